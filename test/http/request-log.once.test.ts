import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import pino from 'pino';
import type { FastifyBaseLogger } from 'fastify';
import { completedLineWriter, plainPinoLine } from '../../src/http/request-log.ts';

/** A pino logger into memory, with `options`; its lines. */
function logger(options: pino.LoggerOptions): { log: FastifyBaseLogger; lines: string[] } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(
        ...chunk
          .toString('utf8')
          .split('\n')
          .filter((line) => line !== ''),
      );
      done();
    },
  });
  return { log: pino(options, stream), lines };
}

describe('the replay\'s "request completed" line', () => {
  it('is formatted by hand for a plain logger, as pino would write it', async () => {
    const { log, lines } = logger({ level: 'info' });
    assert.ok(plainPinoLine(log) !== undefined);
    completedLineWriter(log)('id-1', 'GET', '/x?q="ä"\\', 200, 3.14159);
    log.info({ reqId: 'id-1', method: 'GET', url: '/x?q="ä"\\', statusCode: 200, responseTime: 3.1 }, 'request completed');
    await new Promise((resolve) => setImmediate(resolve));
    const [ours, theirs] = lines.map((line) => ({ ...(JSON.parse(line) as Record<string, unknown>), time: 0 }));
    assert.deepEqual(ours, theirs);
    assert.deepEqual(Object.keys(ours!), Object.keys(theirs!));
  });

  it('is left to pino when the logger would write it otherwise', () => {
    const changed: pino.LoggerOptions[] = [
      { mixin: () => ({ extra: 1 }) },
      { formatters: { level: (label) => ({ level: label }) } },
      { messageKey: 'message' },
      { timestamp: pino.stdTimeFunctions.isoTime },
      { hooks: { logMethod: (args, method) => method.apply(undefined as never, args) } },
      { base: { service: 'x' }, crlf: true },
    ];
    for (const options of changed) assert.equal(plainPinoLine(logger(options).log), undefined, JSON.stringify(Object.keys(options)));
  });

  it("is not written below the logger's level", async () => {
    const { log, lines } = logger({ level: 'warn' });
    completedLineWriter(log)('id-2', 'GET', '/', 200, 1);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(lines, []);
  });
});
