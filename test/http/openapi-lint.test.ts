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

/** The served OpenAPI document passes `redocly lint` (its recommended rules) with no error (contract section 7). */
describe('OpenAPI document under redocly lint', () => {
  let t: TestApp;
  let dir: string;
  before(async () => {
    t = await startTestApp({ SIGNROOM_PUBLIC_BASE_URL: 'https://sign.example.com' });
    dir = mkdtempSync(path.join(tmpdir(), 'signroom-redocly-'));
  });
  after(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('has no error, and names the configured server', async () => {
    const response = await t.app.inject({ url: '/admin/api/v3/openapi.json' });
    assert.equal(response.statusCode, 200);
    assert.deepEqual(
      response.json<{ servers: { url: string }[] }>().servers.map((server) => server.url),
      ['https://sign.example.com'],
    );
    const file = path.join(dir, 'openapi.json');
    writeFileSync(file, response.body);
    // Offline: no telemetry, no update check.
    const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' };
    const { stdout } = await promisify(execFile)(process.execPath, [REDOCLY, 'lint', file, '--format=json'], { env, maxBuffer: 64 * 1024 * 1024 }).catch(
      (error: { stdout?: string }) => ({ stdout: error.stdout ?? '' }),
    );
    const problems = (JSON.parse(stdout) as { problems: LintProblem[] }).problems;
    const errors = problems.filter((problem) => problem.severity === 'error');
    assert.deepEqual(
      errors.map((problem) => `${problem.ruleId} at ${problem.location[0]?.pointer}: ${problem.message}`),
      [],
    );
  });
});
