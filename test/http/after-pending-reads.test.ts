import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { afterPendingReads } from '../../src/http/after-pending-reads.ts';

describe('afterPendingReads', () => {
  it('gives the requests read in one phase one wait, and a request read after it a wait of its own', async () => {
    const first = afterPendingReads();
    assert.equal(afterPendingReads(), first, 'one promise for everything read before the check phase');
    let resolved = false;
    void first.then(() => (resolved = true));
    await Promise.resolve();
    assert.equal(resolved, false, 'not before the event loop moves on');
    await first;
    const later = afterPendingReads();
    assert.notEqual(later, first);
    await later;
  });
});
