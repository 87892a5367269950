import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { DIRECTORY } from '../helpers/fixtures.ts';
import { solidImage } from '../helpers/images.ts';
import { LOOKUP, addApiToken, basic, startTestApp, type TestApp } from '../helpers/test-app.ts';

const SCIM = '/scim/v2/organizations/acme';
const GROUP = 'urn:ietf:params:scim:schemas:core:2.0:Group';
const PATCH_OP = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/**
 * SCIM /Groups as signing rooms (contract section 9), as Entra ID and Okta send them: members kept
 * in step through the directory writer (the next lookup shows who is a room member), one audit
 * event per change, every bad input a SCIM error that changes nothing.
 */
describe('SCIM /Groups', () => {
  let t: TestApp;
  let token: string;
  let tokenId: string;
  const call = (method: Method, url: string, body?: unknown, headers: Record<string, string> = {}) =>
    t.app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/scim+json' } : {}), ...headers },
      ...(body !== undefined ? { payload: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
    });
  const membersInLookup = async (roomId: string) =>
    (
      await t.app.inject({
        url: `${LOOKUP('acme', roomId)}?size=100&purpose=SIGNING_REQUEST_SIGNATORY`,
        headers: { authorization: basic('root', 'root-password') },
      })
    )
      .json<{ content: { email: string }[] }>()
      .content.map((s) => s.email)
      .sort();
  const events = async () =>
    t.sql<{ action: string; actor: string; target_id: string }>(sql`SELECT action, actor, target_id FROM audit_events WHERE org_id = 'acme' ORDER BY seq`);
  const patch = (id: string, operations: unknown[], headers: Record<string, string> = {}) =>
    call('PATCH', `${SCIM}/Groups/${id}`, { schemas: [PATCH_OP], Operations: operations }, headers);
  const expectError = (response: Awaited<ReturnType<typeof call>>, status: number, scimType?: string) => {
    assert.equal(response.statusCode, status, response.body);
    assert.equal(response.json().status, String(status));
    assert.equal(response.json().scimType, scimType);
  };

  before(async () => {
    t = await startTestApp();
    await t.importDirectory(DIRECTORY);
    ({ secret: token, id: tokenId } = await addApiToken(t, 'acme'));
  });
  after(async () => t.close());

  it('runs an Entra ID group cycle: create, add members, remove by value list, rename, delete', async () => {
    const probe = await call('GET', `${SCIM}/Groups?filter=${encodeURIComponent('displayName eq "Signers"')}`);
    assert.equal(probe.statusCode, 200);
    assert.equal(probe.json().totalResults, 0);
    const created = await call('POST', `${SCIM}/Groups`, { schemas: [GROUP], externalId: 'entra-group-1', displayName: 'Signers', members: [] });
    assert.equal(created.statusCode, 201, created.body);
    const group = created.json();
    assert.equal(created.headers['location'], group.meta.location);
    assert.deepEqual(group.members, []);
    const added = await patch(group.id, [{ op: 'Add', path: 'members', value: [{ value: 'u1' }, { value: 'u4' }] }]);
    assert.equal(added.statusCode, 200, added.body);
    assert.deepEqual(
      added.json().members.map((m: { value: string }) => m.value),
      ['u1', 'u4'],
    );
    assert.deepEqual(await membersInLookup(group.id), ['anna@acme.example', 'zoe@acme.example']);
    const removed = await patch(group.id, [{ op: 'Remove', path: 'members', value: [{ value: 'u1' }] }]);
    assert.deepEqual(
      removed.json().members.map((m: { value: string }) => m.value),
      ['u4'],
    );
    assert.deepEqual(await membersInLookup(group.id), ['zoe@acme.example']);
    const renamed = await patch(group.id, [{ op: 'Replace', path: 'displayName', value: 'Signers (EU)' }]);
    assert.equal(renamed.json().displayName, 'Signers (EU)');
    const found = await call('GET', `${SCIM}/Groups?filter=${encodeURIComponent('externalId eq "entra-group-1"')}&excludedAttributes=members`);
    assert.deepEqual(
      found.json().Resources.map((g: { id: string; members?: unknown }) => [g.id, g.members]),
      [[group.id, undefined]],
    );
    assert.equal((await call('DELETE', `${SCIM}/Groups/${group.id}`, '')).statusCode, 204);
    expectError(await call('GET', `${SCIM}/Groups/${group.id}`), 404);
    const recorded = (await events()).filter((event) => event.target_id === group.id);
    assert.deepEqual(
      recorded.map((event) => [event.action, event.actor]),
      [
        ['room.created', `token:${tokenId}`],
        ['room.member.added', `token:${tokenId}`],
        ['room.member.added', `token:${tokenId}`],
        ['room.member.removed', `token:${tokenId}`],
        ['room.updated', `token:${tokenId}`],
        ['room.deleted', `token:${tokenId}`],
      ],
    );
  });

  it('runs an Okta group cycle: rename by pathless replace, remove by filter, replace members by PUT', async () => {
    const created = await call('POST', `${SCIM}/Groups`, {
      schemas: [GROUP],
      displayName: 'Okta group',
      members: [
        { value: 'u1', display: 'Anna' },
        { value: 'u2', display: 'Ben' },
      ],
    });
    assert.equal(created.statusCode, 201, created.body);
    const { id } = created.json();
    assert.deepEqual(await membersInLookup(id), ['anna@acme.example', 'ben@acme.example']);
    const renamed = await patch(id, [{ op: 'replace', value: { id, displayName: 'Okta group renamed' } }]);
    assert.equal(renamed.statusCode, 200, renamed.body);
    assert.equal(renamed.json().displayName, 'Okta group renamed');
    const removed = await patch(id, [{ op: 'remove', path: 'members[value eq "u2"]' }]);
    assert.deepEqual(await membersInLookup(id), ['anna@acme.example']);
    // The members are part of the group: a member change moves lastModified (and the room's updatedAt).
    assert.ok(removed.json().meta.lastModified > renamed.json().meta.lastModified, removed.body);
    const room = await call('GET', `/admin/api/v3/organizations/acme/rooms/${id}`);
    assert.equal(room.json().updatedAt, removed.json().meta.lastModified);
    const put = await call('PUT', `${SCIM}/Groups/${id}`, {
      schemas: [GROUP],
      id,
      displayName: 'Okta group renamed',
      members: [{ value: 'u4' }, { value: 'u2' }],
    });
    assert.equal(put.statusCode, 200, put.body);
    assert.deepEqual(
      put.json().members.map((m: { value: string }) => m.value),
      ['u2', 'u4'],
    );
    assert.deepEqual(await membersInLookup(id), ['ben@acme.example', 'zoe@acme.example']);
    // A version read before a member change no longer matches.
    const stale = renamed.json().meta.version;
    expectError(await patch(id, [{ op: 'replace', path: 'displayName', value: 'x' }], { 'if-match': stale }), 412);
  });

  it('finds a group by a name that differs in case beyond ASCII, and spends no version on a change that changes nothing', async () => {
    const created = await call('POST', `${SCIM}/Groups`, { schemas: [GROUP], displayName: 'Ärzte', members: [{ value: 'u1' }] });
    const { id } = created.json();
    const found = await call('GET', `${SCIM}/Groups?filter=${encodeURIComponent('displayName eq "äRZTE"')}`);
    assert.deepEqual(
      found.json().Resources.map((g: { id: string }) => g.id),
      [id],
    );
    const version = async () => (await t.sql<{ v: number }>(sql`SELECT directory_version AS v FROM organizations WHERE id = 'acme'`))[0]!.v;
    const [versionBefore, eventsBefore] = [await version(), (await events()).length];
    const again = await patch(id, [
      { op: 'Add', path: 'members', value: [{ value: 'u1' }] },
      { op: 'Replace', path: 'displayName', value: 'Ärzte' },
    ]);
    assert.equal(again.statusCode, 200, again.body);
    assert.deepEqual(
      again.json().members.map((m: { value: string }) => m.value),
      ['u1'],
    );
    assert.equal(Number(await version()), Number(versionBefore));
    assert.equal((await events()).length, eventsBefore);
  });

  it("answers Entra ID's check whether a user is still a group's member: id eq and members eq", async () => {
    const created = await call('POST', `${SCIM}/Groups`, { schemas: [GROUP], displayName: 'Checked', members: [{ value: 'u1' }] });
    const id = created.json().id as string;
    const check = async (filter: string) => {
      const answer = await call('GET', `${SCIM}/Groups?filter=${encodeURIComponent(filter)}&attributes=id`);
      assert.equal(answer.statusCode, 200, answer.body);
      return (answer.json().Resources as { id: string }[]).map((group) => group.id);
    };
    assert.deepEqual(await check(`id eq "${id}" and members eq "u1"`), [id]);
    assert.deepEqual(await check(`id eq "${id}" and members eq "u2"`), []);
    assert.deepEqual(await check(`id eq "${id}" and members.value eq "u1"`), [id]);
    assert.ok((await check('members eq "u1"')).includes(id));
    assert.deepEqual(await check(`id eq "${id}" and members eq "nobody"`), []);
    expectError(await call('GET', `${SCIM}/Groups?filter=${encodeURIComponent('members co "u"')}`), 400, 'invalidFilter');
  });

  it('takes attribute names in any case, and refuses two spellings of one', async () => {
    const created = await call('POST', `${SCIM}/Groups`, { Schemas: [GROUP], DisplayName: 'Spelled Freely', Members: [{ Value: 'u1', Display: 'Anna' }] });
    assert.equal(created.statusCode, 201, created.body);
    assert.equal(created.json().displayName, 'Spelled Freely');
    assert.deepEqual(
      created.json().members.map((member: { value: string }) => member.value),
      ['u1'],
    );
    const id = created.json().id as string;
    const put = await call('PUT', `${SCIM}/Groups/${id}`, { schemas: [GROUP], DISPLAYNAME: 'Spelled Again', members: [{ VALUE: 'u2' }] });
    assert.equal(put.statusCode, 200, put.body);
    assert.deepEqual([put.json().displayName, put.json().members.map((member: { value: string }) => member.value)], ['Spelled Again', ['u2']]);
    const eventsBefore = (await events()).length;
    expectError(
      await call('PUT', `${SCIM}/Groups/${id}`, { schemas: [GROUP], displayName: 'Twice', members: [{ value: 'u1' }], Members: [] }),
      400,
      'invalidSyntax',
    );
    assert.deepEqual(
      (await call('GET', `${SCIM}/Groups/${id}`)).json().members.map((member: { value: string }) => member.value),
      ['u2'],
    );
    assert.equal((await events()).length, eventsBefore);
  });

  it('refuses a displayName too long or not text with invalidValue naming displayName', async () => {
    for (const displayName of ['x'.repeat(256), 'half \ud800 emoji', 'tab\there']) {
      const response = await call('POST', `${SCIM}/Groups`, { schemas: [GROUP], displayName });
      expectError(response, 400, 'invalidValue');
      assert.match(response.json().detail, /displayName/, response.body);
    }
  });

  it('refuses bad input with SCIM errors, changing nothing', async () => {
    const created = await call('POST', `${SCIM}/Groups`, { schemas: [GROUP], displayName: 'Guarded', members: [{ value: 'u1' }] });
    const { id } = created.json();
    const before = (await events()).length;
    expectError(await patch(id, [{ op: 'add', path: 'members', value: [{ value: 'u4' }, { value: 'nobody' }] }]), 400, 'invalidValue');
    expectError(await patch(id, [{ op: 'add', path: 'members', value: [{ value: 'o1' }] }]), 400, 'invalidValue');
    expectError(await patch(id, [{ op: 'replace', path: 'id', value: 'x' }]), 400, 'mutability');
    expectError(await patch(id, [{ op: 'replace', value: { id: 'another' } }]), 400, 'mutability');
    expectError(await patch(id, [{ op: 'replace', path: 'owner', value: 'x' }]), 400, 'noTarget');
    expectError(await patch(id, [{ op: 'remove', path: 'displayName' }]), 400, 'invalidValue');
    expectError(await patch(id, [{ op: 'merge', path: 'displayName', value: 'x' }]), 400, 'invalidValue');
    expectError(await call('POST', `${SCIM}/Groups`, { schemas: [GROUP] }), 400, 'invalidValue');
    expectError(await call('POST', `${SCIM}/Groups`, { schemas: [GROUP], displayName: 'x', members: [{ value: 'nobody' }] }), 400, 'invalidValue');
    expectError(await call('GET', `${SCIM}/Groups?filter=${encodeURIComponent('displayName co "G"')}`), 400, 'invalidFilter');
    expectError(await call('GET', `${SCIM}/Groups?filter=${encodeURIComponent('meta.created eq "2026-01-01"')}`), 400, 'invalidFilter');
    expectError(await patch(id, [{ op: 'replace', path: 'displayName', value: 'x' }], { 'if-match': '"stale"' }), 412);
    expectError(await call('GET', `${SCIM}/Groups/nothing`), 404);
    // Writes to a group that does not exist: 404, and the server goes on answering (SQLite has one connection).
    expectError(await patch('nothing', [{ op: 'replace', path: 'displayName', value: 'x' }]), 404);
    expectError(await call('PUT', `${SCIM}/Groups/nothing`, { schemas: [GROUP], displayName: 'x' }), 404);
    expectError(await call('DELETE', `${SCIM}/Groups/nothing`), 404);
    expectError(await patch(id, [{ op: 'remove', path: 'members[value eq "bad\\q"]' }]), 400, 'invalidValue');
    const notAllowed = await call('POST', `${SCIM}/Groups/${id}`, { schemas: [GROUP], displayName: 'x' });
    expectError(notAllowed, 405);
    assert.equal(notAllowed.headers['allow'], 'DELETE, GET, HEAD, PATCH, PUT');
    const options = await t.app.inject({ method: 'OPTIONS', url: `${SCIM}/Groups`, headers: { authorization: `Bearer ${token}` } });
    expectError(options, 405);
    assert.equal(options.headers['allow'], 'GET, HEAD, POST');
    const trace = await t.app.inject({ method: 'TRACE', url: `${SCIM}/Groups/${id}`, headers: { authorization: `Bearer ${token}` } });
    expectError(trace, 405);
    assert.equal(trace.headers['allow'], 'DELETE, GET, HEAD, PATCH, PUT');
    assert.equal((await events()).length, before, 'nothing recorded');
    assert.deepEqual(await membersInLookup(id), ['anna@acme.example'], 'nothing changed');
    // A room that holds documents is not deleted.
    const upload = await t.app.inject({
      method: 'POST',
      url: `/admin/api/v3/organizations/acme/rooms/${id}/documents`,
      headers: { authorization: basic('root', 'root-password'), 'content-type': 'application/json' },
      payload: JSON.stringify({ payload: (await solidImage(4, 4, 'png')).toString('base64') }),
    });
    assert.equal(upload.statusCode, 201, upload.body);
    expectError(await call('DELETE', `${SCIM}/Groups/${id}`), 409);
  });
});
