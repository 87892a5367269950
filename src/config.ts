import { isIP } from 'node:net';
import { availableParallelism, totalmem } from 'node:os';
import path from 'node:path';
import { uploadBodyLimit } from './domain/upload-body.ts';

/** Everything the service reads from its environment, validated once at start. */
export interface Config {
  readonly host: string;
  readonly port: number;
  readonly dataDir: string;
  readonly databaseUrl: string | undefined;
  /** PostgreSQL connections per process. */
  readonly databasePoolSize: number;
  /**
   * PostgreSQL: keep reads between requests, told of changes by LISTEN on one more connection
   * (off behind a pooler in transaction mode, which cannot deliver notices).
   */
  readonly databaseChangeNotices: boolean;
  /** SQLite: how much of the database file is memory-mapped, and the page cache beside it, in bytes. */
  readonly sqliteMemory: SqliteMemory;
  readonly maxPageSize: number;
  /** In-memory search indexes of large organizations (see src/search-index/search-indexes.ts). */
  readonly search: SearchIndexPolicy;
  /** Where the copies of the search indexes are kept (src/search-index/snapshots.ts): processes and imports may share it. */
  readonly searchCopiesDir: string;
  readonly maxDocumentBytes: number;
  /** Bytes of upload bodies one process holds at once; an upload that would pass it is answered 503 before its body is read. */
  readonly uploadMemoryBytes: number;
  readonly thumbnailWidth: number;
  /** Where clients reach the API (behind a proxy, say): the OpenAPI document's `servers` entry; `/` by default. */
  readonly publicBaseUrl: string;
  readonly logLevel: string;
  readonly login: LoginPolicy;
  /** Proxies whose X-Forwarded-For names the client (addresses or CIDR ranges); none by default. */
  readonly trustedProxies: readonly string[];
  readonly render: RenderBudget;
  readonly timeouts: RequestTimeouts;
  /** SIGNROOM_METRICS_TOKEN: the Bearer token GET /metrics asks for; unset, /metrics is not served. */
  readonly metricsToken: string | undefined;
  /** Requests taking longer than this are logged as slow. */
  readonly slowRequestMs: number;
  /** SIGNROOM_PASSWORD: the password `bin/signroom credential set` stores, instead of one read from standard input. */
  readonly credentialPassword: string | undefined;
}

/** How much the in-memory search indexes may hold, and which organizations get one. */
export interface SearchIndexPolicy {
  /** Bytes for all indexes together; 0 turns them off. */
  readonly memoryBytes: number;
  /** Organizations with fewer users are searched in the database only. */
  readonly minUsers: number;
  /** A load running longer is stopped and counts as failed (default LOAD_TIMEOUT_MS). */
  readonly loadTimeoutMs?: number;
}

/** What SQLite may keep in the server's memory: both count in its resident size. */
export interface SqliteMemory {
  readonly mmapBytes: number;
  readonly cacheBytes: number;
}

/** How thumbnails are rendered: worker processes and what one render may spend. */
export interface RenderBudget {
  /** Processes started for waiting renders (more only beside slow renders); each stops after `idleMs` without a job. */
  readonly workers: number;
  /** At most this many processes in all: slow renders get processes of their own beyond `workers`. */
  readonly maxWorkers: number;
  /** CPU time one render may use (time it waits for the CPU does not count). */
  readonly timeoutMs: number;
  /** Wall-clock time after which a render is stopped, whatever it does (a hang, or a render starved of CPU). */
  readonly deadlineMs: number;
  readonly memoryBytes: number;
  /** Resident memory of all renders running at once: beyond it, the largest is stopped (its document gets the placeholder). */
  readonly totalMemoryBytes: number;
  /** Renders one uploader may have running at once, so that one uploader's slow documents leave processes for others. */
  readonly perOwner: number;
  /** A render process with no job for this long stops; the next render starts one (none run before the first upload). */
  readonly idleMs: number;
}

