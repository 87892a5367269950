import { createHash, randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import sharp from 'sharp';
import type { Database, DocumentTable } from '../db/tables.ts';
import { lockBlob, type BlobStore } from '../documents/blob-store.ts';
import { dialectOf, type DialectName } from '../db/dialect.ts';
import type { RenderPool } from '../documents/render-pool.ts';
import { sniffDocumentType, type PayloadResult } from '../domain/payload.ts';
import { toPage, type Page } from '../domain/paging.ts';
import { auditEvent, type Actor } from '../directory/audit.ts';
import { insertAuditEvents } from '../repositories/audit-repository.ts';
import { ProblemError } from '../errors.ts';
import { roomExists } from '../repositories/directory-repository.ts';
import {
  blobInUse,
  countDocuments,
  deleteDocument,
  findDocument,
  findIdempotencyKey,
  findThumbnail,
  insertDocument,
  insertIdempotencyKey,
  listDocuments,
  referencedBlobs,
  type DocumentRow,
  type FoundIdempotencyKey,
} from '../repositories/document-repository.ts';
import { KeyedMutex } from '../lib/keyed-mutex.ts';
import type { Static } from 'typebox';
import type { DocumentMetadata as DocumentMetadataSchema } from '../schemas/documents.ts';

/** A document's metadata as the API returns it. */
export type DocumentMetadata = Static<typeof DocumentMetadataSchema>;

export interface UploadRequest {
  orgId: string;
  roomId: string;
  username: string;
  /** Who acts, as the audit trail names them (the username, unless given). */
  actor?: Actor | undefined;
  /** The decoded `payload` (see src/domain/payload.ts). */
  payload: PayloadResult;
  name?: string | undefined;
  idempotencyKey?: string | undefined;
}

export interface UploadResult {
  id: string;
  thumbnailPng: Uint8Array;
  /** Why page 1 could not be drawn, when the thumbnail is the placeholder (absent on a replay). */
  placeholderReason?: string;
}

/**
 * Uploads, reads and deletes documents. Bytes go to the blob store (durably)
 * before the row commits, so an acknowledged upload survives a crash and an
 * interrupted one leaves at most an orphan blob, removed at the next start.
 */
export class DocumentService {
  readonly #db: Kysely<Database>;
  readonly #blobs: BlobStore;
  readonly #renderer: RenderPool;
  readonly #maxBytes: number;
  readonly #thumbnailWidth: number;
  /** Serialises work on one blob (store + insert against delete + unlink) and on one idempotency key. */
  readonly #locks = new KeyedMutex();
  #placeholder: Promise<Buffer> | undefined;
  readonly #dialect: DialectName;

  constructor(db: Kysely<Database>, blobs: BlobStore, renderer: RenderPool, options: { maxBytes: number; thumbnailWidth: number }) {
    this.#db = db;
    this.#blobs = blobs;
    this.#renderer = renderer;
    this.#maxBytes = options.maxBytes;
    this.#thumbnailWidth = options.thumbnailWidth;
    this.#dialect = dialectOf(db);
  }

  /** Removes what a crash may have left: temporary files and blobs no document refers to. */
  recover(): Promise<{ temporaryFiles: number; orphanBlobs: number }> {
    return this.#blobs.recover(() => referencedBlobs(this.#db));
  }

  /** Checks the payload (400, 413, 415), then the room (404), then renders and stores. */
  async upload(request: UploadRequest): Promise<UploadResult> {
    const decoded = request.payload;
    if (!decoded.ok) {
      throw new ProblemError('invalid-parameter', decoded.reason, { errors: [{ parameter: 'payload', message: decoded.reason }] });
    }
    const bytes = decoded.bytes;
    if (bytes.length > this.#maxBytes) {
      throw new ProblemError('payload-too-large', `The document is ${bytes.length} bytes; at most ${this.#maxBytes} are accepted.`);
    }
    const mediaType = sniffDocumentType(bytes);
    if (mediaType === undefined) {
      throw new ProblemError('unsupported-media-type', 'Only PDF documents and PNG or JPEG images are accepted (recognised by their content).');
    }
    await this.#requireRoom(request.orgId, request.roomId);
    // A missing name and an empty one are different requests.
    const requestSha256 = createHash('sha256')
      .update(bytes)
      .update(request.name === undefined ? '\0' : `\u0001${request.name}`)
      .digest('hex');
    const key = request.idempotencyKey;
    if (key === undefined) return this.#store(request, bytes, mediaType);
    const scope = { orgId: request.orgId, roomId: request.roomId, username: request.username, key };
    // One request per key at a time in this process; across processes, the
    // key's row decides: the first to commit it wins, the others answer as it did.
    return this.#locks.run(`idempotency\0${JSON.stringify(scope)}`, async () => {
      const earlier = await findIdempotencyKey(this.#db, scope);
      if (earlier !== undefined) return replay(earlier, requestSha256);
      try {
        return await this.#store(request, bytes, mediaType, { scope, requestSha256 });
      } catch (error) {
        if (!(error instanceof KeyRecordedMeanwhile)) throw error;
        const winner = await findIdempotencyKey(this.#db, scope);
        if (winner === undefined) throw new Error('an idempotency key recorded meanwhile cannot be read');
        return replay(winner, requestSha256);
      }
    });
  }

  async #store(
    request: UploadRequest,
    bytes: Buffer,
    mediaType: 'application/pdf' | 'image/png' | 'image/jpeg',
    idempotency?: { scope: { orgId: string; roomId: string; username: string; key: string }; requestSha256: string },
  ): Promise<UploadResult> {
    // Staged first: the render worker reads the file, and a stored document needs it anyway.
    const staged = await this.#blobs.stage(bytes);
    try {
      const outcome = await this.#renderer.render(mediaType, staged.path, this.#thumbnailWidth, request.username);
      if (outcome.kind === 'encrypted') throw new ProblemError('document-encrypted', 'The PDF needs a password to open; upload it without one.');
      if (outcome.kind === 'unreadable') throw new ProblemError('document-unreadable', `The document cannot be opened: ${outcome.detail}`);
      const thumbnail = outcome.kind === 'thumbnail' ? outcome.png : await this.#placeholderPng();
      const row: DocumentTable = {
        id: randomUUID(),
        org_id: request.orgId,
        room_id: request.roomId,
        name: request.name ?? null,
        media_type: mediaType,
        size_bytes: bytes.length,
        sha256: staged.sha256,
        page_count: outcome.pageCount,
        created_at: new Date().toISOString(),
        uploaded_by: request.username,
        thumbnail,
        thumbnail_rendered: outcome.kind === 'thumbnail' ? 1 : 0,
      };
      await this.#locks.run(`blob\0${staged.sha256}`, async () => {
        await this.#db.transaction().execute(async (trx) => {
          await lockBlob(trx, staged.sha256, this.#dialect);
          await this.#blobs.commit(staged, trx);
          await insertDocument(trx, row);
          const actor = request.actor ?? { actor: request.username };
          await insertAuditEvents(trx, [
            auditEvent(
              request.orgId,
              actor,
              row.created_at,
              'document.uploaded',
              { type: 'document', id: row.id },
              { roomId: request.roomId, name: row.name, mediaType, sizeBytes: row.size_bytes, sha256: row.sha256 },
            ),
          ]);
          if (idempotency !== undefined) {
            const record = { requestSha256: idempotency.requestSha256, documentId: row.id, thumbnail };
            // Rolls this document back: the key's first request is the one that counts.
            if (!(await insertIdempotencyKey(trx, idempotency.scope, record, row.created_at))) throw new KeyRecordedMeanwhile();
          }
        });
      });
      return { id: row.id, thumbnailPng: thumbnail, ...(outcome.kind === 'placeholder' ? { placeholderReason: outcome.detail } : {}) };
    } finally {
      // Once committed the staged file is gone (moved or copied); otherwise it goes now.
      await this.#blobs.discard(staged);
    }
  }

  async list(orgId: string, roomId: string, page: number, size: number): Promise<Page<DocumentMetadata>> {
    await this.#requireRoom(orgId, roomId);
    const total = await countDocuments(this.#db, orgId, roomId);
    const rows = page * size < total ? await listDocuments(this.#db, orgId, roomId, size, page * size) : [];
    return toPage(rows.map(toMetadata), { page, size }, total);
  }

  async metadata(orgId: string, roomId: string, id: string): Promise<DocumentMetadata> {
    return toMetadata(await this.#requireDocument(orgId, roomId, id));
  }

  async content(orgId: string, roomId: string, id: string): Promise<{ metadata: DocumentMetadata; bytes: Buffer }> {
    const row = await this.#requireDocument(orgId, roomId, id);
    const bytes = await this.#blobs.get(row.sha256);
    if (bytes === undefined) {
      // Deleted while we read it: gone, like the row. A row whose blob is missing is a real fault.
      if ((await findDocument(this.#db, orgId, roomId, id)) === undefined) throw notFound(id);
      throw new Error(`blob ${row.sha256} of document ${row.id} is missing`);
    }
    return { metadata: toMetadata(row), bytes };
  }

  async thumbnail(orgId: string, roomId: string, id: string): Promise<Uint8Array> {
    await this.#requireRoom(orgId, roomId);
    const png = await findThumbnail(this.#db, orgId, roomId, id);
    if (png === undefined) throw notFound(id);
    return png;
  }

  async delete(orgId: string, roomId: string, id: string, actor: Actor): Promise<void> {
    const row = await this.#requireDocument(orgId, roomId, id);
    await this.#locks.run(`blob\0${row.sha256}`, async () => {
      const unused = await this.#db.transaction().execute(async (trx) => {
        await lockBlob(trx, row.sha256, this.#dialect);
        const sha256 = await deleteDocument(trx, orgId, roomId, id);
        if (sha256 === undefined) throw notFound(id);
        await insertAuditEvents(trx, [
          auditEvent(orgId, actor, new Date().toISOString(), 'document.deleted', { type: 'document', id }, { roomId, name: row.name, sha256 }),
        ]);
        return !(await blobInUse(trx, sha256));
      });
      if (unused) await this.#blobs.delete(row.sha256);
    });
  }

  async #requireRoom(orgId: string, roomId: string): Promise<void> {
    if (!(await roomExists(this.#db, orgId, roomId))) {
      throw new ProblemError('room-not-found', `Signing room "${roomId}" does not exist in organization "${orgId}".`);
    }
  }

  async #requireDocument(orgId: string, roomId: string, id: string): Promise<DocumentRow> {
    await this.#requireRoom(orgId, roomId);
    const row = await findDocument(this.#db, orgId, roomId, id);
    if (row === undefined) throw notFound(id);
    return row;
  }

  /** A neutral light-grey page, for documents whose page 1 could not be rendered. */
  #placeholderPng(): Promise<Buffer> {
    this.#placeholder ??= sharp({
      create: {
        width: this.#thumbnailWidth,
        height: Math.round(this.#thumbnailWidth * Math.SQRT2),
        channels: 3,
        background: { r: 236, g: 236, b: 236 },
      },
    })
      .png()
      .toBuffer();
    this.#placeholder.catch(() => {
      this.#placeholder = undefined;
    });
    return this.#placeholder;
  }
}

