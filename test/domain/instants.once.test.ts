import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { instantOf } from '../../src/domain/instants.ts';

describe('instantOf', () => {
  it('reads RFC 3339 date-times and dates as the instants the audit trail stores', () => {
    const cases: [string, string][] = [
      ['2026-11-27T10:00:00Z', '2026-11-27T10:00:00.000Z'],
      ['2026-11-27t10:00:00.123456z', '2026-11-27T10:00:00.123Z'],
      ['2026-11-27T10:00:00+01:30', '2026-11-27T08:30:00.000Z'],
      ['2026-11-27 10:00:00-05:00', '2026-11-27T15:00:00.000Z'],
      ['2026-11-27T10:00:00', '2026-11-27T10:00:00.000Z'],
      ['2000-01-01', '2000-01-01T00:00:00.000Z'],
      ['2024-02-29', '2024-02-29T00:00:00.000Z'],
      ['0001-01-01T00:00:00Z', '0001-01-01T00:00:00.000Z'],
      ['9999-12-31T23:59:59.999Z', '9999-12-31T23:59:59.999Z'],
      ['2026-11-27T10:00Z', '2026-11-27T10:00:00.000Z'],
      ['2026-11-27T10:00:00+0100', '2026-11-27T09:00:00.000Z'],
    ];
    for (const [text, instant] of cases) assert.equal(instantOf(text), instant, text);
  });

  it('refuses what is not one: days a month lacks, hours past 23, years past 9999, bare numbers, other forms', () => {
    for (const text of [
      '2026-02-30T00:00:00Z',
      '2026-11-31',
      '2023-02-29',
      '2026-13-01',
      '2026-00-10',
      '2026-11-27T24:00:00Z',
      '2026-11-27T10:60:00Z',
      '2026-11-27T10:00:00+25:00',
      '+010000-01-01T00:00:00Z',
      '10000-01-01',
      '9999-12-31T23:00:00-05:00',
      '1',
      '2026',
      '2026-11-27T10:00:00+01',
      '2026-11-27T10:0Z',
      'yesterday',
      '',
      ' 2026-11-27',
    ])
      assert.equal(instantOf(text), undefined, text);
  });
});
