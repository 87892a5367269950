import type { Generated } from 'kysely';

/** Every table, as Kysely sees it. Columns ending in `_key` hold folded values (src/domain/fold.ts). */
export interface Database {
  organizations: OrganizationTable;
  users: UserTable;
  rooms: RoomTable;
  room_members: RoomMemberTable;
  credentials: CredentialTable;
  documents: DocumentTable;
  idempotency_keys: IdempotencyKeyTable;
  login_failures: LoginFailureTable;
  user_tallies: UserTallyTable;
  directory_states: DirectoryStateTable;
  audit_events: AuditEventTable;
  api_tokens: ApiTokenTable;
  /** PostgreSQL only: one row per stored blob (SQLite keeps them as files). */
  blobs: BlobTable;
  /** PostgreSQL only: the bytes of each blob, in order. */
  blob_chunks: BlobChunkTable;
}

/** Each directory version an import made, with its random stamp (see the directory-states migration). */
export interface DirectoryStateTable {
  org_id: string;
  version: number;
  stamp: string;
}

/** Failed logins of one username from one client address (the throttle's state, shared by every process). */
export interface LoginFailureTable {
  username: string;
  /** The client's address as the server sees it (behind trusted proxies, from X-Forwarded-For). */
  client: string;
  failures: number;
  /** Milliseconds since the epoch (a string from PostgreSQL's bigint). */
  window_start: number | string;
}

export interface BlobTable {
  sha256: string;
  /** Total bytes (a string from PostgreSQL's bigint). */
  size_bytes: number | string;
}

export interface BlobChunkTable {
  sha256: string;
  /** 0, 1, 2…: the chunk's place in the blob. */
  seq: number;
  bytes: Uint8Array;
}

export interface OrganizationTable {
  id: string;
  name: string;
  /** 0 | 1: whether external users are candidate signatories. */
  external_signatories: number;
  /** Bumped by every change to the organization's users, rooms or settings; keys cached counts. */
  directory_version: Generated<number>;
  /** ISO 8601, UTC, milliseconds. */
  created_at: string;
  updated_at: string;
}

/** One change to the directory, documents, tokens or credentials (contract section 10): never changed or deleted. */
export interface AuditEventTable {
  seq: Generated<number>;
  /** UUID. */
  id: string;
  /** Null for changes outside any organization (credentials). */
  org_id: string | null;
  at: string;
  actor: string;
  action: string;
  target_type: string;
  target_id: string;
  request_id: string | null;
  /** JSON object. */
  details: string;
}

/** Users of an organization (room_id '') or members of a room, by kind: see the migration. */
export interface UserTallyTable {
  org_id: string;
  room_id: string;
  external: number;
  needs_invite: number;
  /** 0 | 1: 0 for users who are never candidates (suspended or deleted). */
  candidate: number;
  /** A string from PostgreSQL's bigint. */
  users: number | string;
}

export interface UserTable {
  /** Stable integer key the search index points at. */
  seq: Generated<number>;
  org_id: string;
  id: string;
  firstname: string | null;
  lastname: string | null;
  email: string;
  /** Lower-cased email: unique per organization. */
  email_lower: string;
  /** 0 | 1 */
  external: number;
  /** `deleted`: kept only so in-memory search indexes can pass over it; never shown (see the directory-writes migration). */
  status: StoredUserStatus;
  /** 0 | 1: external or pending, so a non-member must be invited. */
  needs_invite: number;
  firstname_key: string;
  lastname_key: string;
  email_key: string;
  search_key: string;
  /** The directory version that last changed the user's keys, kind or rooms (0: before it was kept, or a first load). */
  changed_in: number;
  /** SCIM's userName, null when unset (it reads as the email then); lower-cased beside it, unique per organization. */
  user_name: string | null;
  user_name_lower: string | null;
  external_id: string | null;
  created_at: string;
  updated_at: string;
}

export type StoredUserStatus = 'active' | 'pending' | 'suspended' | 'deleted';

export interface RoomTable {
  org_id: string;
  id: string;
  name: string;
  /** The directory version that last replaced the member list (0: before it was kept, or a first load). */
  members_changed_in?: number;
  /** The directory version that last added or removed one member (whose user is marked changed in it too). */
  members_edited_in?: number;
  /** How many times one member was added or removed (a SCIM group's version tells its states apart by it). */
  member_edits?: number;
  /** The identity provider's id of the SCIM group this room is (contract section 9). */
  external_id?: string | null;
  created_at: string;
  updated_at: string;
}

export interface RoomMemberTable {
  org_id: string;
  room_id: string;
  user_id: string;
}

/** An API token (contract section 10): the SHA-256 of its secret, never the secret. */
export interface ApiTokenTable {
  id: string;
  org_id: string;
  name: string;
  /** Hex SHA-256 of the whole token (prefix included). */
  secret_hash: string;
  created_at: string;
  last_used_at: string | null;
}

export interface CredentialTable {
  username: string;
  password_hash: string;
  /** JSON: "*" or an array of organization ids. */
  organizations: string;
  updated_at: string;
}

export interface DocumentTable {
  /** UUID. */
  id: string;
  org_id: string;
  room_id: string;
  name: string | null;
  media_type: string;
  size_bytes: number;
  /** Hex digest; the blob store's key. */
  sha256: string;
  page_count: number;
  /** ISO 8601, UTC, milliseconds. */
  created_at: string;
  uploaded_by: string;
  /** PNG bytes. */
  thumbnail: Uint8Array;
  /** 1 when the thumbnail shows page 1, 0 for the placeholder. */
  thumbnail_rendered: number;
}

export interface IdempotencyKeyTable {
  org_id: string;
  room_id: string;
  username: string;
  key: string;
  /** SHA-256 of the request (decoded bytes and name): a different body under the same key is refused. */
  request_sha256: string;
  document_id: string;
  /** The thumbnail of the first answer (PNG). */
  thumbnail: Uint8Array;
  created_at: string;
}
