import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ProblemError } from './errors.ts';
import Fastify from 'fastify';
import { databasePlugin } from './plugins/database.ts';
import { blobStorePlugin } from './plugins/blob-store.ts';
import { documentsPlugin } from './plugins/documents.ts';
import { loadConfig, ConfigError, type Config, type SqliteMemory } from './config.ts';
import { openMigratedDatabase, SQLITE_FILE, type DatabaseHandle } from './db/database.ts';
import { DatabaseUnavailableError, SchemaNewerError } from './db/database-errors.ts';
import { DEMO_PASSWORD, DEMO_USERNAME, demoDirectory } from './demo/sample-directory.ts';
import { ID_PATTERN, validateDirectoryFile, type ValidationResult } from './domain/directory-file.ts';
import { isChangedFileError, openDirectoryFile, type OpenDirectoryFile } from './directory/import-file-reader.ts';
import { hashPassword } from './auth/password-hash.ts';
import { revokeCredential, setCredential } from './directory/credential-changes.ts';
import { createToken, listTokens, revokeToken } from './auth/api-tokens.ts';
import { DirectoryService } from './directory/directory-service.ts';
import { missingOrganizations } from './repositories/directory-repository.ts';
import { anyoneCanSignIn } from './repositories/credential-repository.ts';
import { ImportRejected, importDirectory } from './directory/bulk-import.ts';
import type { Actor } from './directory/audit.ts';
import { importOptionsFor } from './search-index/index.ts';
import { ListenError, reserveAddress, serve, type Reservation } from './server.ts';
import { VERSION } from './version.ts';
import { readHiddenLine } from './lib/hidden-prompt.ts';

const USAGE = `Usage: signroom <command>

Commands:
  serve [--demo]               Migrate the database and serve the API (--demo loads the demo data first)
  migrate                      Bring the database schema up to date
  import FILE.json [--as NAME] Upsert organizations, users, rooms and credentials from a directory file
  demo                         Load the demo organization "demo" and the credential ${DEMO_USERNAME} / ${DEMO_PASSWORD}
  credential set USER ORGS     Create or change a credential; ORGS is "*" or a comma-separated list of
                               organization ids; the password is read from SIGNROOM_PASSWORD or standard input,
                               or asked for at a terminal (twice, not shown)
  credential revoke USER       Delete a credential (takes effect at once)
  token create ORG [--name NAME] [--json]
                               Create an API token for one organization; prints the token (once) on the first line
  token list [ORG] [--json]    List API tokens: id, name, organization, created and last used
  token revoke ID              Revoke an API token (takes effect at once on every server)
  user add ORG --email EMAIL [--id ID] [--firstname F] [--lastname L] [--external] [--status S]
                               Create a user, as POST …/users would (prints it as JSON)
  user suspend ORG USER        Suspend a user: kept, never a candidate of a lookup
  user activate ORG USER       Make a suspended (or pending) user active again
  user delete ORG USER         Delete a user (it leaves every room)
  room add ORG ROOM [--name NAME]
                               Create a signing room
  room add-member ORG ROOM USER / room remove-member ORG ROOM USER
                               Change a room's members (idempotent)
  upload ORG ROOM FILE [--name NAME] [--as USER]
                               Store a PDF, PNG or JPEG in a room as the API would (prints its id, page count and thumbnail state as JSON)
  help                         Show this text (signroom COMMAND --help: that command's usage)
  version                      Show the version

Directory, credential and token commands are audited with actor "cli", or the name given with --as NAME.
Configuration comes from environment variables (see README).`;

/** `--as NAME`: who the audit trail says acted, for the commands that change something (`cli` by default). */
const ACTOR_OPTION = { as: { type: 'string', default: 'cli' } } as const;

/** Thrown for a bad command line: printed with the usage, exit status 2. */
class UsageError extends Error {}

/** No password came from the terminal, or two that differ: said, exit status 1. */
class PasswordNotGiven extends Error {}

/** Runs `work` on the migrated database; `begins`: a command meant to begin a database (no note that it makes one, see noteNewDatabase). */
async function withDatabase<T>(config: Config, work: (db: DatabaseHandle['db'], dialect: DatabaseHandle['dialect']) => Promise<T>, begins = false): Promise<T> {
  if (!begins) noteNewDatabase(config);
  const { database: handle } = await openMigratedDatabase(config);
  try {
    return await work(handle.db, handle.dialect);
  } finally {
    await handle.close();
  }
}

