/**
 * Folding and ordering rules of the signatory lookup (contract section 3).
 * The database stores the outputs of these functions; it never folds by itself,
 * so SQLite and PostgreSQL match and order identically.
 */

/** Text in ASCII only: each of its characters is its own NFKD decomposition, and none is a mark. */
const ASCII_ONLY = /^[\0-\x7f]*$/;

/** `fold(s)` exactly as the contract defines it: NFKD, marks removed, lower case. */
export function fold(s: string | null | undefined): string {
  const text = s ?? '';
  // Most names and emails are ASCII, for which the first two steps change nothing: skipping them makes folding a directory faster.
  if (ASCII_ONLY.test(text)) return text.toLowerCase();
  return text.normalize('NFKD').replace(/\p{M}/gu, '').toLowerCase();
}

/**
 * Separator between the folded fields in the search key. A search term never
 * contains white space (terms are split on it), so a term cannot match across
 * two fields, which keeps "substring of one of the three fields" exact.
 */
export const SEARCH_KEY_SEPARATOR = '\n';

/** The folded columns stored with each user. */
export interface FoldedKeys {
  firstnameKey: string;
  lastnameKey: string;
  emailKey: string;
  searchKey: string;
}

/** Computes every folded column of a user, in one place for both databases. */
export function foldedKeys(user: { firstname: string | null; lastname: string | null; email: string }): FoldedKeys {
  const firstnameKey = fold(user.firstname);
  const lastnameKey = fold(user.lastname);
  const emailKey = fold(user.email);
  return {
    firstnameKey,
    lastnameKey,
    emailKey,
    searchKey: [firstnameKey, lastnameKey, emailKey].join(SEARCH_KEY_SEPARATOR),
  };
}

/**
 * The folded search terms of a `searchQuery`: trimmed, split on white space,
 * folded. Terms that fold to nothing match everyone and are dropped; a term
 * contained in another term is implied by it and dropped too. Longest first,
 * because the longest term is usually the most selective.
 */
export function searchTerms(searchQuery: string | undefined): string[] {
  if (searchQuery === undefined) return [];
  const folded = new Set(
    searchQuery
      .trim()
      .split(/\s+/)
      .map(fold)
      .filter((term) => term !== ''),
  );
  const byLength = [...folded].sort((a, b) => b.length - a.length || compareCodePoints(a, b));
  const kept: string[] = [];
  for (const term of byLength) {
    if (!kept.some((longer) => longer.includes(term))) kept.push(term);
  }
  return kept;
}

/** Compares strings by Unicode code point (= UTF-8 byte order), not UTF-16 units. */
export function compareCodePoints(a: string, b: string): number {
  if (a === b) return 0;
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) {
      // Surrogates (D800–DFFF) encode code points above FFFF, which sort after
      // every BMP code point, including E000–FFFF that UTF-16 order puts after them.
      const xs = x >= 0xd800 && x <= 0xdfff;
      const ys = y >= 0xd800 && y <= 0xdfff;
      if (xs !== ys) return xs ? 1 : -1;
      return x - y;
    }
  }
  return a.length - b.length;
}
