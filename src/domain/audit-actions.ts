/** The actions of the audit trail, exactly as contract section 10 lists them. */
export const AUDIT_ACTIONS = [
  'organization.created',
  'organization.updated',
  'user.created',
  'user.updated',
  'user.deleted',
  'room.created',
  'room.updated',
  'room.deleted',
  'room.member.added',
  'room.member.removed',
  'document.uploaded',
  'document.deleted',
  'directory.imported',
  'token.created',
  'token.revoked',
  'credential.changed',
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];
