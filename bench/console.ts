/// <reference lib="dom" />
/**
 * Console benchmark (issue 21): how soon the console is usable, and how soon a search shows its
 * result after the last keystroke, in a real Chromium against an organization of N users. The
 * baseline, measured in the same run, is the same lookup asked of the API directly.
 *
 *   npm run bench:console -- [--users 1000000] [--rounds 5] [--dialect sqlite|postgres]
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { launchChromium } from '../test/helpers/browser.ts';
import { benchDatabase } from './bench-database.ts';
import { BENCH_BASIC, latencySummary, writeBenchDirectory } from './bench-directory.ts';
import { startSignroom } from './bench-server.ts';

const { values } = parseArgs({
  options: {
    users: { type: 'string', default: '1000000' },
    rounds: { type: 'string', default: '5' },
    dialect: { type: 'string', default: 'sqlite' },
  },
});
if (values.dialect !== 'sqlite' && values.dialect !== 'postgres') throw new Error('--dialect is sqlite or postgres');
const users = Number(values.users);
const rounds = Math.max(1, Number(values.rounds));

const root = fileURLToPath(new URL('..', import.meta.url));
const signroom = path.join(root, 'bin/signroom');
const dataDir = mkdtempSync(path.join(tmpdir(), 'signroom-bench-console-'));
const database = await benchDatabase(values.dialect);
const env = { ...process.env, ...database.env, SIGNROOM_DATA_DIR: dataDir, SIGNROOM_LOG_LEVEL: 'warn' };
const log = (message: string) => process.stderr.write(`${message}\n`);
const ms = (value: number) => value.toFixed(0);

function run(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(signroom, args, { env, stdio: ['ignore', 'ignore', 'inherit'] });
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`signroom ${args.join(' ')} exited ${code}`))));
  });
}

/** Terms a person types, from rare to common; each is typed into a cleared box, one key every 60 ms. */
const TERMS = ['kowalski.4242', 'ann sch', 'mul', 'garc', 'jen'];
const KEY_DELAY_MS = 60;

log(`generating and importing ${users} users…`);
writeBenchDirectory(path.join(dataDir, 'directory.json'), users);
await run(['import', path.join(dataDir, 'directory.json')]);
const port = 18097;
const origin = `http://127.0.0.1:${port}`;
let server: ChildProcess | undefined;
const browser = await launchChromium();
try {
  server = await startSignroom(signroom, env, port);
  // Wait for the in-memory search index, as a server that has run for a while has it.
  for (;;) {
    const ready = (await (await fetch(`${origin}/readyz`)).json()) as { searchIndexes?: { loading: number } };
    if (ready.searchIndexes?.loading === 0) break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  const lookupUrl = (term: string) =>
    `${origin}/admin/api/v3/organizations/bench/rooms/large/signatories/lookup?searchQuery=${encodeURIComponent(term)}&purpose=SIGNING_REQUEST_DELIVERY_RECIPIENT&page=0&size=20`;
  const apiTotal = async (term: string) => {
    const started = performance.now();
    const body = (await (await fetch(lookupUrl(term), { headers: { authorization: BENCH_BASIC } })).json()) as { totalElements: number };
    return { total: body.totalElements, ms: performance.now() - started };
  };
  await apiTotal('warm-up: the password hash is paid once');

  const firstView: number[] = [];
  const signedIn: number[] = [];
  const search: number[] = [];
  const api: number[] = [];
  for (let round = 0; round < rounds; round++) {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    let started = performance.now();
    await page.goto(`${origin}/console/`);
    const username = page.getByRole('textbox', { name: 'Username' });
    await username.waitFor();
    await username.fill('bench');
    firstView.push(performance.now() - started);
    await page.getByRole('textbox', { name: 'Password' }).fill('bench-password');
    started = performance.now();
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page
      .getByRole('status')
      .filter({ hasText: /\d+ signatories$/ })
      .waitFor();
    signedIn.push(performance.now() - started);
    const box = page.getByRole('searchbox', { name: 'Search signatories' });
    for (const term of TERMS) {
      // Each round asks the API first (the baseline), so the console's lookup is not the first of its kind.
      const expected = await apiTotal(term);
      api.push(expected.ms);
      await box.fill('');
      // The page notes when the last keystroke reached the box, and when the status first read the answer.
      await box.evaluate((element) => element.addEventListener('input', () => ((window as unknown as { lastInput: number }).lastInput = performance.now())));
      await box.pressSequentially(term, { delay: KEY_DELAY_MS });
      const text = `${expected.total} ${expected.total === 1 ? 'signatory' : 'signatories'}`;
      const shown = await page.waitForFunction(
        (want) =>
          document.querySelector('[role="status"]')?.textContent === want ? performance.now() - (window as unknown as { lastInput: number }).lastInput : false,
        text,
        { timeout: 10_000, polling: 'raf' },
      );
      search.push((await shown.jsonValue()) as number);
    }
    await context.close();
  }
  const row = (name: string, values: number[], goal: string) => {
    const summary = latencySummary(values);
    return `| ${name} | ${summary.n} | ${ms(summary.p50)} | ${ms(summary.p99)} | ${ms(summary.max)} | ${goal} |`;
  };
  console.log(`\nConsole in Chromium, ${users.toLocaleString('en-US')} users on ${values.dialect}, ${new Date().toISOString().slice(0, 16)}Z`);
  console.log('\n| measure (ms) | n | p50 | p99 | max | goal |\n|---|---|---|---|---|---|');
  console.log(row('first view: page load to a usable sign-in form', firstView, '< 1000'));
  console.log(row('sign-in to the first page of signatories', signedIn, '—'));
  console.log(row('search: last keystroke to the result shown (200 ms debounce included)', search, '< 1000'));
  console.log(row('baseline: the same lookup asked of the API directly', api, '—'));
  const ratio = latencySummary(search).p50 / Math.max(1, latencySummary(api).p50);
  console.log(`\nsearch p50 / API lookup p50 = ${ratio.toFixed(1)}×`);
} finally {
  await browser.close();
  server?.kill('SIGTERM');
  await database.drop();
  rmSync(dataDir, { recursive: true, force: true });
}
