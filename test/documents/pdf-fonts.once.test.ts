import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { PDFiumLibrary } from '@hyzyla/pdfium';
import { usesNonEmbeddedCjkFont, withoutEmbeddedFontMaps } from '../../src/documents/pdf-fonts.ts';
import { corpusDir } from '../helpers/corpus.ts';
import { rawPdf } from '../helpers/pdf.ts';

/** A page in one font: object 5 is the font, 6 its descendant (if any), 7 the descriptor, 8 the program, 9 the map. */
function pdfWithFont(font: string, descendant: string, descriptor: string): Buffer {
  const content = 'BT /F1 24 Tf 72 700 Td <0001> Tj ET';
  return rawPdf([
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>',
    `<< /Length ${content.length} >>\nstream\n${content}\nendstream`,
    font,
    descendant,
    descriptor,
    '<< /Length 0 >>\nstream\n\nendstream',
    '<< /Length 0 >>\nstream\n\nendstream',
  ]);
}

const TYPE0 = '<< /Type /Font /Subtype /Type0 /BaseFont /AAAAAE+DejaVuSans /Encoding /Identity-H /ToUnicode 9 0 R /DescendantFonts [6 0 R] >>';
const CID_TRUETYPE = '<< /Type /Font /Subtype /CIDFontType2 /BaseFont /AAAAAE+DejaVuSans /FontDescriptor 7 0 R /CIDToGIDMap 9 0 R >>';
const EMBEDDED = '<< /Type /FontDescriptor /FontName /AAAAAE+DejaVuSans /Flags 32 /FontFile2 8 0 R >>';
const NOT_EMBEDDED = '<< /Type /FontDescriptor /FontName /DejaVuSans /Flags 32 >>';

describe('withoutEmbeddedFontMaps', () => {
  it('blanks the map of an embedded composite font with spaces, keeping every byte offset', () => {
    const pdf = pdfWithFont(TYPE0, CID_TRUETYPE, EMBEDDED);
    const changed = withoutEmbeddedFontMaps(pdf);
    assert.ok(changed !== undefined);
    assert.equal(changed.length, pdf.length);
    const at = pdf.indexOf('/ToUnicode 9 0 R');
    assert.equal(changed.toString('latin1', at, at + 16), ' '.repeat(16));
    assert.deepEqual(changed.subarray(0, at), pdf.subarray(0, at));
    assert.deepEqual(changed.subarray(at + 16), pdf.subarray(at + 16));
    assert.equal(pdf.indexOf('/ToUnicode 9 0 R'), at, 'the original is left as it was');
  });

  it('blanks it for an embedded CFF composite font and an identity glyph map', () => {
    const cff = '<< /Type /Font /Subtype /CIDFontType0 /BaseFont /X /FontDescriptor 7 0 R >>';
    assert.ok(withoutEmbeddedFontMaps(pdfWithFont(TYPE0, cff, EMBEDDED.replace('/FontFile2', '/FontFile3'))));
    assert.ok(withoutEmbeddedFontMaps(pdfWithFont(TYPE0, CID_TRUETYPE.replace('/CIDToGIDMap 9 0 R', '/CIDToGIDMap /Identity'), EMBEDDED)));
  });

  it('keeps the map wherever glyphs may be chosen by Unicode', () => {
    const kept = {
      'font not embedded': pdfWithFont(TYPE0, CID_TRUETYPE, NOT_EMBEDDED),
      'TrueType composite font without a glyph map': pdfWithFont(TYPE0, CID_TRUETYPE.replace(' /CIDToGIDMap 9 0 R', ''), EMBEDDED),
      'simple TrueType font': pdfWithFont('<< /Type /Font /Subtype /TrueType /BaseFont /X /FontDescriptor 7 0 R /ToUnicode 9 0 R >>', '<< >>', EMBEDDED),
      'descendant missing': pdfWithFont(TYPE0.replace('[6 0 R]', '[60 0 R]'), CID_TRUETYPE, EMBEDDED),
    };
    for (const [what, pdf] of Object.entries(kept)) assert.equal(withoutEmbeddedFontMaps(pdf), undefined, what);
  });

  it('judges each font of an object by its own dictionary', () => {
    // Fonts written inline, two to an object: a simple TrueType font keeps its map beside an embedded composite one.
    const simple = '<< /Type /Font /Subtype /TrueType /BaseFont /X /FontDescriptor 7 0 R /ToUnicode 9 0 R >>';
    const composite = '<< /Type /Font /Subtype /Type0 /BaseFont /AAAAAE+DejaVuSans /Encoding /Identity-H /ToUnicode 8 0 R /DescendantFonts [6 0 R] >>';
    const pdf = pdfWithFont(`<< /F1 ${simple} /F2 ${composite} >>`, CID_TRUETYPE, EMBEDDED);
    const changed = withoutEmbeddedFontMaps(pdf);
    assert.ok(changed !== undefined);
    assert.ok(changed.includes('/ToUnicode 9 0 R'), "the simple font's map stays");
    assert.ok(!changed.includes('/ToUnicode 8 0 R'), "the composite font's map goes");
  });

  it('leaves "/ToUnicode" outside a font dictionary alone', () => {
    const content = 'BT /F1 24 Tf (/ToUnicode 9 0 R) Tj ET';
    const pdf = rawPdf([
      '<< /Type /Catalog /Pages 2 0 R >>',
      '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
      '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R >>',
      `<< /Length ${content.length} >>\nstream\n${content}\nendstream`,
    ]);
    assert.equal(withoutEmbeddedFontMaps(pdf), undefined);
  });

  it('returns on hostile bytes: long runs of digits and spaces, and thousands of fonts', () => {
    const hostile = [
      Buffer.from(`%PDF-1.7\n/ToUnicode ${'1'.repeat(2_000_000)} 0 obj`),
      Buffer.from(`%PDF-1.7\n1 0 obj << /ToUnicode${' '.repeat(2_000_000)}2 0 R >>`),
      Buffer.from(`%PDF-1.7 /ToUnicode\n${'12 '.repeat(1_000_000)}obj`),
      Buffer.from(`%PDF-1.7\n${'1 0 obj << /Subtype /Type0 /DescendantFonts [1 0 R] /ToUnicode 2 0 R >>\n'.repeat(20_000)}`),
    ];
    for (const pdf of hostile) {
      assert.equal(withoutEmbeddedFontMaps(pdf), undefined);
      assert.equal(usesNonEmbeddedCjkFont(pdf), false);
    }
  });

  it('changes no pixel of any corpus file it applies to, and applies to TCPDF files', async () => {
    const library = await PDFiumLibrary.init();
    const draw = async (bytes: Buffer): Promise<Buffer> => {
      const document = await library.loadDocument(bytes);
      try {
        const page = document.getPage(0);
        const rendered = await page.render({ scale: 200 / page.getOriginalSize().originalWidth, render: 'bitmap' as never, colorSpace: 'BGRA' });
        return Buffer.from(rendered.data);
      } finally {
        document.destroy();
      }
    };
    const dir = corpusDir();
    const changed: string[] = [];
    for (const name of readdirSync(dir).filter((file) => file.toLowerCase().endsWith('.pdf'))) {
      const pdf = readFileSync(path.join(dir, name));
      const blanked = withoutEmbeddedFontMaps(pdf);
      if (blanked === undefined) continue;
      changed.push(name);
      assert.ok((await draw(blanked)).equals(await draw(pdf)), `${name}: the thumbnail changed`);
    }
    assert.ok(changed.includes('basicapi.pdf'), `applied to ${changed.join(', ')}`);
    assert.ok(changed.length >= 20, `applied to ${changed.length} files`);
  });
});

