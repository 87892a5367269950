import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { corpusDir } from '../helpers/corpus.ts';
import { ACME_PASSWORD, DIRECTORY } from '../helpers/fixtures.ts';
import { basic, startTestApp, type TestApp } from '../helpers/test-app.ts';

/*
 * Thumbnails show what is on page 1: for corpus files that exercise each part of
 * the renderer, ours is compared pixel by pixel with poppler's pdftoppm at the
 * same width (mean absolute difference of grey levels, 0–255).
 */
const CORPUS = corpusDir();
const run = promisify(execFile);

const SAMPLES: [file: string, feature: string][] = [
  ['basicapi.pdf', 'text in embedded fonts'],
  ['arial_unicode_en_cidfont.pdf', 'CID-keyed font'],
  ['cidfont_cmap_overflow.pdf', 'CMap'],
  ['Type3WordSpacing.pdf', 'Type 3 font'],
  ['S2.pdf', 'JPEG 2000 image (WASM decoder)'],
  ['bitmap-halftone.pdf', 'JBIG2 image (WASM decoder)'],
  ['issue11124.pdf', 'full-page fill'],
  // Without a CJK font on the machine, poppler draws a box per character; PDFium alone drew nothing.
  ['issue8372.pdf', 'CJK text in a font the file does not embed'],
];

async function greyPixels(png: Buffer, width: number, height: number): Promise<Buffer> {
  return sharp(png).flatten({ background: '#ffffff' }).resize(width, height, { fit: 'fill' }).greyscale().raw().toBuffer();
}

describe('thumbnails against poppler', () => {
  let t: TestApp;
  let out: string;
  before(async () => {
    t = await startTestApp();
    await t.importDirectory(DIRECTORY);
    out = mkdtempSync(path.join(tmpdir(), 'signroom-fidelity-'));
  });
  after(async () => {
    rmSync(out, { recursive: true, force: true });
    await t.close();
  });

  for (const [file, feature] of SAMPLES) {
    it(`draws ${feature} like poppler (${file})`, async () => {
      const bytes = readFileSync(path.join(CORPUS, file));
      const response = await t.app.inject({
        method: 'POST',
        url: '/admin/api/v3/organizations/acme/rooms/board/documents',
        headers: { authorization: basic('acme-admin', ACME_PASSWORD), 'content-type': 'application/json' },
        payload: JSON.stringify({ payload: bytes.toString('base64') }),
      });
      assert.equal(response.statusCode, 201, response.body);
      const ours = Buffer.from(response.json().thumbnail.replace(/^data:image\/png;base64,/, ''), 'base64');
      const { width, height } = await sharp(ours).metadata();
      await run('pdftoppm', [
        '-f',
        '1',
        '-l',
        '1',
        '-scale-to-x',
        '200',
        '-scale-to-y',
        '-1',
        '-png',
        '-singlefile',
        path.join(CORPUS, file),
        path.join(out, 'p'),
      ]);
      const popplerFull = readFileSync(path.join(out, 'p.png'));
      const full = await sharp(popplerFull).metadata();
      const poppler = await sharp(popplerFull)
        .extract({ left: 0, top: 0, width: full.width, height: Math.min(full.height, 2 * full.width) })
        .png()
        .toBuffer();
      const a = await greyPixels(ours, width, height);
      const b = await greyPixels(poppler, width, height);
      let difference = 0;
      let ink = 0;
      for (let i = 0; i < a.length; i++) {
        difference += Math.abs(a[i]! - b[i]!);
        ink += 255 - a[i]!;
      }
      assert.equal(width, 200);
      assert.ok(ink / a.length > 0.1, 'the thumbnail is not blank');
      assert.ok(difference / a.length < 12, `mean difference from poppler ${(difference / a.length).toFixed(1)}`);
    });
  }
});
