import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';

/**
 * Reads a JSON file without holding it whole: the arrays a caller names (the
 * users and rooms of an import file) stay in the file and are read again, a
 * run of elements at a time, each time they are iterated; everything else is
 * parsed as usual. Elements are located by a byte scan and parsed with
 * JSON.parse, so the values are exactly those JSON.parse would give.
 */

/** The file is not valid JSON; `offset` is the byte where reading stopped. */
export class JsonSyntaxError extends Error {
  readonly offset: number;
  constructor(message: string, offset: number) {
    super(`${message} at byte ${offset}`);
    this.name = 'JsonSyntaxError';
    this.offset = offset;
  }
}

/** The file was modified between two reads of it. */
export class JsonFileChanged extends Error {
  constructor(file: string) {
    super(`${file} changed while it was being read; nothing was changed`);
    this.name = 'JsonFileChanged';
  }
}

const SPACE = 0x20;
const TAB = 0x09;
const LF = 0x0a;
const CR = 0x0d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const EOF = -1;

const WINDOW_BYTES = 1 << 20;
/**
 * Bytes of a streamed array's elements parsed in one go: about a hundred users.
 * Much larger runs were slower, their objects living long enough to be moved
 * out of V8's young generation.
 */
const RUN_BYTES = 16 * 1024;
const UTF8_BOM = Buffer.from([0xef, 0xbb, 0xbf]);

function isWhitespace(byte: number): boolean {
  return byte === SPACE || byte === LF || byte === CR || byte === TAB;
}

function shown(byte: number): string {
  return byte === EOF ? 'the end of the file' : JSON.stringify(String.fromCharCode(byte));
}

/** A forward reader over a window of the file, starting at a byte offset. */
class Cursor {
  readonly #fd: number;
  #buffer: Buffer;
  /** File offset of buffer[0]. */
  #base: number;
  /** Valid bytes in the buffer. */
  #length = 0;
  /** Read position in the buffer. */
  #at = 0;
  /** Start of the value being scanned: bytes from here on stay in the buffer. */
  #mark = 0;
  /** While a run of array elements is read (see elements): where it starts, kept in the buffer too; else -1. */
  #runStart = -1;
  #eof = false;

  constructor(fd: number, offset: number, windowBytes: number) {
    this.#fd = fd;
    this.#base = offset;
    this.#buffer = Buffer.allocUnsafe(windowBytes);
  }

  /** The file offset of the read position. */
  get offset(): number {
    return this.#base + this.#at;
  }