/** How long each phase of a request may take, so that a slow or stalled client cannot hold a connection and its memory. */
export interface RequestTimeouts {
  /** From the connection (or the end of the previous request on it) to the end of the request's headers. */
  readonly headersMs: number;
  /** A body must bring at least `minBodyBytesPerSecond` on average over each window of this length. */
  readonly bodyWindowMs: number;
  readonly minBodyBytesPerSecond: number;
  /** The whole request, headers and body: by default, the largest upload body at the minimum rate. */
  readonly requestMs: number;
  /** From the end of the body to the answer. */
  readonly handlerMs: number;
}

/** How failed logins are slowed down and then refused, and how many password hashes may run. */
export interface LoginPolicy {
  /** Failures of one username from one client address (within the lock window) after which that pair answers 429. */
  readonly maxFailures: number;
  /** Failures from one client address, whatever the usernames, after which its logins answer 429 (per process). */
  readonly maxFailuresPerAddress: number;
  /** Password hashes computed at once; more wait in a queue of `hashQueue`, and beyond it are answered 503. */
  readonly hashConcurrency: number;
  readonly hashQueue: number;
  /** Length of the failure window and of the lock, in seconds. */
  readonly lockSeconds: number;
  /** How long a verified credential is trusted without re-hashing, in seconds. */
  readonly verifiedCacheSeconds: number;
}

/** A configuration problem, naming the variable so an operator can fix it. */
export class ConfigError extends Error {
  readonly variable: string;
  constructor(variable: string, message: string) {
    super(`${variable}: ${message}`);
    this.name = 'ConfigError';
    this.variable = variable;
  }
}

type Env = Readonly<Record<string, string | undefined>>;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** Reads and validates the configuration; throws ConfigError naming the first bad variable. */
export function loadConfig(env: Env = process.env, cwd: string = process.cwd()): Config {
  const maxDocumentBytes = integer(env, 'SIGNROOM_MAX_DOCUMENT_BYTES', 26_214_400, 1, 1_073_741_824);
  // The largest upload body: what the upload memory and the whole-request deadline are sized from.
  const largestBody = uploadBodyLimit(maxDocumentBytes);
  const config: Config = {
    host: nonEmpty(env, 'HOST', '127.0.0.1'),
    port: integer(env, 'PORT', 8080, 0, 65535),
    dataDir: path.resolve(cwd, nonEmpty(env, 'SIGNROOM_DATA_DIR', './data')),
    searchCopiesDir: path.resolve(cwd, nonEmpty(env, 'SIGNROOM_SEARCH_COPIES_DIR', path.join(nonEmpty(env, 'SIGNROOM_DATA_DIR', './data'), 'search-indexes'))),
    databaseUrl: databaseUrl(env),
    databasePoolSize: integer(env, 'SIGNROOM_DB_POOL_SIZE', 10, 1, 1000),
    databaseChangeNotices: oneOf(env, 'SIGNROOM_DB_CHANGE_NOTICES', 'on', ['on', 'off']) === 'on',
    sqliteMemory: Object.freeze({
      mmapBytes: integer(env, 'SIGNROOM_SQLITE_MMAP_MB', 0, 0, 1_048_576) * 1024 * 1024,
      cacheBytes: integer(env, 'SIGNROOM_SQLITE_CACHE_MB', 16, 1, 1_048_576) * 1024 * 1024,
    }),
    credentialPassword: env['SIGNROOM_PASSWORD'] === '' ? undefined : env['SIGNROOM_PASSWORD'],
    maxPageSize: integer(env, 'SIGNROOM_MAX_PAGE_SIZE', 2000, 1, 2_147_483_647),
    search: Object.freeze({
      memoryBytes: integer(env, 'SIGNROOM_SEARCH_MEMORY_MB', 192, 0, 1_048_576) * 1024 * 1024,
      minUsers: integer(env, 'SIGNROOM_SEARCH_MIN_USERS', 20_000, 0, 2_147_483_647),
    }),
    maxDocumentBytes,
    uploadMemoryBytes: uploadMemoryBytes(env, largestBody),
    thumbnailWidth: integer(env, 'SIGNROOM_THUMBNAIL_WIDTH', 200, 16, 2000),
    publicBaseUrl: publicBaseUrl(env),
    logLevel: oneOf(env, 'SIGNROOM_LOG_LEVEL', 'info', LOG_LEVELS),
    login: Object.freeze({
      maxFailures: integer(env, 'SIGNROOM_LOGIN_MAX_FAILURES', 5, 1, 1000),
      lockSeconds: integer(env, 'SIGNROOM_LOGIN_LOCK_SECONDS', 300, 1, 86_400),
      verifiedCacheSeconds: integer(env, 'SIGNROOM_AUTH_CACHE_SECONDS', 60, 0, 3600),
      maxFailuresPerAddress: integer(env, 'SIGNROOM_LOGIN_MAX_FAILURES_PER_ADDRESS', 50, 1, 1_000_000),
      ...hashLimits(env),
    }),
    trustedProxies: trustedProxies(env),
    render: renderBudget(env),
    timeouts: requestTimeouts(env, largestBody),
    metricsToken: metricsToken(env),
    slowRequestMs: integer(env, 'SIGNROOM_SLOW_REQUEST_MS', 1000, 1, 3_600_000),
  };
  return Object.freeze(config);
}

