import { Type, type Static, type TSchema } from 'typebox';
import { AUDIT_ACTIONS } from '../domain/audit-actions.ts';
import { EMAIL_PATTERN, ID_PATTERN, MAX_EMAIL_LENGTH, MAX_NAME_LENGTH } from '../domain/directory-entities.ts';
import { SORT_DIRECTIONS, SORT_FIELDS, USER_STATUSES } from '../domain/signatory-rules.ts';
import { pageOf, PageQuery } from './page.ts';
import type { ResponseHeader } from './problem.ts';
import { stringEnum } from './string-enum.ts';

/** The directory management API's schemas (contract section 8): what the routes validate and OpenAPI shows. */

const ID_DESCRIPTION = 'letters, digits, ".", "_", "-"; 1–64 characters';
const Id = (description: string) => Type.String({ pattern: ID_PATTERN.source, description: `${description}: ${ID_DESCRIPTION}` });
const Name = Type.String({ minLength: 1, maxLength: MAX_NAME_LENGTH });
const NullableName = Type.Union([Type.String({ maxLength: MAX_NAME_LENGTH }), Type.Null()]);
const Email = Type.String({
  minLength: 1,
  maxLength: MAX_EMAIL_LENGTH,
  pattern: EMAIL_PATTERN.source,
  description: 'Unique in the organization, ignoring case',
});
const Status = Type.Unsafe<(typeof USER_STATUSES)[number]>({
  type: 'string',
  enum: [...USER_STATUSES],
  description: 'pending: invited, not yet activated; suspended: kept, never a candidate of a lookup',
});
const Instant = Type.String({ format: 'date-time', description: 'ISO 8601, UTC' });
const ReadOnlyInstant = Type.Optional(Type.String({ readOnly: true, description: 'Read-only: ignored when sent' }));
const ScimText = Type.Union([Type.String({ minLength: 1, maxLength: MAX_NAME_LENGTH }), Type.Null()]);

export const OrganizationPathParams = Type.Object({ organizationId: Type.String({ description: `Organization id: ${ID_DESCRIPTION}` }) });
export const UserPathParams = Type.Object({ organizationId: Type.String(), userId: Type.String({ description: `User id: ${ID_DESCRIPTION}` }) });
export const RoomPathParams = Type.Object({ organizationId: Type.String(), roomId: Type.String({ description: `Signing room id: ${ID_DESCRIPTION}` }) });
export const MemberPathParams = Type.Object({ organizationId: Type.String(), roomId: Type.String(), userId: Type.String() });

export const Organization = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    settings: Type.Object({ externalSignatories: Type.Boolean({ description: 'External users are candidate signatories' }) }),
    createdAt: Instant,
    updatedAt: Instant,
  },
  { title: 'Organization' },
);
export type OrganizationBody = Static<typeof Organization>;

export const OrganizationCreate = Type.Object(
  {
    id: Id('Organization id'),
    name: Type.Optional(Name),
    settings: Type.Optional(Type.Object({ externalSignatories: Type.Optional(Type.Boolean()) }, { additionalProperties: false })),
    createdAt: ReadOnlyInstant,
    updatedAt: ReadOnlyInstant,
  },
  { additionalProperties: false, title: 'OrganizationCreate' },
);

/** A JSON merge patch (RFC 7396) of an organization: `name` and `settings.externalSignatories`. */
export const OrganizationPatch = Type.Object(
  {
    id: Type.Optional(Type.String({ description: 'Read-only: must be the organization id if sent' })),
    name: Type.Optional(Type.Union([Name, Type.Null()])),
    settings: Type.Optional(
      Type.Union(
        [Type.Object({ externalSignatories: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])) }, { additionalProperties: false }), Type.Null()],
        {
          description: 'null (or a null member) resets the settings to their defaults',
        },
      ),
    ),
    createdAt: ReadOnlyInstant,
    updatedAt: ReadOnlyInstant,
  },
  { additionalProperties: false, title: 'OrganizationPatch', description: 'JSON merge patch (RFC 7396)' },
);

