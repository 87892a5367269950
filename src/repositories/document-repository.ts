import type { Kysely, Transaction } from 'kysely';
import type { Database, DocumentTable } from '../db/tables.ts';

type Db = Kysely<Database> | Transaction<Database>;

/** A document's metadata as stored (without its thumbnail). */
export type DocumentRow = Omit<DocumentTable, 'thumbnail'>;

const METADATA = [
  'id',
  'org_id',
  'room_id',
  'name',
  'media_type',
  'size_bytes',
  'sha256',
  'page_count',
  'created_at',
  'uploaded_by',
  'thumbnail_rendered',
] as const;

export async function insertDocument(db: Db, row: DocumentTable): Promise<void> {
  await db.insertInto('documents').values(row).execute();
}

/** A document of the room, or undefined (a document of another room is not found either). */
export async function findDocument(db: Db, orgId: string, roomId: string, id: string): Promise<DocumentRow | undefined> {
  return db.selectFrom('documents').select(METADATA).where('org_id', '=', orgId).where('room_id', '=', roomId).where('id', '=', id).executeTakeFirst();
}

export async function findThumbnail(db: Db, orgId: string, roomId: string, id: string): Promise<Uint8Array | undefined> {
  const row = await db
    .selectFrom('documents')
    .select('thumbnail')
    .where('org_id', '=', orgId)
    .where('room_id', '=', roomId)
    .where('id', '=', id)
    .executeTakeFirst();
  return row?.thumbnail;
}

/** A page of the room's documents, newest first (id breaks ties). */
export async function listDocuments(db: Db, orgId: string, roomId: string, limit: number, offset: number): Promise<DocumentRow[]> {
  return db
    .selectFrom('documents')
    .select(METADATA)
    .where('org_id', '=', orgId)
    .where('room_id', '=', roomId)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(limit)
    .offset(offset)
    .execute();
}

export async function countDocuments(db: Db, orgId: string, roomId: string): Promise<number> {
  const row = await db
    .selectFrom('documents')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .where('org_id', '=', orgId)
    .where('room_id', '=', roomId)
    .executeTakeFirstOrThrow();
  return Number(row.count);
}

/** Deletes a document of the room; returns its blob hash, or undefined when there was none. */
export async function deleteDocument(db: Db, orgId: string, roomId: string, id: string): Promise<string | undefined> {
  const row = await db
    .deleteFrom('documents')
    .where('org_id', '=', orgId)
    .where('room_id', '=', roomId)
    .where('id', '=', id)
    .returning('sha256')
    .executeTakeFirst();
  return row?.sha256;
}

/** Whether any document still refers to the blob. */
export async function blobInUse(db: Db, sha256: string): Promise<boolean> {
  const row = await db.selectFrom('documents').select('id').where('sha256', '=', sha256).limit(1).executeTakeFirst();
  return row !== undefined;
}

/** Every blob hash some document refers to. */
export async function referencedBlobs(db: Db): Promise<Set<string>> {
  const rows = await db.selectFrom('documents').select('sha256').distinct().execute();
  return new Set(rows.map((row) => row.sha256));
}

export interface IdempotencyRecord {
  requestSha256: string;
  documentId: string;
  thumbnail: Uint8Array;
}

/** A key's record as found, with whether the document it created is still stored. */
export interface FoundIdempotencyKey extends IdempotencyRecord {
  documentExists: boolean;
}

export async function findIdempotencyKey(
  db: Db,
  scope: { orgId: string; roomId: string; username: string; key: string },
): Promise<FoundIdempotencyKey | undefined> {
  const row = await db
    .selectFrom('idempotency_keys as k')
    .leftJoin('documents as d', 'd.id', 'k.document_id')
    .select(['k.request_sha256', 'k.document_id', 'k.thumbnail', 'd.id as stored_id'])
    .where('k.org_id', '=', scope.orgId)
    .where('k.room_id', '=', scope.roomId)
    .where('k.username', '=', scope.username)
    .where('k.key', '=', scope.key)
    .executeTakeFirst();
  return row === undefined
    ? undefined
    : { requestSha256: row.request_sha256, documentId: row.document_id, thumbnail: row.thumbnail, documentExists: row.stored_id !== null };
}

/**
 * Records what a key answered; false when the key was recorded meanwhile (another
 * process, or the CLI, stored a request with it first): nothing is written then.
 */
export async function insertIdempotencyKey(
  db: Db,
  scope: { orgId: string; roomId: string; username: string; key: string },
  record: IdempotencyRecord,
  createdAt: string,
): Promise<boolean> {
  const result = await db
    .insertInto('idempotency_keys')
    .values({
      org_id: scope.orgId,
      room_id: scope.roomId,
      username: scope.username,
      key: scope.key,
      request_sha256: record.requestSha256,
      document_id: record.documentId,
      thumbnail: record.thumbnail,
      created_at: createdAt,
    })
    .onConflict((conflict) => conflict.doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0) > 0;
}