/**
 * Says so when a command that reads or changes the directory is about to make a new, empty
 * SQLite database: run in another directory than the server's, it finds no database in its
 * ./data, and its empty answer would be taken for the server's. Not for `import`, `demo`,
 * `migrate` and `serve`, which are how a database is meant to begin; not on PostgreSQL, where
 * the database is the operator's.
 */
function noteNewDatabase(config: Config): void {
  if (config.databaseUrl !== undefined) return;
  const file = path.join(config.dataDir, SQLITE_FILE);
  if (!existsSync(file)) console.error(`signroom: no database at ${file}: making a new, empty one (set SIGNROOM_DATA_DIR to use another)`);
}

/**
 * SQLite memory for an import: a short-lived process, so it may map and cache more of the file
 * than the server keeps, which makes a large import faster.
 */
const IMPORT_SQLITE_MEMORY: SqliteMemory = { mmapBytes: 256 * 1024 * 1024, cacheBytes: 64 * 1024 * 1024 };

async function runImport(config: Config, result: ValidationResult | OpenDirectoryFile, actor?: Actor): Promise<number> {
  try {
    const assertUnchanged = 'assertUnchanged' in result ? result.assertUnchanged : undefined;
    const sqliteMemory = {
      mmapBytes: Math.max(config.sqliteMemory.mmapBytes, IMPORT_SQLITE_MEMORY.mmapBytes),
      cacheBytes: Math.max(config.sqliteMemory.cacheBytes, IMPORT_SQLITE_MEMORY.cacheBytes),
    };
    const counts = await withDatabase(
      { ...config, sqliteMemory },
      (db) =>
        importDirectory(db, result.file, result.problems, {
          ...importOptionsFor(config, (message) => console.error(`signroom: ${message}`)),
          ...(assertUnchanged !== undefined ? { assertSourceUnchanged: assertUnchanged } : {}),
          ...(actor !== undefined ? { actor } : {}),
        }),
      true,
    );
    console.log(
      `imported ${counts.organizations} organization(s), ${counts.users} user(s), ${counts.rooms} room(s) ` +
        `with ${counts.members} member(s), ${counts.credentials} credential(s)`,
    );
    return 0;
  } catch (error) {
    if (error instanceof ImportRejected) return reportProblems(error.problems);
    // A file changed under the second pass can also end in a database error (a duplicate the first pass never saw).
    if (isChangedFileError(error) || ('assertUnchanged' in result && hasChanged(result))) {
      console.error('signroom: the import file changed while it was being imported (it is read twice); nothing was changed.');
      return 1;
    }
    throw error;
  }
}

function hasChanged(file: OpenDirectoryFile): boolean {
  try {
    file.assertUnchanged();
    return false;
  } catch {
    return true;
  }
}

function reportProblems(problems: { path: string; message: string }[]): number {
  for (const problem of problems) console.error(`${problem.path}: ${problem.message}`);
  console.error(`signroom: ${problems.length} problem(s) found; nothing was changed.`);
  return 1;
}

/** A fresh install answers every request 401: the server's log says how to get in. */
function warnIfNobodyCanSignIn(app: Awaited<ReturnType<typeof serve>>): void {
  void anyoneCanSignIn(app.database.db).then(
    (someone) => {
      if (!someone)
        app.log.warn(
          "no credential or API token yet, so every request is refused: create one with `bin/signroom credential set NAME '*'` (or start once with --demo)",
        );
    },
    () => undefined,
  );
}

async function loadDemo(config: Config): Promise<number> {
  const code = await runImport(config, validateDirectoryFile(demoDirectory()));
  if (code === 0) {
    console.log(`demo credential: ${DEMO_USERNAME} / ${DEMO_PASSWORD} (organization "demo", rooms "board" and "contracts")`);
  }
  return code;
}

async function readPassword(config: Config, username: string): Promise<string> {
  if (config.credentialPassword !== undefined) return config.credentialPassword;
  if (process.stdin.isTTY) {
    // At a terminal: asked for, not shown, twice.
    const typed = await readHiddenLine(`password for "${username}": `);
    if (typed === undefined || typed === '') throw new PasswordNotGiven('no password given; nothing was changed');
    const again = await readHiddenLine('the same password again: ');
    if (again === undefined) throw new PasswordNotGiven('no password given; nothing was changed');
    if (again !== typed) throw new PasswordNotGiven('the two passwords differ; nothing was changed');
    return typed;
  }
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  const password = Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '');
  if (password === '') throw new UsageError('no password: set SIGNROOM_PASSWORD or pipe it on standard input');
  return password;
}

