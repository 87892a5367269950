import { decodeBase64, type PayloadResult } from './payload.ts';

/**
 * A JSON parser (RFC 8259) for upload bodies that never turns the `payload`
 * into a JavaScript string: its base64 is decoded straight from the raw bytes,
 * over the very bytes it came in, so a 25 MiB document costs the raw body only:
 * not also a decoded copy, nor two 33 MiB strings. Every other value is parsed
 * as JSON.parse would.
 */

/**
 * Request bodies beyond this cannot hold a valid payload: refused (413) before
 * they are read whole. JSON may escape every "/" as "\\/" and every line break
 * as "\\r\\n", which can double the text, so the bound is twice the base64 of
 * the largest document (plus room for a data URI, a name and JSON); the exact
 * decoded size is checked after decoding.
 */
export function uploadBodyLimit(maxDocumentBytes: number): number {
  const base64 = Math.ceil(maxDocumentBytes / 3) * 4;
  return 2 * base64 + 64 * 1024;
}

/** The body is not valid JSON, or is hostile (`__proto__`, `constructor.prototype`). */
export class JsonBodyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'JsonBodyError';
  }
}

export interface ParsedUploadBody {
  /** The body's JSON value; a string `payload` is replaced by a short stand-in ("base64"). */
  value: unknown;
  /** The decoded `payload`, when it was a non-empty string. */
  payload: PayloadResult | undefined;
}

const MAX_DEPTH = 64;
const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

class Parser {
  readonly #bytes: Buffer;
  #at = 0;
  payload: PayloadResult | undefined;

  constructor(bytes: Buffer) {
    this.#bytes = bytes;
  }

  parse(): unknown {
    const value = this.#value(0, true);
    this.#skipWhitespace();
    if (this.#at !== this.#bytes.length) this.#fail('unexpected data after the JSON value');
    return value;
  }

  #fail(message: string): never {
    throw new JsonBodyError(`Body is not valid JSON: ${message} at byte ${this.#at}`);
  }

