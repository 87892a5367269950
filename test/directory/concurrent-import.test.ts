import assert from 'node:assert/strict';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sampleOrganization } from '../../src/demo/sample-directory.ts';
import { cliWorkspace, freePort, runCli, startServer, type CliWorkspace } from '../helpers/cli.ts';
import { basic, LOOKUP } from '../helpers/test-app.ts';

const USERS = 20_000;

describe('an import while lookups run', () => {
  let workspace: CliWorkspace;
  let server: Awaited<ReturnType<typeof startServer>>;
  const write = (name: string, content: unknown) => {
    const file = path.join(workspace.dataDir, name);
    writeFileSync(file, JSON.stringify(content));
    return file;
  };
  const organization = (users: number) => ({
    ...sampleOrganization({
      orgId: 'big',
      users,
      externalShare: 0,
      pendingShare: 0.15,
      rooms: [{ id: 'room', members: 10 }],
      externalSignatories: false,
      seed: 3,
    }),
  });

  before(async () => {
    workspace = await cliWorkspace();
    const first = await runCli(
      [
        'import',
        write('first.json', { organizations: [organization(10)], credentials: [{ username: 'root', password: 'root-password', organizations: '*' }] }),
      ],
      workspace.env,
    );
    assert.equal(first.code, 0, first.stderr);
    server = await startServer({ ...workspace.env, PORT: String(await freePort()), SIGNROOM_LOG_LEVEL: 'warn' });
  });
  after(async () => {
    server.child.kill('SIGTERM');
    if (server.child.exitCode === null) await once(server.child, 'exit');
    await workspace.close();
  });

  it('never shows a half-imported file, and counts the whole file once it is in', async () => {
    const lookup = async (query: string) => {
      const response = await fetch(`${server.url}${LOOKUP('big', 'room')}?${query}`, { headers: { authorization: basic('root', 'root-password') } });
      assert.equal(response.status, 200);
      return (await response.json()) as { totalElements: number; numberOfElements: number; content: { email: string }[] };
    };
    // The same two queries before, during and after: everyone, and a term only some match.
    const queries = ['size=5', 'size=5&searchQuery=mull'];
    const before = await Promise.all(queries.map(lookup));
    const file = write('second.json', { organizations: [organization(USERS)] });

    let importing = true;
    const seen = queries.map(() => new Set<number>());
    const importDone = runCli(['import', file], workspace.env).finally(() => (importing = false));
    let lookups = 0;
    while (importing) {
      const pages = await Promise.all(queries.map(lookup));
      pages.forEach((page, index) => seen[index]!.add(page.totalElements));
      lookups += 1;
    }
    const imported = await importDone;
    assert.equal(imported.code, 0, imported.stderr);
    const afterwards = await Promise.all(queries.map(lookup));

    assert.ok(lookups > 3, `lookups ran during the import (${lookups})`);
    assert.equal(afterwards[0]!.totalElements, USERS);
    assert.ok(afterwards[1]!.totalElements > before[1]!.totalElements);
    queries.forEach((query, index) => {
      const allowed = [before[index]!.totalElements, afterwards[index]!.totalElements];
      for (const total of seen[index]!) assert.ok(allowed.includes(total), `${query}: total ${total} is neither ${allowed.join(' nor ')}`);
    });
    // The count cache did not keep a total from before the import under the new version.
    assert.deepEqual(
      (await Promise.all(queries.map(lookup))).map((page) => page.totalElements),
      afterwards.map((page) => page.totalElements),
    );
  });
});
