import { hash, randomBytes, timingSafeEqual } from 'node:crypto';
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
import { BoundedConcurrency } from '../lib/bounded-concurrency.ts';
import { clientKey, FailureWindows } from './failure-windows.ts';
import { measureHashMs, verifyPassword } from './password-hash.ts';

/** The result of checking an Authorization header; `username` is who acts: a credential's username, or `token:<id>`. */
export type AuthOutcome =
  /**
   * `validUntil` (the authenticator's clock, ms): until when the same header, from the same client,
   * with the database unchanged, is sure to get this outcome again with nothing else to do: the
   * password's verification is due to be verified again then (see #refreshAhead), a token's next
   * `lastUsedAt` write is due then.
   */
  | { kind: 'authenticated'; username: string; scope: CredentialScope; validUntil: number }
  | { kind: 'missing' }
  | { kind: 'malformed' }
  /** `username`: the Basic username tried (absent for a token). */
  | { kind: 'rejected'; delayMs: number; username?: string }
  /** Too many failures: of this username from this address (`username`), or from this address whatever the username (`address`). */
  | { kind: 'throttled'; retryAfterSeconds: number; by: 'username' | 'address'; username: string }
  /** Every password hash slot and its queue are taken: try again shortly. */
  | { kind: 'busy'; retryAfterSeconds: number };

interface VerifiedEntry {
  /** The stored hash the password was verified against: a changed credential no longer matches. */
  passwordHash: string;
  expiresAt: number;
  /** Being verified again ahead of its expiry (see #refreshAhead). */
  refreshing?: boolean;
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
/** Username and address pairs remembered as having logged in. */
const KNOWN_PAIRS = 100_000;
/** How long a pair that logged in stays known. */
const KNOWN_PAIR_MS = 24 * 60 * 60 * 1000;
/** A username failing this many times the per-pair limit, over all addresses, is refused to pairs not known. */
const USERNAME_FAILURES_PER_PAIR = 10;
/** Once a verification is due to be verified again, the answer replay asks again this often until it is (see #validUntil). */
const REFRESH_RETRY_MS = 1000;
/** A token's `lastUsedAt` is written at most this often by one server: not a write per request. */
export const TOKEN_USE_WRITE_MS = 60_000;

/**
 * Checks Basic credentials against the credential table. The credential row is
 * read on every request unless the database says no other connection has
 * committed a change to it since it was read (SQLite's data_version,
 * PostgreSQL's change notices), so revoking or changing it takes effect at
 * once; only the slow hash is skipped for a password verified against that
 * same row within SIGNROOM_AUTH_CACHE_SECONDS (verified again in the
 * background while a client keeps using it: see #refreshAhead). Cache keys are
 * SHA-256 hashes under a per-process salt, so the cache never holds a password
 * or a fast hash of one.
 */
export class Authenticator {
  readonly #db: Kysely<Database>;
  readonly #policy: LoginPolicy;
  readonly #now: () => number;
  readonly #throttle: LoginThrottle;
  readonly #verified = new LruCache<string, VerifiedEntry>(VERIFIED_CACHE_ENTRIES);
  readonly #inFlight = new Map<string, Promise<boolean>>();
  /**
   * Prefixed to what the verified credentials' cache is keyed by, so its keys (hashes) cannot be
   * looked up in a dictionary of passwords. One SHA-256 call over the joined string: an HMAC object
   * per request cost three times as much, on every authenticated request.
   */
  readonly #cacheSalt = randomBytes(32).toString('base64');
  #failuresSincePurge = 0;
  /** Password hashes run here, a few at a time: a flood of logins waits or is refused, it does not take every core. */
  readonly #hashes: BoundedConcurrency;
  /** How long a hash takes, kept up to date: an unknown username is answered after as long, without computing one. */
  #typicalHashMs: number | undefined;
  /** A hash timed when an unknown username first needs the figure, before any real hash has been timed. */
  #firstHashMs: Promise<number> | undefined;
  /** Failures per client address, whatever the usernames. */
  readonly #addresses: FailureWindows;
  /** Failures per username, whatever the addresses: many addresses guessing one account. */
  readonly #usernames: FailureWindows;
  /** Username and address pairs that logged in lately: the address and username limits let them through. */
  readonly #knownPairs = new LruCache<string, number>(KNOWN_PAIRS);
  /** Hashes computed since the start (for /metrics, and to show that unknown usernames cost none). */
  hashesComputed = 0;
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
    const changes = options.changes ?? NO_CHANGE_SOURCE;
    this.#loginStates = new ChangeScopedCache(changes.about(['credentials', 'login_failures']), LOGIN_STATE_ENTRIES);
    this.#tokens = new ChangeScopedCache(changes.about(['api_tokens']), TOKEN_ENTRIES);
    this.#throttle = new LoginThrottle(policy, this.#now);
    this.#hashes = new BoundedConcurrency(policy.hashConcurrency, policy.hashQueue);
    this.#addresses = new FailureWindows(policy.maxFailuresPerAddress, policy.lockSeconds * 1000, this.#now);
    this.#usernames = new FailureWindows(USERNAME_FAILURES_PER_PAIR * policy.maxFailures, policy.lockSeconds * 1000, this.#now);
  }