  /**
   * Reads more of the file, keeping the bytes from the mark on (moved to the
   * front; the buffer doubles when they fill half of it). Returns how far
   * buffer indexes moved.
   */
  #fill(): number {
    const keep = this.#runStart >= 0 ? Math.min(this.#runStart, this.#mark) : this.#mark;
    const kept = this.#length - keep;
    if (kept >= this.#buffer.length / 2) {
      const larger = Buffer.allocUnsafe(this.#buffer.length * 2);
      this.#buffer.copy(larger, 0, keep, this.#length);
      this.#buffer = larger;
    } else if (keep > 0) {
      this.#buffer.copy(this.#buffer, 0, keep, this.#length);
    }
    this.#base += keep;
    this.#length = kept;
    this.#at -= keep;
    this.#mark -= keep;
    if (this.#runStart >= 0) this.#runStart -= keep;
    const read = readSync(this.#fd, this.#buffer, kept, this.#buffer.length - kept, this.#base + kept);
    if (read === 0) this.#eof = true;
    this.#length += read;
    return keep;
  }

  /** Makes buffer[index] readable; returns the index as moved, or -1 at the end of the file. */
  #reach(index: number): number {
    while (index >= this.#length) {
      if (this.#eof) return -1;
      index -= this.#fill();
    }
    return index;
  }

  /** The next non-blank byte (not consumed), or EOF. */
  peek(): number {
    this.#mark = this.#at;
    for (;;) {
      const at = this.#reach(this.#at);
      if (at < 0) return EOF;
      const byte = this.#buffer[at]!;
      if (!isWhitespace(byte)) return byte;
      this.#at = at + 1;
      this.#mark = this.#at;
    }
  }

  /** Consumes the next non-blank byte, which must be one of `expected`. */
  take(...expected: number[]): number {
    const byte = this.peek();
    if (!expected.includes(byte)) {
      throw new JsonSyntaxError(`expected ${expected.map(shown).join(' or ')}, got ${shown(byte)}`, this.offset);
    }
    this.#at += 1;
    return byte;
  }

  /**
   * Steps through an object or array from its `open` byte to its `close`:
   * yields once per entry, which the caller reads (`key: value` or a value)
   * before asking for the next; checks the commas between them.
   */
  *entries(open: number, close: number): Generator<void> {
    this.take(open);
    if (this.peek() === close) {
      this.take(close);
      return;
    }
    do yield;
    while (this.take(COMMA, close) === COMMA);
  }

  /** Parses the next value whole. */
  value(): unknown {
    this.#skipValue();
    return this.#parse(this.#mark, this.#at);
  }

  /**
   * The elements of the array at the read position, parsed a run at a time:
   * whole elements up to `runBytes` (or one larger element) go to one
   * JSON.parse, which gives the values parsing each would, with a fraction
   * of the calls. A run that cannot be read is parsed again element by
   * element, so the error is the one, at the byte, that reading one at a
   * time would have stopped at.
   */
  *elements(runBytes: number): Generator<unknown> {
    this.take(OPEN_BRACKET);
    if (this.peek() === CLOSE_BRACKET) {
      this.take(CLOSE_BRACKET);
      return;
    }
    for (;;) {
      const { separator, run } = this.#readRun(runBytes);
      yield* run;
      if (separator === CLOSE_BRACKET) return;
    }
  }

  /** The next run of elements, and the separator after it (a comma, or the array's end). */
  #readRun(runBytes: number): { separator: number; run: unknown[] } {
    this.peek();
    this.#runStart = this.#at;
    // Where each element starts and ends, from the run's start (wherever the buffer moves the run).
    const bounds: number[] = [];
    let separator: number;
    try {
      do {
        this.peek();
        bounds.push(this.#at - this.#runStart);
        this.#skipValue();
        bounds.push(this.#at - this.#runStart);
        separator = this.take(COMMA, CLOSE_BRACKET);
      } while (separator === COMMA && this.#at - this.#runStart < runBytes);
    } catch (error) {
      // An element before the fault that JSON.parse refuses would have stopped the reading first.
      this.#parseEach(bounds.length % 2 === 0 ? bounds : bounds.slice(0, -1));
      throw error;
    }
    // From the run's first element to the separator after its last: `a, b, c`.
    const text = this.#buffer.toString('utf8', this.#runStart, this.#at - 1);
    try {
      return { separator, run: JSON.parse(`[${text}]`) as unknown[] };
    } catch (error) {
      this.#parseEach(bounds);
      // Not reached: the elements parsed alone, so what lies between them was at fault, which the scan checks.
      throw new JsonSyntaxError((error as Error).message, this.#base + this.#runStart);
    } finally {
      this.#runStart = -1;
    }
  }

  /** Parses each element of the run `bounds` gives, for the error of the first that fails. */
  #parseEach(bounds: readonly number[]): void {
    for (let k = 0; k < bounds.length; k += 2) this.#parse(this.#runStart + bounds[k]!, this.#runStart + bounds[k + 1]!);
  }

  /** JSON.parse of buffer[from, to); a syntax error says where in the file. */
  #parse(from: number, to: number): unknown {
    const text = this.#buffer.toString('utf8', from, to);
    try {
      return JSON.parse(text);
    } catch (error) {
      // JSON.parse counts from the start of the text it was given: say where in the file instead.
      const message = (error as Error).message;
      const position = /at position (\d+)/.exec(message);
      const within = position === null ? 0 : Buffer.byteLength(text.slice(0, Number(position[1])));
      throw new JsonSyntaxError(message.replace(/,? (?:in JSON )?at position \d+.*$/s, ''), this.#base + from + within);
    }
  }

  /**
   * Steps over the next value, checking only its brackets and strings; returns
   * its file offset. Its bytes are not kept: a streamed array is skipped in a
   * window of the usual size, however large it is.
   */
  skip(): number {
    this.peek();
    const start = this.offset;
    this.#skipValue(true);
    return start;
  }

  /** Moves the read position past the next value, which starts at the mark; `release`: its bytes need not stay in the buffer. */
  #skipValue(release = false): void {
    const first = this.peek();
    if (first === EOF) throw new JsonSyntaxError('expected a value, got the end of the file', this.offset);
    if (first === QUOTE) {
      this.#at = this.#stringEnd(this.#at + 1);
    } else if (first === OPEN_BRACE || first === OPEN_BRACKET) {
      this.#skipContainer(release);
    } else {
      // A number, true, false or null: up to the next delimiter; JSON.parse judges it.
      let i = this.#at;
      for (;;) {
        const at = this.#reach(i);
        if (at < 0) break;
        i = at;
        const byte = this.#buffer[i]!;
        if (byte === COMMA || byte === CLOSE_BRACE || byte === CLOSE_BRACKET || byte === COLON || isWhitespace(byte)) break;
        i += 1;
      }
      this.#at = i;
      if (this.#at === this.#mark) throw new JsonSyntaxError(`expected a value, got ${shown(first)}`, this.offset);
    }
  }

  /**
   * Moves past the object or array at the read position, byte by byte (one
   * pass, escapes tracked as it goes: the bytes before a quote are never
   * looked at again, so with `release` they need not be kept).
   */
  #skipContainer(release: boolean): void {
    const closers: number[] = [];
    let inString = false;
    let escaped = false;
    let i = this.#at;
    for (;;) {
      if (i >= this.#length) {
        if (release) this.#mark = i;
        this.#at = i;
        i = this.#reach(i);
        if (i < 0) throw new JsonSyntaxError(inString ? 'unterminated string' : 'unexpected end of the file', this.#base + this.#length);
      }
      const buffer = this.#buffer;
      const length = this.#length;
      for (; i < length; i++) {
        const byte = buffer[i]!;
        if (inString) {
          if (escaped) escaped = false;
          else if (byte === BACKSLASH) escaped = true;
          else if (byte === QUOTE) inString = false;
        } else if (byte === QUOTE) {
          inString = true;
        } else if (byte === OPEN_BRACE) {
          closers.push(CLOSE_BRACE);
        } else if (byte === OPEN_BRACKET) {
          closers.push(CLOSE_BRACKET);
        } else if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) {
          if (closers.pop() !== byte) throw new JsonSyntaxError(`unexpected ${shown(byte)}`, this.#base + i);
          if (closers.length === 0) {
            this.#at = i + 1;
            return;
          }
        }
      }
    }
  }

  /** The index after the quote closing a string whose content starts at index `from`. */
  #stringEnd(from: number): number {
    for (;;) {
      const quote = this.#buffer.indexOf(QUOTE, from);
      if (quote < 0 || quote >= this.#length) {
        from = this.#reach(this.#length);
        if (from < 0) throw new JsonSyntaxError('unterminated string', this.#base + this.#length);
        continue;
      }
      let backslashes = 0;
      while (this.#buffer[quote - 1 - backslashes] === BACKSLASH) backslashes += 1;
      if (backslashes % 2 === 0) return quote + 1;
      from = quote + 1;
    }
  }
}

/** An array left in the file: each iteration reads its elements again, a run of them at a time. */
export class LazyJsonArray implements Iterable<unknown> {
  readonly #file: JsonFile;
  readonly #offset: number;
  /** Bytes from its `[` to its `]`: a small array is read with a small buffer (thousands of organizations each have two). */
  readonly #length: number;

  constructor(file: JsonFile, offset: number, length: number) {
    this.#file = file;
    this.#offset = offset;
    this.#length = length;
  }

  *[Symbol.iterator](): Generator<unknown> {
    yield* this.#file.cursorAt(this.#offset, this.#length).elements(RUN_BYTES);
  }
}

/** In a path, any element of an array (a symbol: any string may be an object's key). */
export const ELEMENT: unique symbol = Symbol('element');

/** A path through objects and arrays: keys, and ELEMENT for an array's elements. */
export type PathPattern = readonly (string | typeof ELEMENT)[];

function matches(pattern: PathPattern, path: PathPattern, prefixOnly: boolean): boolean {
  if (prefixOnly ? path.length > pattern.length : path.length !== pattern.length) return false;
  return path.every((key, index) => pattern[index] === key);
}

/**
 * Reads every array left in the file within a value the reader built, so that
 * a value replaced by a later duplicate key (JSON.parse keeps the last) is
 * still checked to be valid JSON. Values JSON.parse made are valid already
 * and are not walked (they may be nested deeper than a stack allows); the
 * reader builds containers only along the streamed paths, a few levels deep.
 */
function checkSyntax(value: unknown, built: WeakSet<object>): void {
  if (value instanceof LazyJsonArray) {
    for (const element of value) void element;
  } else if (typeof value === 'object' && value !== null && built.has(value)) {
    for (const inner of Object.values(value)) checkSyntax(inner, built);
  }
}

/** A JSON file open for reading; close it when done. */
export class JsonFile {
  readonly #name: string;
  readonly #fd: number;
  readonly #identity: string;
  readonly #windowBytes: number;

  private constructor(name: string, fd: number, windowBytes: number) {
    this.#name = name;
    this.#fd = fd;
    this.#windowBytes = windowBytes;
    this.#identity = this.#stat();
  }

  /** Opens a file; `windowBytes` is the initial read buffer (it grows to hold the largest value parsed whole). */
  static open(name: string, options: { windowBytes?: number } = {}): JsonFile {
    // Non-blocking, so a FIFO without a writer is refused below instead of waiting for one.
    const fd = openSync(name, constants.O_RDONLY | constants.O_NONBLOCK);
    if (!fstatSync(fd).isFile()) {
      closeSync(fd);
      throw Object.assign(new Error(`${name} is not a regular file`), { code: 'ENOTREGULAR' });
    }
    return new JsonFile(name, fd, Math.max(16, options.windowBytes ?? WINDOW_BYTES));
  }

  #stat(): string {
    const stat = fstatSync(this.#fd, { bigint: true });
    return `${stat.dev}:${stat.ino}:${stat.size}:${stat.mtimeNs}:${stat.ctimeNs}`;
  }

  /** Throws JsonFileChanged if the file was written since it was opened. */
  assertUnchanged(): void {
    if (this.#stat() !== this.#identity) throw new JsonFileChanged(this.#name);
  }

  /** A reader from `offset`; `length`, when known, caps its first buffer (it grows when a value needs more). */
  cursorAt(offset: number, length = Infinity): Cursor {
    return new Cursor(this.#fd, offset, Math.max(16, Math.min(this.#windowBytes, length)));
  }

  /**
   * Parses the file, leaving the arrays at the `lazy` paths in it as
   * LazyJsonArray (a value of another type there is parsed as usual).
   * Objects on the way are built with own properties, as JSON.parse does
   * (a `__proto__` key stays a plain key). A UTF-8 byte order mark is skipped.
   */
  parse(lazy: readonly PathPattern[]): unknown {
    const bom = Buffer.alloc(3);
    const top = this.cursorAt(readSync(this.#fd, bom, 0, 3, 0) === 3 && bom.equals(UTF8_BOM) ? 3 : 0);
    /** The objects and arrays built here (not by JSON.parse): see checkSyntax. */
    const built = new WeakSet<object>();
    const read = (path: PathPattern): unknown => {
      const next = top.peek();
      if (next === OPEN_BRACKET && lazy.some((pattern) => matches(pattern, path, false))) {
        const start = top.skip();
        return new LazyJsonArray(this, start, top.offset - start);
      }
      if (!lazy.some((pattern) => matches(pattern, path, true))) return top.value();
      if (next === OPEN_BRACE) {
        const object: Record<string, unknown> = {};
        built.add(object);
        for (const _ of top.entries(OPEN_BRACE, CLOSE_BRACE)) {
          if (top.peek() !== QUOTE) throw new JsonSyntaxError(`expected a key, got ${shown(top.peek())}`, top.offset);
          const key = top.value() as string;
          top.take(COLON);
          const value = read([...path, key]);
          if (Object.hasOwn(object, key)) checkSyntax(object[key], built);
          Object.defineProperty(object, key, { value, enumerable: true, writable: true, configurable: true });
        }
        return object;
      }
      if (next === OPEN_BRACKET) {
        const array: unknown[] = [];
        built.add(array);
        for (const _ of top.entries(OPEN_BRACKET, CLOSE_BRACKET)) array.push(read([...path, ELEMENT]));
        return array;
      }
      return top.value();
    };
    const value = read([]);
    if (top.peek() !== EOF) throw new JsonSyntaxError(`unexpected ${shown(top.peek())} after the value`, top.offset);
    return value;
  }

  close(): void {
    closeSync(this.#fd);
  }
}
