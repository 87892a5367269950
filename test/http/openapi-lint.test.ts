import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { startTestApp, type TestApp } from '../helpers/test-app.ts';

const REDOCLY = createRequire(import.meta.url).resolve('@redocly/cli/bin/cli.js');

interface LintProblem {
  ruleId: string;
  severity: 'error' | 'warn';
  message: string;
  location: { pointer: string }[];
}

/**
 * The served OpenAPI document passes `redocly lint` (its recommended rules) with no error (contract
 * section 7), both as served by default (servers: `/`) and with a public base URL configured.
 */
describe('OpenAPI document under redocly lint', () => {
  let configured: TestApp;
  let plain: TestApp;
  let dir: string;
  before(async () => {
    configured = await startTestApp({ SIGNROOM_PUBLIC_BASE_URL: 'https://sign.example.com' });
    plain = await startTestApp();
    dir = mkdtempSync(path.join(tmpdir(), 'signroom-redocly-'));
  });
  after(async () => {
    await configured.close();
    await plain.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The document `t` serves, its servers' URLs, and redocly's errors on it (each as rule, place and message). */
  async function lint(t: TestApp, name: string): Promise<{ servers: string[]; errors: string[] }> {
    const response = await t.app.inject({ url: '/admin/api/v3/openapi.json' });
    assert.equal(response.statusCode, 200);
    const file = path.join(dir, `${name}.json`);
    writeFileSync(file, response.body);
    // Offline: no telemetry, no update check.
    const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' };
    const { stdout } = await promisify(execFile)(process.execPath, [REDOCLY, 'lint', file, '--format=json'], { env, maxBuffer: 64 * 1024 * 1024 }).catch(
      (error: { stdout?: string }) => ({ stdout: error.stdout ?? '' }),
    );
    const problems = (JSON.parse(stdout) as { problems: LintProblem[] }).problems;
    return {
      servers: response.json<{ servers: { url: string }[] }>().servers.map((server) => server.url),
      errors: problems
        .filter((problem) => problem.severity === 'error')
        .map((problem) => `${problem.ruleId} at ${problem.location[0]?.pointer}: ${problem.message}`),
    };
  }

  it('has no error, and names the configured server', async () => {
    const { servers, errors } = await lint(configured, 'configured');
    assert.deepEqual(servers, ['https://sign.example.com']);
    assert.deepEqual(errors, []);
  });

  it('has no error as served by default, its server the relative `/`', async () => {
    const { servers, errors } = await lint(plain, 'default');
    assert.deepEqual(servers, ['/']);
    assert.deepEqual(errors, []);
  });
});
