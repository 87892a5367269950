import assert from 'node:assert/strict';

/**
 * Waits until `holds` is true, asking every `everyMs`; fails naming `what` once `withinMs` have
 * passed. For what a test needs to have happened, in place of a fixed sleep that bets on the
 * machine's speed.
 */
export async function waitUntil(
  what: string,
  holds: () => boolean | Promise<boolean>,
  { withinMs = 60_000, everyMs = 10 }: { withinMs?: number; everyMs?: number } = {},
): Promise<void> {
  for (const began = performance.now(); !(await holds());) {
    assert.ok(performance.now() - began < withinMs, `waited ${withinMs / 1000} s for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
