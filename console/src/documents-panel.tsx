import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, query, segment, type ApiClient, type DocumentInfo, type Page } from './api.ts';
import { messageFor } from './messages.ts';
import { useLoaded } from './use-api.ts';

const PAGE_SIZE = 24;

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

export function DocumentsPanel({ client, organizationId, roomId, generation }: Props) {
  const base = `/organizations/${segment(organizationId)}/rooms/${segment(roomId)}/documents`;
  const [pages, setPages] = useState(1);
  const [version, setVersion] = useState(0);
  const [uploading, setUploading] = useState<string | undefined>();
  const [messages, setMessages] = useState<string[]>([]);
  const [done, setDone] = useState<string | undefined>();
  const [dragging, setDragging] = useState(false);
  const input = useRef<HTMLInputElement>(null);
  const list = useLoaded(
    (signal) => client.json<Page<DocumentInfo>>(`${base}${query({ page: 0, size: PAGE_SIZE * pages })}`, { signal }),
    [client, base, pages, version, generation],
  );

  async function upload(files: FileList | File[]) {
    const problems: string[] = [];
    const uploaded: string[] = [];
    setMessages([]);
    setDone(undefined);
    for (const file of Array.from(files)) {
      setUploading(file.name);
      try {
        const payload = await readAsDataUrl(file);
        await client.json(base, { method: 'POST', body: { payload, name: file.name.slice(0, 255) } });
        uploaded.push(file.name);
      } catch (error) {
        problems.push(`“${file.name}”: ${error instanceof ApiError ? messageFor(error, 'upload') : 'the file could not be read.'}`);
      }
    }
    setUploading(undefined);
    setMessages(problems);
    if (uploaded.length > 0) {
      setDone(uploaded.length === 1 ? `Uploaded “${uploaded[0]}”.` : `Uploaded ${uploaded.length} documents.`);
      setVersion((value) => value + 1);
    }
    if (input.current !== null) input.current.value = '';
  }

  async function remove(document: DocumentInfo) {
    setMessages([]);
    setDone(undefined);
    try {
      await client.noContent(`${base}/${segment(document.id)}`, { method: 'DELETE' });
      setDone(`Deleted “${documentLabel(document)}”.`);
    } catch (error) {
      if (error instanceof ApiError) setMessages([messageFor(error, 'delete')]);
    }
    setVersion((value) => value + 1);
  }

  const documents = list.data?.content ?? [];
  return (
    <section
      aria-labelledby="documents-heading"
      class={`panel documents${dragging ? ' dragging' : ''}`}
      onDragOver={(event) => {
        event.preventDefault();
        setDragging(true);
      }}
      onDragLeave={() => setDragging(false)}
      onDrop={(event) => {
        event.preventDefault();
        setDragging(false);
        if (event.dataTransfer !== null && event.dataTransfer.files.length > 0) void upload(event.dataTransfer.files);
      }}
    >
      <h2 id="documents-heading">Documents</h2>
      <div class="upload">
        <label for="upload">Upload document</label>
        <input
          ref={input}
          id="upload"
          type="file"
          multiple
          accept="application/pdf,image/png,image/jpeg,.pdf,.png,.jpg,.jpeg"
          aria-describedby="upload-hint"
          disabled={uploading !== undefined}
          onChange={(event) => {
            const files = event.currentTarget.files;
            if (files !== null && files.length > 0) void upload(files);
          }}
        />
        <p id="upload-hint" class="hint">
          PDF, PNG or JPEG. You can also drop files anywhere on this panel.
        </p>
      </div>
      <div aria-live="polite" class="upload-state">
        {uploading !== undefined && <p>Uploading “{uploading}”…</p>}
        {done !== undefined && <p class="ok">{done}</p>}
      </div>
      {messages.length > 0 && (
        <div role="alert" class="error">
          {messages.map((message) => (
            <p key={message}>{message}</p>
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
      {list.data !== undefined && list.data.totalElements > documents.length && (
        <button type="button" onClick={() => setPages((value) => value + 1)}>
          Show more documents
        </button>
      )}
    </section>
  );
}

/** A thumbnail needs the credential, which an <img src> cannot send: read it with fetch and show a blob: URL. */
function Thumbnail({ client, path, alt }: { client: ApiClient; path: string; alt: string }) {
  const [url, setUrl] = useState<string | undefined>();
  useEffect(() => {
    const controller = new AbortController();
    let objectUrl: string | undefined;
    client.blob(path, controller.signal).then(
      (blob) => {
        objectUrl = URL.createObjectURL(blob);
        setUrl(objectUrl);
      },
      () => {},
    );
    return () => {
      controller.abort();
      if (objectUrl !== undefined) URL.revokeObjectURL(objectUrl);
    };
  }, [client, path]);
  return url === undefined ? <div class="thumbnail placeholder" role="img" aria-label={alt} /> : <img class="thumbnail" src={url} alt={alt} />;
}
