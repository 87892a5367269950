import { fork, type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { setPriority } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { RenderBudget } from '../config.ts';
import type { DocumentType } from '../domain/payload.ts';
import type { RenderJob, WorkerMessage } from './render-protocol.ts';

/** What rendering page 1 of a document gave. */
export type RenderOutcome =
  | { kind: 'thumbnail'; png: Buffer; pageCount: number }
  /** Opened, but page 1 could not be drawn within the budget: store it with a placeholder. */
  | { kind: 'placeholder'; pageCount: number; detail: string }
  | { kind: 'encrypted'; detail: string }
  | { kind: 'unreadable'; detail: string };

/** Why a render's process was killed before it answered. */
export type KillReason = 'deadline' | 'time' | 'memory' | 'crashed';

/** What the pool tells its owner as it happens (logged by the server). */
export type RenderEvent = { event: 'render.killed'; reason: KillReason; detail: string; pageOpened: boolean };

const WORKER = fileURLToPath(new URL('./render-worker.ts', import.meta.url));
const MEMORY_POLL_MS = 20;
/** Linux's clock ticks per second in /proc/<pid>/stat (USER_HZ: 100 on every current architecture). */
const CLOCK_TICKS_PER_SECOND = 100;
/**
 * A render running longer than this is slow (typical pages take a small part of it):
 * it keeps its process, and the pool starts another in its place, so one
 * user's slow documents do not hold up everyone else's uploads.
 */
const SLOW_RENDER_MS = 1000;
/** Lowest CPU priority: renders use idle CPU, the API keeps its share. */
const WORKER_NICENESS = 19;

interface Pending {
  job: RenderJob;
  /** Who uploads it: one uploader's renders may not take every process. */
  owner: string;
  resolve(outcome: RenderOutcome): void;
}

interface Running extends Pending {
  pageCount: number | undefined;
  /** The worker's CPU time (ms) when the render began, once read. */
  cpuAtStart: number | undefined;
  timer: NodeJS.Timeout;
  poll: NodeJS.Timeout;
  slowTimer: NodeJS.Timeout;
  /** Past SLOW_RENDER_MS: its worker no longer counts as capacity for other renders. */
  slow: boolean;
}

class Worker {
  readonly child: ChildProcess;
  running: Running | undefined;
  /** Set once the worker is being killed: it takes no more jobs. */
  retired = false;
  /** Set while its memory is checked after a job: it takes no job until then. */
  checking = false;
  /** Set once it has loaded and warmed up its renderers: only then does it take jobs, whose budgets start when they are sent. */
  warm = false;
  /** Its resident memory when last read while it rendered, in bytes. */
  residentBytes = 0;
  /** Its resident memory once warm, before any render: what a render adds is counted above it. */
  baselineBytes = 0;
  /** Set once it was killed over a render (budget, crash, recycling): another starts in its place when it has exited. */
  replace = false;
  /** Running while it is warm and has no job: when it fires, the process stops. */
  idleTimer: NodeJS.Timeout | undefined;

  constructor(onMessage: (worker: Worker, message: WorkerMessage) => void, onExit: (worker: Worker) => void) {
    this.child = fork(WORKER, [], {
      execArgv: ['--max-old-space-size=512', '--disable-warning=ExperimentalWarning'],
      serialization: 'advanced',
      stdio: ['ignore', 'ignore', 'ignore', 'ipc'],
    });
    if (this.child.pid !== undefined) {
      try {
        setPriority(this.child.pid, WORKER_NICENESS);
      } catch {
        // Not permitted here: renders then compete at normal priority.
      }
    }
    this.child.on('message', (message: WorkerMessage) => onMessage(this, message));
    this.child.on('exit', () => onExit(this));
    // A write to a worker that just died fails with EPIPE; its exit handler deals with the job.
    this.child.on('error', () => undefined);
  }
}

/**
 * A pool of render worker processes. Each render runs under a limit of CPU
 * time and of resident memory (both polled from /proc, with a wall-clock
 * guard against hangs); a worker that exceeds either, or dies, is killed and
 * replaced, and the render ends as a placeholder when the document had
 * opened, or as unreadable when it never did.
 *
 * Processes start when renders wait for one, up to `workers` (none run before
 * the first upload), and each stops once it has had no job for `idleMs`, so a
 * server at rest holds no render process. A render past SLOW_RENDER_MS no longer
 * counts: while other renders wait, another process starts in its place (up to
 * `maxWorkers` in all), and once none wait, idle processes beyond `workers`
 * stop at once. So a slow or hostile document delays its own upload, not the
 * others'; only when `maxWorkers` slow renders run at once do new uploads wait.
 * A job goes only to a process that has warmed up, so starting one is never
 * charged to a render's budget (the upload that waits for it pays it in time:
 * docs/decisions.md, "Render processes start when needed").
 */
export class RenderPool {
  readonly #budget: RenderBudget;
  readonly #workers = new Set<Worker>();
  readonly #queue: Pending[] = [];
  #nextId = 1;
  #closed = false;
  readonly #onEvent: (event: RenderEvent) => void;
  /** Renders ended, by outcome, since the start (for /metrics). */
  readonly outcomes: Record<RenderOutcome['kind'], number> = { thumbnail: 0, placeholder: 0, encrypted: 0, unreadable: 0 };
  /** Render processes killed before they answered, by reason, since the start (for /metrics). */
  readonly killed: Record<KillReason, number> = { deadline: 0, time: 0, memory: 0, crashed: 0 };
  /** Render processes started since the start (for /metrics): each start is a warm-up some upload may wait for. */
  started = 0;

  constructor(budget: RenderBudget, options: { onEvent?: (event: RenderEvent) => void } = {}) {
    this.#budget = budget;
    this.#onEvent = options.onEvent ?? (() => undefined);
  }

  /** Whether the pool takes renders: it starts processes when they are needed, so none running is ready. */
  get ready(): boolean {
    return !this.#closed;
  }

  /** Renders waiting for a process (for /metrics): for one to warm up, or behind others' renders. */
  get waiting(): number {
    return this.#queue.length;
  }

  /**
   * Render processes now, by state (for /metrics): `starting` (warming up), `idle`, `busy` (rendering,
   * or its memory checked after a render), `stopping` (killed or stopped, not yet exited).
   */
  get processes(): Record<'starting' | 'idle' | 'busy' | 'stopping', number> {
    const counts = { starting: 0, idle: 0, busy: 0, stopping: 0 };
    for (const worker of this.#workers) {
      if (worker.retired) counts.stopping++;
      else if (!worker.warm) counts.starting++;
      else if (worker.running !== undefined || worker.checking) counts.busy++;
      else counts.idle++;
    }
    return counts;
  }

  /** Renders page 1 of the document in `file` at the given width, for `owner` (who uploads it). */
  render(mediaType: DocumentType, file: string, width: number, owner = ''): Promise<RenderOutcome> {
    if (this.#closed) return Promise.reject(new Error('render pool is closed'));
    return new Promise((resolve) => {
      this.#queue.push({ job: { id: this.#nextId++, mediaType, file, width }, owner, resolve });
      this.#dispatch();
    });
  }

  /**
   * The waiting render to start next, taken off the queue: of the uploaders with fewer than
   * `perOwner` renders running, the one with fewest, and its oldest render (so an uploader who
   * has none running goes before one who has several).
   */
  #next(): Pending | undefined {
    const running = new Map<string, number>();
    for (const worker of this.#workers) {
      const owner = worker.running?.owner;
      if (owner !== undefined) running.set(owner, (running.get(owner) ?? 0) + 1);
    }
    let chosen = -1;
    let fewest = this.#budget.perOwner;
    this.#queue.forEach((pending, index) => {
      const count = running.get(pending.owner) ?? 0;
      if (count < fewest) {
        chosen = index;
        fewest = count;
      }
    });
    return chosen === -1 ? undefined : this.#queue.splice(chosen, 1)[0];
  }

  /** Stops every process, those still warming up included, and ends the renders waiting; resolves once all have exited. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const pending of this.#queue.splice(0)) pending.resolve({ kind: 'unreadable', detail: 'the server is shutting down' });
    const exits = [...this.#workers].map(
      (worker) =>
        new Promise<void>((resolve) =>
          worker.child.exitCode !== null || worker.child.signalCode !== null ? resolve() : worker.child.once('exit', () => resolve()),
        ),
    );
    for (const worker of this.#workers) {
      clearTimeout(worker.idleTimer);
      worker.child.kill('SIGKILL');
    }
    await Promise.all(exits);
  }

  #spawn(): void {
    const worker = new Worker(
      (w, message) => this.#onMessage(w, message),
      (w) => this.#onExit(w),
    );
    this.#workers.add(worker);
    this.started += 1;
  }

  /**
   * Retires a worker: it takes no more jobs and is killed (SIGKILL, for one over its budget or
   * recycled), or asked to stop (SIGTERM, for one idle: it has nothing to finish, and without a
   * handler of its own it ends at once). It leaves the pool when it has exited.
   */
  #retire(worker: Worker, signal: 'SIGKILL' | 'SIGTERM'): void {
    worker.retired = true;
    clearTimeout(worker.idleTimer);
    worker.idleTimer = undefined;
    worker.child.kill(signal);
  }

  /**
   * The worker has had no job for `idleMs`: it stops, unless it got one meanwhile or renders wait
   * (for their uploaders' other renders to end); #resize times it again once none wait.
   */
  #onIdle(worker: Worker): void {
    worker.idleTimer = undefined;
    if (this.#closed || worker.retired || worker.running !== undefined || worker.checking || this.#queue.length > 0) return;
    this.#retire(worker, 'SIGTERM');
  }

  #dispatch(): void {
    for (const worker of this.#workers) {
      if (this.#queue.length === 0) break;
      if (!worker.warm || worker.running !== undefined || worker.retired || worker.checking || !worker.child.connected) continue;
      const pending = this.#next();
      if (pending === undefined) break;
      clearTimeout(worker.idleTimer);
      worker.idleTimer = undefined;
      const running: Running = {
        ...pending,
        pageCount: undefined,
        cpuAtStart: undefined,
        timer: setTimeout(() => this.#abort(worker, `rendering took longer than ${this.#budget.deadlineMs} ms`, 'deadline'), this.#budget.deadlineMs),
        poll: setInterval(() => void this.#checkBudget(worker), MEMORY_POLL_MS),
        slowTimer: setTimeout(() => this.#onSlow(worker), SLOW_RENDER_MS),
        slow: false,
      };
      worker.running = running;
      worker.residentBytes = 0;
      void cpuTime(worker).then((ms) => {
        if (worker.running === running) running.cpuAtStart = ms;
      });
      try {
        worker.child.send(pending.job);
      } catch {
        this.#abort(worker, 'the renderer stopped unexpectedly', 'crashed');
      }
    }
    this.#resize();
  }

  /**
   * Starts processes for renders that could run now but have none free to go to: while fewer than
   * `workers` processes are free of slow renders, or an uploader with nothing running waits behind
   * others' renders (never beyond `maxWorkers` in all). When none wait, stops idle processes beyond
   * `workers` at once, and times the others' idleness.
   */
  #resize(): void {
    if (this.#closed) return;
    while (
      this.#workers.size < this.#budget.maxWorkers &&
      this.#runnable() > this.#free() &&
      (this.#capacity() < this.#budget.workers || this.#uploaderWaitsAlone())
    ) {
      this.#spawn();
    }
    if (this.#queue.length > 0) return;
    for (const worker of this.#workers) {
      if (!worker.warm || worker.running !== undefined || worker.retired || worker.checking) continue;
      if (this.#capacity() > this.#budget.workers) this.#retire(worker, 'SIGKILL');
      // Unref'd: an idle process's timer must not keep a command that is done (bin/signroom upload) alive.
      else worker.idleTimer ??= setTimeout(() => this.#onIdle(worker), this.#budget.idleMs).unref();
    }
  }

  /** Waiting renders that could start now: each uploader's, up to its free share of `perOwner`. */
  #runnable(): number {
    const running = new Map<string, number>();
    for (const worker of this.#workers) {
      const owner = worker.running?.owner;
      if (owner !== undefined) running.set(owner, (running.get(owner) ?? 0) + 1);
    }
    const waiting = new Map<string, number>();
    for (const pending of this.#queue) waiting.set(pending.owner, (waiting.get(pending.owner) ?? 0) + 1);
    let count = 0;
    for (const [owner, queued] of waiting) count += Math.max(0, Math.min(queued, this.#budget.perOwner - (running.get(owner) ?? 0)));
    return count;
  }

  /** Processes that will take a waiting render without another starting: live, with no render, warm or warming up. */
  #free(): number {
    let count = 0;
    for (const worker of this.#workers) if (!worker.retired && worker.running === undefined) count++;
    return count;
  }

  #onMessage(worker: Worker, message: WorkerMessage): void {
    if (message.stage === 'ready') {
      void residentMemory(worker).then((bytes) => {
        worker.baselineBytes = bytes ?? 0;
        worker.warm = true;
        this.#dispatch();
      });
      return;
    }
    const running = worker.running;
    if (running === undefined || running.job.id !== message.id) return;
    if (message.stage === 'opened') {
      running.pageCount = message.pageCount;
      return;
    }
    if (message.stage === 'rendered') {
      this.#finish(worker, { kind: 'thumbnail', png: Buffer.from(message.png), pageCount: running.pageCount ?? 1 });
    } else if (message.reason === 'encrypted') {
      this.#finish(worker, { kind: 'encrypted', detail: message.detail });
    } else if (running.pageCount === undefined) {
      // Never opened. Once opened, a later failure (even a fallback renderer's) is only a missing preview.
      this.#finish(worker, { kind: 'unreadable', detail: message.detail });
    } else {
      this.#finish(worker, { kind: 'placeholder', pageCount: running.pageCount, detail: message.detail });
    }
  }

  #finish(worker: Worker, outcome: RenderOutcome): void {
    const running = worker.running;
    if (running === undefined) return;
    clearTimeout(running.timer);
    clearInterval(running.poll);
    clearTimeout(running.slowTimer);
    worker.running = undefined;
    this.outcomes[outcome.kind] += 1;
    running.resolve(outcome);
    if (!worker.retired) {
      worker.checking = true;
      void this.#recycleIfLarge(worker).finally(() => {
        worker.checking = false;
        this.#dispatch();
      });
    }
    this.#dispatch();
  }

  /**
   * Whether a waiting render's uploader has no render running while every process is busy with
   * others' renders: a process starts for it at once, rather than once those turn slow.
   */
  #uploaderWaitsAlone(): boolean {
    const busy = new Set<string>();
    let idle = 0;
    for (const worker of this.#workers) {
      if (worker.retired) continue;
      if (worker.running === undefined) idle++;
      else busy.add(worker.running.owner);
    }
    return idle === 0 && this.#queue.some((pending) => !busy.has(pending.owner));
  }

  /** Processes that can take a render now or soon: live, not being replaced, not busy with a slow render. */
  #capacity(): number {
    let count = 0;
    for (const worker of this.#workers) if (!worker.retired && worker.running?.slow !== true) count++;
    return count;
  }

  /** A render turned slow: its process no longer counts, so renders waiting behind it get another. */
  #onSlow(worker: Worker): void {
    const running = worker.running;
    if (running === undefined || this.#closed) return;
    running.slow = true;
    this.#resize();
  }

  /** Ends the worker's render on a budget overrun; the exit handler replaces the worker. */
  #abort(worker: Worker, detail: string, reason: KillReason): void {
    const running = worker.running;
    if (running === undefined) return;
    worker.retired = true;
    worker.replace = true;
    this.killed[reason] += 1;
    this.#onEvent({ event: 'render.killed', reason, detail, pageOpened: running.pageCount !== undefined });
    this.#finish(
      worker,
      running.pageCount === undefined
        ? { kind: 'unreadable', detail: `the document could not be opened: ${detail}` }
        : { kind: 'placeholder', pageCount: running.pageCount, detail },
    );
    worker.child.kill('SIGKILL');
  }

  /** Stops the render once it uses more memory, or more CPU time, than its budget. */
  async #checkBudget(worker: Worker): Promise<void> {
    const running = worker.running;
    if (running === undefined) return;
    const [residentBytes, cpuMs] = await Promise.all([residentMemory(worker), cpuTime(worker)]);
    // The job may have ended, and another begun, while /proc was read.
    if (worker.running !== running) return;
    if (residentBytes !== undefined) worker.residentBytes = residentBytes;
    if (residentBytes !== undefined && residentBytes > this.#budget.memoryBytes) {
      this.#abort(worker, `rendering needed more than ${Math.round(this.#budget.memoryBytes / 1048576)} MiB`, 'memory');
    } else if (this.#overTotalMemory()) {
      this.#abort(this.#largestRunning(), `renders at once needed more than ${Math.round(this.#budget.totalMemoryBytes / 1048576)} MiB together`, 'memory');
    } else if (cpuMs !== undefined && running.cpuAtStart !== undefined && cpuMs - running.cpuAtStart > this.#budget.timeoutMs) {
      this.#abort(worker, `rendering took more than ${this.#budget.timeoutMs} ms of CPU time`, 'time');
    }
  }

  /** Whether the renders running now hold more memory together, above their processes' own, than the pool's budget. */
  #overTotalMemory(): boolean {
    let total = 0;
    for (const worker of this.#workers) if (worker.running !== undefined) total += Math.max(0, worker.residentBytes - worker.baselineBytes);
    return total > this.#budget.totalMemoryBytes;
  }

  /** The running render holding the most memory: the one stopped when renders together exceed their budget. */
  #largestRunning(): Worker {
    let largest: Worker | undefined;
    for (const worker of this.#workers) {
      if (
        worker.running !== undefined &&
        (largest === undefined || worker.residentBytes - worker.baselineBytes > largest.residentBytes - largest.baselineBytes)
      ) {
        largest = worker;
      }
    }
    return largest!;
  }

  /** Replaces a worker that stays large after a job, so the next job gets the whole budget. */
  async #recycleIfLarge(worker: Worker): Promise<void> {
    const residentBytes = await residentMemory(worker);
    if (residentBytes !== undefined && residentBytes > this.#budget.memoryBytes / 2 && !worker.retired) {
      worker.replace = true;
      this.#retire(worker, 'SIGKILL');
    }
  }

  #onExit(worker: Worker): void {
    this.#workers.delete(worker);
    clearTimeout(worker.idleTimer);
    if (worker.running !== undefined) this.#abort(worker, 'the renderer stopped unexpectedly', 'crashed');
    if (this.#closed) return;
    // Killed over a render, so uploads are coming: its replacement warms up now rather than in the next
    // upload's time (it stops like any other once idle).
    if (worker.replace && this.#capacity() < this.#budget.workers && this.#workers.size < this.#budget.maxWorkers) this.#spawn();
    this.#dispatch();
  }
}

/** The CPU time (user and system) a process has used, in ms, from /proc, or undefined when it is gone. */
async function cpuTime(worker: Worker): Promise<number | undefined> {
  const pid = worker.child.pid;
  if (pid === undefined) return undefined;
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

/** A process's resident memory in bytes, from /proc, or undefined when it is gone. */
async function residentMemory(worker: Worker): Promise<number | undefined> {
  const pid = worker.child.pid;
  if (pid === undefined) return undefined;
  try {
    const statm = await readFile(`/proc/${pid}/statm`, 'utf8');
    return Number(statm.split(' ')[1]) * 4096;
  } catch {
    return undefined;
  }
}
