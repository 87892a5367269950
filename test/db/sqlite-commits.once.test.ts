import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { after, before, describe, it } from 'node:test';
import { SqliteCommitCounter, walIndexState } from '../../src/db/sqlite-commits.ts';

/** Two valid copies of a WAL-index header (version 3007000, initialized), with `change` as iChange. */
function header(change: number): Buffer {
  const copy = Buffer.alloc(48);
  copy.writeUInt32LE(3007000, 0);
  copy.writeUInt32LE(change, 8);
  copy[12] = 1;
  return Buffer.concat([copy, copy]);
}

describe('walIndexState', () => {
  it('reads a header whose two copies agree, and tells commits apart', () => {
    assert.equal(typeof walIndexState(header(1)), 'string');
    assert.notEqual(walIndexState(header(1)), walIndexState(header(2)));
    assert.equal(walIndexState(header(7)), walIndexState(header(7)));
  });

  it('refuses a header in the middle of a write, not initialized, of another format, or cut short', () => {
    const torn = header(1);
    torn.writeUInt32LE(2, 48 + 8);
    assert.equal(walIndexState(torn), undefined);
    const uninitialized = header(1);
    uninitialized[12] = 0;
    uninitialized[48 + 12] = 0;
    assert.equal(walIndexState(uninitialized), undefined);
    const otherFormat = header(1);
    otherFormat.writeUInt32LE(3007001, 0);
    otherFormat.writeUInt32LE(3007001, 48);
    assert.equal(walIndexState(otherFormat), undefined);
    assert.equal(walIndexState(header(1).subarray(0, 90)), undefined);
  });
});

describe('SqliteCommitCounter', () => {
  let directory: string;
  let file: string;
  let native: DatabaseSync;
  let counter: SqliteCommitCounter;
  before(() => {
    directory = mkdtempSync(path.join(tmpdir(), 'signroom-commits-'));
    file = path.join(directory, 'test.sqlite');
    native = new DatabaseSync(file);
    native.exec('PRAGMA journal_mode = WAL; CREATE TABLE notes (text TEXT)');
    counter = new SqliteCommitCounter(native, file);
  });
  after(() => {
    native.close();
    counter.close();
    rmSync(directory, { recursive: true, force: true });
  });

  it('stays put while nothing is committed, reads included', () => {
    const first = counter.read();
    native.prepare('SELECT count(*) FROM notes').get();
    assert.equal(counter.read(), first);
  });

  it('moves on when another process commits, at once', () => {
    const before = counter.read();
    const child = spawnSync(process.execPath, [
      '-e',
      `new (require('node:sqlite').DatabaseSync)(${JSON.stringify(file)}).exec("INSERT INTO notes VALUES ('from the CLI')")`,
    ]);
    assert.equal(child.status, 0, child.stderr.toString());
    assert.notEqual(counter.read(), before);
  });

  it('reads the shared header, not the pragma: a commit of its own connection moves it too', () => {
    // PRAGMA data_version ignores the connection's own commits; the WAL-index header does not.
    const before = counter.read();
    native.exec("INSERT INTO notes VALUES ('own')");
    assert.notEqual(counter.read(), before);
  });

  it('falls back to the pragma without a WAL index (a database not in WAL mode)', () => {
    const plainFile = path.join(directory, 'plain.sqlite');
    const plain = new DatabaseSync(plainFile);
    plain.exec('CREATE TABLE notes (text TEXT)');
    const plainCounter = new SqliteCommitCounter(plain, plainFile);
    try {
      const before = plainCounter.read();
      assert.equal(plainCounter.read(), before);
      const child = spawnSync(process.execPath, [
        '-e',
        `new (require('node:sqlite').DatabaseSync)(${JSON.stringify(plainFile)}).exec("INSERT INTO notes VALUES ('x')")`,
      ]);
      assert.equal(child.status, 0, child.stderr.toString());
      assert.notEqual(plainCounter.read(), before);
    } finally {
      plain.close();
      plainCounter.close();
    }
  });
});
