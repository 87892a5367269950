/**
 * Takes the console screenshots shown in the README and docs/console.md: the demo organization
 * served from a temporary directory, two documents uploaded, the signing room and directory
 * views at desktop size and at 390 px.
 *
 *   npm run screenshots
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { startSignroom } from '../bench/bench-server.ts';
import { launchChromium } from '../test/helpers/browser.ts';
import { makePdf } from '../test/helpers/pdf.ts';

const root = path.join(import.meta.dirname, '..');
const signroom = path.join(root, 'bin', 'signroom');
const out = path.join(root, 'docs', 'images');
const dataDir = mkdtempSync(path.join(tmpdir(), 'signroom-screenshots-'));
const env = { ...process.env, SIGNROOM_DATA_DIR: dataDir, SIGNROOM_LOG_LEVEL: 'warn' };
const port = 18098;
const api = `http://127.0.0.1:${port}/admin/api/v3/organizations/demo/rooms/board/documents`;
const authorization = `Basic ${Buffer.from('demo:demo-password').toString('base64')}`;

await new Promise<void>((resolve, reject) =>
  spawn(signroom, ['demo'], { env, stdio: 'inherit' }).on('close', (code) => (code === 0 ? resolve() : reject(new Error(`signroom demo exited ${code}`)))),
);
const server = await startSignroom(signroom, env, port);
const browser = await launchChromium();
try {
  const letter = makePdf([
    {
      width: 595,
      height: 842,
      content:
        'BT /F1 28 Tf 60 760 Td (Service agreement) Tj ET 0 0 0 RG 60 700 m 535 700 l S BT /F1 12 Tf 60 670 Td (Signed by both parties on the date below.) Tj ET',
    },
  ]);
  const chart = await sharp({ create: { width: 640, height: 400, channels: 3, background: '#2f6f9f' } })
    .png()
    .toBuffer();
  for (const [name, bytes] of [
    ['Service agreement.pdf', letter],
    ['Floor plan.png', chart],
  ] as const) {
    const response = await fetch(api, {
      method: 'POST',
      headers: { authorization, 'content-type': 'application/json' },
      body: JSON.stringify({ name, payload: bytes.toString('base64') }),
    });
    if (response.status !== 201) throw new Error(`upload of ${name}: ${response.status}`);
  }
  for (const [suffix, viewport] of [
    ['desktop', { width: 1280, height: 860 }],
    ['phone', { width: 390, height: 844 }],
  ] as const) {
    const page = await (await browser.newContext({ viewport, deviceScaleFactor: 1 })).newPage();
    await page.goto(`http://127.0.0.1:${port}/console/`);
    await page.getByRole('textbox', { name: 'Username' }).fill('demo');
    await page.getByRole('textbox', { name: 'Password' }).fill('demo-password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('searchbox', { name: 'Search signatories' }).fill('mül');
    await page
      .getByRole('status')
      .filter({ hasText: /signator/ })
      .waitFor();
    await page.getByRole('img', { name: 'Service agreement.pdf' }).waitFor();
    await page.waitForTimeout(500);
    await page.screenshot({ path: path.join(out, `console-room-${suffix}.png`) });
    await page.getByRole('button', { name: 'Directory' }).click();
    await page.getByRole('heading', { name: 'Users' }).waitFor();
    await page.waitForTimeout(500);
    await page.screenshot({ path: path.join(out, `console-directory-${suffix}.png`) });
    await page.context().close();
  }
  console.log(`screenshots written to ${path.relative(process.cwd(), out)}`);
} finally {
  await browser.close();
  server.kill('SIGTERM');
  rmSync(dataDir, { recursive: true, force: true });
}
