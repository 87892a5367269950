/** A number of bytes shared by holders who reserve before they take and release when done; a reservation beyond it is refused, not queued. */
export class ByteBudget {
  readonly #capacity: number;
  #reserved = 0;

  constructor(capacity: number) {
    this.#capacity = capacity;
  }

  /** Bytes reserved now. */
  get reserved(): number {
    return this.#reserved;
  }

  /** Reserves `bytes`, or returns undefined when they do not fit; the function returned releases them (once, however often called). */
  tryReserve(bytes: number): (() => void) | undefined {
    if (this.#reserved + bytes > this.#capacity) return undefined;
    this.#reserved += bytes;
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      this.#reserved -= bytes;
    };
  }
}
