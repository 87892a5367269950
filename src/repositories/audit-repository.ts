import type { Kysely, Selectable } from 'kysely';
import { chunks } from '../db/chunks.ts';
import type { AuditEventTable, Database } from '../db/tables.ts';

/** An audit event as written: everything but the generated `seq`. */
export type AuditEventRow = Omit<AuditEventTable, 'seq'>;

/** Events written by one statement at most: well under SQLite's 32,766 bound parameters (an import of many organizations has an event each). */
export const AUDIT_EVENTS_PER_STATEMENT = 1000;

/** Records events; called in the transaction of the change they record. */
export async function insertAuditEvents(db: Kysely<Database>, rows: readonly AuditEventRow[]): Promise<void> {
  for (const batch of chunks(rows, AUDIT_EVENTS_PER_STATEMENT)) await db.insertInto('audit_events').values(batch).execute();
}

/** What the audit-events route filters on; `since` and `until` are ISO 8601 instants (both inclusive: an event's own `at` as either finds it). */
export interface AuditEventQuery {
  orgId: string;
  action?: string | undefined;
  actor?: string | undefined;
  since?: string | undefined;
  until?: string | undefined;
}

function filtered(db: Kysely<Database>, query: AuditEventQuery) {
  let select = db.selectFrom('audit_events').where('org_id', '=', query.orgId);
  if (query.action !== undefined) select = select.where('action', '=', query.action);
  if (query.actor !== undefined) select = select.where('actor', '=', query.actor);
  if (query.since !== undefined) select = select.where('at', '>=', query.since);
  if (query.until !== undefined) select = select.where('at', '<=', query.until);
  return select;
}

/** A page of the organization's events, newest first (by time, then by the order they were written), and how many match in all. */
export async function findAuditEvents(
  db: Kysely<Database>,
  query: AuditEventQuery,
  offset: number,
  limit: number,
): Promise<{ total: number; rows: Selectable<AuditEventTable>[] }> {
  const count = await filtered(db, query)
    .select((eb) => eb.fn.countAll<number | string>().as('count'))
    .executeTakeFirstOrThrow();
  const rows = await filtered(db, query).selectAll().orderBy('at', 'desc').orderBy('seq', 'desc').offset(offset).limit(limit).execute();
  return { total: Number(count.count), rows };
}
