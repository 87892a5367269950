import { Type } from 'typebox';
import { pageOf, PageQuery } from './page.ts';
import { PURPOSES, SORT_DIRECTIONS, SORT_FIELDS } from '../domain/signatory-rules.ts';
import { stringEnum } from './string-enum.ts';

const ID_DESCRIPTION = 'Identifier: letters, digits, ".", "_", "-"; 1–64 characters';

export const RoomPathParams = Type.Object({
  organizationId: Type.String({ description: `Organization id. ${ID_DESCRIPTION}` }),
  signingRoomId: Type.String({ description: `Signing room id. ${ID_DESCRIPTION}` }),
});

export const LookupQuery = Type.Object({
  searchQuery: Type.Optional(
    Type.String({
      description:
        'Filters by firstname, lastname or email: split on white space, every term must be a substring of one of the ' +
        'three, ignoring case and accents. All characters are literal.',
    }),
  ),
  ...PageQuery,
  sortBy: Type.Optional(stringEnum(SORT_FIELDS, { default: 'lastname', description: 'Field to sort by (any letter case)' })),
  sortDirection: Type.Optional(stringEnum(SORT_DIRECTIONS, { default: 'ASC', description: 'Sort direction (any letter case)' })),
  roomMember: Type.Optional(Type.Boolean({ deprecated: true, description: 'Deprecated. Filters by room membership; ignored when purpose is given' })),
  requiresInvitation: Type.Optional(
    Type.Boolean({
      deprecated: true,
      description: 'Deprecated. Filters by whether the user must be invited; ignored when purpose is given',
    }),
  ),
  // Exact: contract section 3 makes sortBy and sortDirection case-insensitive, and any other purpose value a 400.
  purpose: Type.Optional(stringEnum(PURPOSES, { description: 'Filters by the purpose of the request', exactCase: true })),
});

export const Signatory = Type.Object(
  {
    displayName: Type.String({ description: 'First and last name, or the email when both are empty' }),
    email: Type.String(),
    firstname: Type.Union([Type.String(), Type.Null()]),
    lastname: Type.Union([Type.String(), Type.Null()]),
    requiresInvitation: Type.Boolean({ description: 'Not a room member, and external or pending' }),
    roomMember: Type.Boolean(),
  },
  { title: 'Signatory' },
);

export const SignatoryPage = pageOf(Signatory, {
  title: 'SignatoryPage',
  description: 'A Spring Data page of signatories',
});
