import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, segment, type ApiClient, type DocumentInfo } from './api.ts';
import { messageFor } from './messages.ts';
import { useLoaded } from './use-api.ts';

interface Props {
  client: ApiClient;
  organizationId: string;
  roomId: string;
  generation: number;
}

/** A file as the API takes it: a data: URI is a valid `payload` (contract section 4). */
function readAsDataUrl(file: File): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result as string);
    reader.onerror = () => reject(reader.error ?? new Error('the file could not be read'));
    reader.readAsDataURL(file);
  });
}

export function documentLabel(document: Pick<DocumentInfo, 'id' | 'name'>): string {
  return document.name !== null && document.name !== '' ? document.name : `Untitled document ${document.id.slice(0, 8)}`;
}

function sizeText(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(0)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

/** What one batch of uploads has come to so far: files picked or dropped while it runs join it. */
interface Batch {
  uploaded: string[];
  problems: string[];
}

export function DocumentsPanel({ client, organizationId, roomId, generation }: Props) {
  const base = `/organizations/${segment(organizationId)}/rooms/${segment(roomId)}/documents`;
  const [version, setVersion] = useState(0);
  const [uploading, setUploading] = useState<string | undefined>();
  const [batch, setBatch] = useState<Batch | undefined>();
  const [deleted, setDeleted] = useState<string | undefined>();
  const [deleteProblem, setDeleteProblem] = useState<string | undefined>();
  const [dragging, setDragging] = useState(false);
  const input = useRef<HTMLInputElement>(null);
  const heading = useRef<HTMLHeadingElement>(null);
  const queue = useRef<File[]>([]);
  const running = useRef(false);
  // Every document of the room, newest first.
  const list = useLoaded((signal) => client.all<DocumentInfo>(base, signal), [client, base, version, generation]);

  async function upload(files: FileList | File[]) {
    queue.current.push(...Array.from(files));
    if (input.current !== null) input.current.value = '';
    if (running.current) return;
    running.current = true;
    setDeleted(undefined);
    setDeleteProblem(undefined);
    setBatch({ uploaded: [], problems: [] });
    for (let file = queue.current.shift(); file !== undefined; file = queue.current.shift()) {
      const name = file.name;
      setUploading(name);
      try {
        const payload = await readAsDataUrl(file);
        // At most 255 characters, as the API counts them (code points): never cut inside an emoji.
        await client.json(base, { method: 'POST', body: { payload, name: Array.from(name).slice(0, 255).join('') } });
        setBatch((current) => ({ uploaded: [...(current?.uploaded ?? []), name], problems: current?.problems ?? [] }));
        setVersion((value) => value + 1);
      } catch (error) {
        const problem = `“${name}”: ${error instanceof ApiError ? messageFor(error, 'upload') : 'the file could not be read.'}`;
        setBatch((current) => ({ uploaded: current?.uploaded ?? [], problems: [...(current?.problems ?? []), problem] }));
      }
    }
    setUploading(undefined);
    running.current = false;
  }

  // Files dropped anywhere on the page come here: the browser would otherwise open them in place of the console.
  useEffect(() => {
    const over = (event: DragEvent) => {
      if (!event.dataTransfer?.types.includes('Files')) return;
      event.preventDefault();
      setDragging(true);
    };
    const leave = (event: DragEvent) => {
      if (event.relatedTarget === null) setDragging(false);
    };
    const drop = (event: DragEvent) => {
      if (event.dataTransfer === null || event.dataTransfer.files.length === 0) return;
      event.preventDefault();
      setDragging(false);
      void upload(event.dataTransfer.files);
    };
    window.addEventListener('dragover', over);
    window.addEventListener('dragleave', leave);
    window.addEventListener('drop', drop);
    return () => {
      window.removeEventListener('dragover', over);
      window.removeEventListener('dragleave', leave);
      window.removeEventListener('drop', drop);
    };
  }, [base]);

  async function remove(document: DocumentInfo) {
    setBatch(undefined);
    setDeleted(undefined);
    setDeleteProblem(undefined);
    try {
      await client.noContent(`${base}/${segment(document.id)}`, { method: 'DELETE' });
      setDeleted(`Deleted “${documentLabel(document)}”.`);
    } catch (error) {
      if (error instanceof ApiError) setDeleteProblem(messageFor(error, 'delete'));
    }
    setVersion((value) => value + 1);
    // The button is gone with its document: focus goes to the list's heading.
    heading.current?.focus();
  }

  const documents = list.data ?? [];
  const uploaded = batch?.uploaded ?? [];
  const problems = [...(batch?.problems ?? []), ...(deleteProblem !== undefined ? [deleteProblem] : [])];
  return (
    <section aria-labelledby="documents-heading" class={`panel documents${dragging ? ' dragging' : ''}`}>
      <h2 id="documents-heading" ref={heading} tabIndex={-1}>
        Documents
      </h2>
      <div class="upload">
        <label for="upload">Upload document</label>
        <input
          ref={input}
          id="upload"
          type="file"
          multiple
          accept="application/pdf,image/png,image/jpeg,.pdf,.png,.jpg,.jpeg"
          aria-describedby="upload-hint"
          onChange={(event) => {
            const files = event.currentTarget.files;
            if (files !== null && files.length > 0) void upload(files);
          }}
        />
        <p id="upload-hint" class="hint">
          PDF, PNG or JPEG. You can also drop files anywhere on the page.
        </p>
      </div>
      <div aria-live="polite" class="upload-state">
        {uploading !== undefined && <p>Uploading “{uploading}”…</p>}
        {uploading === undefined && uploaded.length > 0 && (
          <p class="ok">{uploaded.length === 1 ? `Uploaded “${uploaded[0]}”.` : `Uploaded ${uploaded.length} documents.`}</p>
        )}
        {deleted !== undefined && <p class="ok">{deleted}</p>}
      </div>
      {problems.length > 0 && (
        <div role="alert" class="error">
          {problems.map((problem) => (
            <p key={problem}>{problem}</p>
          ))}
        </div>
      )}
      {list.error !== undefined && (
        <p role="alert" class="error">
          {messageFor(list.error, 'load')}
        </p>
      )}
      {list.data !== undefined && documents.length === 0 && <p class="notice">No documents in this room yet.</p>}
      <ul class="document-grid">
        {documents.map((document) => (
          <li key={document.id}>
            <Thumbnail client={client} path={`${base}/${segment(document.id)}/thumbnail`} alt={documentLabel(document)} />
            <div class="document-meta">
              <span class="document-name">{documentLabel(document)}</span>
              <span class="hint">
                {document.pageCount === 1 ? '1 page' : `${document.pageCount} pages`} · {sizeText(document.size)} ·{' '}
                {new Date(document.createdAt).toLocaleString()}
              </span>
              <button type="button" class="secondary small" aria-label={`Delete ${documentLabel(document)}`} onClick={() => void remove(document)}>
                Delete
              </button>
            </div>
          </li>
        ))}
      </ul>
    </section>
  );
}

/** A thumbnail needs the credential, which an <img src> cannot send: read it with fetch and show a blob: URL. */
function Thumbnail({ client, path, alt }: { client: ApiClient; path: string; alt: string }) {
  const [url, setUrl] = useState<string | undefined>();
  const [failed, setFailed] = useState(false);
  useEffect(() => {
    const controller = new AbortController();
    let objectUrl: string | undefined;
    client.blob(path, controller.signal).then(
      (blob) => {
        if (controller.signal.aborted) return;
        objectUrl = URL.createObjectURL(blob);
        setUrl(objectUrl);
      },
      () => {
        if (!controller.signal.aborted) setFailed(true);
      },
    );
    return () => {
      controller.abort();
      if (objectUrl !== undefined) URL.revokeObjectURL(objectUrl);
    };
  }, [client, path]);
  if (url !== undefined) return <img class="thumbnail" src={url} alt={alt} />;
  return (
    <div class="thumbnail placeholder" role="img" aria-label={alt}>
      {failed && <span aria-hidden="true">No preview</span>}
    </div>
  );
}
