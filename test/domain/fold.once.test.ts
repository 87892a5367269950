import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { compareCodePoints, fold, foldedKeys, searchTerms } from '../../src/domain/fold.ts';

describe('fold', () => {
  it('removes accents and case as the contract defines', () => {
    assert.equal(fold('Müller'), 'muller');
    assert.equal(fold('ÉLODIE'), 'elodie');
    assert.equal(fold('Kateřina'), 'katerina');
    assert.equal(fold('ﬁne'), 'fine'); // NFKD splits the ligature
    assert.equal(fold(null), '');
    assert.equal(fold(undefined), '');
    assert.equal(fold('İstanbul'), 'istanbul');
  });

  it('is the contract formula for any text, ASCII or not (ASCII takes a shorter way)', () => {
    const contract = (s: string) => s.normalize('NFKD').replace(/\p{M}/gu, '').toLowerCase();
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: 'binary' }), fc.string({ unit: 'binary-ascii' })), (s) => fold(s) === contract(s)),
      { numRuns: 2000 },
    );
    for (let code = 0; code < 0x80; code++) assert.equal(fold(String.fromCharCode(code)), contract(String.fromCharCode(code)));
  });

  it('keeps characters without a decomposition', () => {
    assert.equal(fold('Łukasiewicz'), 'łukasiewicz');
    assert.equal(fold('Straße'), 'straße');
    assert.equal(fold('😀%_\\'), '😀%_\\');
  });
});

describe('searchTerms', () => {
  it('trims, splits on white space and folds', () => {
    assert.deepEqual(searchTerms('  Anna \t MÜLLER\n'), ['muller', 'anna']);
  });
  it('is empty for absent or blank queries', () => {
    assert.deepEqual(searchTerms(undefined), []);
    assert.deepEqual(searchTerms(''), []);
    assert.deepEqual(searchTerms(' \u3000 '), []);
  });
  it('drops terms implied by longer ones and duplicates', () => {
    assert.deepEqual(searchTerms('an anna ANNA nna'), ['anna']);
  });
  it('drops terms that fold to nothing', () => {
    assert.deepEqual(searchTerms('\u0301 x'), ['x']);
  });
  it('keeps every wildcard-looking character literal', () => {
    assert.deepEqual(searchTerms(`100% a_b c\\d 'e" *`), ['100%', '\'e"', 'a_b', 'c\\d', '*']);
  });
});

describe('foldedKeys', () => {
  it('joins the folded fields with a separator no term can contain', () => {
    const keys = foldedKeys({ firstname: 'Zoë', lastname: null, email: 'Zoe@X.example' });
    assert.equal(keys.searchKey, 'zoe\n\nzoe@x.example');
    assert.equal(keys.lastnameKey, '');
  });
});

describe('compareCodePoints', () => {
  it('orders by code point, unlike UTF-16 comparison', () => {
    // U+FF5E (BMP, above the surrogates) sorts before U+1F600 by code point,
    // although its UTF-16 unit is larger than the high surrogate D83D.
    assert.ok(compareCodePoints('\uFF5E', '😀') < 0);
    assert.ok('\uFF5E' > '😀');
  });
  it('agrees with UTF-8 byte order on arbitrary strings', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), fc.string({ unit: 'grapheme' }), (a, b) => {
        const expected = Math.sign(Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8')));
        assert.equal(Math.sign(compareCodePoints(a, b)), expected);
      }),
      { numRuns: 2000 },
    );
  });
});
