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
const PLUS = 0x2b;
const SLASH = 0x2f;
const MINUS = 0x2d;
const UNDERSCORE = 0x5f;
const EQUALS = 0x3d;
const BACKSLASH = 0x5c;

function isWhitespace(code: number): boolean {
  return code === 0x20 || code === 0x09 || code === 0x0a || code === 0x0d;
}

/**
 * Decodes base64 held in `source[start, end)`: RFC 4648, standard or URL-safe
 * alphabet (not mixed), padding optional but correct when present, white space
 * and line breaks ignored, optionally behind a `data:…;base64,` header. With
 * `jsonEscapes`, the bytes are the inside of a JSON string, so `\n`, `\r`,
 * `\t`, `\/` and `\uXXXX` escapes are read as the characters they stand for.
 */
export function decodeBase64(source: Uint8Array, start = 0, end = source.length, jsonEscapes = false): PayloadResult {
  const head = Buffer.from(source.buffer, source.byteOffset + start, Math.min(end - start, DATA_URI_MAX)).toString('latin1');
  const header = DATA_URI.exec(head);
  let i = start + (header === null ? 0 : header[0].length);

  const output = Buffer.allocUnsafe(Math.floor(((end - i) * 3) / 4) + 3);
  let written = 0;
  let quad = 0;
  let inQuad = 0;
  let characters = 0;
  let padding = 0;
  let alphabet: 'standard' | 'url-safe' | undefined;

  while (i < end) {
    let code = source[i]!;
    const position = i - start + 1;
    i++;
    if (jsonEscapes && code === BACKSLASH) {
      const escape = source[i];
      i++;
      if (escape === 0x6e || escape === 0x72 || escape === 0x74) continue; // \n \r \t
      if (escape === SLASH) {
        code = SLASH;
      } else if (escape === 0x75) {
        code = parseInt(Buffer.from(source.buffer, source.byteOffset + i, 4).toString('latin1'), 16);
        i += 4;
      } else {
        return invalidCharacter(`\\${String.fromCharCode(escape ?? 0x20)}`, position);
      }
    }
    if (isWhitespace(code)) continue;
    if (code === EQUALS) {
      padding++;
      if (padding > 2) return { ok: false, reason: 'payload is not base64: wrong padding' };
      continue;
    }
    const value = code < 128 ? SEXTET[code]! : -1;
    if (value < 0) return invalidCharacter(describeCode(code, source, i - 1), position);
    if (padding > 0) return { ok: false, reason: `payload is not base64: padding "=" in the middle at position ${position}` };
    if (code === PLUS || code === SLASH || code === MINUS || code === UNDERSCORE) {
      const kind = code === PLUS || code === SLASH ? 'standard' : 'url-safe';
      if (alphabet !== undefined && alphabet !== kind) {
        return { ok: false, reason: 'payload mixes the standard and URL-safe base64 alphabets' };
      }
      alphabet = kind;
    }
    characters++;
    quad = (quad << 6) | value;
    inQuad++;
    if (inQuad === 4) {
      output[written++] = (quad >> 16) & 0xff;
      output[written++] = (quad >> 8) & 0xff;
      output[written++] = quad & 0xff;
      quad = 0;
      inQuad = 0;
    }
  }

  if (characters === 0) return { ok: false, reason: 'payload is empty' };
  if (inQuad === 1) return { ok: false, reason: 'payload is not base64: its length cannot be decoded' };
  if (padding > 0 && (inQuad === 0 || inQuad + padding !== 4)) return { ok: false, reason: 'payload is not base64: wrong padding' };
  if (inQuad === 2) {
    output[written++] = (quad >> 4) & 0xff;
  } else if (inQuad === 3) {
    output[written++] = (quad >> 10) & 0xff;
    output[written++] = (quad >> 2) & 0xff;
  }
  return { ok: true, bytes: output.subarray(0, written) };
}

function invalidCharacter(shown: string, position: number): PayloadResult {
  return { ok: false, reason: `payload is not base64: character ${JSON.stringify(shown)} at position ${position}` };
}

/** The character at a byte offset, read as UTF-8, for an error message. */
function describeCode(code: number, source: Uint8Array, offset: number): string {
  if (code < 0x80) return String.fromCharCode(code);
  return Buffer.from(source.buffer, source.byteOffset + offset, Math.min(4, source.length - offset)).toString('utf8').slice(0, 1);
}

/** Decodes a payload given as a string (the CLI, tests): the same rules as decodeBase64. */
export function decodePayload(payload: string): PayloadResult {
  const bytes = Buffer.from(payload, 'utf8');
  return decodeBase64(bytes);
}

export type DocumentType = 'application/pdf' | 'image/png' | 'image/jpeg';

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
/** PDF readers accept junk before the header; so do we, within the first kilobyte. */
const PDF_HEADER_WINDOW = 1024;
/** A PDF object header (`1 0 obj`): readers also open files whose `%PDF-` line is missing. */
const PDF_OBJECT = /(?:^|[\r\n])%?\s*\d{1,10}\s+\d{1,5}\s+obj\b/;

/** What the bytes are, by their content, or undefined when not a supported type. */
export function sniffDocumentType(bytes: Buffer): DocumentType | undefined {
  if (bytes.subarray(0, 8).equals(PNG_SIGNATURE)) return 'image/png';
  if (bytes.length >= 3 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return 'image/jpeg';
  const head = bytes.subarray(0, PDF_HEADER_WINDOW);
  if (head.includes('%PDF-')) return 'application/pdf';
  if (bytes[0] === 0x25 && PDF_OBJECT.test(head.toString('latin1'))) return 'application/pdf';
  return undefined;
}
