import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ByteBudget } from '../../src/lib/byte-budget.ts';

describe('ByteBudget', () => {
  it('grants reservations while they fit, refuses beyond, and takes each release once', () => {
    const budget = new ByteBudget(100);
    const first = budget.tryReserve(60);
    assert.ok(first !== undefined);
    assert.equal(budget.tryReserve(50), undefined, 'over the capacity');
    const second = budget.tryReserve(40);
    assert.ok(second !== undefined);
    assert.equal(budget.reserved, 100);
    first();
    first();
    assert.equal(budget.reserved, 40, 'a second release of the same reservation changes nothing');
    assert.ok(budget.tryReserve(60) !== undefined);
  });
});
