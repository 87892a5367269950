import { Type } from 'typebox';

/**
 * A string query parameter of a fixed set of values. The query validator takes them in any letter
 * case, unless `exactCase` (marked `x-exact-case` in the OpenAPI document).
 */
export function stringEnum<T extends string>(values: readonly T[], options: { description: string; default?: T; exactCase?: boolean }) {
  const { exactCase, ...rest } = options;
  return Type.Unsafe<T>({ type: 'string', enum: [...values], ...rest, ...(exactCase === true ? { 'x-exact-case': true } : {}) });
}
