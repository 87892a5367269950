import { readFileSync } from 'node:fs';

/** The version of signroom that runs: package.json's. */
export const VERSION = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
