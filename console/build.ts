/**
 * Builds the console into dist/console: one script and one stylesheet, named by their content
 * hash (served as immutable), and index.html pointing at them (served as no-cache). `npm ci`
 * runs it (the `prepare` script); `npm run build:console` runs it by hand.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { build } from 'esbuild';

const here = import.meta.dirname;
const out = path.join(here, '..', 'dist', 'console');
rmSync(out, { recursive: true, force: true });
mkdirSync(path.join(out, 'assets'), { recursive: true });

const result = await build({
  entryPoints: [path.join(here, 'src', 'main.tsx'), path.join(here, 'src', 'styles.css')],
  bundle: true,
  minify: true,
  sourcemap: 'linked',
  format: 'esm',
  target: ['es2022', 'chrome110', 'firefox110', 'safari16'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  outdir: path.join(out, 'assets'),
  entryNames: '[name]-[hash]',
  metafile: true,
  logLevel: 'warning',
});

/** The built file of an entry point, relative to index.html. */
function output(entry: string): string {
  const found = Object.entries(result.metafile.outputs).find(([, meta]) => meta.entryPoint !== undefined && meta.entryPoint.endsWith(entry));
  if (found === undefined) throw new Error(`esbuild wrote no output for ${entry}`);
  return path.relative(out, path.resolve(found[0])).split(path.sep).join('/');
}

const html = readFileSync(path.join(here, 'index.html'), 'utf8').replace('%SCRIPT%', output('main.tsx')).replace('%STYLES%', output('styles.css'));
writeFileSync(path.join(out, 'index.html'), html);
console.log(`console built into ${path.relative(process.cwd(), out) || '.'}`);
