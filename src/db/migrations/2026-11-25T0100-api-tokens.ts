import { sql, type Kysely } from 'kysely';
import type { DialectName } from '../dialect.ts';

// Frozen in time: never import application code here (the dialect name is a plain type).

/**
 * API tokens (contract section 10): each acts for one organization; only the SHA-256 of the
 * secret is kept. A revoked token's row is deleted (its audit events stay). On PostgreSQL, a
 * token created or revoked sends the change notice, so every server forgets what it kept of
 * tokens at once; `last_used_at`, written now and then, does not.
 */
export async function up(db: Kysely<any>, dialect: DialectName): Promise<void> {
  await db.schema
    .createTable('api_tokens')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('org_id', 'text', (c) => c.notNull().references('organizations.id'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('secret_hash', 'text', (c) => c.notNull().unique())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('last_used_at', 'text')
    .execute();
  await db.schema.createIndex('api_tokens_by_org').on('api_tokens').columns(['org_id', 'created_at']).execute();
  if (dialect !== 'postgres') return;
  await sql`CREATE TRIGGER api_tokens_notify_change
    AFTER INSERT OR UPDATE OF secret_hash, org_id OR DELETE OR TRUNCATE ON api_tokens
    FOR EACH STATEMENT EXECUTE FUNCTION signroom_notify_change()`.execute(db);
}

export async function down(db: Kysely<any>, _dialect: DialectName): Promise<void> {
  await db.schema.dropTable('api_tokens').execute();
}