function renderBudget(env: Env): RenderBudget {
  const workers = integer(env, 'SIGNROOM_RENDER_WORKERS', 2, 1, 64);
  const timeoutMs = integer(env, 'SIGNROOM_RENDER_TIMEOUT_MS', 3_000, 100, 600_000);
  const maxWorkers = integer(env, 'SIGNROOM_RENDER_MAX_WORKERS', 2 * workers, workers, 256);
  const memoryBytes = integer(env, 'SIGNROOM_RENDER_MEMORY_MB', 768, 64, 65_536) * 1024 * 1024;
  return Object.freeze({
    workers,
    maxWorkers,
    timeoutMs,
    // Every upload is answered within 5 s by default: a render is stopped 4 s after it starts, whatever it does.
    deadlineMs: integer(env, 'SIGNROOM_RENDER_DEADLINE_MS', timeoutMs + 1_000, 100, 2_400_000),
    memoryBytes,
    totalMemoryBytes:
      integer(
        env,
        'SIGNROOM_RENDER_TOTAL_MEMORY_MB',
        Math.max(64, Math.min(Math.floor(machineMemory() / 8 / 1048576), (2 * memoryBytes) / 1048576)),
        64,
        1_048_576,
      ) *
      1024 *
      1024,
    perOwner: integer(env, 'SIGNROOM_RENDER_PER_UPLOADER', Math.max(1, maxWorkers - 1), 1, 256),
    // A minute keeps a process warm through one person's run of uploads; at rest none is held (see docs/decisions.md).
    idleMs: integer(env, 'SIGNROOM_RENDER_IDLE_SECONDS', 60, 0, 86_400) * 1000,
  });
}

/** The memory this process may count on: its container's limit when it has one, else the machine's. */
function machineMemory(): number {
  const constrained = process.constrainedMemory();
  return constrained > 0 && constrained < totalmem() ? constrained : totalmem();
}

function uploadMemoryBytes(env: Env, largestBody: number): number {
  const fallback = Math.ceil(Math.max(2 * largestBody, machineMemory() / 16) / 1048576);
  const bytes = integer(env, 'SIGNROOM_UPLOAD_MEMORY_MB', fallback, 1, 1_048_576) * 1048576;
  if (bytes < largestBody) {
    throw new ConfigError('SIGNROOM_UPLOAD_MEMORY_MB', `must hold at least one upload body of the largest document (${Math.ceil(largestBody / 1048576)} MiB)`);
  }
  return bytes;
}

function metricsToken(env: Env): string | undefined {
  const value = raw(env, 'SIGNROOM_METRICS_TOKEN');
  if (value !== undefined && !/^[\x21-\x7e]{16,256}$/.test(value)) {
    throw new ConfigError('SIGNROOM_METRICS_TOKEN', 'must be 16 to 256 printable ASCII characters without spaces (e.g. openssl rand -hex 32)');
  }
  return value;
}

