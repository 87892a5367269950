import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { sampleOrganization } from '../../src/demo/sample-directory.ts';
import { fold } from '../../src/domain/fold.ts';
import { isBulkLoad } from '../../src/directory/bulk-import.ts';
import { cliWorkspace, runCli, type CliWorkspace } from '../helpers/cli.ts';
import { TEST_DIALECT } from '../helpers/databases.ts';
import { basic, LOOKUP } from '../helpers/test-app.ts';

const USERS = 12_000;

interface SampleUser {
  id: string;
  firstname: string | null;
  lastname: string | null;
  email: string;
}

/** The emails of the users a search for `term` finds (in any of the three fields), in email order. */
function emailsMatching(users: readonly SampleUser[], term: string): string[] {
  return users
    .filter((user) => [user.firstname, user.lastname, user.email].some((field) => fold(field).includes(term)))
    .map((user) => user.email)
    .sort();
}

/** A lookup in the organization's room "room" as root, which must answer 200. */
async function askLookup(app: FastifyInstance, orgId: string, query: string): Promise<{ totalElements: number; content: { email: string }[] }> {
  const response = await app.inject({ url: `${LOOKUP(orgId, 'room')}?${query}`, headers: { authorization: basic('root', 'root-password') } });
  assert.equal(response.statusCode, 200, response.body);
  return response.json();
}

/**
 * A large first import drops the users' secondary indexes (and SQLite's
 * search-index triggers) and builds them after the load: afterwards the schema
 * must be exactly as before, and search, sorting and later row-by-row changes
 * must work through the rebuilt indexes.
 */
