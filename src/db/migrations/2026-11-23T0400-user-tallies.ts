import { sql, type Kysely } from 'kysely';
import type { DialectName } from '../dialect.ts';

// Frozen in time: never import application code here (the dialect name is a plain type).

/**
 * How many users of each kind (external, needing an invitation) an
 * organization has (room_id '': no room id is empty) and each of its rooms has
 * as members. A lookup without search terms is counted from these few rows
 * instead of a scan of the organization, which grows with it. The
 * import rewrites an organization's rows in its own transaction; existing
 * directories are tallied here.
 */
export async function up(db: Kysely<any>, dialect: DialectName): Promise<void> {
  const text = dialect === 'postgres' ? sql`text collate "C"` : 'text';
  await db.schema
    .createTable('user_tallies')
    .addColumn('org_id', text, (c) => c.notNull())
    .addColumn('room_id', text, (c) => c.notNull())
    .addColumn('external', 'integer', (c) => c.notNull())
    .addColumn('needs_invite', 'integer', (c) => c.notNull())
    .addColumn('users', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('user_tallies_pk', ['org_id', 'room_id', 'external', 'needs_invite'])
    .execute();
  await sql`
    insert into user_tallies (org_id, room_id, external, needs_invite, users)
    select org_id, '', external, needs_invite, count(*) from users group by org_id, external, needs_invite`.execute(db);
  await sql`
    insert into user_tallies (org_id, room_id, external, needs_invite, users)
    select m.org_id, m.room_id, u.external, u.needs_invite, count(*)
    from room_members m join users u on u.org_id = m.org_id and u.id = m.user_id
    group by m.org_id, m.room_id, u.external, u.needs_invite`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('user_tallies').execute();
}