async function credentialCommand(config: Config, args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: ACTOR_OPTION });
  const actor = { actor: values.as };
  const [action, username, orgs] = positionals;
  if (action === 'revoke' && username !== undefined) {
    const existed = await withDatabase(config, (db) => revokeCredential(db, username, actor));
    console.log(existed ? `revoked credential "${username}"` : `no credential "${username}"`);
    return existed ? 0 : 1;
  }
  if (action === 'set' && username !== undefined && orgs !== undefined) {
    const scope = orgs === '*' ? '*' : [...new Set(orgs.split(',').map((id) => id.trim()))];
    if (scope !== '*' && !scope.every((id) => ID_PATTERN.test(id))) throw new UsageError(`bad organization list "${orgs}"`);
    const check = validateDirectoryFile({ credentials: [{ username, password: 'x', organizations: scope }] });
    if (check.problems.length > 0) return reportProblems(check.problems);
    let password: string;
    try {
      password = await readPassword(config, username);
    } catch (error) {
      if (!(error instanceof PasswordNotGiven)) throw error;
      console.error(`signroom: ${error.message}`);
      return 1;
    }
    const passwordHash = await hashPassword(password);
    const missing = await withDatabase(config, async (db) => {
      await db.transaction().execute((trx) => setCredential(trx, { username, passwordHash, scope }, actor));
      return scope === '*' ? [] : missingOrganizations(db, scope);
    });
    console.log(`credential "${username}" set`);
    // Allowed (an organization may be created after its credential), but likely a typo.
    for (const orgId of missing) console.error(`signroom: note: no organization "${orgId}" yet; the credential covers it once it is created`);
    return 0;
  }
  throw new UsageError('expected: credential set USER ORGS | credential revoke USER');
}

/** The longest name a token may be given. */
const MAX_TOKEN_NAME_LENGTH = 200;

async function tokenCommand(config: Config, args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { ...ACTOR_OPTION, name: { type: 'string', default: '' }, json: { type: 'boolean', default: false } },
  });
  const actor = { actor: values.as };
  const [action, target, ...rest] = positionals;
  if (rest.length > 0) throw new UsageError(`unexpected "${rest.join(' ')}"`);
  if (action === 'create' && target !== undefined) {
    if (values.name.length > MAX_TOKEN_NAME_LENGTH || /\p{Cc}/u.test(values.name))
      throw new UsageError(`a token name has at most ${MAX_TOKEN_NAME_LENGTH} characters, none of them control characters`);
    const created = await withDatabase(config, (db) => createToken(db, target, values.name, actor));
    if (created === undefined) {
      console.error(`signroom: no organization "${target}"`);
      return 1;
    }
    if (values.json) console.log(JSON.stringify(created));
    else
      console.log(
        `${created.token}\nid ${created.id}, organization "${created.organizationId}"${created.name === '' ? '' : `, name "${created.name}"`}: shown once, only its hash is kept`,
      );
    return 0;
  }
  if (action === 'list') {
    const tokens = await withDatabase(config, (db) => listTokens(db, target));
    if (tokens === undefined) {
      console.error(`signroom: no organization "${target}"`);
      return 1;
    }
    if (values.json) console.log(JSON.stringify(tokens));
    else
      for (const token of tokens)
        console.log([token.id, JSON.stringify(token.name), token.organizationId, token.createdAt, token.lastUsedAt ?? 'never used'].join('  '));
    return 0;
  }
  if (action === 'revoke' && target !== undefined) {
    const revoked = await withDatabase(config, (db) => revokeToken(db, target, actor));
    if (!revoked) {
      console.error(`signroom: no token "${target}"`);
      return 1;
    }
    console.log(`revoked token ${target}`);
    return 0;
  }
  throw new UsageError('expected: token create ORG [--name NAME] [--json] | token list [ORG] [--json] | token revoke ID');
}

