import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { decodePayload } from '../../src/domain/payload.ts';
import { JsonBodyError, parseUploadBody } from '../../src/domain/upload-body.ts';

const parse = (text: string) => parseUploadBody(Buffer.from(text, 'utf8'));

describe('parseUploadBody', () => {
  it('parses any JSON exactly like JSON.parse', () => {
    fc.assert(
      fc.property(fc.json({ maxDepth: 6 }), (text) => {
        fc.pre(!text.includes('__proto__') && !text.includes('"payload"') && !text.includes('"constructor"'));
        assert.deepEqual(parse(text).value, JSON.parse(text));
      }),
      { numRuns: 2000 },
    );
  });

  it('refuses what JSON.parse refuses', () => {
    fc.assert(
      fc.property(fc.json({ maxDepth: 3 }), fc.nat(), fc.string({ minLength: 1, maxLength: 3 }), (text, at, junk) => {
        const position = at % (text.length + 1);
        const broken = text.slice(0, position) + junk + text.slice(position);
        fc.pre(!broken.includes('__proto__') && !broken.includes('"payload"') && !broken.includes('"constructor"'));
        let expected: unknown;
        try {
          expected = JSON.parse(broken);
        } catch {
          assert.throws(() => parse(broken), JsonBodyError, broken);
          return;
        }
        assert.deepEqual(parse(broken).value, expected);
      }),
      { numRuns: 3000 },
    );
  });

  it('decodes the payload from the raw bytes, escapes included, like decodePayload', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 400 }), fc.nat(6), (data, variant) => {
        const bytes = Buffer.from(data);
        const standard = bytes.toString('base64');
        const spellings = [
          standard,
          bytes.toString('base64url'),
          standard.replace(/=+$/, ''),
          standard.replace(/(.{76})/g, '$1\r\n'),
          `data:application/pdf;base64,${standard}`,
          ` ${standard.replace(/(.{10})/g, '$1\t')} `,
          `\r\n\t data:application/pdf;base64,${standard}\n`,
        ];
        const payload = spellings[variant % spellings.length]!;
        // JSON.stringify escapes the line breaks; also escape "/" and a letter as \u, as some encoders do.
        const json = JSON.stringify({ name: 'x', payload }).replaceAll('/', '\\/').replace('A', '\\u0041');
        const parsed = parse(json);
        assert.deepEqual(parsed.value, { name: 'x', payload: 'base64' });
        assert.ok(parsed.payload?.ok);
        assert.deepEqual(parsed.payload.bytes, bytes);
        const direct = decodePayload(payload);
        assert.ok(direct.ok);
        assert.deepEqual(direct.bytes, bytes);
      }),
      { numRuns: 1000 },
    );
  });

  it('decodes the payload over the body it came in, and keeps what follows it intact', () => {
    const document = Buffer.from(Array.from({ length: 300_000 }, (_, i) => (i * 7) % 256));
    const raw = Buffer.from(JSON.stringify({ payload: document.toString('base64'), name: 'after' }));
    const parsed = parseUploadBody(raw);
    assert.ok(parsed.payload?.ok);
    assert.deepEqual(parsed.payload.bytes, document);
    assert.equal(parsed.payload.bytes.buffer, raw.buffer, 'no second copy of the document');
    assert.deepEqual(parsed.value, { payload: 'base64', name: 'after' });
  });

  it('names a non-ASCII character in the payload, even after decoding over it', () => {
    for (const [payload, character] of [
      ['QUJD'.repeat(30_000) + 'é', 'é'],
      ['QUJDRUZH€', '€'],
      ['QQ😀', '😀'],
    ] as const) {
      const parsed = parseUploadBody(Buffer.from(JSON.stringify({ payload })));
      assert.ok(parsed.payload !== undefined && !parsed.payload.ok);
      assert.match(parsed.payload.reason, new RegExp(`character "${character}"`), payload.slice(-10));
    }
  });

  it('decodes escapes that fall on the boundaries of its internal chunks', () => {
    for (let seed = 0; seed < 40; seed++) {
      const bytes = Buffer.from(Array.from({ length: 150_000 + seed * 997 }, (_, i) => (i * 31 + seed * 7) % 256));
      // Escaped line breaks at varying widths, every "/" escaped, and letters as \u escapes.
      const width = 60 + seed;
      const payload = bytes.toString('base64').replace(new RegExp(`(.{${width}})`, 'g'), '$1\r\n');
      const json = JSON.stringify({ payload }).replaceAll('/', '\\/').replaceAll('Q', '\\u0051');
      const parsed = parse(json);
      assert.ok(parsed.payload?.ok, `seed ${seed}: ${parsed.payload?.ok === false ? parsed.payload.reason : ''}`);
      assert.deepEqual(parsed.payload.bytes, bytes, `seed ${seed}`);
    }
  });

  it('reports invalid base64 in the payload, and leaves a non-string payload to validation', () => {
    for (const payload of ['JVBER*', 'JVBE\\"R', 'QUJD\\u00e9', 'A', 'QQ=Q']) {
      const parsed = parse(`{"payload":"${payload}"}`);
      assert.equal(parsed.payload?.ok, false, payload);
    }
    assert.deepEqual(parse('{"payload": 42}'), { value: { payload: 42 }, payload: undefined });
    assert.deepEqual(parse('{"payload": ""}'), { value: { payload: '' }, payload: undefined });
    assert.deepEqual(parse('{"nested": {"payload": "not decoded"}}').value, { nested: { payload: 'not decoded' } });
  });

  it('refuses a string that is not UTF-8 rather than store replacement characters', () => {
    for (const bytes of [Buffer.from('{"name":"Ren\xe9.pdf"}', 'latin1'), Buffer.from('{"name":"a\\u0041\xff"}', 'latin1')])
      assert.throws(() => parseUploadBody(bytes), /not UTF-8/, bytes.toString('latin1'));
    assert.deepEqual(parse('{"name":"René \ufeff😀.pdf"}').value, { name: 'René \ufeff😀.pdf' });
  });

  it('refuses prototype pollution and absurd nesting', () => {
    assert.throws(() => parse('{"__proto__": {"admin": true}}'), /__proto__/);
    assert.throws(() => parse('{"a": [{"__proto__": 1}]}'), /__proto__/);
    assert.throws(() => parse('{"constructor": {"prototype": {}}}'), /constructor/);
    assert.throws(() => parse(`${'['.repeat(10_000)}${']'.repeat(10_000)}`), /nested/);
  });
});
