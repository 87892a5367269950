import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { BatchedLineWriter } from '../../src/lib/batched-line-writer.ts';

/** A stream that records each write it is given, and (unless `drains`) never finishes one. */
function recorder(drains: boolean): Writable & { writes: string[] } {
  const writes: string[] = [];
  const stream = new Writable({
    highWaterMark: 1,
    write(chunk: Buffer, _encoding, done) {
      writes.push(chunk.toString('utf8'));
      if (drains) done();
    },
  });
  return Object.assign(stream, { writes });
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

/** The codes of the process warnings emitted while `work` runs. */
async function warningsDuring(work: () => Promise<void>): Promise<string[]> {
  const warnings: string[] = [];
  const onWarning = (warning: Error & { code?: string }) => warnings.push(warning.code ?? '');
  process.on('warning', onWarning);
  try {
    await work();
    // Warnings are emitted on the next tick.
    await turn();
  } finally {
    process.off('warning', onWarning);
  }
  return warnings;
}

describe('BatchedLineWriter', () => {
  it('hands the lines of one turn of the event loop to the stream in one write, in order', async () => {
    const out = recorder(true);
    const writer = new BatchedLineWriter(out, 1024);
    writer.write('a\n');
    writer.write('b\n');
    assert.deepEqual(out.writes, [], 'nothing is written before the turn ends');
    await turn();
    writer.write('c\n');
    await turn();
    assert.deepEqual(out.writes, ['a\nb\n', 'c\n']);
  });

  it('drops lines, and counts them, once the stream holds too much', async () => {
    const out = recorder(false);
    const writer = new BatchedLineWriter(out, 10);
    const warnings = await warningsDuring(async () => {
      writer.write('12345\n');
      await turn();
      writer.write('1234\n');
      writer.write('xy\n');
      writer.write('z\n');
      await turn();
    });
    assert.deepEqual(out.writes, ['12345\n'], 'the stream took one write and never finished it');
    assert.equal(out.writableLength, 6 + 'xy\n'.length, 'the line that fitted waits in the stream');
    assert.equal(writer.dropped, 2, 'the lines that would have held more than 10 bytes');
    assert.deepEqual(warnings, ['SIGNROOM_LOG_DROPPED'], 'one warning');
  });

  it('counts a write the stream fails, and warns once per error', async () => {
    const out = new Writable({
      write(_chunk: Buffer, _encoding, done) {
        done(Object.assign(new Error('write EPIPE'), { code: 'EPIPE' }));
      },
    });
    const writer = new BatchedLineWriter(out, 1024);
    const warnings = await warningsDuring(async () => {
      writer.write('lost\n');
      await turn();
      await turn();
    });
    assert.equal(writer.failedWrites, 1);
    assert.deepEqual(warnings, ['SIGNROOM_LOG_WRITE_FAILED']);
  });

  it('waits for the stream to write what it holds before a graceful exit, at most as long as asked', async () => {
    const slow = recorder(false);
    const writer = new BatchedLineWriter(slow, 1024);
    writer.write('held\n');
    const started = performance.now();
    await writer.drained(50);
    assert.ok(performance.now() - started >= 45, 'a stream that never finishes: the time given');
    assert.deepEqual(slow.writes, ['held\n'], 'the lines held were handed over first');
    const fast = recorder(true);
    const drainedWriter = new BatchedLineWriter(fast, 1024);
    drainedWriter.write('written\n');
    await drainedWriter.drained(10_000);
    assert.deepEqual(fast.writes, ['written\n']);
  });

  it('writes what it holds when the process exits', () => {
    const module = fileURLToPath(new URL('../../src/lib/batched-line-writer.ts', import.meta.url));
    const script = `
      const { BatchedLineWriter } = await import(${JSON.stringify(module)});
      const writer = new BatchedLineWriter(process.stdout, 1 << 24);
      for (let i = 0; i < 200000; i++) writer.write('line ' + i + '\\n');
      process.exit(3);`;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', maxBuffer: 16 << 20 });
    assert.equal(child.status, 3, child.stderr);
    const lines = child.stdout.split('\n').filter((line) => line !== '');
    assert.equal(lines.length, 200000, 'more than a pipe holds');
    assert.equal(lines.at(-1), 'line 199999');
  });
});
