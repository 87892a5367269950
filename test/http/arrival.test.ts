import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { describe, it } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { arrivalOf, markArrival } from '../../src/http/arrival.ts';

describe('arrival of a request', () => {
  const request = () => ({}) as IncomingMessage;

  it('is shared by the requests read in one turn of the event loop, and moves on in the next', async () => {
    const first = request();
    const second = request();
    markArrival(first);
    await Promise.resolve();
    markArrival(second);
    assert.equal(arrivalOf(second), arrivalOf(first));
    await nextTurn();
    const later = request();
    markArrival(later);
    assert.ok(arrivalOf(later) > arrivalOf(first));
  });

  it('is now for a request not read from a socket', () => {
    const before = performance.now();
    assert.ok(arrivalOf(request()) >= before);
  });
});
