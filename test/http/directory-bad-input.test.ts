import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { ACME_PASSWORD, DIRECTORY } from '../helpers/fixtures.ts';
import { topHalfBlackPdf } from '../helpers/pdf.ts';
import { basic, startTestApp, type TestApp } from '../helpers/test-app.ts';

const ACME = basic('acme-admin', ACME_PASSWORD);
const API = '/admin/api/v3/organizations';

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/**
 * Every bad input the directory API names (issue: directory management): each is answered with a
 * problem+json that says what is wrong, and changes nothing, the audit trail included.
 */
describe('directory API: bad input gets a clear answer and changes nothing', () => {
  let t: TestApp;
  const send = (method: Method, url: string, payload?: string, headers: Record<string, string> = {}) =>
    t.app.inject({
      method,
      url,
      headers: { authorization: ACME, ...(payload !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
      ...(payload !== undefined ? { payload } : {}),
    });

  /** Everything a write could change: rows of the directory, versions, tallies, events. */
  const state = async () =>
    JSON.stringify(
      await Promise.all([
        t.sql(sql`select org_id, id, firstname, lastname, email, external, status, user_name, external_id, updated_at from users order by org_id, id`),
        t.sql(sql`select org_id, id, name, updated_at from rooms order by org_id, id`),
        t.sql(sql`select * from room_members order by org_id, room_id, user_id`),
        t.sql(sql`select id, name, external_signatories, directory_version from organizations order by id`),
        t.sql(sql`select org_id, room_id, external, needs_invite, candidate, users from user_tallies order by 1, 2, 3, 4, 5`),
        t.sql(sql`select count(*) as events from audit_events`),
      ]),
    );

  /** Sends the request and checks the problem it gets, and that the database is as it was. */
  const refused = async (
    method: Method,
    url: string,
    payload: string | undefined,
    status: number,
    code: string,
    parameters: string[] = [],
    headers: Record<string, string> = {},
  ) => {
    const before = await state();
    const response = await send(method, url, payload, headers);
    assert.equal(response.statusCode, status, `${method} ${url} ${payload ?? ''}: ${response.body}`);
    assert.match(String(response.headers['content-type']), /^application\/problem\+json/);
    const problem = response.json();
    assert.equal(problem.code, code, response.body);
    assert.equal(problem.status, status);
    assert.ok(typeof problem.detail === 'string' && problem.detail.length > 0);
    for (const parameter of parameters) {
      assert.ok(
        problem.errors?.some((error: { parameter: string }) => error.parameter === parameter),
        `${method} ${url} names ${parameter}: ${response.body}`,
      );
    }
    assert.equal(await state(), before, `${method} ${url} changed nothing`);
    return problem;
  };

  before(async () => {
    t = await startTestApp({ SIGNROOM_LOGIN_MAX_FAILURES: '1000' });
    await t.importDirectory(DIRECTORY);
  });
  after(async () => t.close());

  const goodUser = { id: 'x1', firstname: 'X', lastname: 'Y', email: 'x1@acme.example' };
  const badFields: [string, unknown, string][] = [
    ['id', 'has space', 'id'],
    ['id', 'x'.repeat(65), 'id'],
    ['id', 7, 'id'],
    ['email', 'no-at-sign', 'email'],
    ['email', 'two words@acme.example', 'email'],
    ['email', 7, 'email'],
    ['email', null, 'email'],
    ['firstname', 'x'.repeat(256), 'firstname'],
    ['firstname', 'tab\there', 'firstname'],
    ['firstname', 12, 'firstname'],
    ['lastname', { a: 1 }, 'lastname'],
    ['external', 'yes', 'external'],
    ['status', 'sleeping', 'status'],
    ['status', 'deleted', 'status'],
    ['userName', '', 'userName'],
    ['unknownField', 1, 'unknownField'],
  ];
  for (const [field, value, parameter] of badFields) {
    it(`refuses a user whose ${field} is ${JSON.stringify(value)?.slice(0, 20)}, naming it`, async () => {
      await refused('POST', `${API}/acme/users`, JSON.stringify({ ...goodUser, [field]: value }), 400, 'invalid-parameter', [parameter]);
      if (field !== 'id')
        await refused('PUT', `${API}/acme/users/u1`, JSON.stringify({ ...goodUser, id: 'u1', [field]: value }), 400, 'invalid-parameter', [parameter]);
      if (field !== 'id') await refused('PATCH', `${API}/acme/users/u1`, JSON.stringify({ [field]: value }), 400, 'invalid-parameter', [parameter]);
    });
  }

  it('refuses a body that is not UTF-8 (400) or says another charset (415), storing no replacement characters', async () => {
    const latin1 = Buffer.from('{"id":"x9","email":"x9@acme.example","firstname":"Ren\u00e9"}', 'latin1');
    for (const [contentType, status, code] of [
      ['application/json', 400, 'malformed-request'],
      ['application/json; charset=latin1', 415, 'unsupported-media-type'],
      ['application/json; charset="ISO-8859-1"', 415, 'unsupported-media-type'],
    ] as const) {
      const before = await state();
      const response = await t.app.inject({
        method: 'POST',
        url: `${API}/acme/users`,
        headers: { authorization: ACME, 'content-type': contentType },
        payload: latin1,
      });
      assert.equal(response.statusCode, status, `${contentType}: ${response.body}`);
      assert.equal(response.json().code, code);
      assert.equal(await state(), before);
    }
    const utf8 = await t.app.inject({
      method: 'POST',
      url: `${API}/acme/users`,
      headers: { authorization: ACME, 'content-type': 'application/json; charset=UTF-8' },
      payload: Buffer.from('{"id":"x9","email":"x9@acme.example","firstname":"Ren\u00e9"}', 'utf8'),
    });
    assert.equal(utf8.statusCode, 201, utf8.body);
    assert.equal(utf8.json().firstname, 'René');
    assert.equal((await send('DELETE', `${API}/acme/users/x9`)).statusCode, 204);
  });

  it('names every bad field of one body at once', async () => {
    await refused('POST', `${API}/acme/users`, JSON.stringify({ id: 'a b', email: 'nope', external: 'no', extra: 1 }), 400, 'invalid-parameter', [
      'id',
      'email',
      'external',
      'extra',
    ]);
  });

  it("names every bad field at once whichever check finds it: types, rules, an id not the URL's, a malformed If-Match, dates", async () => {
    const root = { authorization: basic('root', 'root-password') };
    const cases: [Method, string, unknown, string[], Record<string, string>?][] = [
      ['PATCH', `${API}/acme/users/u1`, { email: null, firstname: 5 }, ['email', 'firstname']],
      ['PATCH', `${API}/acme/users/u1`, { id: 'other', email: null }, ['id', 'email']],
      [
        'PATCH',
        `${API}/acme/users/u1`,
        { email: null, firstname: 5, status: 'x', external: 'no', id: 'other' },
        ['email', 'firstname', 'status', 'external', 'id'],
      ],
      ['PUT', `${API}/acme/users/u1`, { id: 'other', email: 'bad' }, ['id', 'email']],
      [
        'POST',
        `${API}/acme/users`,
        { firstname: 'a\u0001b', lastname: 'x\u0002', email: 'bad', external: 'x' },
        ['firstname', 'lastname', 'email', 'external'],
      ],
      ['POST', `${API}/acme/rooms`, { id: 'rr', name: 'a\u0001', bogus: 1 }, ['name', 'bogus']],
      ['POST', API, { id: 'oo', name: 'a\u0001', settings: { externalSignatories: 1 } }, ['name', 'settings.externalSignatories'], root],
      ['PATCH', `${API}/acme/rooms/board`, { id: 'zz', name: 3 }, ['id', 'name']],
      ['PATCH', `${API}/acme`, { id: 'other', name: 3 }, ['id', 'name'], root],
      ['PATCH', `${API}/acme/users/u1`, { firstname: 5 }, ['firstname', 'If-Match'], { 'if-match': 'bad' }],
      ['PUT', `${API}/acme/rooms/board`, { name: 'a\u0001' }, ['name', 'If-Match'], { 'if-match': 'bad' }],
      ['GET', `${API}/acme/audit-events?since=bad&size=0`, undefined, ['since', 'size']],
      ['GET', `${API}/acme/audit-events?until=2026-02-30&action=nope`, undefined, ['until', 'action']],
    ];
    for (const [method, url, body, parameters, headers] of cases) {
      const payload = body === undefined ? undefined : JSON.stringify(body);
      const problem = await refused(method, url, payload, 400, 'invalid-parameter', parameters, headers);
      assert.deepEqual(
        problem.errors.map((error: { parameter: string }) => error.parameter).sort(),
        [...parameters].sort(),
        `${method} ${url} ${payload ?? ''}: ${JSON.stringify(problem)}`,
      );
    }
  });

  it('answers a write to a user id no user can have with 404, as a read', async () => {
    for (const method of ['PUT', 'PATCH'] as const) {
      await refused(method, `${API}/acme/users/${'x'.repeat(65)}`, JSON.stringify({ email: 'x@acme.example' }), 404, 'user-not-found');
      await refused(method, `${API}/acme/users/a%20b`, JSON.stringify({ email: 'x@acme.example' }), 404, 'user-not-found');
      // A NUL, which PostgreSQL refuses in any text.
      await refused(method, `${API}/acme/users/a%00b`, JSON.stringify({ email: 'x@acme.example' }), 404, 'user-not-found');
    }
    await refused('DELETE', `${API}/acme/users/a%00b`, undefined, 404, 'user-not-found');
    await refused('GET', `${API}/acme/users/a%00b`, undefined, 404, 'user-not-found');
    await refused('PUT', `${API}/acme/rooms/board/members/a%00b`, undefined, 404, 'user-not-found');
    await refused('PUT', `${API}/acme/rooms/b%00rd/members/u1`, undefined, 404, 'room-not-found');
    await refused('GET', `${API}/acme/rooms/b%00rd`, undefined, 404, 'room-not-found');
  });

  it('answers a malformed If-Match with 400 before looking for the resource', async () => {
    await refused('PATCH', `${API}/acme/users/ghost`, JSON.stringify({}), 400, 'invalid-parameter', ['If-Match'], { 'if-match': 'bad' });
    await refused('DELETE', `${API}/acme/rooms/ghost`, undefined, 400, 'invalid-parameter', ['If-Match'], { 'if-match': 'bad' });
    await refused('PUT', `${API}/acme/rooms/ghost/members/u1`, undefined, 400, 'invalid-parameter', ['If-Match'], { 'if-match': 'bad' });
  });

  it('refuses a missing email, a null email in a merge patch and an empty room name', async () => {
    await refused('POST', `${API}/acme/users`, JSON.stringify({ id: 'x2' }), 400, 'invalid-parameter', ['email']);
    await refused('PATCH', `${API}/acme/users/u1`, JSON.stringify({ email: null }), 400, 'invalid-parameter', ['email']);
    await refused('PUT', `${API}/acme/rooms/board`, JSON.stringify({ name: '' }), 400, 'invalid-parameter', ['name']);
  });

  it('names the bad fields only, and says what was wrong in words', async () => {
    const root = { authorization: basic('root', 'root-password') };
    for (const [payload, bad] of [
      [{ settings: { foo: true } }, ['settings.foo']],
      [{ name: 5, settings: { externalSignatories: 'yes' } }, ['name', 'settings.externalSignatories']],
    ] as const) {
      const problem = await refused('PATCH', `${API}/acme`, JSON.stringify(payload), 400, 'invalid-parameter', [...bad], root);
      assert.deepEqual(problem.errors.map((error: { parameter: string }) => error.parameter).sort(), [...bad].sort(), JSON.stringify(problem));
    }
    const nullEmail = await refused('PATCH', `${API}/acme/users/u1`, JSON.stringify({ email: null }), 400, 'invalid-parameter', ['email']);
    assert.doesNotMatch(nullEmail.detail, /undefined/);
  });

  it('refuses changing an id', async () => {
    await refused('PATCH', `${API}/acme/users/u1`, JSON.stringify({ id: 'u9' }), 400, 'invalid-parameter', ['id']);
    await refused('PUT', `${API}/acme/rooms/board`, JSON.stringify({ id: 'other', name: 'B' }), 400, 'invalid-parameter', ['id']);
  });

  it('refuses an email taken by another user, differing only in case', async () => {
    await refused('POST', `${API}/acme/users`, JSON.stringify({ ...goodUser, email: 'ANNA@acme.example' }), 409, 'email-taken');
    await refused('PATCH', `${API}/acme/users/u2`, JSON.stringify({ email: 'Anna@Acme.Example' }), 409, 'email-taken');
  });

  it('refuses a userName taken by another user, ignoring case', async () => {
    assert.equal((await send('PATCH', `${API}/acme/users/u1`, JSON.stringify({ userName: 'Anna.M' }))).statusCode, 200);
    await refused('PATCH', `${API}/acme/users/u2`, JSON.stringify({ userName: 'anna.m' }), 409, 'user-name-taken');
  });

  it('refuses a userName another user reads as, its email while it has none, and an email another user has as userName', async () => {
    await refused('PATCH', `${API}/acme/users/u2`, JSON.stringify({ userName: 'ZOE@acme.example' }), 409, 'user-name-taken');
    await refused('POST', `${API}/acme/users`, JSON.stringify({ ...goodUser, email: 'anna.m@acme.example', userName: 'anna.m' }), 409, 'user-name-taken');
  });

  it('answers an organization create by a credential not covering all organizations with 403, before looking at the body', async () => {
    await refused('POST', API, JSON.stringify({ id: 'not valid!' }), 403, 'forbidden');
  });

  it('refuses ids that exist already', async () => {
    await refused('POST', `${API}/acme/users`, JSON.stringify({ ...goodUser, id: 'u1' }), 409, 'user-exists');
    await refused('POST', `${API}/acme/rooms`, JSON.stringify({ id: 'board', name: 'Again' }), 409, 'room-exists');
    await refused('POST', API, JSON.stringify({ id: 'acme', name: 'Again' }), 409, 'organization-exists', [], {
      authorization: basic('root', 'root-password'),
    });
  });

  it('answers unknown users and rooms with 404, and a user of another organization exactly like an unknown one', async () => {
    const unknown = await refused('PATCH', `${API}/acme/users/nobody`, JSON.stringify({ firstname: 'A' }), 404, 'user-not-found');
    const other = await refused('PATCH', `${API}/acme/users/o1`, JSON.stringify({ firstname: 'A' }), 404, 'user-not-found');
    assert.equal(other.detail.replace('o1', 'nobody'), unknown.detail);
    await refused('GET', `${API}/acme/users/o1`, undefined, 404, 'user-not-found');
    await refused('DELETE', `${API}/acme/users/o1`, undefined, 404, 'user-not-found');
    await refused('PUT', `${API}/acme/rooms/board/members/o1`, undefined, 404, 'user-not-found');
    await refused('PUT', `${API}/acme/rooms/lobby/members/u1`, undefined, 404, 'room-not-found');
    await refused('DELETE', `${API}/acme/rooms/nowhere`, undefined, 404, 'room-not-found');
    await refused('PATCH', `${API}/acme/rooms/nowhere`, JSON.stringify({ name: 'N' }), 404, 'room-not-found');
  });

  it('answers an organization outside the credential with 403, existing or not', async () => {
    for (const org of ['other', 'no-such-org']) {
      await refused('POST', `${API}/${org}/users`, JSON.stringify(goodUser), 403, 'forbidden');
      await refused('GET', `${API}/${org}/audit-events`, undefined, 403, 'forbidden');
    }
    await refused('POST', `${API}/no-such-org/users`, JSON.stringify(goodUser), 404, 'organization-not-found', [], {
      authorization: basic('root', 'root-password'),
    });
  });

  it('refuses a stale or malformed If-Match', async () => {
    await refused('PATCH', `${API}/acme/users/u1`, JSON.stringify({ firstname: 'A' }), 412, 'precondition-failed', [], { 'if-match': '"stale"' });
    await refused('DELETE', `${API}/acme/users/u1`, undefined, 412, 'precondition-failed', [], { 'if-match': '"stale"' });
    await refused('PUT', `${API}/acme/rooms/board`, JSON.stringify({ name: 'B' }), 412, 'precondition-failed', [], { 'if-match': '"stale"' });
    await refused('PATCH', `${API}/acme`, JSON.stringify({ name: 'B' }), 412, 'precondition-failed', [], { 'if-match': '"stale"' });
    await refused('PATCH', `${API}/acme/users/u1`, JSON.stringify({ firstname: 'A' }), 400, 'invalid-parameter', ['If-Match'], { 'if-match': 'not-quoted' });
    // "*" stands alone: a list holding it is malformed.
    await refused('PATCH', `${API}/acme/users/u1`, JSON.stringify({ firstname: 'A' }), 400, 'invalid-parameter', ['If-Match'], { 'if-match': '"x", *' });
  });

  it('refuses an If-Match on a room membership unless it is "*" and the user is a member', async () => {
    // u1 is a member of board, u2 is not: a membership has no entity tag, so no tag can match.
    for (const [method, user] of [
      ['PUT', 'u2'],
      ['DELETE', 'u1'],
      ['PUT', 'u1'],
    ] as const) {
      await refused(method, `${API}/acme/rooms/board/members/${user}`, undefined, 412, 'precondition-failed', [], { 'if-match': '"anything"' });
    }
    await refused('PUT', `${API}/acme/rooms/board/members/u2`, undefined, 412, 'precondition-failed', [], { 'if-match': '*' });
    await refused('DELETE', `${API}/acme/rooms/empty/members/u1`, undefined, 412, 'precondition-failed', [], { 'if-match': '*' });
    await refused('DELETE', `${API}/acme/rooms/board/members/u1`, undefined, 400, 'invalid-parameter', ['If-Match'], { 'if-match': 'not-quoted' });
    // Unknown room or user: the 404 comes first, as for every other resource.
    await refused('PUT', `${API}/acme/rooms/nope/members/u1`, undefined, 404, 'room-not-found', [], { 'if-match': '*' });
  });

  it('refuses bodies that are not JSON objects, not JSON, of another type, or too large', async () => {
    await refused('PATCH', `${API}/acme/users/u1`, '[{"op":"replace"}]', 400, 'invalid-parameter');
    await refused('PATCH', `${API}/acme/users/u1`, '"text"', 400, 'invalid-parameter');
    await refused('POST', `${API}/acme/users`, '{"id": "x3", ', 400, 'malformed-request', ['body']);
    await refused('POST', `${API}/acme/users`, 'id=x3', 415, 'unsupported-media-type', [], { 'content-type': 'application/x-www-form-urlencoded' });
    await refused('POST', `${API}/acme/users`, JSON.stringify({ ...goodUser, firstname: 'x'.repeat(70_000) }), 413, 'payload-too-large');
    await refused('POST', `${API}/acme/users`, '{"__proto__": {"polluted": true}, "email": "p@acme.example"}', 400, 'malformed-request');
  });

  it('refuses to delete a room that holds documents', async () => {
    const upload = await send('POST', `${API}/acme/rooms/board/documents`, JSON.stringify({ payload: topHalfBlackPdf().toString('base64') }));
    assert.equal(upload.statusCode, 201, upload.body);
    await refused('DELETE', `${API}/acme/rooms/board`, undefined, 409, 'room-has-documents');
  });

  it('lets exactly one of two concurrent changes sent with the same If-Match win', async () => {
    const etag = String((await send('GET', `${API}/acme/users/u4`)).headers['etag']);
    const [a, b] = await Promise.all(
      ['Zoe A', 'Zoe B'].map((firstname) => send('PATCH', `${API}/acme/users/u4`, JSON.stringify({ firstname }), { 'if-match': etag })),
    );
    assert.deepEqual([a!.statusCode, b!.statusCode].sort(), [200, 412]);
    const winner = a!.statusCode === 200 ? 'Zoe A' : 'Zoe B';
    assert.equal((await send('GET', `${API}/acme/users/u4`)).json().firstname, winner);
  });
});