  #skipWhitespace(): void {
    const bytes = this.#bytes;
    while (this.#at < bytes.length) {
      const c = bytes[this.#at];
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) return;
      this.#at++;
    }
  }

  #value(depth: number, topLevel: boolean): unknown {
    if (depth > MAX_DEPTH) this.#fail(`nested deeper than ${MAX_DEPTH} levels`);
    this.#skipWhitespace();
    const c = this.#bytes[this.#at];
    if (c === 0x7b) return this.#object(depth, topLevel);
    if (c === 0x5b) return this.#array(depth);
    if (c === QUOTE) return this.#string();
    if (c === 0x74) return this.#literal('true', true);
    if (c === 0x66) return this.#literal('false', false);
    if (c === 0x6e) return this.#literal('null', null);
    if (c === 0x2d || (c !== undefined && c >= 0x30 && c <= 0x39)) return this.#number();
    return this.#fail(c === undefined ? 'unexpected end' : 'unexpected character');
  }

  #object(depth: number, topLevel: boolean): Record<string, unknown> {
    this.#at++;
    const result: Record<string, unknown> = {};
    this.#skipWhitespace();
    if (this.#bytes[this.#at] === 0x7d) {
      this.#at++;
      return result;
    }
    for (;;) {
      this.#skipWhitespace();
      if (this.#bytes[this.#at] !== QUOTE) this.#fail('expected a property name');
      const key = this.#string();
      if (key === '__proto__') throw new JsonBodyError('Body contains a forbidden "__proto__" property');
      this.#skipWhitespace();
      if (this.#bytes[this.#at] !== 0x3a) this.#fail('expected ":"');
      this.#at++;
      this.#skipWhitespace();
      if (topLevel && key === 'payload' && this.#bytes[this.#at] === QUOTE) {
        result[key] = this.#payload();
      } else {
        const value = this.#value(depth + 1, false);
        if (key === 'constructor' && typeof value === 'object' && value !== null && Object.hasOwn(value, 'prototype')) {
          throw new JsonBodyError('Body contains a forbidden "constructor.prototype" property');
        }
        result[key] = value;
      }
      this.#skipWhitespace();
      const next = this.#bytes[this.#at];
      this.#at++;
      if (next === 0x7d) return result;
      if (next !== 0x2c) this.#fail('expected "," or "}"');
    }
  }

  #array(depth: number): unknown[] {
    this.#at++;
    const result: unknown[] = [];
    this.#skipWhitespace();
    if (this.#bytes[this.#at] === 0x5d) {
      this.#at++;
      return result;
    }
    for (;;) {
      result.push(this.#value(depth + 1, false));
      this.#skipWhitespace();
      const next = this.#bytes[this.#at];
      this.#at++;
      if (next === 0x5d) return result;
      if (next !== 0x2c) this.#fail('expected "," or "]"');
    }
  }

  /** Finds the end of a string starting at its opening quote; checks its escapes and characters. */
  #scanString(): { start: number; end: number; escaped: boolean } {
    const bytes = this.#bytes;
    const start = this.#at + 1;
    let escaped = false;
    for (let i = start; i < bytes.length; i++) {
      const c = bytes[i]!;
      if (c === QUOTE) {
        this.#at = i + 1;
        return { start, end: i, escaped };
      }
      if (c < 0x20) {
        this.#at = i;
        this.#fail('control character in a string');
      }
      if (c === BACKSLASH) {
        escaped = true;
        const e = bytes[i + 1];
        if (e === 0x75) {
          if (!/^[0-9A-Fa-f]{4}$/.test(bytes.toString('latin1', i + 2, i + 6))) {
            this.#at = i;
            this.#fail('bad \\u escape');
          }
          i += 5;
        } else if (e === QUOTE || e === BACKSLASH || e === 0x2f || e === 0x62 || e === 0x66 || e === 0x6e || e === 0x72 || e === 0x74) {
          i += 1;
        } else {
          this.#at = i;
          this.#fail('bad escape');
        }
      }
    }
    this.#at = bytes.length;
    return this.#fail('unterminated string');
  }

  /** A string's value; its bytes must be UTF-8 (Buffer#toString would make U+FFFD of others, and the name be stored so). */
  #string(): string {
    const { start, end, escaped } = this.#scanString();
    let text: string;
    try {
      text = STRICT_UTF8.decode(this.#bytes.subarray(escaped ? start - 1 : start, escaped ? end + 1 : end));
    } catch {
      this.#at = start;
      return this.#fail('a string that is not UTF-8');
    }
    return escaped ? (JSON.parse(text) as string) : text;
  }

  /** Finds the end of the payload string fast (native searches); its characters are checked as it is decoded. */
  #scanPayload(): { start: number; end: number } {
    const bytes = this.#bytes;
    const start = this.#at + 1;
    let from = start;
    for (;;) {
      const quote = bytes.indexOf(QUOTE, from);
      if (quote === -1) {
        this.#at = bytes.length;
        this.#fail('unterminated string');
      }
      let backslashes = 0;
      while (quote - backslashes - 1 >= start && bytes[quote - backslashes - 1] === BACKSLASH) backslashes++;
      if (backslashes % 2 === 0) {
        this.#at = quote + 1;
        return { start, end: quote };
      }
      from = quote + 1;
    }
  }

  #payload(): string {
    const { start, end } = this.#scanPayload();
    if (start === end) return '';
    this.payload = decodeBase64(this.#bytes, { start, end, jsonEscapes: true, inPlace: true });
    return 'base64';
  }

  #number(): number {
    const match = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/.exec(this.#bytes.toString('latin1', this.#at, Math.min(this.#at + 400, this.#bytes.length)));
    if (match === null) return this.#fail('bad number');
    this.#at += match[0].length;
    return Number(match[0]);
  }

  #literal<T>(text: string, value: T): T {
    if (this.#bytes.toString('latin1', this.#at, this.#at + text.length) !== text) this.#fail('unexpected word');
    this.#at += text.length;
    return value;
  }
}

/**
 * Parses an upload body; throws JsonBodyError for invalid or hostile JSON.
 * The payload is decoded in place: `raw` is consumed, and the decoded bytes
 * are a view of it.
 */
export function parseUploadBody(raw: Buffer): ParsedUploadBody {
  const parser = new Parser(raw);
  const value = parser.parse();
  return { value, payload: parser.payload };
}
