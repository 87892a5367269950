/**
 * Runs at most `limit` tasks at once, with at most `queueLimit` more waiting their turn in order;
 * a task beyond both is refused at once instead of queued without end.
 */
export class BoundedConcurrency {
  readonly #limit: number;
  readonly #queueLimit: number;
  #running = 0;
  readonly #waiting: (() => void)[] = [];

  constructor(limit: number, queueLimit: number) {
    this.#limit = limit;
    this.#queueLimit = queueLimit;
  }

  /** Tasks waiting for a free slot. */
  get queued(): number {
    return this.#waiting.length;
  }

  /** Tasks running now. */
  get running(): number {
    return this.#running;
  }

  /** Whether a task given now would be refused (every slot and the whole queue taken). */
  get full(): boolean {
    return this.#running >= this.#limit && this.#waiting.length >= this.#queueLimit;
  }

  /** Runs `task` now or once a slot frees; undefined, without running it, when the queue is full. */
  run<T>(task: () => Promise<T>): Promise<T> | undefined {
    if (this.#running < this.#limit) {
      this.#running += 1;
      return this.#release(task);
    }
    if (this.#waiting.length >= this.#queueLimit) return undefined;
    return new Promise<T>((resolve, reject) => {
      this.#waiting.push(() => void this.#release(task).then(resolve, reject));
    });
  }

  /** Runs the task in a slot already counted, then hands the slot to the next waiting task, or frees it. */
  #release<T>(task: () => Promise<T>): Promise<T> {
    let result: Promise<T>;
    try {
      result = task();
    } catch (error) {
      result = Promise.reject(error);
    }
    return result.finally(() => {
      const next = this.#waiting.shift();
      if (next !== undefined) next();
      else this.#running -= 1;
    });
  }
}
