/**
 * Telling "the database cannot be reached" apart from every other failure, and
 * saying why in words an operator can act on. Messages name the host, user or
 * database, never a password (DATABASE_URL is not printed).
 */

/** Socket errors and PostgreSQL SQLSTATEs that mean the database is unreachable or refusing work. */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now (starting up, shutting down)
  '53300', // too_many_connections
]);

const UNREACHABLE_MESSAGES = [
  /Connection terminated/i,
  /timeout exceeded when trying to connect/i,
  /Client has encountered a connection error/i,
  /Connection ended unexpectedly/i,
];

/** Whether an error means the database cannot be reached right now (a 503, not a 500). */
export function isDatabaseUnreachable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as NodeJS.ErrnoException).code;
  if (code !== undefined && (UNREACHABLE_CODES.has(code) || code.startsWith('08'))) return true;
  if (error instanceof AggregateError && error.errors.some(isDatabaseUnreachable)) return true;
  return UNREACHABLE_MESSAGES.some((pattern) => pattern.test(error.message));
}

/** The database could not be opened or migrated at start; the message says why. */
export class DatabaseUnavailableError extends Error {
  constructor(description: string, cause: unknown) {
    super(`cannot use the database ${description}: ${explainDatabaseError(cause)}`, { cause });
    this.name = 'DatabaseUnavailableError';
  }
}

/** The database was migrated by a later signroom: this one does not know all its migrations, and must not write to it. */
export class SchemaNewerError extends Error {
  constructor(description: string, migration: string) {
    super(
      `the database ${description} has a newer schema than this signroom knows (migration "${migration}"): ` +
        'run the signroom version that migrated it, or a later one',
    );
    this.name = 'SchemaNewerError';
  }
}

/** One line on why a connection or migration failed. */
export function explainDatabaseError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const { code, hostname } = error as NodeJS.ErrnoException & { hostname?: string };
  switch (code) {
    case 'ECONNREFUSED':
      return 'connection refused (is PostgreSQL running and listening on that host and port?)';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `unknown host${hostname !== undefined ? ` "${hostname}"` : ''} (check the host in DATABASE_URL)`;
    case 'ETIMEDOUT':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return 'the host does not answer (network or firewall)';
    case '28P01':
      return `${error.message} (check the user and password in DATABASE_URL)`;
    case '28000':
      return `${error.message} (the server refuses this user or client address)`;
    case '3D000':
      return `${error.message} (create it, or fix the database name in DATABASE_URL)`;
    case '42501':
      return `${error.message} (the user needs the right to create tables and the pg_trgm extension)`;
    default:
      if (error instanceof AggregateError && error.errors[0] !== undefined) return explainDatabaseError(error.errors[0]);
      if (/timeout exceeded when trying to connect/i.test(error.message)) return 'timed out connecting (is the host right and reachable?)';
      return error.message;
  }
}
