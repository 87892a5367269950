/**
 * `npm test`: runs the suite once per database named in DIALECTS (default
 * `sqlite,postgres`). The unit tests (test/domain, test/services, test/db) run once; everything
 * that touches a database runs on each; test/postgres holds what only
 * PostgreSQL has (several processes on one database, a server that goes away).
 * PostgreSQL being unreachable fails the run with a message saying how to
 * start it; it is never skipped.
 */
import { spawnSync } from 'node:child_process';
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

/** What runs on a database: the integration tests, the PostgreSQL-only ones there, the pure unit tests on the first database only. */
function suiteFiles(dialect: string, first: boolean): string[] {
  const files = ['test/http/**/*.test.ts', 'test/cli/**/*.test.ts', 'test/repositories/**/*.test.ts'];
  if (first)
    files.unshift(
      'test/domain/**/*.test.ts',
      'test/documents/**/*.test.ts',
      'test/lib/**/*.test.ts',
      'test/search-index/**/*.test.ts',
      'test/directory/**/*.test.ts',
      'test/db/**/*.test.ts',
      'test/console/**/*.test.ts',
    );
  if (dialect === 'postgres') files.push('test/postgres/**/*.test.ts');
  return files;
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
