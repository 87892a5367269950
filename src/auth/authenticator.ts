import { createHmac, createSecretKey, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { LoginPolicy } from '../config.ts';
import type { Database } from '../db/tables.ts';
import { bearerToken, looksLikeToken, tokenHash } from '../domain/api-token.ts';
import { parseBasicAuthorization } from '../domain/basic-auth.ts';
import { findTokenByHash, touchToken } from '../repositories/api-token-repository.ts';
import { findLoginState, type CredentialScope, type LoginState } from '../repositories/credential-repository.ts';
import { clearLoginFailures, purgeLoginFailures, recordLoginFailure } from '../repositories/login-failure-repository.ts';
import { ChangeScopedCache, NO_CHANGE_SOURCE, type ChangeSource } from '../lib/change-scoped-cache.ts';
import { LruCache } from '../lib/lru-cache.ts';
import { failureDelayMs, LoginThrottle } from './login-throttle.ts';
import { DECOY_HASH, verifyPassword } from './password-hash.ts';

/** The result of checking an Authorization header; `username` is who acts: a credential's username, or `token:<id>`. */
export type AuthOutcome =
  | { kind: 'authenticated'; username: string; scope: CredentialScope }
  | { kind: 'missing' }
  | { kind: 'malformed' }
  | { kind: 'rejected'; delayMs: number }
  | { kind: 'throttled'; retryAfterSeconds: number };

interface VerifiedEntry {
  /** The stored hash the password was verified against: a changed credential no longer matches. */
  passwordHash: string;
  expiresAt: number;
}

const VERIFIED_CACHE_ENTRIES = 10_000;
/** The longest username and password an import or the CLI can store. */
const MAX_USERNAME_LENGTH = 128;
const MAX_PASSWORD_LENGTH = 1024;
/** Every this many recorded failures, expired failure records are deleted. */
const PURGE_EVERY_FAILURES = 100;

/** Usernames whose credential and failed logins are kept between requests (while the database is unchanged). */
const LOGIN_STATE_ENTRIES = 10_000;
/** Tokens (by hash) kept between requests while the database is unchanged, unknown ones included. */
const TOKEN_ENTRIES = 10_000;
/** A token's `lastUsedAt` is written at most this often by one server: not a write per request. */
export const TOKEN_USE_WRITE_MS = 60_000;

/**
 * Checks Basic credentials against the credential table. The credential row is
 * read on every request unless the database says no other connection has
 * committed a change to it since it was read (SQLite's data_version,
 * PostgreSQL's change notices), so revoking or changing it takes effect at
 * once; only the slow hash is skipped for a password verified against that
 * same row within the last few seconds. Cache keys are HMACs under a
 * per-process secret, so the cache never holds a password or a fast hash of one.
 */
export class Authenticator {
  readonly #db: Kysely<Database>;
  readonly #policy: LoginPolicy;
  readonly #now: () => number;
  readonly #throttle: LoginThrottle;
  readonly #verified = new LruCache<string, VerifiedEntry>(VERIFIED_CACHE_ENTRIES);
  readonly #inFlight = new Map<string, Promise<boolean>>();
  // A key object made once: handing createHmac raw bytes would build one on every request.
  readonly #cacheSecret = createSecretKey(randomBytes(32));
  #failuresSincePurge = 0;
  /** Login states read while the database was unchanged; this process's own writes forget theirs. */
  readonly #loginStates: ChangeScopedCache<string, LoginState>;
  /** Tokens by the hash of their secret, read while the database was unchanged (a revoked one is gone at once). */
  readonly #tokens: ChangeScopedCache<string, { token: { id: string; orgId: string } | undefined }>;
  /** When this server last wrote each token's `lastUsedAt`. */
  readonly #tokenUseWritten = new LruCache<string, number>(TOKEN_ENTRIES);

  constructor(db: Kysely<Database>, policy: LoginPolicy, options: { now?: () => number; changes?: ChangeSource } = {}) {
    this.#db = db;
    this.#policy = policy;
    this.#now = options.now ?? Date.now;
    this.#loginStates = new ChangeScopedCache(options.changes ?? NO_CHANGE_SOURCE, LOGIN_STATE_ENTRIES);
    this.#tokens = new ChangeScopedCache(options.changes ?? NO_CHANGE_SOURCE, TOKEN_ENTRIES);
    this.#throttle = new LoginThrottle(policy, this.#now);
  }

  /** Authenticates the value of an Authorization header, as the credential stands at least as new as `asOf` (`performance.now()`). */
  async authenticate(header: string | undefined, asOf = performance.now()): Promise<AuthOutcome> {
    if (header === undefined || header === '') return { kind: 'missing' };
    const token = bearerToken(header);
    if (token !== undefined) return this.#authenticateToken(token, asOf);
    const credentials = parseBasicAuthorization(header);
    if (credentials === undefined) return { kind: 'malformed' };
    const { username, password } = credentials;
    // No stored credential is this long or has a control character in its name (the import
    // refuses them; PostgreSQL cannot even take U+0000): answer at once, and keep nothing about it.
    if (username.length > MAX_USERNAME_LENGTH || password.length > MAX_PASSWORD_LENGTH || /\p{Cc}/u.test(username)) {
      return { kind: 'rejected', delayMs: 0 };
    }

    // One read per request: the credential (so a revoked or changed one stops
    // working at once) and the username's failed logins, shared by every process.
    const { credential: row, failures } = await this.#loginStates.read(username, () => findLoginState(this.#db, username), asOf);
    const verdict = this.#throttle.check(username, failures);
    if (verdict.locked) return { kind: 'throttled', retryAfterSeconds: verdict.retryAfterSeconds };

    const cacheKey = createHmac('sha256', this.#cacheSecret).update(username).update('\0').update(password).digest('base64');
    const cached = this.#verified.get(cacheKey);
    if (row !== undefined && cached !== undefined && cached.expiresAt > this.#now() && sameString(cached.passwordHash, row.passwordHash)) {
      return { kind: 'authenticated', username, scope: row.scope };
    }

    const storedHash = row?.passwordHash ?? (await DECOY_HASH);
    // Identical attempts in flight share one hash and count as one attempt.
    const verificationKey = `${cacheKey}\0${storedHash}`;
    let verification = this.#inFlight.get(verificationKey);
    const owner = verification === undefined;
    if (verification === undefined) {
      const admitted = this.#throttle.begin(username, failures);
      if (admitted.locked) return { kind: 'throttled', retryAfterSeconds: admitted.retryAfterSeconds };
      verification = verifyPassword(password, storedHash).finally(() => this.#inFlight.delete(verificationKey));
      this.#inFlight.set(verificationKey, verification);
    }
    let valid: boolean;
    try {
      valid = await verification;
    } catch (error) {
      if (owner) this.#throttle.end(username);
      throw error;
    }
    if (!valid || row === undefined) {
      if (!owner) return { kind: 'rejected', delayMs: failureDelayMs(this.#throttle.current(failures)?.failures ?? 0) };
      try {
        const recorded = await this.#loginStates.forgetting(username, () =>
          recordLoginFailure(this.#db, username, this.#now(), {
            windowMs: this.#policy.lockSeconds * 1000,
            maxFailures: this.#policy.maxFailures,
          }),
        );
        await this.#purgeNowAndThen();
        return { kind: 'rejected', delayMs: failureDelayMs(recorded.failures) };
      } finally {
        this.#throttle.end(username);
      }
    }

    if (owner) {
      try {
        if (failures !== undefined) await this.#loginStates.forgetting(username, () => clearLoginFailures(this.#db, username));
      } finally {
        this.#throttle.end(username);
      }
    }
    if (this.#policy.verifiedCacheSeconds > 0) {
      this.#verified.set(cacheKey, {
        passwordHash: storedHash,
        expiresAt: this.#now() + this.#policy.verifiedCacheSeconds * 1000,
      });
    }
    return { kind: 'authenticated', username, scope: row.scope };
  }

  /**
   * An API token: found by the hash of its secret (no slow hash: 256 random bits leave nothing to
   * guess), acting for its one organization as `token:<id>`. Its `lastUsedAt` is written on its first
   * use here and then at most every TOKEN_USE_WRITE_MS, in the background.
   */
  async #authenticateToken(token: string, asOf: number): Promise<AuthOutcome> {
    if (!looksLikeToken(token)) return { kind: 'rejected', delayMs: 0 };
    const hash = tokenHash(token);
    const { token: found } = await this.#tokens.read(hash, async () => ({ token: await findTokenByHash(this.#db, hash) }), asOf);
    if (found === undefined) return { kind: 'rejected', delayMs: 0 };
    const now = this.#now();
    const written = this.#tokenUseWritten.get(found.id);
    if (written === undefined || now - written >= TOKEN_USE_WRITE_MS) {
      this.#tokenUseWritten.set(found.id, now);
      // A failed write only leaves lastUsedAt older: the request goes on.
      touchToken(this.#db, found.id, new Date(now).toISOString()).catch(() => this.#tokenUseWritten.delete(found.id));
    }
    return { kind: 'authenticated', username: `token:${found.id}`, scope: [found.orgId] };
  }

  async #purgeNowAndThen(): Promise<void> {
    this.#failuresSincePurge += 1;
    if (this.#failuresSincePurge < PURGE_EVERY_FAILURES) return;
    this.#failuresSincePurge = 0;
    await purgeLoginFailures(this.#db, this.#now() - this.#policy.lockSeconds * 1000);
    this.#loginStates.clear();
  }
}

/** Whether a credential scope covers an organization. */
export function scopeIncludes(scope: CredentialScope, orgId: string): boolean {
  return scope === '*' || scope.includes(orgId);
}

function sameString(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