export const User = Type.Object(
  {
    id: Type.String(),
    firstname: Type.Union([Type.String(), Type.Null()]),
    lastname: Type.Union([Type.String(), Type.Null()]),
    email: Type.String(),
    external: Type.Boolean({ description: 'Someone outside the organization, e.g. a counterparty' }),
    status: Status,
    userName: Type.String({ description: 'SCIM userName; the email when none was set' }),
    externalId: Type.Union([Type.String(), Type.Null()], { description: "The identity provider's id, set by SCIM" }),
    createdAt: Instant,
    updatedAt: Instant,
  },
  { title: 'User' },
);
export type UserBody = Static<typeof User>;

const userFields = {
  firstname: Type.Optional(NullableName),
  lastname: Type.Optional(NullableName),
  email: Email,
  external: Type.Optional(Type.Boolean({ default: false })),
  status: Type.Optional(Status),
  userName: Type.Optional(ScimText),
  externalId: Type.Optional(ScimText),
};

/** A user to create: `id` generated when absent. */
export const UserCreate = Type.Object(
  { id: Type.Optional(Id('User id')), ...userFields, createdAt: ReadOnlyInstant, updatedAt: ReadOnlyInstant },
  { additionalProperties: false, title: 'UserCreate' },
);

/** A user's whole new state (PUT): absent optional fields reset. */
export const UserReplace = Type.Object(
  { id: Type.Optional(Type.String({ description: 'Must be the user id if sent' })), ...userFields, createdAt: ReadOnlyInstant, updatedAt: ReadOnlyInstant },
  { additionalProperties: false, title: 'UserReplace' },
);

/** A JSON merge patch (RFC 7396) of a user: `null` removes an optional field (`email` is required: never null). */
export const UserPatch = Type.Object(
  {
    id: Type.Optional(Type.String({ description: 'Must be the user id if sent' })),
    firstname: Type.Optional(NullableName),
    lastname: Type.Optional(NullableName),
    email: Type.Optional(Email),
    external: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
    status: Type.Optional(Type.Union([Status, Type.Null()])),
    userName: Type.Optional(ScimText),
    externalId: Type.Optional(ScimText),
    createdAt: ReadOnlyInstant,
    updatedAt: ReadOnlyInstant,
  },
  { additionalProperties: false, title: 'UserPatch', description: 'JSON merge patch (RFC 7396)' },
);

export const Room = Type.Object(
  { id: Type.String(), name: Type.String(), memberCount: Type.Integer({ minimum: 0 }), createdAt: Instant, updatedAt: Instant },
  { title: 'Room' },
);
export type RoomBody = Static<typeof Room>;

export const RoomCreate = Type.Object(
  {
    id: Type.Optional(Id('Signing room id')),
    name: Type.Optional(Name),
    memberCount: Type.Optional(Type.Integer({ readOnly: true, description: 'Read-only: ignored when sent' })),
    createdAt: ReadOnlyInstant,
    updatedAt: ReadOnlyInstant,
  },
  { additionalProperties: false, title: 'RoomCreate' },
);
export const RoomReplace = Type.Object(
  {
    id: Type.Optional(Type.String({ description: 'Must be the room id if sent' })),
    name: Type.Optional(Type.Union([Name, Type.Null()], { description: 'Absent or null: the room id, as on creation' })),
    memberCount: Type.Optional(Type.Integer({ readOnly: true, description: 'Read-only: ignored when sent' })),
    createdAt: ReadOnlyInstant,
    updatedAt: ReadOnlyInstant,
  },
  { additionalProperties: false, title: 'RoomReplace' },
);
export const RoomPatch = Type.Object(
  {
    id: Type.Optional(Type.String({ description: 'Must be the room id if sent' })),
    name: Type.Optional(Type.Union([Name, Type.Null()], { description: 'null: the room id, as on creation' })),
    memberCount: Type.Optional(Type.Integer({ readOnly: true, description: 'Read-only: ignored when sent' })),
    createdAt: ReadOnlyInstant,
    updatedAt: ReadOnlyInstant,
  },
  { additionalProperties: false, title: 'RoomPatch', description: 'JSON merge patch (RFC 7396)' },
);

