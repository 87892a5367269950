import { GROUP_SCHEMA } from './group-resource.ts';
import { SIGNROOM_USER_SCHEMA, USER_SCHEMA } from './user-resource.ts';

/**
 * SCIM discovery (RFC 7644 §4, RFC 7643 §5–7): what this service supports and the attributes it
 * keeps, as identity providers read them before provisioning. Static; `base` is the tenant URL.
 */
const LIST = 'urn:ietf:params:scim:api:messages:2.0:ListResponse';

export function serviceProviderConfig(base: string) {
  return {
    schemas: ['urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig'],
    // No documentationUri: a self-hosted service has no address of its documentation that is sure to exist (docs/scim.md ships with it).
    patch: { supported: true },
    bulk: { supported: false, maxOperations: 0, maxPayloadSize: 0 },
    filter: { supported: true, maxResults: 1000 },
    changePassword: { supported: false },
    sort: { supported: false },
    etag: { supported: true },
    authenticationSchemes: [
      {
        type: 'oauthbearertoken',
        name: 'API token',
        description: 'Authorization: Bearer with an API token of the organization (bin/signroom token create ORG)',
        primary: true,
      },
      { type: 'httpbasic', name: 'HTTP Basic', description: 'A credential whose scope covers the organization' },
    ],
    meta: { resourceType: 'ServiceProviderConfig', location: `${base}/ServiceProviderConfig` },
  };
}

export function resourceTypes(base: string) {
  const types = [
    {
      schemas: ['urn:ietf:params:scim:schemas:core:2.0:ResourceType'],
      id: 'User',
      name: 'User',
      endpoint: '/Users',
      description: 'A person of the organization: a possible signatory',
      schema: USER_SCHEMA,
      schemaExtensions: [{ schema: SIGNROOM_USER_SCHEMA, required: false }],
      meta: { resourceType: 'ResourceType', location: `${base}/ResourceTypes/User` },
    },
    {
      schemas: ['urn:ietf:params:scim:schemas:core:2.0:ResourceType'],
      id: 'Group',
      name: 'Group',
      endpoint: '/Groups',
      description: 'A signing room and its members',
      schema: GROUP_SCHEMA,
      meta: { resourceType: 'ResourceType', location: `${base}/ResourceTypes/Group` },
    },
  ];
  return { schemas: [LIST], totalResults: types.length, startIndex: 1, itemsPerPage: types.length, Resources: types };
}

type Attribute = {
  name: string;
  type: 'string' | 'boolean' | 'complex' | 'dateTime' | 'reference';
  multiValued: boolean;
  description: string;
  required: boolean;
  caseExact: boolean;
  mutability: 'readOnly' | 'readWrite' | 'immutable' | 'writeOnly';
  returned: 'always' | 'never' | 'default' | 'request';
  uniqueness: 'none' | 'server' | 'global';
  subAttributes?: Attribute[];
};

function attribute(name: string, description: string, options: Partial<Attribute> = {}): Attribute {
  return {
    name,
    type: 'string',
    multiValued: false,
    description,
    required: false,
    caseExact: false,
    mutability: 'readWrite',
    returned: 'default',
    uniqueness: 'none',
    ...options,
  };
}

const USER_ATTRIBUTES: Attribute[] = [
  attribute('id', 'Assigned by signroom', { mutability: 'readOnly', returned: 'always', uniqueness: 'server', caseExact: true }),
  attribute('externalId', "The identity provider's id of the user", { caseExact: true }),
  attribute('userName', 'Unique in the organization, ignoring case; reads as the email while unset', { required: true, uniqueness: 'server' }),
  attribute('name', "The user's name", {
    type: 'complex',
    subAttributes: [attribute('givenName', 'First name (signroom: firstname)'), attribute('familyName', 'Last name (signroom: lastname)')],
  }),
  attribute('displayName', 'As the lookup shows the user: first and last name, else the email; writes are ignored', { mutability: 'readOnly' }),
  attribute('emails', "The user's one email (the primary one given, else the first), unique in the organization ignoring case", {
    type: 'complex',
    multiValued: true,
    subAttributes: [attribute('value', 'The email'), attribute('type', 'Always "work"'), attribute('primary', 'Always true', { type: 'boolean' })],
  }),
  attribute('active', 'false: suspended (kept, never a signatory candidate)', { type: 'boolean' }),
];

const GROUP_ATTRIBUTES: Attribute[] = [
  attribute('id', "Assigned by signroom: the signing room's id", { mutability: 'readOnly', returned: 'always', uniqueness: 'server', caseExact: true }),
  attribute('externalId', "The identity provider's id of the group", { caseExact: true }),
  attribute('displayName', "The signing room's name", { required: true }),
  attribute('members', "The room's members: users of the organization", {
    type: 'complex',
    multiValued: true,
    subAttributes: [
      attribute('value', 'A user id', { mutability: 'immutable', caseExact: true }),
      attribute('$ref', "The user's URL", { type: 'reference', mutability: 'immutable' }),
      attribute('type', 'Always "User"', { mutability: 'immutable' }),
    ],
  }),
];

const SIGNROOM_ATTRIBUTES: Attribute[] = [
  attribute('external', 'An external signatory (offered only in rooms that allow external signatories)', { type: 'boolean' }),
];

export function schemas(base: string) {
  const list = [
    {
      schemas: ['urn:ietf:params:scim:schemas:core:2.0:Schema'],
      id: USER_SCHEMA,
      name: 'User',
      description: 'User Account',
      attributes: USER_ATTRIBUTES,
      meta: { resourceType: 'Schema', location: `${base}/Schemas/${USER_SCHEMA}` },
    },
    {
      schemas: ['urn:ietf:params:scim:schemas:core:2.0:Schema'],
      id: GROUP_SCHEMA,
      name: 'Group',
      description: 'Group: a signing room',
      attributes: GROUP_ATTRIBUTES,
      meta: { resourceType: 'Schema', location: `${base}/Schemas/${GROUP_SCHEMA}` },
    },
    {
      schemas: ['urn:ietf:params:scim:schemas:core:2.0:Schema'],
      id: SIGNROOM_USER_SCHEMA,
      name: 'SignroomUser',
      description: 'What signroom keeps of a user besides the core',
      attributes: SIGNROOM_ATTRIBUTES,
      meta: { resourceType: 'Schema', location: `${base}/Schemas/${SIGNROOM_USER_SCHEMA}` },
    },
  ];
  return { schemas: [LIST], totalResults: list.length, startIndex: 1, itemsPerPage: list.length, Resources: list };
}
