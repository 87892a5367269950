/** What the render pool tests share: an upload to the board room, and the render processes this test process started. */
import { readdirSync, readFileSync } from 'node:fs';
import { ACME_PASSWORD } from './fixtures.ts';
import { basic, type TestApp } from './test-app.ts';

export const DOCUMENTS = '/admin/api/v3/organizations/acme/rooms/board/documents';
export const ACME_AUTH = basic('acme-admin', ACME_PASSWORD);

/** Uploads a PDF to the board room of `t`'s app. */
export function upload(t: TestApp, pdf: Buffer) {
  return t.app.inject({
    method: 'POST',
    url: DOCUMENTS,
    headers: { authorization: ACME_AUTH, 'content-type': 'application/json' },
    payload: JSON.stringify({ payload: pdf.toString('base64') }),
  });
}

/** The render worker processes this test process started (through an app's pool). */
export function renderWorkers(): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
        return parent === process.pid && readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('render-worker');
      } catch {
        return false; // gone meanwhile
      }
    })
    .map(Number);
}