export const AuditEvent = Type.Object(
  {
    id: Type.String(),
    at: Instant,
    actor: Type.String({ description: 'A credential\'s username, "token:<id>", or "cli"' }),
    action: Type.String(),
    target: Type.Object({ type: Type.String(), id: Type.String() }),
    requestId: Type.Union([Type.String(), Type.Null()]),
    details: Type.Object({}, { additionalProperties: true }),
  },
  { title: 'AuditEvent' },
);
export type AuditEventBody = Static<typeof AuditEvent>;

export const OrganizationPage = pageOf(Organization, { title: 'OrganizationPage', description: 'A page of organizations, by id' });
export const UserPage = pageOf(User, { title: 'UserPage', description: 'A page of users' });
export const RoomPage = pageOf(Room, { title: 'RoomPage', description: 'A page of signing rooms, by id' });
export const AuditEventPage = pageOf(AuditEvent, { title: 'AuditEventPage', description: 'A page of audit events, newest first' });

/** `page` and `size` with the management routes' default size of 20. */
const SmallPageQuery = { ...PageQuery, size: Type.Optional(Type.Integer({ ...PageQuery.size, default: 20 })) };

export const ListQuery = Type.Object(SmallPageQuery);
export const UserListQuery = Type.Object({
  ...SmallPageQuery,
  searchQuery: Type.Optional(
    Type.String({ description: 'As in the lookup: every term a substring of firstname, lastname or email, ignoring case and accents' }),
  ),
  sortBy: Type.Optional(stringEnum(SORT_FIELDS, { default: 'lastname', description: 'Field to sort by (any letter case)' })),
  sortDirection: Type.Optional(stringEnum(SORT_DIRECTIONS, { default: 'ASC', description: 'Sort direction (any letter case)' })),
  status: Type.Optional(stringEnum(USER_STATUSES, { description: 'Only users of this status' })),
});
export const AuditEventQuery = Type.Object({
  ...SmallPageQuery,
  action: Type.Optional(stringEnum(AUDIT_ACTIONS, { description: 'Only events of this action (any letter case), e.g. user.created' })),
  actor: Type.Optional(Type.String({ description: 'Only events of this actor' })),
  since: Type.Optional(
    Type.String({ description: 'Only events at or after this instant: an RFC 3339 date-time (UTC without an offset) or a date (its first instant)' }),
  ),
  until: Type.Optional(
    Type.String({ description: 'Only events at or before this instant: an RFC 3339 date-time (UTC without an offset) or a date (its first instant)' }),
  ),
});

export const IfMatchHeaders = Type.Object({
  'if-match': Type.Optional(Type.String({ description: 'The ETag of the version this change is meant for: 412 if the resource changed since' })),
});

/** A room membership has no representation, so no ETag: only `*` can hold. */
export const MembershipIfMatchHeaders = Type.Object({
  'if-match': Type.Optional(
    Type.String({ description: 'Only "*" can hold, while the user is a member of the room (a membership has no ETag): 412 otherwise' }),
  ),
});

export const IfNoneMatchHeaders = Type.Object({
  'if-none-match': Type.Optional(
    Type.String({ description: 'ETags of versions the client holds, or "*": when one is the current version, the answer is 304 without a body' }),
  ),
});

export const ETagHeader: ResponseHeader = { type: 'string', description: 'The version of the resource, for If-Match' };

/** The 304 of a read whose If-None-Match named the current version (RFC 9110 section 15.4.5: it repeats the ETag). */
export const NotModified = { description: 'Not modified: If-None-Match named the current version', type: 'null', headers: { ETag: ETagHeader } } as const;
export const LocationHeader: ResponseHeader = { type: 'string', description: 'The URL of the created resource' };

/** A 200 or 201 body with its ETag (and Location) headers declared. */
export function withETag<T extends TSchema>(schema: T, description: string, location = false) {
  return { ...schema, description, headers: { ETag: ETagHeader, ...(location ? { Location: LocationHeader } : {}) } };
}