/** `user …` and `room …`: one change through the directory writer, as the API would make it. */
async function directoryCommand(config: Config, noun: 'user' | 'room', args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      ...ACTOR_OPTION,
      id: { type: 'string' },
      email: { type: 'string' },
      firstname: { type: 'string' },
      lastname: { type: 'string' },
      external: { type: 'boolean' },
      status: { type: 'string' },
      name: { type: 'string' },
    },
  });
  const actor = { actor: values.as };
  const [action, orgId, first, second] = positionals;
  const run = (work: (directory: DirectoryService) => Promise<unknown>) =>
    withDatabase(config, async (db) => {
      try {
        const result = await work(new DirectoryService(db, config.maxPageSize));
        if (result !== undefined) console.log(JSON.stringify(result));
        return 0;
      } catch (error) {
        if (!(error instanceof ProblemError)) throw error;
        // Its message names every bad field already.
        console.error(`signroom: ${error.code}: ${error.message}`);
        return 1;
      }
    });
  if (orgId === undefined) throw new UsageError(`${noun} ${action ?? ''} needs an organization id`);
  if (noun === 'user') {
    if (action === 'add' && first === undefined) {
      const body = Object.fromEntries(
        Object.entries({
          id: values.id,
          email: values.email,
          firstname: values.firstname,
          lastname: values.lastname,
          external: values.external,
          status: values.status,
        }).filter(([, value]) => value !== undefined),
      );
      return run(async (directory) => (await directory.createUser(orgId, body, actor)).body);
    }
    if (first !== undefined && second === undefined) {
      if (action === 'suspend' || action === 'activate') {
        const status = action === 'suspend' ? 'suspended' : 'active';
        return run(async (directory) => (await directory.patchUser(orgId, first, { status }, undefined, actor)).body);
      }
      if (action === 'delete') return run((directory) => directory.deleteUser(orgId, first, undefined, actor));
    }
    throw new UsageError('expected: user add ORG --email EMAIL [options] | user suspend|activate|delete ORG USER');
  }
  if (action === 'add' && first !== undefined && second === undefined) {
    return run(
      async (directory) => (await directory.createRoom(orgId, { id: first, ...(values.name !== undefined ? { name: values.name } : {}) }, actor)).body,
    );
  }
  if ((action === 'add-member' || action === 'remove-member') && first !== undefined && second !== undefined) {
    return run((directory) => directory.setMember(orgId, first, second, action === 'add-member', undefined, actor));
  }
  throw new UsageError('expected: room add ORG ROOM [--name NAME] | room add-member|remove-member ORG ROOM USER');
}

