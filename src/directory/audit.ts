import { randomUUID } from 'node:crypto';
import type { AuditAction } from '../domain/audit-actions.ts';
import type { AuditEventRow } from '../repositories/audit-repository.ts';

export type { AuditAction } from '../domain/audit-actions.ts';

/**
 * The audit trail (contract section 10): who did what to which resource, one event per change,
 * written in the change's own transaction by whoever makes the change (the directory writer, the
 * import, the document service, the CLI's credential commands).
 */

/** Who acts, as the audit trail records it: a credential's username, `token:<id>`, or `cli`. */
export interface Actor {
  actor: string;
  requestId?: string | undefined;
}

/** An audit event of a change, before it is stamped. */
export function auditEvent(
  orgId: string | null,
  actor: Actor,
  at: string,
  action: AuditAction,
  target: { type: string; id: string },
  details: object = {},
): AuditEventRow {
  return {
    id: randomUUID(),
    org_id: orgId,
    at,
    actor: actor.actor,
    action,
    target_type: target.type,
    target_id: target.id,
    request_id: actor.requestId ?? null,
    details: JSON.stringify(details),
  };
}
