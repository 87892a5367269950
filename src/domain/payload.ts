/**
 * Decoding of the upload `payload` (contract section 4) and recognising what
 * the bytes are. Pure and strict: Node's own base64 decoder skips junk
 * silently, so every character is checked here.
 *
 * The decoder works on bytes, so an upload body can be decoded straight from
 * the request's raw JSON (escapes included) without first becoming a string of
 * 4/3 the document's size: see src/domain/upload-body.ts.
 */

export type PayloadResult = { ok: true; bytes: Buffer } | { ok: false; reason: string };

const DATA_URI = /^data:[^,;]*(?:;[^,;=]+=[^,;]*)*;base64,/i;
/** The longest `data:…;base64,` header we look for. */
const DATA_URI_MAX = 256;

const STANDARD_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const URL_SAFE_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
/** Sextet value of each character code: 0–63, or -1 outside both alphabets. */
const SEXTET = new Int8Array(128).fill(-1);
for (let i = 0; i < 64; i++) {
  SEXTET[STANDARD_ALPHABET.charCodeAt(i)] = i;
  SEXTET[URL_SAFE_ALPHABET.charCodeAt(i)] = i;
}
const BACKSLASH = 0x5c;
/** Raw bytes read per step: small enough that the strings made per chunk die young (no large-object space). */
const CHUNK = 1 << 16;

const JSON_ESCAPE = /\\(?:u([0-9A-Fa-f]{4})|([nrt])|(\/))/g;
const INVALID = /[^A-Za-z0-9+/_=-]/;

/** Removes the characters a payload may carry between base64 characters, with native string searches. */
function withoutSpacing(text: string, jsonEscapes: boolean): string {
  let result = text;
  if (jsonEscapes && result.includes('\\')) {
    for (const [escape, meaning] of [
      ['\\n', ''],
      ['\\r', ''],
      ['\\t', ''],
      ['\\/', '/'],
    ] as const) {
      if (result.includes(escape)) result = result.replaceAll(escape, meaning);
    }
    if (result.includes('\\')) result = result.replace(JSON_ESCAPE, unescape);
  }
  for (const space of [' ', '\n', '\r', '\t']) {
    if (result.includes(space)) result = result.replaceAll(space, '');
  }
  return result;
}

const SPACES = new Set([0x20, 0x0a, 0x0d, 0x09]);
/** JSON's escapes of line breaks and tabs (`\n`, `\r`, `\t`): white space inside a JSON string. */
const ESCAPED_SPACES = new Set([0x6e, 0x72, 0x74]);

/** Where the text in `bytes[start, end)` begins after white space (with `jsonEscapes`, escaped white space too). */
function afterLeadingSpace(bytes: Buffer, start: number, end: number, jsonEscapes: boolean): number {
  let at = start;
  for (;;) {
    if (at < end && SPACES.has(bytes[at]!)) at += 1;
    else if (jsonEscapes && at + 1 < end && bytes[at] === BACKSLASH && ESCAPED_SPACES.has(bytes[at + 1]!)) at += 2;
    else return at;
  }
}

/**
 * Decodes base64 held in `source[start, end)`: RFC 4648, standard or URL-safe
 * alphabet (not mixed), padding optional but correct when present, unused bits
 * zero, white space and line breaks ignored, optionally behind a
 * `data:…;base64,` header. With `jsonEscapes`, the bytes are the inside of a
 * JSON string, so `\n`, `\r`, `\t`, `\/` and `\uXXXX` escapes are read as the
 * characters they stand for. Works a chunk at a time with native decoding, so
 * even the largest payload holds the event loop only briefly.
 *
 * With `inPlace`, the decoded bytes are written over `source[start, …)`, which
 * the caller gives up: decoding only ever shrinks the text, so each chunk is
 * written behind the point already read, and the document costs no memory
 * beyond the request body that carried it.
 */
