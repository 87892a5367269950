import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, truncate, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { SearchIndexBuilder, type SearchIndexParts } from '../../src/domain/search-index.ts';
import { readSnapshot, writeSnapshot, type DirectoryState } from '../../src/search-index/snapshots.ts';

/** The parts of an index of `users` users with keys and orders that differ from user to user. */
function sampleParts(version: number, users: number): SearchIndexParts {
  const builder = new SearchIndexBuilder(version, users);
  builder.addUsers(
    Array.from({ length: users }, (_, k) => ({
      seq: 10 + k * 3,
      searchKey: `zoë ${k}\nmüller\nuser.${k}@x.example`,
      external: k % 3 === 0,
      needsInvite: k % 5 === 0,
      candidate: true,
    })),
  );
  const seqs = Array.from({ length: users }, (_, k) => 10 + k * 3);
  builder.addOrder('lastname', seqs);
  builder.addOrder('firstname', [...seqs].reverse());
  builder.addOrder('email', [...seqs.slice(1), seqs[0]!]);
  const built = builder.parts()!;
  // The builder's keys are a Buffer; a copy read back holds them in a plain Uint8Array.
  return { ...built, keys: new Uint8Array(built.keys) };
}

describe('search index copies on disk', () => {
  let directory: string;
  const state: DirectoryState = { version: 7, stamp: '6f0c1d9e-stamp' };
  const parts = sampleParts(state.version, 500);
  /** What a database listing only `listed` would confirm. */
  const listing =
    (...listed: DirectoryState[]) =>
    async (asked: DirectoryState) =>
      listed.some((one) => one.version === asked.version && one.stamp === asked.stamp);
  const listsState = listing(state);
  const file = () => path.join(directory, 'org-acme.index');

  before(async () => {
    directory = await mkdtemp(path.join(tmpdir(), 'signroom-snapshots-'));
  });
  after(() => rm(directory, { recursive: true, force: true }));

  it('gives back the index it kept, array for array, at the same state', async () => {
    await writeSnapshot(directory, 'acme', state, parts);
    assert.deepEqual(await readSnapshot(directory, 'acme', listsState), parts);
  });

  it('gives nothing unless the database lists the state the copy was read at, nor for another organization', async () => {
    await writeSnapshot(directory, 'acme', state, parts);
    assert.equal(await readSnapshot(directory, 'acme', listing({ ...state, version: 8 })), undefined);
    assert.equal(await readSnapshot(directory, 'acme', listing({ ...state, stamp: 'another-stamp' })), undefined);
    assert.equal(await readSnapshot(directory, 'acme', listing()), undefined);
    assert.equal(await readSnapshot(directory, 'globex', listsState), undefined);
    assert.deepEqual(await readSnapshot(directory, 'acme', listing({ version: 3, stamp: 'x' }, state)), parts);
  });

  it('gives nothing for a copy cut short, with a byte changed, or with a header claiming other sizes', async () => {
    await writeSnapshot(directory, 'acme', state, parts);
    const whole = await readFile(file());

    await truncate(file(), whole.byteLength - 1);
    assert.equal(await readSnapshot(directory, 'acme', listsState), undefined, 'cut short');

    const flipped = Buffer.from(whole);
    flipped[whole.byteLength - 100]! ^= 0x01;
    await writeFile(file(), flipped);
    assert.equal(await readSnapshot(directory, 'acme', listsState), undefined, 'one bit changed in the orders');

    const headerLength = whole.readUInt32LE(8);
    const header = JSON.parse(whole.subarray(12, 12 + headerLength).toString('utf8')) as Record<string, unknown>;
    const claiming = (changes: Record<string, unknown>) => {
      const text = Buffer.from(JSON.stringify({ ...header, ...changes }));
      const prefix = Buffer.from(whole.subarray(0, 12));
      prefix.writeUInt32LE(text.byteLength, 8);
      return Buffer.concat([prefix, text, whole.subarray(12 + headerLength)]);
    };
    await writeFile(file(), claiming({ keyBytes: 2 ** 40 }));
    assert.equal(await readSnapshot(directory, 'acme', listsState), undefined, 'keys of a terabyte: refused before anything is allocated');
    await writeFile(file(), claiming({ keyBytes: 'many' }));
    assert.equal(await readSnapshot(directory, 'acme', listsState), undefined, 'a header of the wrong types');
    await writeFile(file(), Buffer.from('not a copy at all'));
    assert.equal(await readSnapshot(directory, 'acme', listsState), undefined, 'another file');

    // Written again, it is whole again.
    await writeSnapshot(directory, 'acme', state, parts);
    assert.deepEqual(await readSnapshot(directory, 'acme', listsState), parts);
  });

  it('passes over what is not a regular file, a FIFO without a writer too, at once', async () => {
    execFileSync('mkfifo', [path.join(directory, 'org-fifo.index')]);
    assert.equal(await readSnapshot(directory, 'fifo', listsState), undefined);
    await mkdir(path.join(directory, 'org-dir.index'));
    assert.equal(await readSnapshot(directory, 'dir', listsState), undefined);
  });

  it('names files safely for any organization id, "." and ".." too', async () => {
    for (const orgId of ['.', '..', 'a.b_c-D']) {
      await writeSnapshot(directory, orgId, state, parts);
      assert.deepEqual(await readSnapshot(directory, orgId, listsState), parts);
    }
    assert.ok((await stat(directory)).isDirectory());
  });

  it('removes what a writer stopped midway left, once it is old, and nothing a writer may still be writing', async () => {
    const abandoned = path.join(directory, 'org-acme.index.0b7c.tmp');
    const recent = path.join(directory, 'org-acme.index.1c8d.tmp');
    await writeFile(abandoned, 'x');
    await writeFile(recent, 'x');
    const hourAgo = new Date(Date.now() - 3600_000);
    await utimes(abandoned, hourAgo, hourAgo);
    await writeSnapshot(directory, 'acme', state, parts);
    const names = await readdir(directory);
    assert.equal(names.includes('org-acme.index.0b7c.tmp'), false);
    assert.equal(names.includes('org-acme.index.1c8d.tmp'), true);
    await rm(recent);
  });
});
