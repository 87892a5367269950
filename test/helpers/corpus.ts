import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The real-world PDF corpus beside the checkout (../shared/pdf-corpus); tests that use it fail clearly without it. */
export function corpusDir(): string {
  const dir = fileURLToPath(new URL('../../../shared/pdf-corpus/', import.meta.url));
  if (!existsSync(dir)) throw new Error(`the PDF corpus is missing: expected ${dir} (../shared/pdf-corpus beside the checkout)`);
  return dir;
}
