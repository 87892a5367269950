import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ACME_PASSWORD, DIRECTORY } from '../helpers/fixtures.ts';
import { LOOKUP, basic, startTestApp, type TestApp } from '../helpers/test-app.ts';

describe('lookup parameters and scoping', () => {
  let t: TestApp;
  const auth = basic('acme-admin', ACME_PASSWORD);
  const get = (query: string, room = 'board', org = 'acme') => t.app.inject({ url: `${LOOKUP(org, room)}${query}`, headers: { authorization: auth } });

  before(async () => {
    t = await startTestApp();
    await t.importDirectory(DIRECTORY);
  });
  after(async () => t.close());

  it('answers with defaults and the Spring page shape', async () => {
    const response = await get('');
    assert.equal(response.statusCode, 200);
    assert.match(String(response.headers['content-type']), /^application\/json/);
    const body = response.json();
    assert.equal(body.size, 2000);
    assert.equal(body.totalElements, 4);
    assert.deepEqual(
      body.content.map((s: { email: string }) => s.email),
      ['ext%_\\@partner.example', 'ben@acme.example', 'anna@acme.example', 'zoe@acme.example'],
    );
    assert.deepEqual(body.content[0], {
      displayName: 'ext%_\\@partner.example',
      email: 'ext%_\\@partner.example',
      firstname: null,
      lastname: null,
      requiresInvitation: true,
      roomMember: false,
    });
  });

  for (const [query, parameter] of [
    ['?sortBy=age', 'sortBy'],
    ['?sortBy=', 'sortBy'],
    ['?sortDirection=up', 'sortDirection'],
    ['?purpose=EVERYONE', 'purpose'],
    // Only sortBy and sortDirection are case-insensitive (contract section 3): another spelling of a purpose is unknown.
    ['?purpose=signing_request_signatory', 'purpose'],
    ['?page=-1', 'page'],
    ['?page=1.5', 'page'],
    ['?page=abc', 'page'],
    ['?page=', 'page'],
    ['?page=2147483648', 'page'],
    ['?size=0', 'size'],
    ['?size=-5', 'size'],
    ['?size=ten', 'size'],
    ['?size=1e3', 'size'],
    ['?size=99999999999', 'size'],
    ['?roomMember=yes', 'roomMember'],
    ['?roomMember=1', 'roomMember'],
    ['?requiresInvitation=', 'requiresInvitation'],
    ['?page=1&page=2', 'page'],
  ] as const) {
    it(`refuses ${query} with a 400 naming ${parameter}`, async () => {
      const response = await get(query);
      assert.equal(response.statusCode, 400);
      assert.equal(response.headers['content-type'], 'application/problem+json; charset=utf-8');
      const body = response.json();
      assert.equal(body.code, 'invalid-parameter');
      assert.equal(body.status, 400);
      assert.equal(body.type, 'urn:signroom:problem:invalid-parameter');
      assert.equal(body.instance, LOOKUP('acme', 'board'));
      assert.deepEqual(
        body.errors.map((e: { parameter: string }) => e.parameter),
        [parameter],
      );
      assert.ok(body.errors[0].message.length > 0);
    });
  }

  it('names every bad parameter at once', async () => {
    const response = await get('?page=x&size=0&sortBy=x&sortDirection=x&purpose=x&roomMember=x&requiresInvitation=x');
    assert.equal(response.statusCode, 400);
    assert.deepEqual(
      response
        .json()
        .errors.map((e: { parameter: string }) => e.parameter)
        .sort(),
      ['page', 'purpose', 'requiresInvitation', 'roomMember', 'size', 'sortBy', 'sortDirection'],
    );
  });

  it('accepts sortBy, sortDirection and booleans in any letter case and ignores unknown parameters', async () => {
    const response = await get('?sortBy=EMAIL&sortDirection=desc&roomMember=TRUE&purpose=SIGNING_REQUEST_DELIVERY_RECIPIENT&whatever=1');
    assert.equal(response.statusCode, 200);
    // purpose wins over roomMember: everyone, by email descending
    assert.deepEqual(
      response.json().content.map((s: { email: string }) => s.email),
      ['zoe@acme.example', 'ext%_\\@partner.example', 'ben@acme.example', 'anna@acme.example'],
    );
  });

  it('clamps the page size to the maximum and says so', async () => {
    const body = (await get('?size=5000')).json();
    assert.equal(body.size, 2000);
    assert.equal(body.pageable.pageSize, 2000);
  });

  it('answers a page past the end with the true totals', async () => {
    const body = (await get('?size=3&page=1000000')).json();
    assert.deepEqual(
      {
        content: body.content,
        empty: body.empty,
        first: body.first,
        last: body.last,
        totalElements: body.totalElements,
        totalPages: body.totalPages,
        offset: body.pageable.offset,
      },
      { content: [], empty: true, first: false, last: true, totalElements: 4, totalPages: 2, offset: 3000000 },
    );
  });

  it('treats search characters literally', async () => {
    const emails = async (searchQuery: string) =>
      ((await get(`?searchQuery=${encodeURIComponent(searchQuery)}`)).json().content as { email: string }[]).map((s) => s.email);
    assert.deepEqual(await emails('%'), ['ext%_\\@partner.example']);
    assert.deepEqual(await emails('_'), ['ext%_\\@partner.example']);
    assert.deepEqual(await emails('\\'), ['ext%_\\@partner.example']);
    assert.deepEqual(await emails("o'b"), ['zoe@acme.example']);
    assert.deepEqual(await emails('"'), []);
    assert.deepEqual(await emails('*'), []);
    assert.deepEqual(await emails('😀'), []);
    assert.deepEqual(await emails('ann\u0000'), []);
    assert.deepEqual(await emails('\u0000\u0000\u0000 anna'), []);
    assert.deepEqual(await emails('MULLER anna'), ['anna@acme.example']);
    assert.deepEqual(await emails('zoe'), ['zoe@acme.example']);
  });

  it('answers a 10,000-character query without error (its time is measured by npm run bench)', async () => {
    for (const searchQuery of [
      'a'.repeat(10_000),
      Array.from({ length: 5000 }, (_, i) => `t${i}`)
        .join(' ')
        .slice(0, 10_000),
      '% '.repeat(5000),
    ]) {
      const response = await get(`?searchQuery=${encodeURIComponent(searchQuery)}`);
      assert.equal(response.statusCode, 200, response.body);
      assert.equal(response.json().totalElements, 0 + (searchQuery.startsWith('%') ? 1 : 0));
    }
  });

  it('filters on the deprecated flags without a purpose', async () => {
    const emails = async (query: string) => ((await get(query)).json().content as { email: string }[]).map((s) => s.email);
    assert.deepEqual(await emails('?roomMember=true'), ['anna@acme.example']);
    assert.deepEqual(await emails('?requiresInvitation=true'), ['ext%_\\@partner.example', 'ben@acme.example']);
    assert.deepEqual(await emails('?roomMember=false&requiresInvitation=false'), ['zoe@acme.example']);
    assert.deepEqual(await emails('?purpose=PERMISSION_INVITATION'), ['ben@acme.example', 'zoe@acme.example']);
  });

  it('answers 404 for an unknown room and for a room of another organization', async () => {
    for (const [org, room] of [
      ['acme', 'nope'],
      ['acme', 'lobby'],
      // A NUL, which no id holds and PostgreSQL refuses in any text.
      ['acme', 'bo%00rd'],
    ]) {
      const root = await t.app.inject({ url: LOOKUP(org!, room!), headers: { authorization: basic('root', 'root-password') } });
      assert.equal(root.statusCode, 404);
      assert.equal(root.json().code, 'room-not-found');
    }
  });

  it('answers 404 for an unknown organization to an all-organizations credential', async () => {
    for (const org of ['ghost', 'ac%00me']) {
      const response = await t.app.inject({ url: LOOKUP(org, 'board'), headers: { authorization: basic('root', 'root-password') } });
      assert.equal(response.statusCode, 404);
      assert.equal(response.json().code, 'organization-not-found');
    }
  });

  it('checks 403 before 400 before 404', async () => {
    const forbidden = await get('?page=x', 'nope', 'other');
    assert.equal(forbidden.statusCode, 403);
    const invalid = await get('?page=x', 'nope');
    assert.equal(invalid.statusCode, 400);
  });

  it('leaves out external users when the organization does not allow them', async () => {
    await t.importDirectory({ organizations: [{ ...DIRECTORY.organizations[0], settings: { externalSignatories: false } }] });
    const body = (await get('')).json();
    assert.equal(body.totalElements, 3);
    assert.ok(body.content.every((s: { email: string }) => !s.email.includes('partner')));
    await t.importDirectory({ organizations: [DIRECTORY.organizations[0]] });
    assert.equal((await get('')).json().totalElements, 4);
  });
});
