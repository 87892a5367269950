/** A small hand-written directory used by several integration tests. */
export const ACME = {
  id: 'acme',
  name: 'Acme AG',
  settings: { externalSignatories: true },
  users: [
    { id: 'u1', firstname: 'Anna', lastname: 'Müller', email: 'anna@acme.example' },
    { id: 'u2', firstname: 'Ben', lastname: 'Mueller', email: 'ben@acme.example', status: 'pending' },
    { id: 'u3', firstname: null, lastname: null, email: 'ext%_\\@partner.example', external: true },
    { id: 'u4', firstname: 'Zoë', lastname: "O'Brien", email: 'zoe@acme.example' },
  ],
  rooms: [
    { id: 'board', name: 'Board', members: ['u1'] },
    { id: 'empty', name: 'Empty', members: [] },
  ],
};

export const OTHER = {
  id: 'other',
  name: 'Other Ltd',
  users: [{ id: 'o1', firstname: 'Olga', lastname: 'Other', email: 'olga@other.example' }],
  rooms: [{ id: 'lobby', name: 'Lobby', members: ['o1'] }],
};

/** Passwords with a colon and non-ASCII characters must work (RFC 7617, UTF-8). */
export const ACME_PASSWORD = 'pä:ss:wörd-🔑';

export const DIRECTORY = {
  organizations: [ACME, OTHER],
  credentials: [
    { username: 'acme-admin', password: ACME_PASSWORD, organizations: ['acme'] },
    { username: 'root', password: 'root-password', organizations: '*' },
  ],
};
