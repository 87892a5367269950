import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { cliWorkspace, runCli, type CliWorkspace } from '../helpers/cli.ts';
import { DIRECTORY } from '../helpers/fixtures.ts';

describe('bin/signroom user and room commands', () => {
  let workspace: CliWorkspace;
  const env = () => workspace.env;
  const events = () =>
    workspace.sql<{ action: string; actor: string; target_id: string; org_id: string | null; details: string }>(
      sql`SELECT action, actor, target_id, org_id, details FROM audit_events ORDER BY seq`,
    );

  before(async () => {
    workspace = await cliWorkspace();
    const file = path.join(workspace.dataDir, 'directory.json');
    writeFileSync(file, JSON.stringify(DIRECTORY));
    const result = await runCli(['import', file], env());
    assert.equal(result.code, 0, result.stderr);
  });
  after(() => workspace.close());

  it('records the import as one event per organization, with counts, by "cli"', async () => {
    const imported = (await events()).filter((event) => event.action === 'directory.imported');
    assert.deepEqual(
      imported
        .map((event) => ({ org: event.org_id, actor: event.actor, counts: JSON.parse(event.details) as Record<string, unknown> }))
        .map(({ org, actor, counts }) => ({ org, actor, users: counts['users'], rooms: counts['rooms'], members: counts['members'] })),
      [
        { org: 'acme', actor: 'cli', users: 4, rooms: 2, members: 1 },
        { org: 'other', actor: 'cli', users: 1, rooms: 1, members: 1 },
      ],
    );
    const credentials = (await events()).filter((event) => event.action === 'credential.changed');
    assert.deepEqual(
      credentials.map((event) => [event.target_id, event.org_id]),
      [
        ['acme-admin', 'acme'],
        ['root', null],
      ],
    );
  });

  it('records an import by the name given with --as, before or after the file, and refuses anything more', async () => {
    const file = path.join(workspace.dataDir, 'directory.json');
    for (const [args, name] of [
      [['import', file, '--as', 'hr-sync'], 'hr-sync'],
      [['import', '--as', 'hr-nightly', file], 'hr-nightly'],
    ] as const) {
      const before = (await events()).length;
      const result = await runCli([...args], env());
      assert.equal(result.code, 0, result.stderr);
      const recorded = (await events()).slice(before).filter((event) => event.action === 'directory.imported');
      assert.deepEqual(
        recorded.map((event) => event.actor),
        [name, name],
      );
    }
    const before = (await events()).length;
    for (const args of [
      ['import', file, 'another.json'],
      ['import', file, '--bogus'],
      ['import', file, '--as'],
    ]) {
      const refused = await runCli(args, env());
      assert.equal(refused.code, 2, `${args.join(' ')}: ${refused.stderr}`);
      assert.match(refused.stderr, /^signroom: .*\n\nUsage of signroom import:/s);
      assert.doesNotMatch(refused.stderr, /\n {4}at /, 'no stack trace');
    }
    assert.equal((await events()).length, before, 'nothing imported');
  });

  it('adds, suspends and deletes a user, and changes a room, each through the writer and audited', async () => {
    const before = (await events()).length;
    const added = await runCli(['user', 'add', 'acme', '--id', 'cli1', '--email', 'cli1@acme.example', '--firstname', 'Cleo'], env());
    assert.equal(added.code, 0, added.stderr);
    assert.equal(JSON.parse(added.stdout).status, 'active');
    assert.equal((await runCli(['room', 'add', 'acme', 'cli-room', '--name', 'CLI room'], env())).code, 0);
    assert.equal((await runCli(['room', 'add-member', 'acme', 'cli-room', 'cli1'], env())).code, 0);
    const suspended = await runCli(['user', 'suspend', 'acme', 'cli1', '--as', 'ops-alice'], env());
    assert.equal(suspended.code, 0, suspended.stderr);
    assert.equal(JSON.parse(suspended.stdout).status, 'suspended');
    assert.equal((await runCli(['room', 'remove-member', 'acme', 'cli-room', 'cli1'], env())).code, 0);
    assert.equal((await runCli(['user', 'delete', 'acme', 'cli1'], env())).code, 0);
    const recorded = (await events()).slice(before).map((event) => [event.action, event.actor, event.target_id]);
    assert.deepEqual(recorded, [
      ['user.created', 'cli', 'cli1'],
      ['room.created', 'cli', 'cli-room'],
      ['room.member.added', 'cli', 'cli-room'],
      ['user.updated', 'ops-alice', 'cli1'],
      ['room.member.removed', 'cli', 'cli-room'],
      ['user.deleted', 'cli', 'cli1'],
    ]);
  });

  it('refuses an import naming a deleted user as a member', async () => {
    assert.equal((await runCli(['user', 'add', 'acme', '--id', 'gone1', '--email', 'gone1@acme.example'], env())).code, 0);
    assert.equal((await runCli(['user', 'delete', 'acme', 'gone1'], env())).code, 0);
    const file = path.join(workspace.dataDir, 'members.json');
    writeFileSync(file, JSON.stringify({ organizations: [{ id: 'acme', name: 'Acme AG', rooms: [{ id: 'board', members: ['u1', 'gone1'] }] }] }));
    const imported = await runCli(['import', file], env());
    assert.equal(imported.code, 1);
    assert.match(imported.stderr, /members\[1\]: unknown user id "gone1"/);
  });

  it("refuses bad input with the API's problem, exit 1, and changes nothing", async () => {
    const before = (await events()).length;
    const badRoom = await runCli(['room', 'add', 'acme', 'a b/c'], env());
    assert.equal(badRoom.code, 1);
    assert.match(badRoom.stderr, /invalid-parameter/);
    const bad = await runCli(['user', 'add', 'acme', '--id', 'bad id', '--email', 'nope'], env());
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /invalid-parameter/);
    // One line naming every bad field.
    assert.match(bad.stderr, /^signroom: invalid-parameter: id .*; email must be an email address/);
    assert.equal(bad.stderr.trim().split('\n').length, 1, bad.stderr);
    const taken = await runCli(['user', 'add', 'acme', '--email', 'ANNA@acme.example'], env());
    assert.equal(taken.code, 1);
    assert.match(taken.stderr, /email-taken/);
    assert.match((await runCli(['user', 'delete', 'acme', 'nobody'], env())).stderr, /user-not-found/);
    assert.match((await runCli(['user', 'suspend', 'no-org', 'u1'], env())).stderr, /organization-not-found/);
    assert.equal((await runCli(['user', 'frobnicate', 'acme'], env())).code, 2);
    assert.equal((await events()).length, before);
  });

  it('audits credential changes from the CLI', async () => {
    const before = (await events()).length;
    assert.equal((await runCli(['credential', 'set', 'carol', 'acme,other'], { ...env(), SIGNROOM_PASSWORD: 'carol-secret' })).code, 0);
    assert.equal((await runCli(['credential', 'revoke', 'carol', '--as', 'ops-bob'], env())).code, 0);
    assert.equal((await runCli(['credential', 'revoke', 'carol'], env())).code, 1);
    assert.equal((await runCli(['credential', 'set', 'dave', 'acme'], { ...env(), SIGNROOM_PASSWORD: 'dave-secret' })).code, 0);
    assert.equal((await runCli(['credential', 'set', 'dave', 'other'], { ...env(), SIGNROOM_PASSWORD: 'dave-secret' })).code, 0);
    const recorded = (await events()).slice(before).map((event) => [event.actor, event.target_id, event.org_id, event.details]);
    assert.deepEqual(recorded, [
      ['cli', 'carol', 'acme', '{"username":"carol","change":"created","access":"granted"}'],
      ['cli', 'carol', 'other', '{"username":"carol","change":"created","access":"granted"}'],
      ['ops-bob', 'carol', 'acme', '{"username":"carol","change":"revoked","access":"revoked"}'],
      ['ops-bob', 'carol', 'other', '{"username":"carol","change":"revoked","access":"revoked"}'],
      ['cli', 'dave', 'acme', '{"username":"dave","change":"created","access":"granted"}'],
      // Each organization's trail says what changed for it, and names no other organization.
      ['cli', 'dave', 'acme', '{"username":"dave","change":"changed","access":"revoked"}'],
      ['cli', 'dave', 'other', '{"username":"dave","change":"changed","access":"granted"}'],
    ]);
  });
});
