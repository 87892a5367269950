import type { Generated } from 'kysely';

/** Every table, as Kysely sees it. Columns ending in `_key` hold folded values (src/domain/fold.ts). */
export interface Database {
  organizations: OrganizationTable;
  users: UserTable;
  rooms: RoomTable;
  room_members: RoomMemberTable;
  credentials: CredentialTable;
}

export interface OrganizationTable {
  id: string;
  name: string;
  /** 0 | 1: whether external users are candidate signatories. */
  external_signatories: number;
  /** Bumped by every change to the organization's users, rooms or settings; keys cached counts. */
  directory_version: Generated<number>;
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
  status: 'active' | 'pending';
  /** 0 | 1: external or pending, so a non-member must be invited. */
  needs_invite: number;
  firstname_key: string;
  lastname_key: string;
  email_key: string;
  search_key: string;
}

export interface RoomTable {
  org_id: string;
  id: string;
  name: string;
}

export interface RoomMemberTable {
  org_id: string;
  room_id: string;
  user_id: string;
}

export interface CredentialTable {
  username: string;
  password_hash: string;
  /** JSON: "*" or an array of organization ids. */
  organizations: string;
  updated_at: string;
}
