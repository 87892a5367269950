import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LruCache } from '../../src/lib/lru-cache.ts';

describe('LruCache', () => {
  it('forgets the least recently used entry beyond its capacity', () => {
    const cache = new LruCache<string, number>(2);
    cache.set('a', 1);
    cache.set('b', 2);
    assert.equal(cache.get('a'), 1);
    cache.set('c', 3);
    assert.deepEqual([cache.get('a'), cache.get('b'), cache.get('c')], [1, undefined, 3]);
    assert.equal(cache.size, 2);
  });

  it('bounds the total weight, evicting as many old entries as a heavy one needs', () => {
    const cache = new LruCache<string, string>(10, (value) => value.length);
    cache.set('a', 'xxxx');
    cache.set('b', 'xxxx');
    cache.set('c', 'xx');
    cache.set('d', 'xxxxxxx');
    assert.deepEqual([cache.get('a'), cache.get('b'), cache.get('c'), cache.get('d')], [undefined, undefined, 'xx', 'xxxxxxx']);
    // Replacing a value re-weighs it; one heavier than the whole cache is not kept.
    cache.set('c', 'x');
    cache.set('e', 'xx');
    assert.equal(cache.size, 3);
    cache.set('f', 'x'.repeat(11));
    assert.equal(cache.get('f'), undefined);
    assert.equal(cache.size, 3);
  });
});