async function uploadCommand(config: Config, args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { name: { type: 'string' }, ...ACTOR_OPTION },
  });
  const [orgId, roomId, file] = positionals;
  if (orgId === undefined || roomId === undefined || file === undefined || positionals.length > 3) {
    throw new UsageError('expected: upload ORG ROOM FILE [--name NAME] [--as USER]');
  }
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch (error) {
    console.error(`signroom: cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
    return 1;
  }
  noteNewDatabase(config);
  // The same plugins the server registers, with one render worker and no HTTP.
  const core = Fastify({ logger: false, pluginTimeout: 0 });
  try {
    await core.register(databasePlugin, { config });
    await core.register(blobStorePlugin, { config });
    await core.register(documentsPlugin, { config, renderWorkers: 1 });
    const { documents } = core;
    try {
      const result = await documents.upload({
        orgId,
        roomId,
        username: values.as,
        payload: { ok: true, bytes },
        name: values.name ?? path.basename(file),
      });
      const metadata = await documents.metadata(orgId, roomId, result.id);
      console.log(JSON.stringify({ id: result.id, pageCount: metadata.pageCount, thumbnail: metadata.thumbnail }));
      return 0;
    } catch (error) {
      if (error instanceof ProblemError) {
        console.error(`signroom: ${error.code}: ${error.message}`);
        return 1;
      }
      throw error;
    }
  } finally {
    await core.close();
  }
}

/**
 * One command's part of USAGE: its lines (and their continuation lines) under "Commands:", or
 * undefined for a command that does not exist.
 */
function commandUsage(command: string): string | undefined {
  const lines = USAGE.split('\n');
  const picked: string[] = [];
  let inCommand = false;
  for (const line of lines.slice(lines.indexOf('Commands:') + 1)) {
    if (line === '') break;
    if (/^ {2}\S/.test(line)) inCommand = line.startsWith(`  ${command} `) || line === `  ${command}`;
    if (inCommand) picked.push(line);
  }
  if (picked.length === 0) return undefined;
  return `Usage of signroom ${command}:\n\n${picked.join('\n')}\n\nConfiguration comes from environment variables (see README).`;
}

async function main(argv: string[]): Promise<number> {
  const [command, ...args] = argv;
  if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
    console.log(USAGE);
    return command === undefined ? 2 : 0;
  }
  if (command === 'version' || command === '--version' || command === '-v') {
    console.log(`signroom ${VERSION}`);
    return 0;
  }
  // Asked of any command, help prints that command's usage and does nothing else (serve does not start).
  if (args.includes('--help') || args.includes('-h')) {
    const usage = commandUsage(command);
    if (usage === undefined) throw new UsageError(`unknown command "${command}"`);
    console.log(usage);
    return 0;
  }
  const config = loadConfig();
  switch (command) {
    case 'serve': {
      parseArgs({ args, options: { demo: { type: 'boolean' } } });
      let reserved: Reservation | undefined;
      if (args.includes('--demo')) {
        // Held from before the demo is loaded until the server listens on it.
        reserved = await reserveAddress(config);
        const code = await loadDemo(config).catch(async (error: unknown) => {
          await reserved?.release();
          throw error;
        });
        if (code !== 0) {
          await reserved.release();
          return code;
        }
      }
      warnIfNobodyCanSignIn(await serve(config, reserved));
      return -1;
    }
    case 'migrate': {
      parseArgs({ args, options: {} });
      const { database: handle, applied } = await openMigratedDatabase(config);
      try {
        console.log(
          applied.length === 0
            ? `database schema is up to date (${handle.description})`
            : `applied ${applied.length} migration(s) to ${handle.description}: ${applied.join(', ')}`,
        );
        return 0;
      } finally {
        await handle.close();
      }
    }
    case 'import': {
      const { values, positionals } = parseArgs({ args, allowPositionals: true, options: ACTOR_OPTION });
      const [file, ...rest] = positionals;
      if (file === undefined) throw new UsageError('import needs a file: signroom import FILE.json [--as NAME]');
      if (rest.length > 0) throw new UsageError(`unexpected "${rest.join(' ')}"`);
      let directory: OpenDirectoryFile;
      try {
        directory = openDirectoryFile(file);
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === undefined) throw error;
        const reason = code === 'ENOTREGULAR' ? 'not a regular file (the import reads it twice: save it to a file first)' : code;
        console.error(`signroom: cannot read ${file}: ${reason}`);
        return 1;
      }
      try {
        return await runImport(config, directory, { actor: values.as });
      } finally {
        directory.close();
      }
    }
    case 'demo':
      parseArgs({ args, options: {} });
      return loadDemo(config);
    case 'credential':
      return credentialCommand(config, args);
    case 'token':
      return tokenCommand(config, args);
    case 'upload':
      return uploadCommand(config, args);
    case 'user':
    case 'room':
      return directoryCommand(config, command, args);
    default:
      throw new UsageError(`unknown command "${command}"`);
  }
}

/** node:util's parseArgs refusing the command line (ERR_PARSE_ARGS_UNKNOWN_OPTION, …_INVALID_OPTION_VALUE, …). */
function isParseArgsError(error: unknown): error is Error {
  return error instanceof Error && String((error as NodeJS.ErrnoException).code).startsWith('ERR_PARSE_ARGS_');
}

/** What parseArgs says, in this CLI's words: its advice on `--` is for positionals, not a mistyped option. */
function parseArgsMessage(error: Error): string {
  const unknown = /^Unknown option '([^']+)'/.exec(error.message);
  return unknown === null ? error.message : `unknown option ${unknown[1]}`;
}

const argv = process.argv.slice(2);
main(argv).then(
  (code) => {
    if (code >= 0) process.exitCode = code;
  },
  (error: unknown) => {
    // A bad option (unknown, or missing its value) is a bad command line too: said with that command's usage.
    if (error instanceof UsageError || isParseArgsError(error)) {
      const message = error instanceof UsageError ? error.message : parseArgsMessage(error);
      console.error(`signroom: ${message}\n\n${(argv[0] === undefined ? undefined : commandUsage(argv[0])) ?? USAGE}`);
      process.exitCode = 2;
    } else if (error instanceof ListenError || error instanceof DatabaseUnavailableError || error instanceof SchemaNewerError) {
      console.error(`signroom: ${error.message}`);
      process.exitCode = 1;
    } else if (error instanceof ConfigError) {
      console.error(`signroom: configuration error: ${error.message}`);
      process.exitCode = 2;
    } else {
      console.error('signroom:', error);
      process.exitCode = 1;
    }
  },
);
