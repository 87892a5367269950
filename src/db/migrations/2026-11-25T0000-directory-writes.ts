import { sql, type Kysely } from 'kysely';
import type { DialectName } from '../dialect.ts';

// Frozen in time: never import application code here (the dialect name is a plain type).

/**
 * What changing the directory one resource at a time needs (contract sections 2, 8 and 10):
 * - created and updated times of organizations, users and rooms (rows kept from before take the
 *   time of this migration);
 * - a user's SCIM `userName` (unique per organization ignoring case) and `externalId`;
 * - users whose status is `suspended` (and `deleted`: a deleted user's row stays, emptied of
 *   personal data, so the in-memory search indexes can pass over it), which are never candidates:
 *   the tallies count them apart (`candidate` 0), so a count stays a few rows;
 * - the audit trail, one event per change, written in the change's own transaction;
 * - the rooms a user is a member of, found by an index.
 */
export async function up(db: Kysely<any>, dialect: DialectName): Promise<void> {
  const text = dialect === 'postgres' ? sql`text collate "C"` : sql`text`;
  const now = new Date().toISOString();
  for (const table of ['organizations', 'users', 'rooms']) {
    await sql`alter table ${sql.table(table)} add column created_at text not null default ${sql.lit(now)}`.execute(db);
    await sql`alter table ${sql.table(table)} add column updated_at text not null default ${sql.lit(now)}`.execute(db);
  }
  // The version that last added or removed one member (the writer marks the user changed too): an
  // index holding the room's members lays those users' memberships over them.
  await sql`alter table rooms add column members_edited_in integer not null default 0`.execute(db);
  await sql`alter table users add column user_name ${text}`.execute(db);
  await sql`alter table users add column user_name_lower ${text}`.execute(db);
  await sql`alter table users add column external_id ${text}`.execute(db);
  // A userName reads as the email while unset: what must be unique is the one a user reads as.
  await sql`create unique index users_user_name_unique on users (org_id, coalesce(user_name_lower, email_lower))`.execute(db);
  // The rooms of one user: a change to the user moves its kind in each room's tallies, a deletion
  // leaves every room (the primary key leads with the room: it found them by reading every member).
  await db.schema.createIndex('room_members_by_user').on('room_members').columns(['org_id', 'user_id', 'room_id']).execute();

  await db.schema.dropTable('user_tallies').execute();
  await db.schema
    .createTable('user_tallies')
    .addColumn('org_id', text, (c) => c.notNull())
    .addColumn('room_id', text, (c) => c.notNull())
    .addColumn('external', 'integer', (c) => c.notNull())
    .addColumn('needs_invite', 'integer', (c) => c.notNull())
    .addColumn('candidate', 'integer', (c) => c.notNull())
    .addColumn('users', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('user_tallies_pk', ['org_id', 'room_id', 'external', 'needs_invite', 'candidate'])
    .execute();
  await sql`
    insert into user_tallies (org_id, room_id, external, needs_invite, candidate, users)
    select org_id, '', external, needs_invite, 1, count(*) from users group by org_id, external, needs_invite`.execute(db);
  await sql`
    insert into user_tallies (org_id, room_id, external, needs_invite, candidate, users)
    select m.org_id, m.room_id, u.external, u.needs_invite, 1, count(*)
    from room_members m join users u on u.org_id = m.org_id and u.id = m.user_id
    group by m.org_id, m.room_id, u.external, u.needs_invite`.execute(db);

  await db.schema
    .createTable('audit_events')
    .addColumn('seq', 'integer', (c) => (dialect === 'postgres' ? c.generatedByDefaultAsIdentity().primaryKey() : c.primaryKey()))
    .addColumn('id', text, (c) => c.notNull().unique())
    .addColumn('org_id', text)
    .addColumn('at', text, (c) => c.notNull())
    .addColumn('actor', text, (c) => c.notNull())
    .addColumn('action', text, (c) => c.notNull())
    .addColumn('target_type', text, (c) => c.notNull())
    .addColumn('target_id', text, (c) => c.notNull())
    .addColumn('request_id', text)
    .addColumn('details', text, (c) => c.notNull())
    .execute();
  await db.schema.createIndex('audit_events_by_org').on('audit_events').columns(['org_id', 'at', 'seq']).execute();
}

export async function down(db: Kysely<any>, dialect: DialectName): Promise<void> {
  await db.schema.dropTable('audit_events').execute();
  await db.schema.dropTable('user_tallies').execute();
  const text = dialect === 'postgres' ? sql`text collate "C"` : sql`text`;
  await db.schema
    .createTable('user_tallies')
    .addColumn('org_id', text, (c) => c.notNull())
    .addColumn('room_id', text, (c) => c.notNull())
    .addColumn('external', 'integer', (c) => c.notNull())
    .addColumn('needs_invite', 'integer', (c) => c.notNull())
    .addColumn('users', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('user_tallies_pk', ['org_id', 'room_id', 'external', 'needs_invite'])
    .execute();
  await db.schema.dropIndex('room_members_by_user').execute();
  await db.schema.alterTable('rooms').dropColumn('members_edited_in').execute();
  await db.schema.dropIndex('users_user_name_unique').execute();
  for (const column of ['external_id', 'user_name_lower', 'user_name']) await db.schema.alterTable('users').dropColumn(column).execute();
  for (const table of ['organizations', 'users', 'rooms']) {
    await db.schema.alterTable(table).dropColumn('updated_at').execute();
    await db.schema.alterTable(table).dropColumn('created_at').execute();
  }
  await sql`insert into user_tallies (org_id, room_id, external, needs_invite, users)
    select org_id, '', external, needs_invite, count(*) from users group by org_id, external, needs_invite`.execute(db);
  await sql`insert into user_tallies (org_id, room_id, external, needs_invite, users)
    select m.org_id, m.room_id, u.external, u.needs_invite, count(*)
    from room_members m join users u on u.org_id = m.org_id and u.id = m.user_id
    group by m.org_id, m.room_id, u.external, u.needs_invite`.execute(db);
}
