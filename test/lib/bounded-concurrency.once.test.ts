import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BoundedConcurrency } from '../../src/lib/bounded-concurrency.ts';

/** A task that ends when told to, recording that it started. */
function gated(started: string[], name: string) {
  let finish!: () => void;
  const done = new Promise<string>((resolve) => (finish = () => resolve(name)));
  return { task: () => (started.push(name), done), finish: () => finish() };
}

describe('BoundedConcurrency', () => {
  it('runs up to the limit at once, queues up to its length in order, and refuses beyond', async () => {
    const gate = new BoundedConcurrency(2, 1);
    const started: string[] = [];
    const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((name) => gated(started, name));
    const runA = gate.run(a!.task);
    const runB = gate.run(b!.task);
    const runC = gate.run(c!.task);
    assert.equal(gate.run(d!.task), undefined, 'the queue is full');
    assert.deepEqual(started, ['a', 'b']);
    assert.equal(gate.queued, 1);
    a!.finish();
    assert.equal(await runA, 'a');
    assert.deepEqual(started, ['a', 'b', 'c'], 'the waiting task takes the freed slot');
    b!.finish();
    c!.finish();
    assert.deepEqual(await Promise.all([runB, runC]), ['b', 'c']);
    assert.equal(gate.running, 0);
    assert.equal(gate.queued, 0);
  });

  it('frees the slot of a task that fails, and passes its error on', async () => {
    const gate = new BoundedConcurrency(1, 0);
    await assert.rejects(gate.run(() => Promise.reject(new Error('no'))) as Promise<unknown>, /no/);
    assert.equal(await gate.run(async () => 'next'), 'next');
    assert.equal(gate.running, 0);
  });
});
