import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { describe, it } from 'node:test';
import { runCli } from '../helpers/cli.ts';
import { freshDataDir } from '../helpers/test-app.ts';

const COMMANDS = ['serve', 'migrate', 'import', 'demo', 'credential', 'token', 'user', 'room', 'upload'];

describe('bin/signroom <command> --help', () => {
  for (const command of COMMANDS) {
    it(`prints the usage of ${command} and does nothing else`, async () => {
      const dataDir = freshDataDir();
      for (const flag of ['--help', '-h']) {
        // Arguments a command would act on are ignored once help is asked for.
        const result = await runCli([command, 'acme', flag], { SIGNROOM_DATA_DIR: dataDir, PORT: '1' });
        assert.equal(result.code, 0, result.stderr);
        assert.equal(result.stderr, '');
        assert.ok(result.stdout.startsWith(`Usage of signroom ${command}:\n`), result.stdout);
        assert.match(result.stdout, new RegExp(`^ {2}${command}\\b`, 'm'));
        assert.ok(!/^ {2}(?!\s)/m.test(result.stdout.replace(new RegExp(`^ {2}${command}\\b.*$`, 'gm'), '')), 'only this command is listed');
      }
    });
  }

  it('refuses arguments a command does not take, with exit 2, doing nothing', async () => {
    for (const args of [
      ['serve', 'extra'],
      ['serve', '--port', '1'],
      ['migrate', 'extra'],
      ['demo', 'extra'],
    ]) {
      const dataDir = freshDataDir();
      const result = await runCli(args, { SIGNROOM_DATA_DIR: dataDir, PORT: '1' });
      assert.equal(result.code, 2, `${args.join(' ')}: ${result.stderr}`);
      assert.match(result.stderr, /Unexpected argument|unknown option --port/, result.stderr);
      // That command's usage, not every command's.
      assert.match(result.stderr, new RegExp(`\\n\\nUsage of signroom ${args[0]}:\\n`), result.stderr);
      assert.deepEqual(readdirSync(dataDir), [], `${args.join(' ')} created nothing`);
    }
  });

  it('refuses help for a command that does not exist, with the whole usage', async () => {
    const result = await runCli(['frobnicate', '--help'], { SIGNROOM_DATA_DIR: freshDataDir() });
    assert.equal(result.code, 2);
    assert.match(result.stderr, /unknown command "frobnicate"\n\nUsage: signroom <command>/);
  });

  it('prints its version', async () => {
    for (const flag of ['--version', 'version']) {
      const result = await runCli([flag], { SIGNROOM_DATA_DIR: freshDataDir() });
      assert.equal(result.code, 0, result.stderr);
      assert.match(result.stdout, /^signroom \d+\.\d+\.\d+\n$/);
    }
  });
});
