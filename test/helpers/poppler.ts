import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import sharp from 'sharp';

const run = promisify(execFile);

/** A thumbnail within this mean grey difference from poppler's page 1 (0–1) counts as faithful (issue 18). */
export const FAITHFUL_DIFFERENCE = 0.08;

/**
 * Poppler's page 1 of the PDF at `width` pixels wide, its crop box as a thumbnail shows it
 * (pdftoppm draws the media box unless told `-cropbox`), or undefined when poppler cannot.
 */
export async function popplerPage1(file: string, width: number): Promise<Buffer | undefined> {
  const dir = mkdtempSync(path.join(tmpdir(), 'signroom-poppler-'));
  try {
    const out = path.join(dir, 'page');
    await run('pdftoppm', ['-f', '1', '-l', '1', '-cropbox', '-scale-to-x', String(width), '-scale-to-y', '-1', '-png', '-singlefile', file, out], {
      timeout: 60_000,
    }).catch(() => undefined);
    try {
      return statSync(`${out}.png`).size > 0 ? readFileSync(`${out}.png`) : undefined;
    } catch {
      return undefined;
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function grey(png: Buffer, width: number, height: number): Promise<Buffer> {
  return sharp(png).flatten({ background: '#ffffff' }).resize(width, height, { fit: 'fill' }).greyscale().raw().toBuffer();
}

/** Share of pixels darker than near-white: how much a picture draws. */
function ink(pixels: Buffer): number {
  let inked = 0;
  for (const value of pixels) if (value < 235) inked++;
  return inked / pixels.length;
}

export interface Comparison {
  /** Mean absolute difference of grey levels, 0–1. */
  difference: number;
  /** Ours draws (next to) nothing where poppler draws. */
  blank: boolean;
  /** Both pictures at our thumbnail's size, poppler's cut to the top part a thumbnail keeps. */
  ours: Buffer;
  poppler: Buffer;
  width: number;
  height: number;
}

/** Our thumbnail against poppler's full page 1 at the same width, its top part kept as the thumbnail keeps it. */
export async function compareWithPoppler(thumbnail: Buffer, popplerFull: Buffer): Promise<Comparison> {
  const { width = 1, height = 1 } = await sharp(thumbnail).metadata();
  const full = await sharp(popplerFull).metadata();
  const poppler = await sharp(popplerFull)
    .extract({ left: 0, top: 0, width: full.width, height: Math.min(full.height, 2 * full.width) })
    .png()
    .toBuffer();
  const a = await grey(thumbnail, width, height);
  const b = await grey(poppler, width, height);
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference += Math.abs(a[i]! - b[i]!);
  return { difference: difference / a.length / 255, blank: ink(a) < 0.001 && ink(b) >= 0.005, ours: thumbnail, poppler, width, height };
}
