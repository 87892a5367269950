/**
 * An instant as the audit trail's `since` and `until` take it (contract section 10): an RFC 3339
 * date-time (`2026-11-27T10:00:00Z`, `…+01:00`, fractions of a second; as ISO 8601 also allows,
 * without seconds or with `+0100`; without an offset, UTC) or a date alone (its first instant,
 * UTC), years 0000–9999. Returns it as the trail stores its
 * instants (`Date#toISOString`, which compare as text), or undefined when it is not one: a day
 * the month does not have, hour 24, year 10000, a bare number. `Date.parse` alone took all of
 * these, rolling 30 February into March and a year past 9999 into text that sorts before any.
 */
export function instantOf(text: string): string | undefined {
  const found = INSTANT.exec(text);
  if (found === null) return undefined;
  const [, year, month, day, hour = '00', minute = '00', second = '00', fraction = '', offset = 'Z'] = found;
  if (Number(month) < 1 || Number(month) > 12 || Number(day) < 1 || Number(day) > daysIn(Number(year), Number(month))) return undefined;
  if (Number(hour) > 23 || Number(minute) > 59 || Number(second) > 59) return undefined;
  const zone = offset.length === 5 ? `${offset.slice(0, 3)}:${offset.slice(3)}` : offset.toUpperCase();
  if (zone !== 'Z' && (Number(zone.slice(1, 3)) > 23 || Number(zone.slice(4, 6)) > 59)) return undefined;
  const millis = Date.parse(`${year}-${month}-${day}T${hour}:${minute}:${second}.${(fraction + '000').slice(0, 3)}${zone}`);
  if (Number.isNaN(millis)) return undefined;
  const instant = new Date(millis);
  // An offset may carry a first or last day past the years kept.
  const kept = instant.getUTCFullYear() >= 0 && instant.getUTCFullYear() <= 9999;
  return kept ? instant.toISOString() : undefined;
}

const INSTANT = /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?([Zz]|[+-]\d{2}:?\d{2})?)?$/;

function daysIn(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}