function hashLimits(env: Env): { hashConcurrency: number; hashQueue: number } {
  // scrypt runs on libuv's thread pool, four threads unless UV_THREADPOOL_SIZE says otherwise: one is left for file work.
  const hashConcurrency = integer(env, 'SIGNROOM_LOGIN_HASH_CONCURRENCY', Math.min(availableParallelism(), 3), 1, 256);
  return { hashConcurrency, hashQueue: integer(env, 'SIGNROOM_LOGIN_HASH_QUEUE', 4 * hashConcurrency, 0, 100_000) };
}

const CIDR = /^(.+)\/(\d{1,3})$/;

function trustedProxies(env: Env): readonly string[] {
  const value = raw(env, 'SIGNROOM_TRUSTED_PROXIES');
  if (value === undefined) return Object.freeze([]);
  const entries = value
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
  for (const entry of entries) {
    const range = CIDR.exec(entry);
    const address = range?.[1] ?? entry;
    const version = isIP(address);
    const bits = range === null ? undefined : Number(range[2]);
    if (version === 0 || (bits !== undefined && bits > (version === 4 ? 32 : 128))) {
      throw new ConfigError('SIGNROOM_TRUSTED_PROXIES', `must list IP addresses or CIDR ranges separated by commas, got "${entry}"`);
    }
  }
  return Object.freeze(entries);
}

function requestTimeouts(env: Env, largestBody: number): RequestTimeouts {
  const headersMs = integer(env, 'SIGNROOM_HEADERS_TIMEOUT_MS', 10_000, 100, 3_600_000);
  const minBodyBytesPerSecond = integer(env, 'SIGNROOM_BODY_MIN_BYTES_PER_SECOND', 16_384, 1, 1_073_741_824);
  const requestMs = integer(env, 'SIGNROOM_REQUEST_TIMEOUT_MS', headersMs + Math.ceil(largestBody / minBodyBytesPerSecond) * 1000, 100, 2_147_483_647);
  if (requestMs < headersMs)
    throw new ConfigError('SIGNROOM_REQUEST_TIMEOUT_MS', `must be at least SIGNROOM_HEADERS_TIMEOUT_MS (${headersMs}), got ${requestMs}`);
  return Object.freeze({
    headersMs,
    bodyWindowMs: integer(env, 'SIGNROOM_BODY_TIMEOUT_MS', 10_000, 100, 3_600_000),
    minBodyBytesPerSecond,
    requestMs,
    handlerMs: integer(env, 'SIGNROOM_HANDLER_TIMEOUT_MS', 60_000, 100, 3_600_000),
  });
}

function raw(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

function nonEmpty(env: Env, name: string, fallback: string): string {
  return raw(env, name) ?? fallback;
}

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const value = raw(env, name);
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value)) throw new ConfigError(name, `must be a whole number from ${min} to ${max}, got "${value}"`);
  const n = Number(value);
  if (n < min || n > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${n}`);
  return n;
}

function oneOf(env: Env, name: string, fallback: string, allowed: readonly string[]): string {
  const value = raw(env, name);
  if (value === undefined) return fallback;
  if (!allowed.includes(value)) throw new ConfigError(name, `must be one of ${allowed.join(', ')}, got "${value}"`);
  return value;
}

function publicBaseUrl(env: Env): string {
  const value = raw(env, 'SIGNROOM_PUBLIC_BASE_URL');
  if (value === undefined) return '/';
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError('SIGNROOM_PUBLIC_BASE_URL', `is not a valid URL (expected https://host[:port][/path]), got "${value}"`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new ConfigError('SIGNROOM_PUBLIC_BASE_URL', `must start with http:// or https:// (got ${url.protocol}//)`);
  return value.replace(/\/+$/, '');
}

function databaseUrl(env: Env): string | undefined {
  const value = raw(env, 'DATABASE_URL');
  if (value === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError('DATABASE_URL', 'is not a valid URL (expected postgres://user:password@host:port/database)');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new ConfigError('DATABASE_URL', `must start with postgres:// or postgresql:// (got ${url.protocol}//)`);
  }
  return value;
}
