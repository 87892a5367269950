import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ACME_PASSWORD, DIRECTORY } from '../helpers/fixtures.ts';
import { topHalfBlackPdf } from '../helpers/pdf.ts';
import { basic, startTestApp, type TestApp } from '../helpers/test-app.ts';

const ACME = basic('acme-admin', ACME_PASSWORD);
const ROOT = basic('root', 'root-password');
const API = '/admin/api/v3/organizations';

describe('the audit trail', () => {
  let t: TestApp;
  const send = (method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, body?: unknown, authorization = ACME) =>
    t.app.inject({
      method,
      url,
      headers: { authorization, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { payload: JSON.stringify(body) } : {}),
    });
  const trail = async (query = '') => (await send('GET', `${API}/acme/audit-events?size=200${query}`)).json();

  before(async () => {
    t = await startTestApp();
    await t.importDirectory(DIRECTORY);
  });
  after(async () => t.close());

  it('records exactly one event for each successful change, with its action, actor, target and request id', async () => {
    let documentId = '';
    const changes: [string, () => Promise<{ statusCode: number; body: string }>, string, string][] = [
      ['user.created', () => send('POST', `${API}/acme/users`, { id: 'a1', email: 'a1@acme.example' }), 'user', 'a1'],
      ['user.updated', () => send('PATCH', `${API}/acme/users/a1`, { firstname: 'Ada' }), 'user', 'a1'],
      ['user.updated', () => send('PUT', `${API}/acme/users/a1`, { email: 'a1@acme.example', status: 'suspended' }), 'user', 'a1'],
      ['room.created', () => send('POST', `${API}/acme/rooms`, { id: 'r1', name: 'R1' }), 'room', 'r1'],
      ['room.updated', () => send('PUT', `${API}/acme/rooms/r1`, { name: 'R one' }), 'room', 'r1'],
      ['room.member.added', () => send('PUT', `${API}/acme/rooms/r1/members/a1`), 'room', 'r1'],
      ['room.member.removed', () => send('DELETE', `${API}/acme/rooms/r1/members/a1`), 'room', 'r1'],
      ['room.deleted', () => send('DELETE', `${API}/acme/rooms/r1`), 'room', 'r1'],
      ['user.deleted', () => send('DELETE', `${API}/acme/users/a1`), 'user', 'a1'],
      ['organization.updated', () => send('PATCH', `${API}/acme`, { settings: { externalSignatories: false } }), 'organization', 'acme'],
      [
        'document.uploaded',
        async () => {
          const response = await send('POST', `${API}/acme/rooms/board/documents`, { payload: topHalfBlackPdf().toString('base64'), name: 'a.pdf' });
          documentId = response.json().id;
          return response;
        },
        'document',
        '',
      ],
      ['document.deleted', () => send('DELETE', `${API}/acme/rooms/board/documents/${documentId}`), 'document', ''],
    ];
    for (const [action, change, type, id] of changes) {
      const before = (await trail()).totalElements;
      const response = await change();
      assert.ok(response.statusCode < 300, `${action}: ${response.body}`);
      const after = await trail();
      assert.equal(after.totalElements, before + 1, `${action} records one event`);
      const event = after.content[0];
      assert.equal(event.action, action);
      assert.equal(event.actor, 'acme-admin');
      assert.deepEqual(event.target, { type, id: id === '' ? documentId : id });
      assert.match(event.requestId, /./);
      assert.match(event.id, /^[0-9a-f-]{36}$/);
      assert.ok(Math.abs(Date.parse(event.at) - Date.now()) < 60_000);
    }
  });

  it('lists in an update event the fields it changed, not every field sent', async () => {
    const organization = (await send('GET', `${API}/acme`)).json();
    const renamed = await send('PATCH', `${API}/acme`, { id: 'acme', name: `${organization.name} (renamed)`, settings: organization.settings });
    assert.equal(renamed.statusCode, 200, renamed.body);
    assert.deepEqual((await trail('&action=organization.updated')).content[0].details, { changed: ['name'] });
    const flipped = await send('PATCH', `${API}/acme`, {
      name: `${organization.name} (renamed)`,
      settings: { externalSignatories: !organization.settings.externalSignatories },
    });
    assert.equal(flipped.statusCode, 200, flipped.body);
    assert.deepEqual((await trail('&action=organization.updated')).content[0].details, { changed: ['settings.externalSignatories'] });
    assert.equal((await send('PATCH', `${API}/acme`, { name: organization.name, settings: organization.settings })).statusCode, 200);
    assert.deepEqual((await trail('&action=organization.updated')).content[0].details, { changed: ['name', 'settings.externalSignatories'] });
    const user = await send('PATCH', `${API}/acme/users/u2`, { firstname: 'Changed', lastname: (await send('GET', `${API}/acme/users/u2`)).json().lastname });
    assert.equal(user.statusCode, 200, user.body);
    assert.deepEqual((await trail('&action=user.updated')).content[0].details, { changed: ['firstname'] });
  });

  it('records nothing for a change that changes nothing (adding a member twice, a resource written as it is) or is refused', async () => {
    assert.equal((await send('PUT', `${API}/acme/rooms/board/members/u2`)).statusCode, 204);
    const before = (await trail()).totalElements;
    assert.equal((await send('PUT', `${API}/acme/rooms/board/members/u2`)).statusCode, 204);
    assert.equal((await send('DELETE', `${API}/acme/rooms/board/members/u3`)).statusCode, 204);
    // Written again as they are, a user, a room and the organization answer as they were: same ETag, same updatedAt.
    for (const [url, write] of [
      [
        `${API}/acme/users/u2`,
        (body: Record<string, unknown>) => ({
          firstname: body['firstname'],
          lastname: body['lastname'],
          email: body['email'],
          external: body['external'],
          status: body['status'],
        }),
      ],
      [`${API}/acme/rooms/board`, (body: Record<string, unknown>) => ({ name: body['name'] })],
    ] as const) {
      const read = await send('GET', url);
      for (const [method, body] of [
        ['PUT', write(read.json())],
        ['PATCH', {}],
      ] as const) {
        const written = await send(method, url, body);
        assert.equal(written.statusCode, 200, written.body);
        assert.equal(written.headers['etag'], read.headers['etag'], `${method} ${url}`);
        assert.equal(written.json().updatedAt, read.json().updatedAt);
      }
    }
    const organization = await send('GET', `${API}/acme`);
    const patched = await send('PATCH', `${API}/acme`, { name: organization.json().name, settings: organization.json().settings });
    assert.equal(patched.statusCode, 200, patched.body);
    assert.equal(patched.headers['etag'], organization.headers['etag']);
    assert.equal((await send('POST', `${API}/acme/users`, { id: 'u1', email: 'x@acme.example' })).statusCode, 409);
    assert.equal((await trail()).totalElements, before);
  });

  it('records an organization created under that organization', async () => {
    assert.equal((await send('POST', API, { id: 'fresh', name: 'Fresh' }, ROOT)).statusCode, 201);
    const events = (await send('GET', `${API}/fresh/audit-events`, undefined, ROOT)).json();
    assert.deepEqual(
      events.content.map((event: { action: string; actor: string }) => [event.action, event.actor]),
      [['organization.created', 'root']],
    );
  });

  it('filters by action, actor and time, newest first, and keeps other organizations apart', async () => {
    const created = await trail('&action=user.created');
    assert.ok(created.content.length > 0);
    assert.ok(created.content.every((event: { action: string }) => event.action === 'user.created'));
    assert.equal((await trail('&actor=nobody')).totalElements, 0);
    // An actor no event has: with a NUL, which PostgreSQL refuses in any text.
    assert.equal((await trail('&actor=cli%00')).totalElements, 0);
    const all = (await trail()).content as { at: string; action: string }[];
    assert.deepEqual(
      [...all].sort((a, b) => b.at.localeCompare(a.at)).map((e) => e.at),
      all.map((e) => e.at),
    );
    const future = new Date(Date.now() + 60_000).toISOString();
    assert.equal((await trail(`&since=${encodeURIComponent(future)}`)).totalElements, 0);
    assert.equal((await trail(`&until=${encodeURIComponent('2000-01-01T00:00:00Z')}`)).totalElements, 0);
    assert.equal((await trail(`&since=2000-01-01`)).totalElements, (await trail()).totalElements);
    // Both ends are inclusive: an event's own instant as since and until finds it.
    const one = all[0]!;
    const at = encodeURIComponent(one.at);
    const same = (await trail(`&since=${at}&until=${at}`)).content as { at: string }[];
    assert.ok(same.length > 0 && same.every((event) => event.at === one.at), JSON.stringify(same));
    for (const [parameter, value] of [
      ['since', 'yesterday'],
      ['since', '2026-02-30T00:00:00Z'],
      ['until', '+010000-01-01T00:00:00Z'],
      ['until', '1'],
    ]) {
      const bad = await send('GET', `${API}/acme/audit-events?${parameter}=${encodeURIComponent(value!)}`);
      assert.equal(bad.statusCode, 400, `${parameter}=${value}: ${bad.body}`);
      assert.equal(bad.json().errors[0].parameter, parameter);
    }
    // An action not in the trail's list is a mistake to point out, not an empty page; letter case does not matter.
    const unknown = await send('GET', `${API}/acme/audit-events?action=user.renamed`);
    assert.equal(unknown.statusCode, 400);
    assert.equal(unknown.json().errors[0].parameter, 'action');
    assert.match(unknown.json().errors[0].message, /user\.created/);
    assert.equal((await trail('&action=USER.CREATED')).totalElements, created.totalElements);
    assert.ok(!all.some((event) => event.action === 'organization.created'));
  });

  it('is read-only: no route changes or deletes events', async () => {
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE'] as const) {
      const response = await send(method, `${API}/acme/audit-events`);
      assert.equal(response.statusCode, 405, method);
    }
  });
});
