/**
 * `npm test`: runs the suite once per database named in DIALECTS (default
 * `sqlite,postgres`). A test file's name says where it runs, so that test/ can
 * mirror src/ whatever a test needs: `*.once.test.ts` runs once, on the first
 * database (pure rules, and tests whose subject does not change with the database);
 * `*.postgres.test.ts` only on PostgreSQL (several processes on one database, a
 * server that goes away); every other `*.test.ts` on each database.
 * PostgreSQL being unreachable fails the run with a message saying how to
 * start it; it is never skipped.
 */
import { spawnSync } from 'node:child_process';
import { globSync } from 'node:fs';
import { POSTGRES_ADMIN_URL, requirePostgres } from './helpers/databases.ts';

const KNOWN = ['sqlite', 'postgres'];
const dialects = (process.env['DIALECTS'] ?? 'sqlite,postgres')
  .split(',')
  .map((name) => name.trim())
  .filter((name) => name !== '');
const unknown = dialects.filter((name) => !KNOWN.includes(name));
if (unknown.length > 0 || dialects.length === 0) {
  console.error(`DIALECTS must list some of ${KNOWN.join(', ')}; got "${process.env['DIALECTS']}"`);
  process.exit(2);
}
const extra = process.argv.slice(2);

/** The test files that run on `dialect`, chosen by name (see above); `first` is whether it is the first database of the run. */
function suiteFiles(dialect: string, first: boolean): string[] {
  return globSync('test/**/*.test.ts')
    .filter((file) => (file.endsWith('.once.test.ts') ? first : file.endsWith('.postgres.test.ts') ? dialect === 'postgres' : true))
    .sort();
}

let failed = false;
for (const [index, dialect] of dialects.entries()) {
  if (dialect === 'postgres') {
    try {
      await requirePostgres();
    } catch (error) {
      console.error(`\n✖ the PostgreSQL suite cannot run: ${(error as Error).message}`);
      failed = true;
      continue;
    }
  }
  const files = extra.length > 0 ? extra : suiteFiles(dialect, index === 0);
  const where = dialect === 'postgres' ? ` (fresh databases on ${new URL(POSTGRES_ADMIN_URL).host})` : '';
  console.log(`\n# suite on ${dialect}${where}`);
  const result = spawnSync(process.execPath, ['--test', '--test-concurrency=1', ...files], {
    stdio: 'inherit',
    env: { ...process.env, SIGNROOM_TEST_DIALECT: dialect },
  });
  if (result.status !== 0) {
    console.error(`\n✖ the suite failed on ${dialect}`);
    failed = true;
  }
}
process.exit(failed ? 1 : 0);