describe('a bulk import that rebuilds the indexes', () => {
  let workspace: CliWorkspace;
  const organization = sampleOrganization({
    orgId: 'bulk',
    users: USERS,
    externalShare: 0,
    pendingShare: 0,
    rooms: [{ id: 'room', members: 5 }],
    externalSignatories: false,
    seed: 11,
  }) as { users: SampleUser[] };
  const write = (name: string, content: unknown) => {
    const file = path.join(workspace.dataDir, name);
    writeFileSync(file, JSON.stringify(content));
    return file;
  };
  /** The users table's indexes, triggers and keys (also those pointing at it), as the database describes them. */
  const schema = (where: CliWorkspace = workspace) =>
    TEST_DIALECT === 'postgres'
      ? where.sql<{ name: string; definition: string }>(
          sql`SELECT indexname AS name, indexdef AS definition FROM pg_indexes WHERE tablename = 'users'
              UNION ALL SELECT conname, conrelid::regclass || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
                WHERE conrelid = 'users'::regclass OR confrelid = 'users'::regclass
              ORDER BY name, definition`,
        )
      : where.sql<{ name: string; definition: string }>(
          sql`SELECT name, sql AS definition FROM sqlite_master WHERE tbl_name IN ('users', 'users_search') ORDER BY name`,
        );
  const lookup = async (query: string) => {
    const app = await buildApp(loadConfig({ ...workspace.env, SIGNROOM_LOG_LEVEL: 'silent' }));
    try {
      return await askLookup(app, 'bulk', query);
    } finally {
      await app.close();
    }
  };

  before(async () => {
    workspace = await cliWorkspace();
  });
  after(() => workspace.close());

  it('takes the bulk path only for many users that outweigh the stored ones', () => {
    assert.equal(isBulkLoad(USERS, 0), true);
    assert.equal(isBulkLoad(USERS, 2 * USERS), true);
    assert.equal(isBulkLoad(USERS, 2 * USERS + 1), false);
    assert.equal(isBulkLoad(9_999, 0), false);
  });

  it('leaves the same indexes and triggers, and finds users through them', async () => {
    const migrated = await runCli(['migrate'], workspace.env);
    assert.equal(migrated.code, 0, migrated.stderr);
    const before = await schema();
    const imported = await runCli(
      ['import', write('bulk.json', { organizations: [organization], credentials: [{ username: 'root', password: 'root-password', organizations: '*' }] })],
      workspace.env,
    );
    assert.equal(imported.code, 0, imported.stderr);
    assert.deepEqual(await schema(), before);

    const term = 'muller.1';
    const expected = emailsMatching(organization.users, term);
    const page = await lookup(`searchQuery=${term}&sortBy=email&size=2000`);
    assert.ok(expected.length > 10);
    assert.equal(page.totalElements, expected.length);
    assert.deepEqual(
      page.content.map((user) => user.email),
      expected,
    );
    assert.equal((await lookup('size=1')).totalElements, USERS);

    // A short term with thousands of matches: a full page, read by id in batches, in order.
    const short = 'ex';
    const many = emailsMatching(organization.users, short);
    assert.ok(many.length > 2000);
    const full = await lookup(`searchQuery=${short}&sortBy=email&size=2000&page=0`);
    assert.equal(full.totalElements, many.length);
    assert.deepEqual(
      full.content.map((user) => user.email),
      many.slice(0, 2000),
    );

    // Again, now over stored users: the bulk path upserts, keeping the unique keys.
    const again = await runCli(['import', path.join(workspace.dataDir, 'bulk.json')], workspace.env);
    assert.equal(again.code, 0, again.stderr);
    assert.deepEqual(await schema(), before);
    assert.equal((await lookup('size=1')).totalElements, USERS);
    assert.equal((await lookup(`searchQuery=${term}&sortBy=email&size=2000`)).totalElements, expected.length);
  });

  it('rebuilds once around many organizations that together make a bulk load, each too small to be one', async () => {
    const many = Array.from({ length: 4 }, (_, index) =>
      sampleOrganization({
        orgId: `many${index}`,
        users: 3_000,
        externalShare: 0.1,
        pendingShare: 0.2,
        rooms: [{ id: 'room', members: 50 }],
        externalSignatories: true,
        seed: 20 + index,
      }),
    ) as unknown as { id: string; users: SampleUser[] }[];
    // A database of its own: the first import finds no user stored at all.
    const own = await cliWorkspace();
    try {
      const migrated = await runCli(['migrate'], own.env);
      assert.equal(migrated.code, 0, migrated.stderr);
      const before = await schema(own);
      const file = write('many.json', { organizations: many, credentials: [{ username: 'root', password: 'root-password', organizations: '*' }] });
      for (const round of ['first import', 'again, over stored users']) {
        const imported = await runCli(['import', file], own.env);
        assert.equal(imported.code, 0, `${round}: ${imported.stderr}`);
        assert.deepEqual(await schema(own), before, round);
        await expectEachOrganizationFound(own, round);
      }
    } finally {
      await own.close();
    }

    async function expectEachOrganizationFound(where: CliWorkspace, round: string): Promise<void> {
      for (const organization of many) {
        const app = await buildApp(loadConfig({ ...where.env, SIGNROOM_LOG_LEVEL: 'silent' }));
        try {
          const ask = (query: string) => askLookup(app, organization.id, query);
          // Counted from the tallies: of the organization, and of the room's 50 members.
          assert.equal((await ask('size=1')).totalElements, 3_000, `${round}: ${organization.id}`);
          assert.equal((await ask('size=1&purpose=SIGNING_REQUEST_SIGNATORY')).totalElements, 50, `${round}: ${organization.id}`);
          const term = 'schmidt';
          const expected = emailsMatching(organization.users, term);
          const found = await ask(`searchQuery=${term}&sortBy=email&size=2000`);
          assert.deepEqual(
            found.content.map((user) => user.email),
            expected,
            `${round}: ${organization.id}`,
          );
        } finally {
          await app.close();
        }
      }
    }
  });

  it('refuses a first load of many organizations naming an unknown member, and stores nothing', async () => {
    const own = await cliWorkspace();
    try {
      const organizations = [0, 1].map((index) => ({
        ...sampleOrganization({
          orgId: `first${index}`,
          users: 5_000,
          externalShare: 0,
          pendingShare: 0,
          rooms: [],
          externalSignatories: false,
          seed: 40 + index,
        }),
        rooms: [{ id: 'room', name: 'Room', members: ['u1', 'ghost', 'u2'] }],
      }));
      const refused = await runCli(['import', write('unknown-member.json', { organizations })], own.env);
      assert.notEqual(refused.code, 0);
      assert.match(refused.stderr, /^\$\.organizations\[0\]\.rooms\[0\]\.members\[1\]: unknown user id "ghost" in organization "first0"$/m);
      assert.match(refused.stderr, /^\$\.organizations\[1\]\.rooms\[0\]\.members\[1\]: unknown user id "ghost" in organization "first1"$/m);
      const stored = await own.sql<{ users: number | string; organizations: number | string }>(
        sql`SELECT (SELECT count(*) FROM users) AS users, (SELECT count(*) FROM organizations) AS organizations`,
      );
      assert.deepEqual([Number(stored[0]!.users), Number(stored[0]!.organizations)], [0, 0]);
    } finally {
      await own.close();
    }
  });

  it('refuses a bulk load of one organization naming an unknown member, and stores nothing; stores the members of a good one', async () => {
    const own = await cliWorkspace();
    try {
      const users = sampleOrganization({
        orgId: 'one',
        users: USERS,
        externalShare: 0,
        pendingShare: 0,
        rooms: [],
        externalSignatories: false,
        seed: 42,
      }).users;
      const withRoom = (members: string[]) => ({ organizations: [{ id: 'one', name: 'One', users, rooms: [{ id: 'room', members }] }] });
      const refused = await runCli(['import', write('one-unknown.json', withRoom(['u1', 'ghost', 'u2']))], own.env);
      assert.notEqual(refused.code, 0);
      assert.match(refused.stderr, /^\$\.organizations\[0\]\.rooms\[0\]\.members\[1\]: unknown user id "ghost" in organization "one"$/m);
      const count = async (table: 'users' | 'room_members') =>
        Number((await own.sql<{ n: number | string }>(sql`SELECT count(*) AS n FROM ${sql.table(table)}`))[0]!.n);
      assert.deepEqual([await count('users'), await count('room_members')], [0, 0]);

      const imported = await runCli(['import', write('one.json', withRoom(['u1', 'u2', `u${USERS - 1}`]))], own.env);
      assert.equal(imported.code, 0, imported.stderr);
      assert.deepEqual([await count('users'), await count('room_members')], [USERS, 3]);
    } finally {
      await own.close();
    }
  });

  it('keeps the search index in step with a later small import', async () => {
    const renamed = { id: 'u42', firstname: 'Quirinus', lastname: 'Zwetschgenbaum', email: 'quirinus@bulk.example' };
    const imported = await runCli(['import', write('small.json', { organizations: [{ id: 'bulk', name: 'bulk', users: [renamed] }] })], workspace.env);
    assert.equal(imported.code, 0, imported.stderr);
    const found = await lookup('searchQuery=zwetschgen');
    assert.deepEqual(
      found.content.map((user) => user.email),
      ['quirinus@bulk.example'],
    );
    const old = organization.users.find((user) => user.id === 'u42')!;
    const byOldEmail = await lookup(`searchQuery=${encodeURIComponent(old.email)}`);
    assert.equal(byOldEmail.totalElements, 0);
  });
});
