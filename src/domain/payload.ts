/**
 * Decoding of the upload `payload` (contract section 4) and recognising what
 * the bytes are. Pure and strict: Node's own base64 decoder skips junk
 * silently, so the text is checked character by character first.
 */

export type PayloadResult =
  | { ok: true; bytes: Buffer }
  | { ok: false; reason: string };

const DATA_URI = /^data:[^,;]*(?:;[^,;=]+=[^,;]*)*;base64,/i;
const WHITESPACE = /[ \t\r\n]/g;
const STANDARD = /^[A-Za-z0-9+/]*={0,2}$/;
const URL_SAFE = /^[A-Za-z0-9_-]*={0,2}$/;

/**
 * Decodes a payload: RFC 4648 base64 in the standard or the URL-safe alphabet
 * (not mixed), padding optional but correct when present, white space and line
 * breaks ignored, optionally behind a `data:…;base64,` header.
 */
export function decodePayload(payload: string): PayloadResult {
  const header = DATA_URI.exec(payload);
  const text = (header === null ? payload : payload.slice(header[0].length)).replace(WHITESPACE, '');
  if (text.length === 0) return { ok: false, reason: 'payload is empty' };
  const standard = STANDARD.test(text);
  if (!standard && !URL_SAFE.test(text)) {
    return { ok: false, reason: describeInvalid(text) };
  }
  const unpadded = text.replace(/=+$/, '');
  const padding = text.length - unpadded.length;
  if (unpadded.length % 4 === 1) return { ok: false, reason: 'payload is not base64: its length cannot be decoded' };
  if (padding > 0 && (text.length % 4 !== 0 || (4 - (unpadded.length % 4)) % 4 !== padding)) {
    return { ok: false, reason: 'payload is not base64: wrong padding' };
  }
  const bytes = Buffer.from(unpadded, standard ? 'base64' : 'base64url');
  if (bytes.length === 0) return { ok: false, reason: 'payload is empty' };
  return { ok: true, bytes };
}

function describeInvalid(text: string): string {
  const invalid = /[^A-Za-z0-9+/_=-]/u.exec(text);
  if (invalid !== null) return `payload is not base64: character ${JSON.stringify(invalid[0])} at position ${invalid.index + 1}`;
  const early = /=[^=]/.exec(text);
  if (early !== null) return `payload is not base64: padding "=" in the middle at position ${early.index + 1}`;
  if (/={3,}$/.test(text)) return 'payload is not base64: wrong padding';
  return 'payload mixes the standard and URL-safe base64 alphabets';
}

/** The decoded length of a base64 text of `length` characters, at most. */
export function maxDecodedLength(length: number): number {
  return Math.floor((length * 3) / 4);
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
