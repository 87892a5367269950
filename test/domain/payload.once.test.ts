import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { decodePayload, sniffDocumentType } from '../../src/domain/payload.ts';

const ok = (payload: string) => {
  const result = decodePayload(payload);
  assert.ok(result.ok, `expected ${JSON.stringify(payload.slice(0, 40))} to decode: ${result.ok ? '' : result.reason}`);
  return result.bytes;
};
const refused = (payload: string) => {
  const result = decodePayload(payload);
  assert.equal(result.ok, false, `expected ${JSON.stringify(payload.slice(0, 40))} to be refused`);
  return result.ok ? '' : result.reason;
};

describe('decodePayload', () => {
  it('round-trips any bytes in every accepted spelling', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 300 }), fc.nat(3), (data, variant) => {
        const bytes = Buffer.from(data);
        const standard = bytes.toString('base64');
        const spellings = [
          standard,
          standard.replace(/=+$/, ''),
          bytes.toString('base64url'),
          `data:application/pdf;base64,${standard}`,
          standard.replace(/(.{76})/g, '$1\r\n'),
          ` ${standard.replace(/(.{60})/g, '$1\n')}\n`,
          `\n  data:image/png;base64,${standard}\n`,
        ];
        const spelling = spellings[(variant + data.length) % spellings.length]!;
        assert.deepEqual(ok(spelling), bytes);
      }),
    );
  });

  it('accepts exactly what a plain reference validator accepts', () => {
    const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
    const reference = (text: string): Buffer | undefined => {
      const clean = text.replace(/[ \t\r\n]/g, '');
      const body = clean.replace(/={1,2}$/, '');
      const padding = clean.length - body.length;
      if (body.length === 0 || body.length % 4 === 1) return undefined;
      if (/[+/]/.test(body) && /[-_]/.test(body)) return undefined;
      if (!/^[A-Za-z0-9+/_-]*$/.test(body)) return undefined;
      if (padding > 0 && clean.length % 4 !== 0) return undefined;
      const last = ALPHABET.indexOf(body.at(-1)!.replace('-', '+').replace('_', '/'));
      if ((body.length % 4 === 2 && (last & 0x0f) !== 0) || (body.length % 4 === 3 && (last & 0x03) !== 0)) return undefined;
      return Buffer.from(body.replaceAll('-', '+').replaceAll('_', '/'), 'base64');
    };
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom(...'AQgw+/-_=\n é!*'.split('')), maxLength: 30 }), (text) => {
        const expected = reference(text);
        const actual = decodePayload(text);
        assert.equal(actual.ok, expected !== undefined, JSON.stringify(text));
        if (actual.ok) assert.deepEqual(actual.bytes, expected);
      }),
      { numRuns: 5000 },
    );
  });

  it('accepts a data URI with parameters', () => {
    assert.deepEqual(ok('data:image/png;name=a.png;base64,AAEC'), Buffer.from([0, 1, 2]));
  });

  it('refuses invalid base64 anywhere, naming the problem', () => {
    assert.match(refused('AAEC!AAA'), /character "!" (at|near) position 5/);
    assert.match(refused('QQ=='.replace('QQ', 'QR')), /unused bits/);
    assert.match(refused('AAECAA*A'), /character "\*"/);
    assert.match(refused('AA=CAAAA'), /padding/);
    assert.match(refused('AAE'.padEnd(4, '=') + '='), /padding|not base64/);
    assert.match(refused('AAECA'), /length/);
    assert.match(refused('AA+_'), /mixes/);
    assert.match(refused('AAEC\u00e9'), /not base64/);
    assert.match(refused('AAE='.replace('=', '==')), /padding/);
  });

  it('refuses empty payloads', () => {
    assert.match(refused(''), /empty/);
    assert.match(refused('  \n '), /empty/);
    assert.match(refused('data:application/pdf;base64,'), /empty/);
    assert.match(refused('===='), /empty|padding|not base64/);
  });
});

describe('sniffDocumentType', () => {
  it('recognises PDF, PNG and JPEG by their bytes', () => {
    assert.equal(sniffDocumentType(Buffer.from('%PDF-1.7\n...')), 'application/pdf');
    assert.equal(sniffDocumentType(Buffer.concat([Buffer.from('junk before header\n'), Buffer.from('%PDF-1.4')])), 'application/pdf');
    assert.equal(sniffDocumentType(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0])), 'image/png');
    assert.equal(sniffDocumentType(Buffer.from([0xff, 0xd8, 0xff, 0xe0])), 'image/jpeg');
    // No %PDF- line, but a comment and PDF objects: readers (pdf.js, poppler) open these.
    assert.equal(sniffDocumentType(Buffer.from('%\xe2\xe3\n1 0 obj\n<< /Type /Catalog >>', 'latin1')), 'application/pdf');
    // Nor a comment: the file starts with its first object (pdfinfo and pdftoppm open it).
    assert.equal(sniffDocumentType(Buffer.from('1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>')), 'application/pdf');
  });
  it('refuses anything else', () => {
    assert.equal(sniffDocumentType(Buffer.from('hello, world')), undefined);
    assert.equal(sniffDocumentType(Buffer.from('1 0 obj, said the text file')), undefined);
    assert.equal(sniffDocumentType(Buffer.from([0x50, 0x4b, 0x03, 0x04])), undefined); // ZIP
    assert.equal(sniffDocumentType(Buffer.concat([Buffer.alloc(2000), Buffer.from('%PDF-1.4')])), undefined);
  });
});
