/** Messages between the render pool (parent) and a render worker (child process). */

export interface RenderJob {
  id: number;
  mediaType: 'application/pdf' | 'image/png' | 'image/jpeg';
  bytes: Uint8Array;
  width: number;
}

export type WorkerMessage =
  | { id: number; stage: 'opened'; pageCount: number }
  | { id: number; stage: 'rendered'; png: Uint8Array }
  | { id: number; stage: 'failed'; reason: RenderFailure; detail: string };

/**
 * `encrypted`: needs a password to open. `unreadable`: cannot be opened at all.
 * `render-failed`: opened, but page 1 could not be drawn.
 */
export type RenderFailure = 'encrypted' | 'unreadable' | 'render-failed';
