import { createHash, randomBytes } from 'node:crypto';

/**
 * API tokens (contract section 10): a recognisable prefix and 256 random bits. Only the SHA-256 of
 * a token is stored: a fast hash is right for a secret of that much entropy (no guess list to run
 * through it, unlike a password), and it lets a token be found by its hash in one index read.
 */
export const TOKEN_PREFIX = 'srt_';

/** `srt_` and 43 base64url characters (32 bytes). */
const TOKEN_PATTERN = /^srt_[A-Za-z0-9_-]{43}$/;

/** A new token's secret, shown once. */
export function newToken(): string {
  return TOKEN_PREFIX + randomBytes(32).toString('base64url');
}

/** A new token's id: public (it names the token in lists and as the actor `token:<id>`), not secret. */
export function newTokenId(): string {
  return randomBytes(8).toString('hex');
}

/** Whether a string has the form of a token (anything else is refused without a database read). */
export function looksLikeToken(value: string): boolean {
  return TOKEN_PATTERN.test(value);
}

/** What is stored of a token: its SHA-256, in hex. */
export function tokenHash(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/** The token of an `Authorization: Bearer <token>` header (RFC 6750: the scheme ignores case); undefined for another scheme. */
export function bearerToken(header: string): string | undefined {
  const match = /^bearer +(\S+) *$/i.exec(header);
  return match?.[1];
}
