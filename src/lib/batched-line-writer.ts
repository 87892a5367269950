import { writeSync } from 'node:fs';
import type { Writable } from 'node:stream';

/** At exit, how long the lines held may take to write when the reader is slow: a stalled one must not keep the process from ending. */
const EXIT_WRITE_MS = 1000;
/** What a retry at exit waits on, 1 ms at a time. */
const PAUSE = new Int32Array(new SharedArrayBuffer(4));

/**
 * Log lines written to a stream (standard output) in batches: each line joins a list, and once
 * per turn of the event loop the list goes out in one write. So the lines of every request
 * answered in one turn leave together, and a line costs little more than its formatting.
 *
 * Why not pino's writer (SonicBoom, which this replaces): it concatenates each line into a
 * string, counts its UTF-8 bytes and checks its thresholds line by line, and writes through
 * libuv's thread pool, a hand-off to another thread and back for each write: about 2 µs a
 * line more, on a lookup answered from memory in about 15 µs (docs/benchmarks.md, "The log
 * line"). Standard output, when it is a pipe (a log collector, a container runtime), is a
 * non-blocking socket-like stream in Node.js: a write is tried at once on this thread, and what
 * the pipe does not take waits in the stream.
 *
 * If the stream stops taking lines (a stalled log collector), at most `maxHeldBytes` wait (in the
 * stream and here, counted in characters) and further lines are dropped, counted in `dropped`,
 * with one warning on standard error: a synchronous write would stop the whole server. A write
 * the stream fails (EPIPE, ENOSPC) is counted in `failedWrites`, with one warning per error.
 * Standard output on a file or a terminal is written synchronously by Node.js itself, as
 * `console.log` is: one write per turn, to the page cache. When the process exits, the
 * lines not yet handed over are written synchronously to the stream's descriptor, waiting at
 * most a second for a slow reader; what the stream itself still holds then (only when the reader
 * lags) is lost, as Node.js loses it: a graceful shutdown waits for it first (drained).
 */
export class BatchedLineWriter {
  readonly #out: Writable;
  readonly #maxHeldBytes: number;
  #lines: string[] = [];
  /** Characters in #lines. */
  #held = 0;
  #scheduled = false;
  #warnedDropping = false;
  readonly #warnedErrors = new Set<string>();
  /** Lines dropped because too much was held. */
  dropped = 0;
  /** Writes the stream failed (EPIPE: nobody reads any more; ENOSPC: a full disk): their lines are lost. */
  failedWrites = 0;

  constructor(out: Writable, maxHeldBytes: number) {
    this.#out = out;
    this.#maxHeldBytes = maxHeldBytes;
    // Unheard, a write error would end the process; each kind is warned of once.
    out.on('error', (error: NodeJS.ErrnoException) => {
      this.failedWrites += 1;
      const code = error.code ?? error.name;
      if (this.#warnedErrors.has(code)) return;
      this.#warnedErrors.add(code);
      process.emitWarning(`log lines could not be written to standard output (${code}): they are lost`, { code: 'SIGNROOM_LOG_WRITE_FAILED' });
    });
    process.on('exit', () => this.#flushAtExit());
  }

  /** Takes one line (its newline included); never blocks. */
  write(line: string): boolean {
    if (this.#held + line.length + this.#out.writableLength > this.#maxHeldBytes) {
      this.#drop();
      return true;
    }
    this.#lines.push(line);
    this.#held += line.length;
    if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(this.#flushTurn);
    }
    return true;
  }

  readonly #flushTurn = (): void => {
    this.#scheduled = false;
    this.flush();
  };

  /** Hands the lines held to the stream now; `done` (pino's `logger.flush`) once the stream has taken them. */
  flush(done?: (error?: Error | null) => void): void {
    if (this.#lines.length === 0 || this.#out.destroyed) {
      if (done !== undefined) setImmediate(done);
      return;
    }
    this.#out.write(this.#take(), done);
  }

  /** The lines held, as one string, no longer held. */
  #take(): string {
    const text = this.#lines.length === 1 ? this.#lines[0]! : this.#lines.join('');
    this.#lines = [];
    this.#held = 0;
    return text;
  }

  /**
   * Resolves once the stream has written everything it was given, or after `withinMs` (a reader
   * that lags): called before a graceful exit, whose synchronous write covers only the lines not
   * yet handed over.
   */
  async drained(withinMs: number): Promise<void> {
    this.flush();
    if (this.#out.writableLength === 0) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, withinMs);
      timer.unref();
      const out = this.#out;
      function done() {
        clearTimeout(timer);
        out.off('drain', done);
        resolve();
      }
      out.on('drain', done);
    });
  }

  #flushAtExit(): void {
    const fd = (this.#out as Writable & { fd?: unknown }).fd;
    // Written beside the stream only when it holds nothing, so no line overtakes another.
    if (typeof fd !== 'number' || this.#out.writableLength > 0) {
      this.flush();
      return;
    }
    if (this.#lines.length === 0) return;
    let chunk = Buffer.from(this.#take(), 'utf8');
    const giveUpAt = performance.now() + EXIT_WRITE_MS;
    while (chunk.length > 0 && performance.now() < giveUpAt) {
      try {
        chunk = chunk.subarray(writeSync(fd, chunk));
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') return;
        Atomics.wait(PAUSE, 0, 0, 1);
      }
    }
  }

  #drop(): void {
    this.dropped += 1;
    if (this.#warnedDropping) return;
    this.#warnedDropping = true;
    process.emitWarning(`standard output is not taking log lines: ${this.#maxHeldBytes} bytes held, further lines are dropped`, {
      code: 'SIGNROOM_LOG_DROPPED',
    });
  }
}
