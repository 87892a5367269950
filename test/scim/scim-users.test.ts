import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { ACME_PASSWORD, DIRECTORY } from '../helpers/fixtures.ts';
import { LOOKUP, addApiToken, basic, startTestApp, type TestApp } from '../helpers/test-app.ts';

const SCIM = '/scim/v2/organizations/acme';
const USER = 'urn:ietf:params:scim:schemas:core:2.0:User';
const ENTERPRISE = 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User';
const PATCH_OP = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';
const ERROR = 'urn:ietf:params:scim:api:messages:2.0:Error';

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/**
 * SCIM /Users (contract section 9) as Microsoft Entra ID and Okta send it, on the real app and
 * database: every write through the directory writer (the next lookup shows it, one audit event
 * as `token:<id>`), every bad input a SCIM error that changes nothing.
 */
describe('SCIM /Users', () => {
  let t: TestApp;
  let token: string;
  let tokenId: string;
  let otherToken: string;
  const call = (method: Method, url: string, body?: unknown, headers: Record<string, string> = {}) =>
    t.app.inject({
      method,
      url,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/scim+json' } : {}), ...headers },
      ...(body !== undefined ? { payload: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
    });
  const lookupEmails = async (query: string) =>
    (await t.app.inject({ url: `${LOOKUP('acme', 'board')}?size=100&${query}`, headers: { authorization: basic('root', 'root-password') } }))
      .json<{ content: { email: string }[] }>()
      .content.map((s) => s.email);
  const events = async () =>
    t.sql<{ action: string; actor: string; target_id: string }>(sql`SELECT action, actor, target_id FROM audit_events WHERE org_id = 'acme' ORDER BY seq`);
  const assertScimError = (response: Awaited<ReturnType<typeof call>>, status: number, scimType?: string) => {
    assert.equal(response.statusCode, status, response.body);
    assert.equal(response.headers['content-type'], 'application/scim+json; charset=utf-8');
    const body = response.json();
    assert.deepEqual(body.schemas, [ERROR]);
    assert.equal(body.status, String(status));
    assert.equal(body.scimType, scimType);
    assert.equal(typeof body.detail, 'string');
  };

  before(async () => {
    t = await startTestApp();
    await t.importDirectory(DIRECTORY);
    ({ secret: token, id: tokenId } = await addApiToken(t, 'acme'));
    ({ secret: otherToken } = await addApiToken(t, 'other'));
  });
  after(async () => t.close());

  it('runs an Entra ID provisioning cycle as Entra sends it', async () => {
    // Entra first looks the user up, and expects an empty list, not a 404.
    const probe = await call('GET', `${SCIM}/Users?filter=${encodeURIComponent('userName eq "Ella.Entra@acme.example"')}`);
    assert.equal(probe.statusCode, 200);
    assert.equal(probe.headers['content-type'], 'application/scim+json; charset=utf-8');
    assert.deepEqual(probe.json(), {
      schemas: ['urn:ietf:params:scim:api:messages:2.0:ListResponse'],
      totalResults: 0,
      startIndex: 1,
      itemsPerPage: 0,
      Resources: [],
    });
    const created = await call('POST', `${SCIM}/Users`, {
      schemas: [USER, ENTERPRISE],
      externalId: 'entra-0001',
      userName: 'Ella.Entra@acme.example',
      active: true,
      displayName: 'Ella Entra',
      emails: [{ primary: true, type: 'work', value: 'ella.entra@acme.example' }],
      meta: { resourceType: 'User' },
      name: { formatted: 'Ella Entra', familyName: 'Entra', givenName: 'Ella' },
      [ENTERPRISE]: { department: 'Legal', employeeNumber: '42' },
    });
    assert.equal(created.statusCode, 201, created.body);
    const user = created.json();
    assert.equal(created.headers['location'], user.meta.location);
    assert.equal(created.headers['etag'], user.meta.version);
    assert.equal(user.userName, 'Ella.Entra@acme.example');
    assert.deepEqual(user.name, { givenName: 'Ella', familyName: 'Entra' });
    assert.equal(user.active, true);
    assert.deepEqual(user.emails, [{ value: 'ella.entra@acme.example', type: 'work', primary: true }]);
    assert.equal(user[ENTERPRISE], undefined, 'the enterprise extension is accepted and not kept');
    assert.ok((await lookupEmails('searchQuery=ella')).includes('ella.entra@acme.example'));
    // The lookup by externalId and by userName, ignoring case.
    for (const filter of ['externalId eq "entra-0001"', 'userName eq "ELLA.ENTRA@ACME.EXAMPLE"', 'emails[type eq "work"].value eq "ella.entra@acme.example"']) {
      const found = await call('GET', `${SCIM}/Users?filter=${encodeURIComponent(filter)}`);
      assert.deepEqual(
        found.json().Resources.map((r: { id: string }) => r.id),
        [user.id],
        filter,
      );
    }
    // Entra's PATCH: capitalised ops, string booleans, dotted keys in a pathless replace, an email by its type, displayName ignored.
    const patched = await call('PATCH', `${SCIM}/Users/${user.id}`, {
      schemas: [PATCH_OP],
      Operations: [
        { op: 'Replace', value: { 'name.givenName': 'Elle', displayName: 'Whatever Entra says' } },
        { op: 'Add', path: 'emails[type eq "work"].value', value: 'elle.entra@acme.example' },
        { op: 'Replace', path: `${ENTERPRISE}:department`, value: 'Finance' },
      ],
    });
    assert.equal(patched.statusCode, 200, patched.body);
    assert.equal(patched.json().name.givenName, 'Elle');
    assert.equal(patched.json().displayName, 'Elle Entra');
    assert.deepEqual(
      patched.json().emails.map((e: { value: string }) => e.value),
      ['elle.entra@acme.example'],
    );
    assert.ok((await lookupEmails('searchQuery=elle')).includes('elle.entra@acme.example'));
    // What Entra's default mapping sends of attributes signroom does not keep: accepted and ignored.
    const ignored = await call('PATCH', `${SCIM}/Users/${user.id}`, {
      schemas: [PATCH_OP],
      Operations: [
        { op: 'Replace', path: 'phoneNumbers[type eq "mobile"].value', value: '+41 79 000 00 00' },
        { op: 'Remove', path: 'addresses[type eq "work"]' },
        { op: 'Add', path: 'title', value: 'Counsel' },
        { op: 'Replace', value: { preferredLanguage: 'de-CH', 'name.familyName': 'Entra' } },
      ],
    });
    assert.equal(ignored.statusCode, 200, ignored.body);
    assert.equal(ignored.json().phoneNumbers, undefined);
    // It changed nothing kept: the same version, and no event (below).
    assert.equal(ignored.json().meta.version, patched.json().meta.version);
    // A new primary email added to the list replaces the email.
    const swapped = await call('PATCH', `${SCIM}/Users/${user.id}`, {
      schemas: [PATCH_OP],
      Operations: [{ op: 'add', path: 'emails', value: [{ value: 'elle.e@acme.example', primary: true }] }],
    });
    assert.deepEqual(
      swapped.json().emails.map((e: { value: string }) => e.value),
      ['elle.e@acme.example'],
    );
    const back = await call('PATCH', `${SCIM}/Users/${user.id}`, {
      schemas: [PATCH_OP],
      Operations: [{ op: 'Replace', path: 'emails[type eq "work"].value', value: 'elle.entra@acme.example' }],
    });
    assert.equal(back.statusCode, 200, back.body);
    // Deactivated: never a candidate of a lookup that starts after the answer.
    const deactivated = await call('PATCH', `${SCIM}/Users/${user.id}`, {
      schemas: [PATCH_OP],
      Operations: [{ op: 'Replace', path: 'active', value: 'False' }],
    });
    assert.equal(deactivated.statusCode, 200, deactivated.body);
    assert.equal(deactivated.json().active, false);
    assert.ok(!(await lookupEmails('searchQuery=entra')).includes('elle.entra@acme.example'));
    assert.equal((await call('DELETE', `${SCIM}/Users/${user.id}`, '')).statusCode, 204);
    assertScimError(await call('GET', `${SCIM}/Users/${user.id}`), 404);
    const recorded = (await events()).filter((event) => event.target_id === user.id);
    assert.deepEqual(
      recorded.map((event) => [event.action, event.actor]),
      [
        ['user.created', `token:${tokenId}`],
        ['user.updated', `token:${tokenId}`], // name and email
        ['user.updated', `token:${tokenId}`], // a new primary email
        ['user.updated', `token:${tokenId}`], // the email back
        ['user.updated', `token:${tokenId}`], // deactivated
        ['user.deleted', `token:${tokenId}`],
      ],
    );
  });

  it('runs an Okta provisioning cycle as Okta sends it', async () => {
    const probe = await call('GET', `${SCIM}/Users?filter=${encodeURIComponent('userName eq "otto@acme.example"')}&startIndex=1&count=100`);
    assert.equal(probe.json().totalResults, 0);
    const created = await call(
      'POST',
      `${SCIM}/Users`,
      {
        schemas: [USER],
        userName: 'otto@acme.example',
        name: { givenName: 'Otto', familyName: 'Okta' },
        emails: [{ primary: true, value: 'otto@acme.example', type: 'work' }],
        displayName: 'Otto Okta',
        locale: 'en-US',
        externalId: '00u1okta',
        groups: [],
        password: 'Secr3t!',
        active: true,
      },
      { 'content-type': 'application/json; charset=utf-8' },
    );
    assert.equal(created.statusCode, 201, created.body);
    const { id } = created.json();
    const put = await call('PUT', `${SCIM}/Users/${id}`, {
      schemas: [USER],
      id,
      userName: 'otto@acme.example',
      name: { givenName: 'Otto', familyName: 'Oktavian' },
      emails: [{ primary: true, value: 'otto@acme.example', type: 'work' }],
      active: true,
      password: 'N3wSecr3t!',
      groups: [{ value: 'board', display: 'Board' }],
      locale: 'de-DE',
    });
    assert.equal(put.statusCode, 200, put.body);
    assert.equal(put.json().name.familyName, 'Oktavian');
    const off = await call('PATCH', `${SCIM}/Users/${id}`, { schemas: [PATCH_OP], Operations: [{ op: 'replace', value: { active: false } }] });
    assert.equal(off.statusCode, 200, off.body);
    assert.equal(off.json().active, false);
    assert.ok(!(await lookupEmails('searchQuery=otto')).includes('otto@acme.example'));
    const on = await call('PATCH', `${SCIM}/Users/${id}`, { schemas: [PATCH_OP], Operations: [{ op: 'replace', value: { active: true } }] });
    assert.equal(on.json().active, true);
    assert.ok((await lookupEmails('searchQuery=otto')).includes('otto@acme.example'));
  });

  it('answers attributes and excludedAttributes, and pages from startIndex', async () => {
    const only = await call('GET', `${SCIM}/Users?attributes=userName,name.givenName&count=2`);
    assert.equal(only.statusCode, 200);
    const list = only.json();
    assert.equal(list.itemsPerPage, 2);
    assert.ok(list.totalResults >= 4);
    for (const resource of list.Resources)
      assert.deepEqual(
        Object.keys(resource).sort(),
        ['id', 'name', 'schemas', 'userName'].filter((key) => key !== 'name' || resource.name !== undefined).sort(),
      );
    const without = await call('GET', `${SCIM}/Users/u1?excludedAttributes=emails,meta`);
    assert.equal(without.json().emails, undefined);
    assert.equal(without.json().meta, undefined);
    assert.equal(without.json().id, 'u1');
    const second = await call('GET', `${SCIM}/Users?startIndex=2&count=1`);
    assert.equal(second.json().startIndex, 2);
    assert.notEqual(second.json().Resources[0].id, list.Resources[0].id);
    for (const startIndex of ['0', '-3']) assert.equal((await call('GET', `${SCIM}/Users?startIndex=${startIndex}&count=1`)).json().startIndex, 1);
    const capped = await call('GET', `${SCIM}/Users?count=5000`);
    assert.equal(capped.statusCode, 200);
    assert.ok(capped.json().itemsPerPage <= 1000);
    assert.equal((await call('GET', `${SCIM}/Users?count=0`)).json().Resources.length, 0);
  });

  it('takes names as the RFC allows them: a core URN in front, a filter or the extension inside a pathless value', async () => {
    const created = await call('POST', `${SCIM}/Users`, { schemas: [USER], userName: 'quinn.qualified@acme.example', name: { givenName: 'Quinn' } });
    assert.equal(created.statusCode, 201, created.body);
    const id = created.json().id as string;
    const patch = (operations: unknown) => call('PATCH', `${SCIM}/Users/${id}`, { schemas: [PATCH_OP], Operations: operations });
    // Entra ID's pathless replace of several attributes, one of them a path with a filter.
    const pathless = await patch([
      {
        op: 'Replace',
        value: { 'name.familyName': 'Qualified', 'emails[type eq "work"].value': 'quinn.q@acme.example', [`${USER}:active`]: 'True', title: 'ignored' },
      },
    ]);
    assert.equal(pathless.statusCode, 200, pathless.body);
    assert.deepEqual([pathless.json().name.familyName, pathless.json().emails[0].value, pathless.json().active], ['Qualified', 'quinn.q@acme.example', true]);
    assert.ok((await lookupEmails('searchQuery=quinn.q')).includes('quinn.q@acme.example'));
    // The signroom extension named whole: pathless, or as the path.
    const extension = 'urn:signroom:params:scim:schemas:extension:2.0:User';
    assert.equal((await patch([{ op: 'replace', value: { [extension]: { external: true } } }])).json()[extension].external, true);
    assert.equal((await patch([{ op: 'add', path: extension, value: { external: false } }])).json()[extension].external, false);
    // A core attribute by its qualified path, in a patch, a filter and attribute lists.
    assert.equal((await patch([{ op: 'replace', path: `${USER}:name.givenName`, value: 'Quin' }])).json().name.givenName, 'Quin');
    const found = await call('GET', `${SCIM}/Users?filter=${encodeURIComponent(`${USER}:userName eq "QUINN.QUALIFIED@acme.example"`)}`);
    assert.deepEqual(
      found.json().Resources.map((user: { id: string }) => user.id),
      [id],
    );
    const only = (await call('GET', `${SCIM}/Users/${id}?attributes=${USER}:userName,${USER}:name.givenName,${extension}:external`)).json();
    assert.deepEqual(only, {
      schemas: [USER, extension],
      id,
      userName: 'quinn.qualified@acme.example',
      name: { givenName: 'Quin' },
      [extension]: { external: false },
    });
    const without = (await call('GET', `${SCIM}/Users/${id}?excludedAttributes=${USER}:meta,emails.type,${extension}:external`)).json();
    assert.equal(without.meta, undefined);
    assert.deepEqual(without.emails, [{ value: 'quinn.q@acme.example', primary: true }]);
    assert.deepEqual(without[extension], {});
    // A value filter that selects nothing is noTarget, and changes nothing.
    assertScimError(await patch([{ op: 'replace', path: 'emails[type eq "home"].value', value: 'home@acme.example' }]), 400, 'noTarget');
    assert.equal((await call('GET', `${SCIM}/Users/${id}`)).json().emails[0].value, 'quinn.q@acme.example');
  });

  it('takes attribute names in any case (RFC 7643 §2.1), in bodies, paths and pathless values', async () => {
    const created = await call('POST', `${SCIM}/Users`, {
      Schemas: [USER],
      UserName: 'carla.case@acme.example',
      Name: { GivenName: 'Carla', FamilyName: 'Case' },
      Emails: [{ Value: 'carla.case@acme.example', Primary: true, Type: 'work' }],
      ExternalID: 'case-1',
    });
    assert.equal(created.statusCode, 201, created.body);
    const user = created.json();
    assert.deepEqual(
      [user.userName, user.name, user.emails[0].value, user.externalId],
      ['carla.case@acme.example', { givenName: 'Carla', familyName: 'Case' }, 'carla.case@acme.example', 'case-1'],
    );
    const id = user.id as string;
    const patch = (body: unknown) => call('PATCH', `${SCIM}/Users/${id}`, body);
    // A deactivation by any spelling suspends: the next lookup leaves the user out.
    const off = await patch({ schemas: [PATCH_OP], Operations: [{ op: 'Replace', path: 'Active', value: 'False' }] });
    assert.equal(off.statusCode, 200, off.body);
    assert.equal(off.json().active, false);
    assert.ok(!(await lookupEmails('searchQuery=carla.case')).includes('carla.case@acme.example'));
    const on = await patch({ schemas: [PATCH_OP], operations: [{ OP: 'replace', Value: { ACTIVE: true } }] });
    assert.equal(on.statusCode, 200, on.body);
    assert.equal(on.json().active, true);
    assert.ok((await lookupEmails('searchQuery=carla.case')).includes('carla.case@acme.example'));
    const renamed = await patch({
      schemas: [PATCH_OP],
      Operations: [
        { op: 'Replace', path: 'Name.GivenName', value: 'Carlota' },
        { op: 'Replace', value: { 'NAME.FAMILYNAME': 'Caso', 'Emails[Type eq "work"].Value': 'carlota.caso@acme.example' } },
        { op: 'add', path: 'urn:signroom:params:scim:schemas:extension:2.0:user:External', value: true },
      ],
    });
    assert.equal(renamed.statusCode, 200, renamed.body);
    const after = renamed.json();
    assert.deepEqual(
      [after.name, after.emails, after['urn:signroom:params:scim:schemas:extension:2.0:User']],
      [{ givenName: 'Carlota', familyName: 'Caso' }, [{ value: 'carlota.caso@acme.example', type: 'work', primary: true }], { external: true }],
    );
    // Value filters on emails compare type and value ignoring case, as the schema says they are (caseExact false).
    const byFilter = await patch({
      schemas: [PATCH_OP],
      Operations: [{ op: 'Replace', path: 'emails[type eq "Work"].value', value: 'carla.c@acme.example' }],
    });
    assert.equal(byFilter.statusCode, 200, byFilter.body);
    assert.equal(byFilter.json().emails[0].value, 'carla.c@acme.example');
    const byValue = await patch({
      schemas: [PATCH_OP],
      Operations: [{ op: 'replace', path: 'emails[value eq "CARLA.C@ACME.EXAMPLE"].value', value: 'carlota.caso@acme.example' }],
    });
    assert.equal(byValue.statusCode, 200, byValue.body);
    assert.equal(byValue.json().emails[0].value, 'carlota.caso@acme.example');
    assertScimError(
      await patch({ schemas: [PATCH_OP], Operations: [{ op: 'replace', path: 'emails[type eq "Home"].value', value: 'x@acme.example' }] }),
      400,
      'noTarget',
    );
    // No attribute of another spelling was stored beside the user's own.
    const read = (await call('GET', `${SCIM}/Users/${id}`)).json();
    assert.deepEqual(
      Object.keys(read).sort(),
      [
        'displayName',
        'emails',
        'externalId',
        'id',
        'meta',
        'name',
        'schemas',
        'urn:signroom:params:scim:schemas:extension:2.0:User',
        'userName',
        'active',
      ].sort(),
    );
    const replaced = await call('PUT', `${SCIM}/Users/${id}`, {
      schemas: [USER],
      USERNAME: 'carla.case@acme.example',
      ACTIVE: 'False',
      NAME: { givenname: 'Carla' },
    });
    assert.equal(replaced.statusCode, 200, replaced.body);
    assert.deepEqual([replaced.json().name, replaced.json().active], [{ givenName: 'Carla' }, false]);
  });

  it('leaves the sub-attributes a pathless add or replace of a complex attribute does not name as they are (RFC 7644 §3.5.2)', async () => {
    const created = await call('POST', `${SCIM}/Users`, {
      schemas: [USER],
      userName: 'mona.merge@acme.example',
      name: { givenName: 'Mona', familyName: 'Merge' },
    });
    const id = created.json().id as string;
    const patch = (operation: unknown) => call('PATCH', `${SCIM}/Users/${id}`, { schemas: [PATCH_OP], Operations: [operation] });
    const added = await patch({ op: 'add', value: { name: { givenName: 'Monika' } } });
    assert.equal(added.statusCode, 200, added.body);
    assert.deepEqual(added.json().name, { givenName: 'Monika', familyName: 'Merge' });
    const replaced = await patch({ op: 'Replace', value: { name: { familyName: 'Merger' }, active: true } });
    assert.equal(replaced.statusCode, 200, replaced.body);
    assert.deepEqual(replaced.json().name, { givenName: 'Monika', familyName: 'Merger' });
    const rest = await t.app.inject({ url: `/admin/api/v3/organizations/acme/users/${id}`, headers: { authorization: basic('root', 'root-password') } });
    assert.deepEqual([rest.json().firstname, rest.json().lastname], ['Monika', 'Merger']);
  });

  it("removes the signroom extension's external by PATCH, appends by a pathless add of emails, and refuses two spellings of one attribute", async () => {
    const extension = 'urn:signroom:params:scim:schemas:extension:2.0:User';
    const created = await call('POST', `${SCIM}/Users`, { schemas: [USER, extension], userName: 'eve.external@acme.example', [extension]: { external: true } });
    const id = created.json().id as string;
    const patch = (operations: unknown[]) => call('PATCH', `${SCIM}/Users/${id}`, { schemas: [PATCH_OP], Operations: operations });
    const removed = await patch([{ op: 'remove', path: `${extension}:external` }]);
    assert.equal(removed.statusCode, 200, removed.body);
    assert.equal(removed.json()[extension].external, false);
    assert.equal((await patch([{ op: 'replace', path: `${extension}:external`, value: true }])).json()[extension].external, true);
    assert.equal((await patch([{ op: 'replace', path: `${extension}:external`, value: null }])).json()[extension].external, false);
    // A pathless add of one email (an object, not a list) is not written over the user's own email.
    const added = await patch([{ op: 'add', value: { emails: { value: 'second@acme.example', type: 'home' } } }]);
    assert.equal(added.statusCode, 200, added.body);
    assert.deepEqual(added.json().emails, [{ value: 'eve.external@acme.example', type: 'work', primary: true }]);
    assert.equal((await call('GET', `${SCIM}/Users/${id}`)).json().emails[0].value, 'eve.external@acme.example');
    // Attribute names ignore case, so two spellings of one are one attribute given twice.
    assertScimError(
      await call('PUT', `${SCIM}/Users/${id}`, {
        schemas: [USER],
        userName: 'eve.external@acme.example',
        name: { givenName: 'Eve' },
        Name: { familyName: 'X' },
      }),
      400,
      'invalidSyntax',
    );
    assertScimError(await call('PUT', `${SCIM}/Users/${id}`, { schemas: [USER], ID: 'other', userName: 'eve.external@acme.example' }), 400, 'mutability');
    // Paths identity providers send for attributes a user does not keep are accepted and change nothing.
    const ignored = await patch([
      { op: 'replace', path: 'roles[primary eq "True"].value', value: 'admin' },
      { op: 'replace', path: 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:manager', value: { value: 'u1' } },
      { op: 'add', path: 'groups.$ref', value: 'x' },
    ]);
    assert.equal(ignored.statusCode, 200, ignored.body);
    assert.equal(ignored.headers['etag'], (await call('GET', `${SCIM}/Users/${id}`)).headers['etag']);
  });

  it('builds a PATCH without If-Match on the user as it is when it is written: concurrent patches all land, none is a 412', async () => {
    const created = await call('POST', `${SCIM}/Users`, { schemas: [USER], userName: 'cora.concurrent@acme.example', name: { givenName: 'Cora' } });
    const id = created.json().id as string;
    const givenNames = Array.from({ length: 8 }, (_, k) => `Cora${k}`);
    const externalIds = Array.from({ length: 8 }, (_, k) => `cc-${k}`);
    const answers = await Promise.all([
      ...givenNames.map((value) =>
        call('PATCH', `${SCIM}/Users/${id}`, { schemas: [PATCH_OP], Operations: [{ op: 'Replace', path: 'name.givenName', value }] }),
      ),
      ...externalIds.map((value) => call('PATCH', `${SCIM}/Users/${id}`, { schemas: [PATCH_OP], Operations: [{ op: 'replace', path: 'externalId', value }] })),
    ]);
    assert.deepEqual(
      answers.map((answer) => answer.statusCode),
      answers.map(() => 200),
    );
    const now = (await call('GET', `${SCIM}/Users/${id}`)).json();
    assert.ok(givenNames.includes(now.name.givenName));
    assert.ok(externalIds.includes(now.externalId));
    // With If-Match, a stale version still fails.
    const stale = await call(
      'PATCH',
      `${SCIM}/Users/${id}`,
      { schemas: [PATCH_OP], Operations: [{ op: 'replace', path: 'externalId', value: 'late' }] },
      {
        'if-match': created.json().meta.version,
      },
    );
    assertScimError(stale, 412);
    assert.equal((await call('GET', `${SCIM}/Users/${id}`)).json().externalId, now.externalId);
  });

  it('answers If-None-Match naming the version with 304, and a tenant URL pasted with a trailing slash as without', async () => {
    const user = await call('GET', `${SCIM}/Users/u1`);
    const version = user.json().meta.version as string;
    assert.equal(user.headers['etag'], version);
    const notModified = await call('GET', `${SCIM}/Users/u1`, undefined, { 'if-none-match': version });
    assert.equal(notModified.statusCode, 304);
    assert.equal(notModified.body, '');
    assert.equal(notModified.headers['etag'], version);
    assert.equal((await call('GET', `${SCIM}/Users/u1`, undefined, { 'if-none-match': '"older"' })).statusCode, 200);
    const group = await call('GET', `${SCIM}/Groups/board`);
    assert.equal((await call('GET', `${SCIM}/Groups/board`, undefined, { 'if-none-match': group.json().meta.version })).statusCode, 304);
    for (const url of [
      `${SCIM}//Users?filter=${encodeURIComponent('userName eq "nobody@acme.example"')}`,
      `${SCIM}/Users/`,
      `${SCIM}//Users/u1`,
      `${SCIM}/ServiceProviderConfig/`,
    ]) {
      const answer = await call('GET', url);
      assert.equal(answer.statusCode, 200, `${url}: ${answer.body}`);
      assert.equal(answer.headers['content-type'], 'application/scim+json; charset=utf-8');
    }
  });

  it('keeps the signroom extension as it is on a PUT that does not send it (Okta sends none)', async () => {
    const extension = 'urn:signroom:params:scim:schemas:extension:2.0:User';
    const created = await call('POST', `${SCIM}/Users`, { schemas: [USER, extension], userName: 'pia.partner@acme.example', [extension]: { external: true } });
    assert.equal(created.json()[extension].external, true);
    const id = created.json().id as string;
    const put = await call('PUT', `${SCIM}/Users/${id}`, {
      schemas: [USER],
      id,
      userName: 'pia.partner@acme.example',
      name: { givenName: 'Pia', familyName: 'Partner' },
      emails: [{ primary: true, value: 'pia.partner@acme.example', type: 'work' }],
      active: true,
      password: 'N3wSecr3t!',
      groups: [],
      locale: 'en-US',
    });
    assert.equal(put.statusCode, 200, put.body);
    assert.equal(put.json()[extension].external, true);
    const sent = await call('PUT', `${SCIM}/Users/${id}`, {
      schemas: [USER, extension],
      userName: 'pia.partner@acme.example',
      [extension]: { external: false },
    });
    assert.equal(sent.json()[extension].external, false);
  });

  it('keeps the status on a PUT without active: a user the identity provider suspended stays out of every lookup', async () => {
    const body = (userName: string, extra: object = {}) => ({ schemas: [USER], userName, name: { givenName: 'Lea', familyName: 'Leaver' }, ...extra });
    const created = await call('POST', `${SCIM}/Users`, body('lea.leaver@acme.example', { active: false }));
    assert.equal(created.statusCode, 201, created.body);
    const id = created.json().id as string;
    const put = await call('PUT', `${SCIM}/Users/${id}`, body('lea.leaver@acme.example'));
    assert.equal(put.statusCode, 200, put.body);
    assert.equal(put.json().active, false);
    assert.deepEqual(await lookupEmails('searchQuery=leaver'), []);
    // Nor does a PATCH that removes active.
    const removed = await call('PATCH', `${SCIM}/Users/${id}`, { schemas: [PATCH_OP], Operations: [{ op: 'remove', path: 'active' }] });
    assert.equal(removed.statusCode, 200, removed.body);
    assert.equal(removed.json().active, false);
    assert.deepEqual(await lookupEmails('searchQuery=leaver'), []);
    // A pending user (set by the REST API) stays pending; active: true makes an active user of a suspended one.
    const root = { authorization: basic('root', 'root-password') };
    const pending = await t.app.inject({
      method: 'POST',
      url: '/admin/api/v3/organizations/acme/users',
      headers: root,
      payload: { id: 'pam-pending', email: 'pam.pending@acme.example', status: 'pending' },
    });
    assert.equal(pending.statusCode, 201, pending.body);
    assert.equal(
      (await call('PUT', `${SCIM}/Users/pam-pending`, body('pam.pending@acme.example', { name: { givenName: 'Pam', familyName: 'Pending' } }))).statusCode,
      200,
    );
    const stored = await t.app.inject({ url: '/admin/api/v3/organizations/acme/users/pam-pending', headers: root });
    assert.equal(stored.json().status, 'pending');
    assert.equal((await call('PUT', `${SCIM}/Users/${id}`, body('lea.leaver@acme.example', { active: true }))).json().active, true);
    assert.deepEqual(await lookupEmails('searchQuery=leaver'), ['lea.leaver@acme.example']);
  });

  it("takes the signroom extension's attribute, and core ones by their URN, written out at the top of a POST or PUT, and leaves out an empty name", async () => {
    const extension = 'urn:signroom:params:scim:schemas:extension:2.0:User';
    const created = await call('POST', `${SCIM}/Users`, { schemas: [USER, extension], userName: 'flo.flat@acme.example', [`${extension}:external`]: true });
    assert.equal(created.statusCode, 201, created.body);
    assert.equal(created.json()[extension].external, true);
    assert.equal(Object.hasOwn(created.json(), 'name'), false, 'no name: none is assigned');
    const id = created.json().id as string;
    const put = await call('PUT', `${SCIM}/Users/${id}`, { schemas: [USER], userName: 'flo.flat@acme.example', [`${extension}:External`]: 'False' });
    assert.equal(put.json()[extension].external, false);
    const twice = await call('PUT', `${SCIM}/Users/${id}`, {
      schemas: [USER],
      userName: 'flo.flat@acme.example',
      [extension]: { external: true },
      [`${extension}:external`]: true,
    });
    assertScimError(twice, 400, 'invalidSyntax');
    assert.equal((await call('GET', `${SCIM}/Users/${id}`)).json()[extension].external, false);
    // A nested null gives nothing: the one written out counts.
    const nestedNull = await call('PUT', `${SCIM}/Users/${id}`, {
      schemas: [USER],
      userName: 'flo.flat@acme.example',
      [extension]: { external: null },
      [`${extension}:external`]: true,
    });
    assert.equal(nestedNull.json()[extension].external, true);
    // Core attributes named by their schema's URN (RFC 7644 §3.10), as pathless PATCH values take them.
    const qualified = await call('PUT', `${SCIM}/Users/${id}`, {
      schemas: [USER],
      [`${USER}:userName`]: 'flo.flat@acme.example',
      [`${USER}:name.givenName`]: 'Flo',
      name: { familyName: 'Flat' },
      [`${USER}:active`]: 'False',
    });
    assert.equal(qualified.statusCode, 200, qualified.body);
    assert.deepEqual([qualified.json().name, qualified.json().active], [{ givenName: 'Flo', familyName: 'Flat' }, false]);
    const both = await call('PUT', `${SCIM}/Users/${id}`, { schemas: [USER], userName: 'flo.flat@acme.example', [`${USER}:UserName`]: 'other@acme.example' });
    assertScimError(both, 400, 'invalidSyntax');
    // Removing the whole extension by PATCH clears its attribute.
    const removed = await call('PATCH', `${SCIM}/Users/${id}`, { schemas: [PATCH_OP], Operations: [{ op: 'remove', path: extension }] });
    assert.equal(removed.statusCode, 200, removed.body);
    assert.equal(removed.json()[extension].external, false);
  });

  it('answers search by POST and bulk operations, which it does not offer, with 501', async () => {
    for (const url of [`${SCIM}/.search`, `${SCIM}/Users/.search`, `${SCIM}/Groups/.search`, `${SCIM}/Bulk`]) {
      const answer = await call('POST', url, { schemas: ['urn:ietf:params:scim:api:messages:2.0:SearchRequest'], filter: 'userName eq "x"' });
      assertScimError(answer, 501);
    }
    // Not before the token is checked.
    const anonymous = await t.app.inject({ method: 'POST', url: `${SCIM}/Bulk`, headers: { 'content-type': 'application/scim+json' }, payload: '{}' });
    assert.equal(anonymous.statusCode, 401);
  });

  it('reads filter values as JSON strings (a backslash escaped or not), bare words as strings, and paging numbers of any size', async () => {
    const created = await call('POST', `${SCIM}/Users`, {
      schemas: [USER],
      userName: 'CORP\\dora',
      externalId: 'a\\b"c',
      emails: [{ value: 'dora@acme.example', primary: true }],
    });
    assert.equal(created.statusCode, 201, created.body);
    const { id } = created.json();
    const found = async (filter: string) =>
      (await call('GET', `${SCIM}/Users?filter=${encodeURIComponent(filter)}`)).json().Resources?.map((user: { id: string }) => user.id);
    for (const filter of ['userName eq "CORP\\\\dora"', 'userName eq "corp\\u005cDORA"', 'userName eq "CORP\\dora"', 'externalId eq "a\\\\b\\"c"'])
      assert.deepEqual(await found(filter), [id], filter);
    const plain = await call('POST', `${SCIM}/Users`, { schemas: [USER], userName: 'jyoung@acme.example', externalId: 'jyoung' });
    assert.equal(plain.statusCode, 201, plain.body);
    assert.deepEqual(await found('externalId eq jyoung'), [plain.json().id]);
    const numbered = await call('POST', `${SCIM}/Users`, { schemas: [USER], userName: 'n12345@acme.example', externalId: '12345' });
    assert.equal(numbered.statusCode, 201, numbered.body);
    for (const filter of ['externalId eq 12345', 'externalId eq 12345 and userName eq "n12345@acme.example"'])
      assert.deepEqual(await found(filter), [numbered.json().id], filter);
    // Unescaped, a backslash before n, t, b, f or r would be a control character no name holds: it stands for itself.
    const nancy = await call('POST', `${SCIM}/Users`, { schemas: [USER], userName: 'CORP\\nancy', emails: [{ value: 'nancy@acme.example' }] });
    assert.equal(nancy.statusCode, 201, nancy.body);
    for (const filter of ['userName eq "CORP\\nancy"', 'userName eq "CORP\\\\nancy"']) assert.deepEqual(await found(filter), [nancy.json().id], filter);
    assert.deepEqual(await found('userName eq "nobody\\\\here"'), []);
    // A parameter given twice has no one meaning; numbers past 32 bits are capped, not refused.
    assertScimError(await call('GET', `${SCIM}/Users?filter=userName%20eq%20%22a%22&filter=userName%20eq%20%22b%22`), 400, 'invalidFilter');
    assertScimError(await call('GET', `${SCIM}/Users?count=1&count=2`), 400, 'invalidValue');
    const capped = await call('GET', `${SCIM}/Users?count=10000000000&startIndex=1`);
    assert.equal(capped.statusCode, 200, capped.body);
    assert.ok(capped.json().itemsPerPage <= 1000);
    const past = await call('GET', `${SCIM}/Users?startIndex=99999999999`);
    assert.equal(past.statusCode, 200, past.body);
    assert.equal(past.json().itemsPerPage, 0);
  });

  it('refuses a body that is not UTF-8 or says another charset, with SCIM errors', async () => {
    const body = Buffer.from(JSON.stringify({ schemas: [USER], userName: 'rene@acme.example', name: { givenName: 'Ren\u00e9' } }), 'latin1');
    for (const [contentType, status, scimType] of [
      ['application/scim+json', 400, 'invalidSyntax'],
      ['application/scim+json; charset=latin1', 415, undefined],
    ] as const) {
      const response = await t.app.inject({
        method: 'POST',
        url: `${SCIM}/Users`,
        headers: { authorization: `Bearer ${token}`, 'content-type': contentType },
        payload: body,
      });
      assertScimError(response, status, scimType);
    }
    const found = await call('GET', `${SCIM}/Users?filter=${encodeURIComponent('userName eq "rene@acme.example"')}`);
    assert.equal(found.json().totalResults, 0);
  });

  it('refuses an add or replace without a value, or without a path and an object, changing nothing', async () => {
    const created = await call('POST', `${SCIM}/Users`, { schemas: [USER], userName: 'val@acme.example', name: { givenName: 'Val' } });
    assert.equal(created.statusCode, 201, created.body);
    const { id } = created.json();
    for (const operation of [
      { op: 'add' },
      { op: 'Replace' },
      { op: 'add', path: 'displayName' },
      { op: 'add', value: null },
      { op: 'replace', value: 'Val' },
      { op: 'replace', value: [{ 'name.givenName': 'X' }] },
    ])
      assertScimError(await call('PATCH', `${SCIM}/Users/${id}`, { schemas: [PATCH_OP], Operations: [operation] }), 400, 'invalidValue');
    const after = await call('GET', `${SCIM}/Users/${id}`);
    assert.equal(after.json().meta.version, created.json().meta.version);
  });

  it('describes itself: ServiceProviderConfig, ResourceTypes, Schemas', async () => {
    const config = (await call('GET', `${SCIM}/ServiceProviderConfig`)).json();
    assert.deepEqual(
      [config.patch.supported, config.bulk.supported, config.filter.supported, config.sort.supported, config.etag.supported],
      [true, false, true, false, true],
    );
    const types = (await call('GET', `${SCIM}/ResourceTypes`)).json();
    assert.deepEqual(
      types.Resources.map((type: { endpoint: string }) => type.endpoint),
      ['/Users', '/Groups'],
    );
    // Each one at the location its list gives (RFC 7644 §4).
    for (const type of types.Resources) {
      const alone = await call('GET', new URL(type.meta.location).pathname);
      assert.equal(alone.statusCode, 200, alone.body);
      assert.deepEqual(alone.json(), type);
    }
    assertScimError(await call('GET', `${SCIM}/ResourceTypes/Robot`), 404);
    const schemas = (await call('GET', `${SCIM}/Schemas`)).json();
    for (const schema of schemas.Resources) assert.deepEqual((await call('GET', new URL(schema.meta.location).pathname)).json(), schema);
    assertScimError(await call('GET', `${SCIM}/Schemas/urn:example:nothing`), 404);
    const user = schemas.Resources.find((schema: { id: string }) => schema.id === USER);
    assert.ok(user.attributes.some((attribute: { name: string; uniqueness: string }) => attribute.name === 'userName' && attribute.uniqueness === 'server'));
    const group = schemas.Resources.find((schema: { id: string }) => schema.id === 'urn:ietf:params:scim:schemas:core:2.0:Group');
    assert.deepEqual(
      group.attributes.map((attribute: { name: string }) => attribute.name),
      ['id', 'externalId', 'displayName', 'members'],
    );
  });

  it('refuses bad input with SCIM errors, changing nothing', async () => {
    const before = (await events()).length;
    // Credentials.
    assertScimError(await call('GET', `${SCIM}/Users`, undefined, { authorization: '' }), 401);
    assertScimError(await call('GET', `${SCIM}/Users`, undefined, { authorization: 'Bearer srt_not-a-token' }), 401);
    assertScimError(await call('GET', `${SCIM}/Users`, undefined, { authorization: `Bearer ${otherToken}` }), 403);
    // A revoked token (its row deleted, as `token revoke` does): refused at once.
    const revoked = await addApiToken(t, 'acme');
    assert.equal((await call('GET', `${SCIM}/Users?count=1`, undefined, { authorization: `Bearer ${revoked.secret}` })).statusCode, 200);
    await t.sql(sql`DELETE FROM api_tokens WHERE id = ${revoked.id}`);
    assertScimError(await call('GET', `${SCIM}/Users?count=1`, undefined, { authorization: `Bearer ${revoked.secret}` }), 401);
    assert.equal(
      (await call('GET', `${SCIM}/Users?count=1`, undefined, { authorization: basic('acme-admin', ACME_PASSWORD) })).statusCode,
      200,
      'a Basic credential covering the organization works too',
    );
    // Filters.
    for (const filter of [
      'userName sw "a"',
      'title eq "x"',
      'userName eq "unbalanced',
      'emails[type eq "work"',
      'userName eq "a" or userName eq "b"',
      `userName eq "${'a'.repeat(1_000)}"`,
      'active eq true',
    ]) {
      assertScimError(await call('GET', `${SCIM}/Users?filter=${encodeURIComponent(filter)}`), 400, 'invalidFilter');
    }
    // An id no resource has: with a NUL, which PostgreSQL refuses in any text.
    for (const method of ['GET', 'PUT', 'PATCH', 'DELETE'] as const) {
      const body =
        method === 'PUT'
          ? { schemas: [USER], userName: 'nul@acme.example' }
          : method === 'PATCH'
            ? { schemas: [PATCH_OP], Operations: [{ op: 'replace', path: 'active', value: false }] }
            : undefined;
      assertScimError(await call(method, `${SCIM}/Users/u%001`, body), 404);
      assertScimError(
        await call(
          method,
          `${SCIM}/Groups/bo%00rd`,
          method === 'PUT' ? { schemas: ['urn:ietf:params:scim:schemas:core:2.0:Group'], displayName: 'Board' } : body,
        ),
        404,
      );
    }
    // Uniqueness, ignoring case: a userName taken, an email taken.
    assertScimError(await call('POST', `${SCIM}/Users`, { schemas: [USER], userName: 'ANNA@acme.example' }), 409, 'uniqueness');
    assertScimError(
      await call('POST', `${SCIM}/Users`, { schemas: [USER], userName: 'fresh-name', emails: [{ value: 'Ben@ACME.example' }] }),
      409,
      'uniqueness',
    );
    // Bad values.
    assertScimError(await call('POST', `${SCIM}/Users`, { schemas: [USER] }), 400, 'invalidValue');
    assertScimError(await call('POST', `${SCIM}/Users`, { schemas: [USER], userName: 'no-email-here' }), 400, 'invalidValue');
    assertScimError(await call('POST', `${SCIM}/Users`, { schemas: [USER], userName: 'x@acme.example', active: 'perhaps' }), 400, 'invalidValue');
    // PATCH: an unknown op, read-only or unknown paths, a body that is no PatchOp.
    const patch = (operations: unknown) => call('PATCH', `${SCIM}/Users/u1`, { schemas: [PATCH_OP], Operations: operations });
    assertScimError(await patch([{ op: 'frobnicate', path: 'userName', value: 'x' }]), 400, 'invalidValue');
    assertScimError(await patch([{ op: 'replace', path: 'id', value: 'u9' }]), 400, 'mutability');
    assertScimError(await patch([{ op: 'replace', path: 'meta.created', value: '2020-01-01' }]), 400, 'mutability');
    assertScimError(await patch([{ op: 'replace', value: { id: 'u9' } }]), 400, 'mutability');
    assertScimError(await patch([{ op: 'replace', path: 'shoeSize', value: 44 }]), 400, 'noTarget');
    // A path that is none by RFC 7644's grammar: invalidPath.
    for (const path of ['', ' ', 'emails[type eq "work"', 'emails[type eq "work].value', 'name..givenName', 'name.givenName.extra', '[type eq "work"]'])
      assertScimError(await patch([{ op: 'replace', path, value: 'x' }]), 400, 'invalidPath');
    assertScimError(await patch([]), 400, 'invalidSyntax');
    // Bodies: not JSON, an array, too large, another content type.
    assertScimError(await call('POST', `${SCIM}/Users`, '{"userName": '), 400, 'invalidSyntax');
    assertScimError(await call('POST', `${SCIM}/Users`, '[]'), 400, 'invalidSyntax');
    assertScimError(await call('POST', `${SCIM}/Users`, JSON.stringify({ userName: 'big@acme.example', title: 'x'.repeat(1_100_000) })), 413);
    assertScimError(await call('POST', `${SCIM}/Users`, 'userName=x', { 'content-type': 'application/x-www-form-urlencoded' }), 415);
    // A stale If-Match.
    assertScimError(
      await call(
        'PATCH',
        `${SCIM}/Users/u1`,
        { schemas: [PATCH_OP], Operations: [{ op: 'replace', path: 'name.givenName', value: 'X' }] },
        { 'if-match': '"stale"' },
      ),
      412,
    );
    assertScimError(await call('GET', `${SCIM}/Users/nobody`), 404);
    assertScimError(await call('GET', '/scim/v2/organizations/acme/Nothing'), 404);
    // Met before routing: a segment longer than any id, a malformed percent-encoding.
    assertScimError(await call('GET', `${SCIM}/Users/${'a'.repeat(201)}`), 404);
    assertScimError(await call('GET', `/scim/v2/organizations/${'a'.repeat(201)}/Users`), 404);
    assertScimError(await call('GET', `${SCIM}/Users/%ZZ`), 400);
    // An organization that does not exist, for a credential covering every one.
    for (const route of ['Users', 'Users?filter=userName%20eq%20%22x%22', 'Groups', 'ServiceProviderConfig']) {
      assertScimError(await call('GET', `/scim/v2/organizations/nope/${route}`, undefined, { authorization: basic('root', 'root-password') }), 404);
    }
    assert.equal((await events()).length, before, 'nothing recorded');
    assert.equal((await call('GET', `${SCIM}/Users/u1`)).json().name.givenName, 'Anna', 'nothing changed');
  });
});
