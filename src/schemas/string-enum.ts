import { Type } from 'typebox';

/** A string query parameter of a fixed set of values (the query validator takes them in any letter case). */
export function stringEnum<T extends string>(values: readonly T[], options: { description: string; default?: T }) {
  return Type.Unsafe<T>({ type: 'string', enum: [...values], ...options });
}
