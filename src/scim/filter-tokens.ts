import { parseFilter, Tokens, type Token } from 'scim2-parse-filter/lib/src/parser.js';
import type { Filter } from 'scim2-parse-filter';

/** scim2-parse-filter's token grammar (0.2.10), unchanged: white space, numbers, quoted strings, brackets, words. */
const TOKEN = /^(?:(\s+)|(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![-\w._:/)\s]))|("(?:[^"\\]|\\.|\n)*")|([[()]|]\.?)|(\w[-\w._:/%]*))/;
const COMPARISONS = new Set(['eq', 'ne', 'co', 'sw', 'ew', 'gt', 'lt', 'ge', 'le']);
const JSON_WORDS = new Set(['true', 'false', 'null']);

/**
 * A filter's tree, read by scim2-parse-filter's parser from tokens read here. Its own tokenizer
 * doubles every backslash of a quoted value that is not before a quote, so a value written as
 * RFC 7644 says (a JSON string: `"CORP\\jdoe"`) was compared as `CORP\\jdoe` and never found, and
 * `\u005c` was taken as text. Here a quoted value is a JSON string, read leniently for a client
 * that does not escape its backslashes (`"CORP\jdoe"`, `"CORP\nancy"`: see jsonString). A bare
 * word or number compared with (`externalId eq jyoung`, as in Microsoft's provisioning guide) is
 * taken as the string it spells: every attribute a filter compares here is a string.
 */
export function parseScimFilter(filter: string): Filter {
  const tokens: Token[] = [];
  let rest = filter;
  for (let found = TOKEN.exec(rest); found !== null && found[0].length > 0; found = TOKEN.exec(rest)) {
    const [whole, space, number, quoted, bracket, word] = found;
    const compared = comparedWith(tokens.at(-1));
    if (space !== undefined) {
      // nothing to keep
    } else if (number !== undefined) tokens.push(compared ? { literal: JSON.stringify(number), type: 'Quoted' } : { literal: number, type: 'Number' });
    else if (quoted !== undefined) tokens.push({ literal: jsonString(quoted), type: 'Quoted' });
    else if (bracket !== undefined) tokens.push({ literal: bracket, type: 'Bracket' });
    else if (word !== undefined)
      tokens.push(compared && !JSON_WORDS.has(word) ? { literal: JSON.stringify(word), type: 'Quoted' } : { literal: word, type: 'Word' });
    rest = rest.slice(whole.length);
  }
  if (rest.length > 0) throw new Error(`unexpected token ${rest}`);
  tokens.push({ literal: '', type: 'EOT' });
  const list = new Tokens(tokens);
  const tree = parseFilter(list);
  if (list.peek().type !== 'EOT') throw new Error(`unexpected ${list.getList().join(' ')}`);
  return tree;
}

/** Whether a token follows a comparison operator. */
function comparedWith(previous: Token | undefined): boolean {
  return previous?.type === 'Word' && COMPARISONS.has(previous.literal.toLowerCase());
}

/**
 * A quoted value as a JSON string: its escapes kept, each backslash that starts none doubled (it
 * stands for itself). When the escapes would make a control character, which no name or id
 * stored holds, every backslash stands for itself instead (`"CORP\nancy"` from a client that does
 * not escape is `CORP\nancy`, not a line break).
 */
function jsonString(quoted: string): string {
  const escaped = quoted.replace(/\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})|\\/g, (found) => (found.length === 1 ? '\\\\' : found));
  try {
    if (!/\p{Cc}/u.test(JSON.parse(escaped) as string)) return escaped;
  } catch {
    return escaped;
  }
  return quoted.replace(/\\(?!")/g, '\\\\');
}