describe('usesNonEmbeddedCjkFont', () => {
  const cid = (ordering: string, descriptor = ' /FontDescriptor 7 0 R') =>
    `<< /Type /Font /Subtype /CIDFontType0 /BaseFont /Ryumin-Light /CIDSystemInfo << /Registry (Adobe) /Ordering (${ordering}) /Supplement 2 >>${descriptor} >>`;

  it('finds a Chinese, Japanese or Korean composite font the file does not embed', () => {
    for (const ordering of ['GB1', 'CNS1', 'Japan1', 'Korea1'])
      assert.equal(usesNonEmbeddedCjkFont(pdfWithFont(TYPE0, cid(ordering), NOT_EMBEDDED)), true, ordering);
    assert.equal(usesNonEmbeddedCjkFont(pdfWithFont(TYPE0, cid('Japan1', ''), NOT_EMBEDDED)), true, 'no descriptor at all');
  });

  it('passes over embedded, non-CJK and unseen fonts', () => {
    const passed = {
      embedded: pdfWithFont(TYPE0, cid('Japan1'), EMBEDDED.replace('/FontFile2', '/FontFile3')),
      'Identity ordering': pdfWithFont(TYPE0, cid('Identity'), NOT_EMBEDDED),
      'descriptor out of sight': pdfWithFont(TYPE0, cid('Japan1', ' /FontDescriptor 70 0 R'), NOT_EMBEDDED),
      'no composite font': pdfWithFont('<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>', '<< >>', '<< >>'),
    };
    for (const [what, pdf] of Object.entries(passed)) assert.equal(usesNonEmbeddedCjkFont(pdf), false, what);
  });

  it('tells the corpus files with CJK text in fonts they do not embed', () => {
    const dir = corpusDir();
    const read = (name: string) => readFileSync(path.join(dir, name));
    for (const name of ['issue8372.pdf', 'issue2128r.pdf', 'noembed-identity.pdf']) assert.equal(usesNonEmbeddedCjkFont(read(name)), true, name);
    for (const name of ['basicapi.pdf', 'arial_unicode_en_cidfont.pdf', '160F-2019.pdf']) assert.equal(usesNonEmbeddedCjkFont(read(name)), false, name);
  });
});
