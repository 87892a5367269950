/**
 * A render worker: a child process that turns page 1 of a PDF (pdf.js on
 * @napi-rs/canvas) or an image (sharp) into a PNG thumbnail. It runs in its
 * own process so the pool can kill it on a time or memory budget, and at low
 * CPU priority so the API stays responsive while it works.
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import sharp from 'sharp';
import { getDocument, PasswordException } from 'pdfjs-dist/legacy/build/pdf.mjs';
import { thumbnailSize } from '../domain/thumbnail-geometry.ts';
import type { RenderJob, WorkerMessage } from './render-protocol.ts';

const require = createRequire(import.meta.url);
const PDFJS_DIR = path.dirname(require.resolve('pdfjs-dist/package.json'));
/** Images larger than this many pixels are not decoded (sharp's own default is 268 M). */
const MAX_IMAGE_PIXELS = 100_000_000;
/** Images embedded in a PDF larger than this are skipped by pdf.js rather than decoded. */
const MAX_PDF_IMAGE_PIXELS = 50_000_000;

sharp.cache(false);
sharp.concurrency(1);

function send(message: WorkerMessage): void {
  process.send?.(message);
}

async function renderPdf(job: RenderJob, bytes: Buffer): Promise<void> {
  const task = getDocument({
    // pdf.js refuses Buffer: hand it a plain view.
    data: new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength),
    standardFontDataUrl: `${PDFJS_DIR}/standard_fonts/`,
    cMapUrl: `${PDFJS_DIR}/cmaps/`,
    wasmUrl: `${PDFJS_DIR}/wasm/`,
    iccUrl: `${PDFJS_DIR}/iccs/`,
    enableXfa: false,
    maxImageSize: MAX_PDF_IMAGE_PIXELS,
    verbosity: 0,
  });
  let document;
  try {
    document = await task.promise;
  } catch (error) {
    await task.destroy().catch(() => undefined);
    if (error instanceof PasswordException) {
      send({ id: job.id, stage: 'failed', reason: 'encrypted', detail: 'the PDF needs a password to open' });
    } else {
      send({ id: job.id, stage: 'failed', reason: 'unreadable', detail: describe(error) });
    }
    return;
  }
  try {
    send({ id: job.id, stage: 'opened', pageCount: document.numPages });
    const page = await document.getPage(1);
    const unscaled = page.getViewport({ scale: 1 });
    const size = thumbnailSize(unscaled.width, unscaled.height, job.width);
    if (size === undefined) {
      send({ id: job.id, stage: 'failed', reason: 'render-failed', detail: 'page 1 has no usable size' });
      return;
    }
    const viewport = page.getViewport({ scale: size.scale });
    const factory = document.canvasFactory as {
      create(width: number, height: number): { canvas: { toBuffer(type: 'image/png'): Buffer }; context: { fillStyle: string; fillRect(x: number, y: number, w: number, h: number): void } };
    };
    const { canvas, context } = factory.create(size.width, size.height);
    context.fillStyle = '#ffffff';
    context.fillRect(0, 0, size.width, size.height);
    await page.render({ canvas: canvas as never, canvasContext: context as never, viewport, background: '#ffffff' }).promise;
    send({ id: job.id, stage: 'rendered', png: canvas.toBuffer('image/png') });
  } catch (error) {
    send({ id: job.id, stage: 'failed', reason: 'render-failed', detail: describe(error) });
  } finally {
    await task.destroy().catch(() => undefined);
  }
}

async function renderImage(job: RenderJob, bytes: Buffer): Promise<void> {
  let width: number | undefined;
  let height: number | undefined;
  try {
    const metadata = await sharp(bytes, { limitInputPixels: false }).metadata();
    width = metadata.autoOrient?.width ?? metadata.width;
    height = metadata.autoOrient?.height ?? metadata.height;
  } catch (error) {
    send({ id: job.id, stage: 'failed', reason: 'unreadable', detail: describe(error) });
    return;
  }
  if (width === undefined || height === undefined || width * height > MAX_IMAGE_PIXELS) {
    send({ id: job.id, stage: 'failed', reason: 'unreadable', detail: `the image is ${width}×${height} pixels; at most ${MAX_IMAGE_PIXELS} pixels are accepted` });
    return;
  }
  send({ id: job.id, stage: 'opened', pageCount: 1 });
  const size = thumbnailSize(width, height, job.width);
  if (size === undefined) {
    send({ id: job.id, stage: 'failed', reason: 'render-failed', detail: 'the image has no usable size' });
    return;
  }
  try {
    const png = await sharp(bytes, { limitInputPixels: MAX_IMAGE_PIXELS, failOn: 'none' })
      .autoOrient()
      .resize({ width: size.width, height: Math.max(1, Math.round(height * size.scale)), fit: 'fill' })
      .extract({ left: 0, top: 0, width: size.width, height: size.height })
      .flatten({ background: '#ffffff' })
      .png()
      .toBuffer();
    send({ id: job.id, stage: 'rendered', png });
  } catch (error) {
    send({ id: job.id, stage: 'failed', reason: 'render-failed', detail: describe(error) });
  }
}

function describe(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.slice(0, 300);
}

async function render(job: RenderJob): Promise<void> {
  const bytes = await readFile(job.file);
  await (job.mediaType === 'application/pdf' ? renderPdf(job, bytes) : renderImage(job, bytes));
}

process.on('message', (job: RenderJob) => {
  render(job).catch((error: unknown) => send({ id: job.id, stage: 'failed', reason: 'render-failed', detail: describe(error) }));
});
process.on('disconnect', () => process.exit(0));
