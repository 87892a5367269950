import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ChangeScopedCache } from '../../src/services/change-scoped-cache.ts';

describe('ChangeScopedCache', () => {
  it('keeps values while the database token stays, and empties when it moves', () => {
    let databaseToken = 7;
    const cache = new ChangeScopedCache<string, number>(() => databaseToken, 10);
    cache.set('a', 1, cache.token());
    assert.equal(cache.get('a'), 1);
    databaseToken = 8;
    assert.equal(cache.get('a'), undefined);
  });

  it('refuses a value read before the database moved or before this process forgot something', () => {
    let databaseToken = 1;
    const cache = new ChangeScopedCache<string, number>(() => databaseToken, 10);
    let readAt = cache.token();
    databaseToken = 2; // another connection committed while the read ran
    cache.set('a', 1, readAt);
    assert.equal(cache.get('a'), undefined);

    readAt = cache.token();
    cache.delete('b'); // this process wrote meanwhile
    cache.set('a', 1, readAt);
    assert.equal(cache.get('a'), undefined);

    readAt = cache.token();
    cache.clear();
    cache.set('a', 1, readAt);
    assert.equal(cache.get('a'), undefined);

    readAt = cache.token();
    cache.set('a', 1, readAt);
    assert.equal(cache.get('a'), 1);
  });

  it('holds nothing when the database cannot tell whether it changed', () => {
    const cache = new ChangeScopedCache<string, number>(() => undefined, 10);
    cache.set('a', 1, cache.token());
    assert.equal(cache.get('a'), undefined);
  });
});
