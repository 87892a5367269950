import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { corpusDir } from '../helpers/corpus.ts';
import { ACME_PASSWORD, DIRECTORY } from '../helpers/fixtures.ts';
import { compareWithPoppler, popplerPage1 } from '../helpers/poppler.ts';
import { basic, startTestApp, type TestApp } from '../helpers/test-app.ts';

/*
 * Thumbnails show what is on page 1: for corpus files that exercise each part of
 * the renderer, ours is compared pixel by pixel with poppler's pdftoppm at the
 * same width (mean absolute difference of grey levels, 0–1).
 */
const CORPUS = corpusDir();

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

describe('thumbnails against poppler', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
    await t.importDirectory(DIRECTORY);
  });
  after(async () => {
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
      const poppler = await popplerPage1(path.join(CORPUS, file), 200);
      assert.ok(poppler !== undefined, 'poppler draws page 1');
      const { difference, blank, width } = await compareWithPoppler(ours, poppler);
      assert.equal(width, 200);
      assert.ok(!blank, 'the thumbnail is not blank');
      // Closer than the corpus-wide measure: each of these files shows one feature the renderer must get right.
      assert.ok(difference < 12 / 255, `mean difference from poppler ${difference.toFixed(3)}`);
    });
  }
});
