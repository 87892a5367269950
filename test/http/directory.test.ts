import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ACME_PASSWORD, DIRECTORY } from '../helpers/fixtures.ts';
import { LOOKUP, basic, startTestApp, type TestApp } from '../helpers/test-app.ts';

const ACME = basic('acme-admin', ACME_PASSWORD);
const ROOT = basic('root', 'root-password');
const API = '/admin/api/v3/organizations';

describe('directory management API', () => {
  let t: TestApp;
  const call = (method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, body?: unknown, headers: Record<string, string> = {}) =>
    t.app.inject({
      method,
      url,
      headers: { authorization: ACME, ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
      ...(body !== undefined ? { payload: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
    });
  const lookup = async (query: string, room = 'board') =>
    (await t.app.inject({ url: `${LOOKUP('acme', room)}?${query}`, headers: { authorization: ACME } })).json();

  before(async () => {
    t = await startTestApp();
    await t.importDirectory(DIRECTORY);
  });
  after(async () => t.close());

  it('creates a user who is found by the next lookup, with Location and ETag', async () => {
    const created = await call('POST', `${API}/acme/users`, { id: 'new1', firstname: 'Nora', lastname: 'Neu', email: 'nora@acme.example' });
    assert.equal(created.statusCode, 201, created.body);
    assert.equal(created.headers['location'], `${API}/acme/users/new1`);
    assert.match(String(created.headers['etag']), /^"[^"]+"$/);
    const user = created.json();
    assert.deepEqual(
      { ...user, createdAt: undefined, updatedAt: undefined },
      {
        id: 'new1',
        firstname: 'Nora',
        lastname: 'Neu',
        email: 'nora@acme.example',
        external: false,
        status: 'active',
        userName: 'nora@acme.example',
        externalId: null,
        createdAt: undefined,
        updatedAt: undefined,
      },
    );
    const page = await lookup('searchQuery=nora');
    assert.deepEqual(
      page.content.map((s: { email: string }) => s.email),
      ['nora@acme.example'],
    );
    const read = await call('GET', `${API}/acme/users/new1`);
    assert.equal(read.statusCode, 200);
    assert.equal(read.headers['etag'], created.headers['etag']);
  });

  it('counts a name in characters as people see them: 255 emoji fit, 256 do not, and the error never splits one', async () => {
    const fits = await call('POST', `${API}/acme/users`, { id: 'emoji1', firstname: '😀'.repeat(255), email: 'emoji1@acme.example' });
    assert.equal(fits.statusCode, 201, fits.body);
    assert.equal(fits.json().firstname, '😀'.repeat(255));
    const room = await call('POST', `${API}/acme/rooms`, { id: 'emoji-room', name: '😀'.repeat(255) });
    assert.equal(room.statusCode, 201, room.body);
    for (const [url, body, parameter] of [
      [`${API}/acme/users`, { id: 'emoji2', firstname: '😀'.repeat(256), email: 'emoji2@acme.example' }, 'firstname'],
      [`${API}/acme/rooms`, { id: 'emoji-room2', name: '😀'.repeat(256) }, 'name'],
    ] as const) {
      const refused = await call('POST', url, body);
      assert.equal(refused.statusCode, 400, refused.body);
      const { detail, errors } = refused.json<{ detail: string; errors: { message: string }[] }>();
      assert.ok(
        [detail, ...errors.map((error) => error.message)].every((text) => text.isWellFormed()),
        `no half of a character in the echo: ${refused.body}`,
      );
      assert.deepEqual(
        refused.json().errors.map((error: { parameter: string }) => error.parameter),
        [parameter],
      );
    }
  });

  it('generates an id when none is given', async () => {
    const created = await call('POST', `${API}/acme/users`, { email: 'anon@acme.example' });
    assert.equal(created.statusCode, 201, created.body);
    assert.match(created.json().id, /^[A-Za-z0-9._-]{1,64}$/);
  });

  it('takes a resource as read elsewhere on a create: its read-only fields are ignored', async () => {
    const old = '2001-01-01T00:00:00.000Z';
    const user = await call('POST', `${API}/acme/users`, { id: 'copied', email: 'copied@acme.example', createdAt: old, updatedAt: old });
    assert.equal(user.statusCode, 201, user.body);
    assert.notEqual(user.json().createdAt, old);
    const room = await call('POST', `${API}/acme/rooms`, { id: 'copied-room', name: 'Copied', memberCount: 7, createdAt: old, updatedAt: old });
    assert.equal(room.statusCode, 201, room.body);
    assert.deepEqual([room.json().memberCount, room.json().createdAt === old], [0, false]);
    const root = { authorization: basic('root', 'root-password') };
    const organization = await t.app.inject({
      method: 'POST',
      url: API,
      headers: { ...root, 'content-type': 'application/json' },
      payload: { id: 'copied-org', name: 'Copied', settings: { externalSignatories: false }, createdAt: old, updatedAt: old },
    });
    assert.equal(organization.statusCode, 201, organization.body);
    assert.notEqual(organization.json().createdAt, old);
  });

  it('adds a member who is a roomMember at once, and removes them idempotently', async () => {
    assert.equal((await call('PUT', `${API}/acme/rooms/board/members/new1`)).statusCode, 204);
    assert.equal((await call('PUT', `${API}/acme/rooms/board/members/new1`)).statusCode, 204);
    let page = await lookup('searchQuery=nora&purpose=SIGNING_REQUEST_SIGNATORY');
    assert.equal(page.totalElements, 1);
    assert.equal(page.content[0].roomMember, true);
    const room = (await call('GET', `${API}/acme/rooms/board`)).json();
    assert.equal(room.memberCount, 2);
    assert.equal((await call('DELETE', `${API}/acme/rooms/board/members/new1`)).statusCode, 204);
    assert.equal((await call('DELETE', `${API}/acme/rooms/board/members/new1`)).statusCode, 204);
    page = await lookup('purpose=SIGNING_REQUEST_SIGNATORY');
    assert.deepEqual(
      page.content.map((s: { email: string }) => s.email),
      ['anna@acme.example'],
    );
  });

  it('suspends a user by merge patch: kept and listed, never a candidate', async () => {
    const before = await lookup('size=100');
    const patched = await call('PATCH', `${API}/acme/users/u4`, { status: 'suspended' }, { 'content-type': 'application/merge-patch+json' });
    assert.equal(patched.statusCode, 200, patched.body);
    assert.equal(patched.json().status, 'suspended');
    assert.equal(patched.json().firstname, 'Zoë');
    const after = await lookup('size=100');
    assert.equal(after.totalElements, before.totalElements - 1);
    assert.ok(!after.content.some((s: { email: string }) => s.email === 'zoe@acme.example'));
    assert.equal((await lookup('searchQuery=zoe')).totalElements, 0);
    const listed = (await call('GET', `${API}/acme/users?status=suspended`)).json();
    assert.deepEqual(
      listed.content.map((u: { id: string }) => u.id),
      ['u4'],
    );
    const back = await call('PATCH', `${API}/acme/users/u4`, { status: 'active' });
    assert.equal(back.statusCode, 200);
    assert.equal((await lookup('searchQuery=zoe')).totalElements, 1);
  });

  it('honours If-Match: a stale tag is 412 and changes nothing', async () => {
    const read = await call('GET', `${API}/acme/users/u1`);
    const etag = String(read.headers['etag']);
    const first = await call('PATCH', `${API}/acme/users/u1`, { firstname: 'Anne' }, { 'if-match': etag });
    assert.equal(first.statusCode, 200, first.body);
    const stale = await call('PATCH', `${API}/acme/users/u1`, { firstname: 'Annie' }, { 'if-match': etag });
    assert.equal(stale.statusCode, 412);
    assert.equal(stale.json().code, 'precondition-failed');
    assert.equal((await call('GET', `${API}/acme/users/u1`)).json().firstname, 'Anne');
  });

  it('answers a read whose If-None-Match names the current version with 304 and no body', async () => {
    for (const url of [`${API}/acme`, `${API}/acme/users/u1`, `${API}/acme/rooms/board`]) {
      const read = await call('GET', url);
      const etag = String(read.headers['etag']);
      for (const held of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
        const again = await call('GET', url, undefined, { 'if-none-match': held });
        assert.equal(again.statusCode, 304, `${url} ${held}`);
        assert.equal(again.body, '');
        assert.equal(again.headers['etag'], etag);
      }
      const other = await call('GET', url, undefined, { 'if-none-match': '"other"' });
      assert.equal(other.statusCode, 200);
      assert.deepEqual(other.json(), read.json());
    }
    // Changed since: the version held is not the current one any more.
    const before = String((await call('GET', `${API}/acme/rooms/board`)).headers['etag']);
    assert.equal((await call('PATCH', `${API}/acme/rooms/board`, { name: 'Board of directors' })).statusCode, 200);
    const after = await call('GET', `${API}/acme/rooms/board`, undefined, { 'if-none-match': before });
    assert.equal(after.statusCode, 200);
    assert.equal(after.json().name, 'Board of directors');
    assert.equal((await call('PATCH', `${API}/acme/rooms/board`, { name: 'Board' })).statusCode, 200);
  });

  it('honours If-Match: * on a room membership while the user is a member', async () => {
    assert.equal((await call('PUT', `${API}/acme/rooms/empty/members/u2`)).statusCode, 204);
    const kept = await call('PUT', `${API}/acme/rooms/empty/members/u2`, undefined, { 'if-match': '*' });
    assert.equal(kept.statusCode, 204, kept.body);
    const removed = await call('DELETE', `${API}/acme/rooms/empty/members/u2`, undefined, { 'if-match': '*' });
    assert.equal(removed.statusCode, 204, removed.body);
    assert.equal((await call('GET', `${API}/acme/rooms/empty`)).json().memberCount, 0);
    const again = await call('DELETE', `${API}/acme/rooms/empty/members/u2`, undefined, { 'if-match': '*' });
    assert.equal(again.statusCode, 412, again.body);
  });

  it('deletes a user: gone from the lookup, the rooms and the users route; its id may be taken again', async () => {
    assert.equal((await call('PUT', `${API}/acme/rooms/board/members/new1`)).statusCode, 204);
    assert.equal((await call('DELETE', `${API}/acme/users/new1`)).statusCode, 204);
    assert.equal((await lookup('searchQuery=nora')).totalElements, 0);
    assert.equal((await call('GET', `${API}/acme/users/new1`)).statusCode, 404);
    assert.equal((await call('GET', `${API}/acme/rooms/board`)).json().memberCount, 1);
    const again = await call('POST', `${API}/acme/users`, { id: 'new1', email: 'nora@acme.example' });
    assert.equal(again.statusCode, 201, again.body);
  });

  it('creates, renames and deletes rooms', async () => {
    const created = await call('POST', `${API}/acme/rooms`, { id: 'deals', name: 'Deals' });
    assert.equal(created.statusCode, 201, created.body);
    assert.equal(created.headers['location'], `${API}/acme/rooms/deals`);
    assert.equal((await call('POST', `${API}/acme/rooms`, { id: 'deals', name: 'Again' })).json().code, 'room-exists');
    const renamed = await call('PATCH', `${API}/acme/rooms/deals`, { name: 'Big deals' });
    assert.equal(renamed.json().name, 'Big deals');
    // The name is optional, as on creation (the room id then): PUT without it and a null merge patch reset it.
    const replaced = await call('PUT', `${API}/acme/rooms/deals`, {});
    assert.equal(replaced.statusCode, 200, replaced.body);
    assert.equal(replaced.json().name, 'deals');
    assert.equal((await call('PATCH', `${API}/acme/rooms/deals`, { name: 'Deals again' })).json().name, 'Deals again');
    assert.equal((await call('PATCH', `${API}/acme/rooms/deals`, { name: null })).json().name, 'deals');
    assert.equal((await t.app.inject({ url: LOOKUP('acme', 'deals'), headers: { authorization: ACME } })).statusCode, 200);
    assert.equal((await call('DELETE', `${API}/acme/rooms/deals`)).statusCode, 204);
    assert.equal((await t.app.inject({ url: LOOKUP('acme', 'deals'), headers: { authorization: ACME } })).statusCode, 404);
  });

  it('creates organizations with a "*" credential only', async () => {
    const refused = await call('POST', API, { id: 'neworg', name: 'New' });
    assert.equal(refused.statusCode, 403);
    const created = await call('POST', API, { id: 'neworg', name: 'New', settings: { externalSignatories: true } }, { authorization: ROOT });
    assert.equal(created.statusCode, 201, created.body);
    assert.deepEqual(created.json().settings, { externalSignatories: true });
    assert.equal((await call('POST', API, { id: 'neworg', name: 'New' }, { authorization: ROOT })).json().code, 'organization-exists');
    const listed = (await call('GET', API)).json();
    assert.deepEqual(
      listed.content.map((o: { id: string }) => o.id),
      ['acme'],
    );
  });

  it('resets the settings to their defaults with a null merge patch', async () => {
    const patched = await call('PATCH', API + '/acme', { settings: null }, { 'content-type': 'application/merge-patch+json' });
    assert.equal(patched.statusCode, 200, patched.body);
    assert.deepEqual(patched.json().settings, { externalSignatories: false });
    assert.equal((await call('PATCH', API + '/acme', { settings: { externalSignatories: true } })).json().settings.externalSignatories, true);
  });

  it('stores a userName equal to the email as unset: it follows the email', async () => {
    const created = await call('POST', `${API}/acme/users`, { id: 'un1', email: 'un1@acme.example', userName: 'un1@acme.example' });
    assert.equal(created.json().userName, 'un1@acme.example');
    // One that differs in case is kept as given (identity providers read back what they sent).
    const cased = await call('POST', `${API}/acme/users`, { id: 'un2', email: 'un2@acme.example', userName: 'UN2@acme.example' });
    assert.equal(cased.json().userName, 'UN2@acme.example');
    assert.equal((await call('PATCH', `${API}/acme/users/un2`, { email: 'un2.new@acme.example' })).json().userName, 'UN2@acme.example');
    const moved = await call('PATCH', `${API}/acme/users/un1`, { email: 'un1.new@acme.example' });
    assert.equal(moved.json().userName, 'un1.new@acme.example');
    const named = await call('PATCH', `${API}/acme/users/un1`, { userName: 'un-one' });
    assert.equal(named.json().userName, 'un-one');
    assert.equal((await call('PATCH', `${API}/acme/users/un1`, { lastname: 'One' })).json().userName, 'un-one', 'a patch that does not name it keeps it');
  });

  it('records one audit event per change, newest first', async () => {
    const events = (await call('GET', `${API}/acme/audit-events?size=100`)).json();
    const actions = events.content.map((e: { action: string }) => e.action);
    assert.ok(actions.indexOf('room.deleted') < actions.indexOf('room.created'));
    assert.ok(actions.includes('user.created'));
    assert.ok(actions.includes('room.member.added'));
    assert.equal(events.content[0].actor, 'acme-admin');
  });
});
