import { sql, type Kysely } from 'kysely';
import type { DialectName } from '../dialect.ts';

// Frozen in time: never import application code here (the dialect name is a plain type).

/**
 * PostgreSQL: a change notice names the table whose change sends it (its payload), so a server
 * forgets only what was read from that table: a directory write (which bumps its organization's
 * version) no longer makes every server read credentials and tokens again. Notices with the same
 * payload in one transaction are still sent once; a server of before this migration ignores the
 * payload, and a notice without one means any table.
 */
export async function up(db: Kysely<any>, dialect: DialectName): Promise<void> {
  if (dialect !== 'postgres') return;
  await sql`CREATE OR REPLACE FUNCTION signroom_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('signroom_changes', TG_TABLE_NAME);
      RETURN NULL;
    END
  $$`.execute(db);
}

export async function down(db: Kysely<any>, dialect: DialectName): Promise<void> {
  if (dialect !== 'postgres') return;
  await sql`CREATE OR REPLACE FUNCTION signroom_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('signroom_changes', '');
      RETURN NULL;
    END
  $$`.execute(db);
}
