/** Messages between the render pool (parent) and a render worker (child process). */

export interface RenderJob {
  id: number;
  mediaType: 'application/pdf' | 'image/png' | 'image/jpeg';
  /** A file holding the document: the worker reads it, so the bytes are not copied over IPC. */
  file: string;
  width: number;
}

export type WorkerMessage =
  /** Sent once, when the worker has loaded and warmed up its renderers. */
  | { stage: 'ready' }
  | { id: number; stage: 'opened'; pageCount: number }
  | { id: number; stage: 'rendered'; png: Uint8Array }
  | { id: number; stage: 'failed'; reason: RenderFailure; detail: string };

/**
 * `encrypted`: needs a password to open. `unreadable`: cannot be opened at all.
 * `render-failed`: opened, but page 1 could not be drawn.
 */
export type RenderFailure = 'encrypted' | 'unreadable' | 'render-failed';
