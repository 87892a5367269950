import type { Migration } from 'kysely/migration';
import * as directory from './2026-11-22T0000-directory.ts';
import * as documents from './2026-11-22T0100-documents.ts';

/** All migrations by name, in the order they run. Add new ones at the end. */
export const MIGRATIONS: Record<string, Migration> = {
  '2026-11-22T0000-directory': directory,
  '2026-11-22T0100-documents': documents,
};
