/**
 * Who is a candidate signatory and which filters apply (contract section 3).
 * Pure rules: the repository turns a SignatoryFilter into SQL.
 */

export const PURPOSES = ['SIGNING_REQUEST_SIGNATORY', 'SIGNATORY_INVITATION', 'PERMISSION_INVITATION', 'SIGNING_REQUEST_DELIVERY_RECIPIENT'] as const;
export type Purpose = (typeof PURPOSES)[number];

export const SORT_FIELDS = ['firstname', 'lastname', 'email'] as const;
export type SortField = (typeof SORT_FIELDS)[number];

export const SORT_DIRECTIONS = ['ASC', 'DESC'] as const;
export type SortDirection = (typeof SORT_DIRECTIONS)[number];

/** Conditions on a candidate, all combined with AND; an absent one does not filter. */
export interface SignatoryFilter {
  roomMember?: boolean;
  requiresInvitation?: boolean;
  /** Only `false` is ever used: PERMISSION_INVITATION excludes external users. */
  external?: false;
}

/** The filter a request asks for: `purpose` wins over the deprecated flags. */
export function signatoryFilter(request: {
  purpose?: Purpose | undefined;
  roomMember?: boolean | undefined;
  requiresInvitation?: boolean | undefined;
}): SignatoryFilter {
  switch (request.purpose) {
    case 'SIGNING_REQUEST_SIGNATORY':
      return { roomMember: true };
    case 'SIGNATORY_INVITATION':
      return { roomMember: false };
    case 'PERMISSION_INVITATION':
      return { roomMember: false, external: false };
    case 'SIGNING_REQUEST_DELIVERY_RECIPIENT':
      return {};
    case undefined: {
      const filter: SignatoryFilter = {};
      if (request.roomMember !== undefined) filter.roomMember = request.roomMember;
      if (request.requiresInvitation !== undefined) filter.requiresInvitation = request.requiresInvitation;
      return filter;
    }
  }
}

/** Whether the filter depends on who is a member of the room. */
export function filterNeedsMembers(filter: SignatoryFilter): boolean {
  return filter.roomMember !== undefined || filter.requiresInvitation !== undefined;
}

/** A user's status (contract section 2): suspended users are kept, and never candidates. */
export type UserStatus = 'active' | 'pending' | 'suspended';
export const USER_STATUSES: readonly UserStatus[] = ['active', 'pending', 'suspended'];

/** The statuses of users who may be candidates of a lookup. */
export const CANDIDATE_STATUSES = ['active', 'pending'] as const;

/** Whether a user of this status (as stored: deleted users stay as rows) is ever a candidate. */
export function isCandidateStatus(status: string): boolean {
  return status === 'active' || status === 'pending';
}

/** Whether a user who is not a room member must be invited: external or not yet activated. */
export function needsInvitation(user: { external: boolean; status: string }): boolean {
  return user.external || user.status === 'pending';
}

/** `requiresInvitation` of a candidate relative to a room. */
export function requiresInvitation(roomMember: boolean, needsInvite: boolean): boolean {
  return !roomMember && needsInvite;
}

/** `displayName`: first and last name joined by one space, nulls left out; the email when both are empty. */
export function displayName(user: { firstname: string | null; lastname: string | null; email: string }): string {
  const name = [user.firstname, user.lastname].filter((part) => part !== null && part !== '').join(' ');
  return name === '' ? user.email : name;
}

/** The sort key columns, most significant first, for a `sortBy` field (id breaks ties last). */
export function sortKeyOrder(sortBy: SortField): SortField[] {
  const rest: SortField[] = ['lastname', 'firstname', 'email'];
  return [sortBy, ...rest.filter((field) => field !== sortBy)];
}

/** What decides whether a user is a candidate matching a filter, search terms apart. */
export interface CandidateKind {
  external: boolean;
  needsInvitation: boolean;
  roomMember: boolean;
}

/**
 * Whether a user of this kind is a candidate matching the filter: external
 * users only where the organization allows them (and the filter does not
 * exclude them), then the room-member and requires-invitation flags. The
 * repository builds the same test in SQL.
 */
export function matchesFilter(kind: CandidateKind, includeExternal: boolean, filter: SignatoryFilter): boolean {
  if (kind.external && (!includeExternal || filter.external === false)) return false;
  if (filter.roomMember !== undefined && kind.roomMember !== filter.roomMember) return false;
  const requiresInvitation = kind.needsInvitation && !kind.roomMember;
  return filter.requiresInvitation === undefined || requiresInvitation === filter.requiresInvitation;
}

/** How many users of one kind an organization has, or a room has as members. */
export interface Tally {
  external: boolean;
  needsInvitation: boolean;
  /** False for users who are never candidates (suspended, deleted), tallied apart. */
  candidate: boolean;
  users: number;
}

/**
 * The candidates matching a filter without search terms, counted from the
 * organization's users and the room's members tallied by kind: each kind's
 * members match as room members, the rest of that kind as non-members.
 */
export function countFromTallies(organization: readonly Tally[], members: readonly Tally[], includeExternal: boolean, filter: SignatoryFilter): number {
  let count = 0;
  for (const kind of organization) {
    if (!kind.candidate) continue;
    const inRoom = members
      .filter((member) => member.candidate && member.external === kind.external && member.needsInvitation === kind.needsInvitation)
      .reduce((sum, member) => sum + member.users, 0);
    if (matchesFilter({ ...kind, roomMember: true }, includeExternal, filter)) count += inRoom;
    if (matchesFilter({ ...kind, roomMember: false }, includeExternal, filter)) count += kind.users - inRoom;
  }
  return count;
}