function notFound(id: string): ProblemError {
  return new ProblemError('document-not-found', `Document "${id}" does not exist in this signing room.`);
}

function toMetadata(row: DocumentRow): DocumentMetadata {
  return {
    id: row.id,
    name: row.name,
    mediaType: row.media_type,
    size: Number(row.size_bytes),
    sha256: row.sha256,
    pageCount: Number(row.page_count),
    createdAt: row.created_at,
    uploadedBy: row.uploaded_by,
    thumbnail: Number(row.thumbnail_rendered) === 1 ? 'rendered' : 'placeholder',
  };
}

/** Another process recorded the same Idempotency-Key while this request was being stored. */
class KeyRecordedMeanwhile extends Error {
  constructor() {
    super('the Idempotency-Key was recorded meanwhile');
    this.name = 'KeyRecordedMeanwhile';
  }
}

/**
 * The answer to a request whose key was used before: the same 201; 422 for another body; 409 when
 * the document the key created has been deleted since (a 201 would name a document that is gone).
 */
function replay(earlier: FoundIdempotencyKey, requestSha256: string): UploadResult {
  if (earlier.requestSha256 !== requestSha256) {
    throw new ProblemError('idempotency-key-reused', 'This Idempotency-Key was used for a different request body.');
  }
  if (!earlier.documentExists) {
    throw new ProblemError(
      'idempotency-key-document-deleted',
      `The document this Idempotency-Key created (${earlier.documentId}) has been deleted since; upload it again with a new key.`,
    );
  }
  return { id: earlier.documentId, thumbnailPng: earlier.thumbnail };
}