export function decodeBase64(
  source: Uint8Array,
  { start = 0, end = source.length, jsonEscapes = false, inPlace = false }: { start?: number; end?: number; jsonEscapes?: boolean; inPlace?: boolean } = {},
): PayloadResult {
  const bytes = Buffer.from(source.buffer, source.byteOffset, source.byteLength);
  // White space is ignored before a data URI's header too.
  const first = afterLeadingSpace(bytes, start, end, jsonEscapes);
  const header = DATA_URI.exec(bytes.toString('latin1', first, Math.min(end, first + DATA_URI_MAX)));
  if (header !== null) start = first;
  let at = start + (header === null ? 0 : header[0].length);

  const output = inPlace ? bytes.subarray(start, end) : Buffer.allocUnsafe(Math.floor(((end - at) * 3) / 4) + 3);
  let written = 0;
  let carry = '';
  let padding = 0;
  let alphabet: 'base64' | 'base64url' | undefined;

  while (at < end) {
    let stop = Math.min(end, at + CHUNK);
    if (jsonEscapes && stop < end) {
      // Never cut an escape in two (the longest, \uXXXX, has six bytes): stop before a backslash among the last bytes.
      for (let k = stop - 1; k > stop - 6 && k > at; k--) {
        if (bytes[k] === BACKSLASH) {
          stop = k;
          break;
        }
      }
    }
    const raw = bytes.toString('latin1', at, stop);
    const offset = at - start;
    at = stop;
    let text = withoutSpacing(raw, jsonEscapes);
    const standard = text.includes('+') || text.includes('/');
    const urlSafe = text.includes('-') || text.includes('_');
    if ((standard && (urlSafe || alphabet === 'base64url')) || (urlSafe && alphabet === 'base64')) {
      return { ok: false, reason: 'payload mixes the standard and URL-safe base64 alphabets' };
    }
    if (standard) alphabet = 'base64';
    if (urlSafe) alphabet = 'base64url';
    const equals = text.indexOf('=');
    if (padding > 0 && text.length > 0) return { ok: false, reason: 'payload is not base64: padding "=" in the middle' };
    if (equals !== -1) {
      const tail = text.slice(equals);
      if (tail !== '='.repeat(tail.length))
        return { ok: false, reason: `payload is not base64: padding "=" in the middle near position ${offset + equals + 1}` };
      padding += tail.length;
      text = text.slice(0, equals);
      if (padding > 2) return { ok: false, reason: 'payload is not base64: wrong padding' };
    }
    const group = carry + text;
    const whole = group.length - (group.length % 4);
    const quads = group.slice(0, whole);
    // Node's decoder skips what it does not understand, so whole quads of valid
    // characters, and only they, give exactly three bytes per four characters.
    const decoded = output.write(quads, written, 'base64');
    if (decoded !== (whole / 4) * 3) {
      const invalid = INVALID.exec(text);
      const character = invalid === null ? '?' : invalid[0];
      return {
        ok: false,
        reason: `payload is not base64: character ${JSON.stringify(describeCharacter(character, raw))} near position ${offset + Math.max(0, raw.indexOf(character)) + 1}`,
      };
    }
    written += decoded;
    carry = group.slice(whole);
  }

  if (written === 0 && carry.length === 0) return { ok: false, reason: 'payload is empty' };
  if (carry.length === 1) return { ok: false, reason: 'payload is not base64: its length cannot be decoded' };
  if (padding > 0 && carry.length + padding !== 4) return { ok: false, reason: 'payload is not base64: wrong padding' };
  if (carry.length > 0) {
    for (let k = 0; k < carry.length; k++) {
      const code = carry.charCodeAt(k);
      if (code >= 128 || SEXTET[code]! < 0) {
        return { ok: false, reason: `payload is not base64: character ${JSON.stringify(describeCharacter(carry[k]!, carry))} near the end` };
      }
    }
    const last = SEXTET[carry.charCodeAt(carry.length - 1)]!;
    if ((carry.length === 2 && (last & 0x0f) !== 0) || (carry.length === 3 && (last & 0x03) !== 0)) {
      return { ok: false, reason: 'payload is not base64: the unused bits of its last character are not zero' };
    }
    written += output.write(carry, written, 'base64');
  }
  return { ok: true, bytes: output.subarray(0, written) };
}

/** Replaces one JSON escape by the character it stands for. */
function unescape(_match: string, hex: string | undefined, control: string | undefined): string {
  if (hex !== undefined) return String.fromCharCode(parseInt(hex, 16));
  if (control !== undefined) return ' ';
  return '/';
}

/**
 * The offending character for an error message: a non-ASCII byte is shown as
 * the UTF-8 character it starts. `text` holds the bytes read, one character per
 * byte (latin1), not the buffer, which in-place decoding has overwritten.
 */
function describeCharacter(character: string, text: string): string {
  const code = character.charCodeAt(0);
  if (code < 0x80) return character;
  const index = text.indexOf(character);
  if (index === -1) return character;
  const decoded = Buffer.from(text.slice(index, index + 4), 'latin1').toString('utf8');
  return String.fromCodePoint(decoded.codePointAt(0)!);
}

/** Decodes a payload given as a string (the CLI, tests): the same rules as decodeBase64. */
export function decodePayload(payload: string): PayloadResult {
  return decodeBase64(Buffer.from(payload, 'utf8'), { inPlace: true });
}

export type DocumentType = 'application/pdf' | 'image/png' | 'image/jpeg';

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
/** PDF readers accept junk before the header; so do we, within the first kilobyte. */
const PDF_HEADER_WINDOW = 1024;
/** A PDF object header (`1 0 obj`) after a comment line: readers also open files whose `%PDF-` line is missing. */
const PDF_OBJECT = /(?:^|[\r\n])%?\s*\d{1,10}\s+\d{1,5}\s+obj\b/;
/** A file that starts with an object and its dictionary (`1 0 obj <<`), with no comment line at all. */
const PDF_OBJECT_FIRST = /^\s{0,16}\d{1,10}\s{1,16}\d{1,5}\s{1,16}obj\s{0,16}<</;

/** What the bytes are, by their content, or undefined when not a supported type. */
export function sniffDocumentType(bytes: Buffer): DocumentType | undefined {
  if (bytes.subarray(0, 8).equals(PNG_SIGNATURE)) return 'image/png';
  if (bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return 'image/jpeg';
  const head = bytes.subarray(0, PDF_HEADER_WINDOW);
  if (head.includes('%PDF-')) return 'application/pdf';
  if (bytes[0] === 0x25 && PDF_OBJECT.test(head.toString('latin1'))) return 'application/pdf';
  if (PDF_OBJECT_FIRST.test(head.toString('latin1', 0, 64))) return 'application/pdf';
  return undefined;
}
