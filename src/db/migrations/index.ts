import type { Migration } from 'kysely/migration';
import * as directory from './2026-11-22T0000-directory.ts';

/** All migrations by name, in the order they run. Add new ones at the end. */
export const MIGRATIONS: Record<string, Migration> = {
  '2026-11-22T0000-directory': directory,
};
