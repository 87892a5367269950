/** Parsing of the HTTP Basic `Authorization` header (RFC 7617), without any I/O. */

export interface BasicCredentials {
  username: string;
  password: string;
}

const STRICT_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{2,3})?$/;
const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The username and password of a Basic header, or undefined when the header is
 * missing or malformed: another scheme, invalid base64, invalid UTF-8, no colon.
 * The split is at the first colon, so passwords may contain colons.
 */
export function parseBasicAuthorization(header: string | undefined): BasicCredentials | undefined {
  if (header === undefined) return undefined;
  const match = /^basic[ \t]+(\S+)[ \t]*$/i.exec(header);
  const token = match?.[1];
  if (token === undefined || !STRICT_BASE64.test(token)) return undefined;
  let decoded: string;
  try {
    decoded = UTF8.decode(Buffer.from(token, 'base64'));
  } catch {
    return undefined;
  }
  const colon = decoded.indexOf(':');
  if (colon <= 0) return undefined;
  return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}