  /** Password hashes running and waiting now. */
  get hashQueue(): { running: number; queued: number } {
    return { running: this.#hashes.running, queued: this.#hashes.queued };
  }

  /**
   * Authenticates the value of an Authorization header sent from `client` (its address), as the
   * credential stands at least as new as `asOf` (`performance.now()`).
   */
  async authenticate(header: string | undefined, asOf = performance.now(), address = ''): Promise<AuthOutcome> {
    if (header === undefined || header === '') return { kind: 'missing' };
    const token = bearerToken(header);
    if (token !== undefined) return this.#authenticateToken(token, asOf);
    const credentials = parseBasicAuthorization(header);
    if (credentials === undefined) return { kind: 'malformed' };
    const { username, password } = credentials;
    // No stored credential is this long or has a control character in its name (the import
    // refuses them; PostgreSQL cannot even take U+0000): answer at once, and keep nothing about it.
    if (username.length > MAX_USERNAME_LENGTH || password.length > MAX_PASSWORD_LENGTH || /\p{Cc}/u.test(username)) {
      return { kind: 'rejected', delayMs: 0, username };
    }
    const client = clientKey(address);
    const cacheKey = this.#verifiedKey(username, password);
    const cached = this.#verified.get(cacheKey);
    const recentlyVerified = cached !== undefined && cached.expiresAt > this.#now();
    // An address that failed too often, or a username that many addresses failed, is refused
    // before any read or hash, unless this username logged in from this address lately.
    const throttleKey = `${client}\0${username}`;
    const knownAt = this.#knownPairs.get(throttleKey);
    const known = recentlyVerified || (knownAt !== undefined && this.#now() - knownAt < KNOWN_PAIR_MS);
    if (!known) {
      const fromAddress = this.#addresses.check(client);
      if (fromAddress.locked) return { kind: 'throttled', retryAfterSeconds: fromAddress.retryAfterSeconds, by: 'address', username };
      const ofUsername = this.#usernames.check(username);
      if (ofUsername.locked) return { kind: 'throttled', retryAfterSeconds: ofUsername.retryAfterSeconds, by: 'username', username };
    }

    // One read per request: the credential (so a revoked or changed one stops working at once)
    // and the failed logins of this username from this address, shared by every process.
    const { credential: row, failures } = await this.#loginState(throttleKey, username, client, asOf);
    const verdict = this.#throttle.check(throttleKey, failures);
    if (verdict.locked) return { kind: 'throttled', retryAfterSeconds: verdict.retryAfterSeconds, by: 'username', username };

    // Read again: verified again in the background (a new entry) while the row was read.
    const verified = this.#verified.get(cacheKey);
    if (
      row !== undefined &&
      recentlyVerified &&
      verified !== undefined &&
      verified.expiresAt > this.#now() &&
      sameString(verified.passwordHash, row.passwordHash)
    ) {
      this.#refreshAhead(cacheKey, verified, password);
      return { kind: 'authenticated', username, scope: row.scope, validUntil: this.#validUntil(verified.expiresAt) };
    }

    // Every hash slot and the queue taken: busy, for a username that exists or not alike.
    if (this.#hashes.full) return { kind: 'busy', retryAfterSeconds: 1 };
    // Identical attempts in flight share one check and count as one attempt.
    const verificationKey = `${cacheKey}\0${row?.passwordHash ?? ''}`;
    let verification = this.#inFlight.get(verificationKey);
    const owner = verification === undefined;
    if (verification === undefined) {
      const admitted = this.#throttle.begin(throttleKey, failures);
      if (admitted.locked) return { kind: 'throttled', retryAfterSeconds: admitted.retryAfterSeconds, by: 'username', username };
      // An unknown username computes no hash: it is answered after as long as a hash takes, so time tells nothing.
      const storedHash = row?.passwordHash;
      const started = storedHash === undefined ? this.#asLongAsAHash() : this.#hashes.run(() => this.#verify(password, storedHash));
      if (started === undefined) {
        this.#throttle.end(throttleKey);
        return { kind: 'busy', retryAfterSeconds: 1 };
      }
      verification = started.finally(() => this.#inFlight.delete(verificationKey));
      this.#inFlight.set(verificationKey, verification);
    }
    let valid: boolean;
    try {
      valid = await verification;
    } catch (error) {
      if (owner) this.#throttle.end(throttleKey);
      throw error;
    }
    if (!valid || row === undefined) {
      if (!owner) return { kind: 'rejected', delayMs: failureDelayMs(this.#throttle.current(failures)?.failures ?? 0), username };
      try {
        this.#addresses.fail(client);
        this.#usernames.fail(username);
        const recorded = await this.#loginStates.forgetting(throttleKey, () =>
          recordLoginFailure(this.#db, username, client, this.#now(), {
            windowMs: this.#policy.lockSeconds * 1000,
            maxFailures: this.#policy.maxFailures,
          }),
        );
        await this.#purgeNowAndThen();
        return { kind: 'rejected', delayMs: failureDelayMs(recorded.failures), username };
      } finally {
        this.#throttle.end(throttleKey);
      }
    }

    if (owner) {
      this.#knownPairs.set(throttleKey, this.#now());
      try {
        if (failures !== undefined) await this.#loginStates.forgetting(throttleKey, () => clearLoginFailures(this.#db, username, client));
      } finally {
        this.#throttle.end(throttleKey);
      }
    }
    const expiresAt = this.#now() + this.#policy.verifiedCacheSeconds * 1000;
    if (this.#policy.verifiedCacheSeconds > 0) this.#verified.set(cacheKey, { passwordHash: row.passwordHash, expiresAt });
    return { kind: 'authenticated', username, scope: row.scope, validUntil: this.#validUntil(expiresAt) };
  }

  /**
   * Whether a header that passed lately passes still, as of `asOf` (`performance.now()`), when
   * that takes neither a password hash nor a write: the credential row (revoked, changed) and the
   * failed logins are read as authenticate reads them, once per change of the database; undefined
   * whenever authenticate would have more to do (a hash to wait for, a failure to record, a token's
   * `lastUsedAt` due), or would not authenticate (a verification due to be verified again is,
   * in the background: see #refreshAhead). The answer replay renews kept answers with it
   * after a commit, without the framework.
   */
  async recheck(header: string, asOf: number, address: string): Promise<{ scope: CredentialScope; validUntil: number } | undefined> {
    const token = bearerToken(header);
    if (token !== undefined) {
      if (!looksLikeToken(token)) return undefined;
      const found = await this.#tokenOf(tokenHash(token), asOf);
      const written = found === undefined ? undefined : this.#tokenUseWritten.get(found.id);
      if (found === undefined || written === undefined || this.#now() - written >= TOKEN_USE_WRITE_MS) return undefined;
      return { scope: [found.orgId], validUntil: written + TOKEN_USE_WRITE_MS };
    }
    const credentials = parseBasicAuthorization(header);
    if (credentials === undefined) return undefined;
    const { username, password } = credentials;
    const cacheKey = this.#verifiedKey(username, password);
    if (!((this.#verified.get(cacheKey)?.expiresAt ?? 0) > this.#now())) return undefined;
    const throttleKey = `${clientKey(address)}\0${username}`;
    const { credential: row, failures } = await this.#loginState(throttleKey, username, clientKey(address), asOf);
    // Read after the row: verified again in the background (a new entry) meanwhile, or expired.
    const cached = this.#verified.get(cacheKey);
    if (cached === undefined || cached.expiresAt <= this.#now()) return undefined;
    if (this.#throttle.check(throttleKey, failures).locked || row === undefined || !sameString(cached.passwordHash, row.passwordHash)) return undefined;
    this.#refreshAhead(cacheKey, cached, password);
    return { scope: row.scope, validUntil: this.#validUntil(cached.expiresAt) };
  }

  /** What the verified credentials' cache is keyed by: a hash under this process's salt. */
  #verifiedKey(username: string, password: string): string {
    return hash('sha256', `${this.#cacheSalt}\0${username}\0${password}`, 'base64');
  }

  /** The credential and its failed logins from this client, as new as `asOf`. */
  #loginState(throttleKey: string, username: string, client: string, asOf: number): Promise<LoginState> {
    return this.#loginStates.read(throttleKey, () => findLoginState(this.#db, username, client), asOf);
  }

  /** The API token with this secret's hash, as new as `asOf`. */
  async #tokenOf(secretHash: string, asOf: number): Promise<{ id: string; orgId: string } | undefined> {
    return (await this.#tokens.read(secretHash, async () => ({ token: await findTokenByHash(this.#db, secretHash) }), asOf)).token;
  }

  /**
   * A verification used in the last third of its life (by a request authenticated, or by the
   * answer replay's recheck, which its `validUntil` sends there from then on) is verified again in
   * the background (one hash, only into an idle hash slot), and the request answered at once: a
   * client that keeps calling never waits for a hash when its verification expires, where every
   * request arriving then waited for one (100-250 ms under load; the bursts of slow answers every
   * minute in the benches). A changed credential still stops working at once: the entry holds the stored hash
   * it was verified against, compared with the row read for every request, and a refreshed
   * entry is kept only while the cache still holds the one it refreshes.
   */
  #refreshAhead(cacheKey: string, cached: VerifiedEntry, password: string): void {
    const lifeMs = this.#policy.verifiedCacheSeconds * 1000;
    // Only into a free slot: a login waiting for one goes first.
    const idle = this.#hashes.running < this.#policy.hashConcurrency && this.#hashes.queued === 0;
    if (cached.refreshing === true || this.#now() < this.#refreshDueAt(cached.expiresAt) || !idle) return;
    const verification = this.#hashes.run(() => this.#verify(password, cached.passwordHash));
    if (verification === undefined) return;
    cached.refreshing = true;
    verification.then(
      (valid) => {
        if (valid && this.#verified.get(cacheKey) === cached)
          this.#verified.set(cacheKey, { passwordHash: cached.passwordHash, expiresAt: this.#now() + lifeMs });
        else cached.refreshing = false;
      },
      () => (cached.refreshing = false),
    );
  }

  /** When a verification ending at `expiresAt` is due to be verified again: the start of its last third. */
  #refreshDueAt(expiresAt: number): number {
    return expiresAt - (this.#policy.verifiedCacheSeconds * 1000) / 3;
  }

  /**
   * The `validUntil` of a verification ending at `expiresAt`: when it is due to be verified again,
   * so that the answer replay, which answers without authenticating, asks again then
   * (Authenticator.recheck) and sets that off; once due, a moment from now (at most its end), so
   * the replay goes on answering while it runs and asks again shortly, for the renewed entry or to
   * set it off when a hash slot was not free.
   */
  #validUntil(expiresAt: number): number {
    const now = this.#now();
    const due = this.#refreshDueAt(expiresAt);
    return now < due ? due : Math.min(expiresAt, now + REFRESH_RETRY_MS);
  }

  /** Verifies a password against its stored hash, keeping the typical time of a hash up to date. */
  async #verify(password: string, storedHash: string): Promise<boolean> {
    const started = performance.now();
    try {
      return await verifyPassword(password, storedHash);
    } finally {
      const ms = performance.now() - started;
      this.hashesComputed += 1;
      this.#typicalHashMs = this.#typicalHashMs === undefined ? ms : 0.8 * this.#typicalHashMs + 0.2 * ms;
    }
  }

  /** Waits as long as a hash takes (waiting in the queue included), and fails: what an unknown username gets. */
  async #asLongAsAHash(): Promise<boolean> {
    const hash = this.#typicalHashMs ?? (await (this.#firstHashMs ??= measureHashMs()));
    const ms = hash * (1 + this.#hashes.queued / this.#policy.hashConcurrency);
    await new Promise((resolve) => setTimeout(resolve, ms));
    return false;
  }

  /**
   * An API token: found by the hash of its secret (no slow hash: 256 random bits leave nothing to
   * guess), acting for its one organization as `token:<id>`. Its `lastUsedAt` is written on its first
   * use here and then at most every TOKEN_USE_WRITE_MS, in the background.
   */
  async #authenticateToken(token: string, asOf: number): Promise<AuthOutcome> {
    if (!looksLikeToken(token)) return { kind: 'rejected', delayMs: 0 };
    const found = await this.#tokenOf(tokenHash(token), asOf);
    if (found === undefined) return { kind: 'rejected', delayMs: 0 };
    const now = this.#now();
    let written = this.#tokenUseWritten.get(found.id);
    if (written === undefined || now - written >= TOKEN_USE_WRITE_MS) {
      written = now;
      this.#tokenUseWritten.set(found.id, now);
      // A failed write only leaves lastUsedAt older: the request goes on.
      touchToken(this.#db, found.id, new Date(now).toISOString()).catch(() => this.#tokenUseWritten.delete(found.id));
    }
    return { kind: 'authenticated', username: `token:${found.id}`, scope: [found.orgId], validUntil: written + TOKEN_USE_WRITE_MS };
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
