/**
 * A render worker: a child process that turns page 1 of a PDF or an image
 * (sharp) into a PNG thumbnail. PDFs are drawn by PDFium (compiled to
 * WebAssembly: faster than pdf.js here, see docs/benchmarks.md), and by pdf.js on
 * @napi-rs/canvas when PDFium cannot open a file or draw its page, or would
 * leave out CJK text (see renderPdf). It runs in its own process so the pool
 * can kill it on a time or memory budget, and at low CPU priority so the API
 * stays responsive while it works.
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { deflateSync } from 'node:zlib';
import { PDFiumLibrary } from '@hyzyla/pdfium';
import sharp from 'sharp';
import { getDocument, PasswordException } from 'pdfjs-dist/legacy/build/pdf.mjs';
import { thumbnailSize } from '../domain/thumbnail-geometry.ts';
import { inspectFonts } from './pdf-fonts.ts';
import { pdfjsFirst } from './renderer-choice.ts';
import type { RenderJob, WorkerMessage } from './render-protocol.ts';

const require = createRequire(import.meta.url);
const PDFJS_DIR = path.dirname(require.resolve('pdfjs-dist/package.json'));
/** Images larger than this many pixels are not decoded (sharp's own default is 268 M). */
const MAX_IMAGE_PIXELS = 100_000_000;
/** Images embedded in a PDF larger than this are skipped by pdf.js rather than decoded. */
const MAX_PDF_IMAGE_PIXELS = 50_000_000;

/** A page drawn at the thumbnail width taller than this many widths is left to pdf.js, which clips while drawing. */
const MAX_FULL_HEIGHT_IN_WIDTHS = 20;

sharp.cache(false);
sharp.concurrency(1);

const pdfium = PDFiumLibrary.init();

/**
 * A one-page PDF drawn at start through the same code as an upload (font inspection, PDFium with form
 * fields, the same sharp steps), so that a process's first upload does not pay for compiling that code:
 * V8 compiles PDFium's WebAssembly one function at a time, on its first call, and a real page calls
 * more of them than a line of text does (decompression, an image, a clip, two fonts, a form field). It
 * costs no more than the line of text did, and takes about 55 ms of CPU off a first real PDF
 * (docs/decisions.md, "Render processes start when needed"). Not warmed: pdf.js (few files go to it
 * first, and warming it costs every start about 350 ms of CPU) and embedded TrueType fonts (100–200 ms
 * more per start for about 50 ms).
 */
function warmUpDocument(): Buffer {
  const content = deflateSync(
    'q 0.9 0.9 0.9 rg 0 760 595 82 re f Q q 72 72 451 200 re W n 0.2 0.4 0.8 rg 36 36 523 300 re f Q ' +
      'BT /F1 24 Tf 72 700 Td (signroom) Tj /F2 12 Tf 0 -30 Td (warm-up) Tj ET q 100 0 0 100 300 500 cm /Im1 Do Q',
  );
  const pixels = deflateSync(Buffer.alloc(16 * 16 * 3, 0x7f));
  const stream = (dictionary: string, bytes: Buffer) =>
    Buffer.concat([
      Buffer.from(`<< ${dictionary} /Length ${bytes.length} /Filter /FlateDecode >>\nstream\n`, 'latin1'),
      bytes,
      Buffer.from('\nendstream', 'latin1'),
    ]);
  const objects = [
    '<< /Type /Catalog /Pages 2 0 R /AcroForm << /Fields [8 0 R] /DA (/F1 0 Tf 0 g) /DR << /Font << /F1 4 0 R >> >> /NeedAppearances true >> >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 4 0 R /F2 5 0 R >> /XObject << /Im1 7 0 R >> >> /Contents 6 0 R /Annots [8 0 R] >>',
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
    '<< /Type /Font /Subtype /Type1 /BaseFont /Times-Roman >>',
    stream('', content),
    stream('/Type /XObject /Subtype /Image /Width 16 /Height 16 /ColorSpace /DeviceRGB /BitsPerComponent 8', pixels),
    '<< /Type /Annot /Subtype /Widget /FT /Tx /T (name) /V (signroom) /Rect [72 600 300 630] /DA (/F1 12 Tf 0 g) /F 4 /P 3 0 R >>',
  ];
  const parts = [Buffer.from('%PDF-1.7\n', 'latin1')];
  let length = parts[0]!.length;
  const offsets = objects.map((body, index) => {
    const part = Buffer.concat([Buffer.from(`${index + 1} 0 obj\n`, 'latin1'), Buffer.from(body as never, 'latin1'), Buffer.from('\nendobj\n', 'latin1')]);
    parts.push(part);
    length += part.length;
    return length - part.length;
  });
  const xref = `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n${offsets.map((o) => `${String(o).padStart(10, '0')} 00000 n \n`).join('')}`;
  parts.push(Buffer.from(`${xref}trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${length}\n%%EOF\n`, 'latin1'));
  return Buffer.concat(parts);
}

/** Set while the warm-up draws: its messages are not the pool's to read. */
let warmingUp = true;

async function warmUp(): Promise<void> {
  await renderPdf({ id: 0, mediaType: 'application/pdf', file: '', width: 200 }, warmUpDocument());
}

function send(message: WorkerMessage): void {
  if (!warmingUp) process.send?.(message);
}

/**
 * Draws page 1 with PDFium from `bytes` (the file as PDFium should read it: see
 * inspectFonts); returns false when PDFium cannot open the file or draw the
 * page, so pdf.js can try (an 'opened' already sent stands).
 */
async function renderPdfWithPdfium(job: RenderJob, bytes: Buffer): Promise<boolean> {
  const library = await pdfium;
  let document;
  try {
    document = await library.loadDocument(bytes);
  } catch (error) {
    if (/password/i.test(describe(error))) {
      send({ id: job.id, stage: 'failed', reason: 'encrypted', detail: 'the PDF needs a password to open' });
      return true;
    }
    return false;
  }
  try {
    const pageCount = document.getPageCount();
    if (pageCount < 1) return false;
    // Opened: from here a render that runs out of budget still stores the document.
    // (PDFium parses the page's content when it loads the page.)
    send({ id: job.id, stage: 'opened', pageCount });
    const page = document.getPage(0);
    const { originalWidth, originalHeight } = page.getOriginalSize();
    const size = thumbnailSize(originalWidth, originalHeight, job.width);
    if (size === undefined || originalHeight * size.scale > MAX_FULL_HEIGHT_IN_WIDTHS * job.width) return false;
    const rendered = await page.render({ scale: size.scale, render: 'bitmap' as never, colorSpace: 'BGRA', renderFormFields: true });
    const png = await sharp(Buffer.from(rendered.data), { raw: { width: rendered.width, height: rendered.height, channels: 4 } })
      .flatten({ background: '#ffffff' })
      .resize({ width: size.width, height: Math.max(1, Math.round(originalHeight * size.scale)), fit: 'fill' })
      .extract({ left: 0, top: 0, width: size.width, height: size.height })
      .png()
      .toBuffer();
    send({ id: job.id, stage: 'rendered', png });
    return true;
  } catch {
    return false;
  } finally {
    document.destroy();
  }
}

/**
 * Page 1 of a PDF: PDFium first, pdf.js when PDFium cannot open the file or
 * draw the page; pdf.js first, with PDFium as its fallback, for the features
 * renderer-choice.ts lists (a CJK font the file does not embed: PDFium would
 * draw nothing, pdf.js a box per character as poppler does without CJK fonts).
 */
async function renderPdf(job: RenderJob, bytes: Buffer): Promise<void> {
  const fonts = inspectFonts(bytes);
  if (pdfjsFirst(bytes, fonts.nonEmbeddedCjk)) {
    const failure = await renderPdfWithPdfjs(job, bytes);
    if (failure === undefined || (await renderPdfWithPdfium(job, fonts.withoutMaps ?? bytes))) return;
    send(failure);
    return;
  }
  if (await renderPdfWithPdfium(job, fonts.withoutMaps ?? bytes)) return;
  const failure = await renderPdfWithPdfjs(job, bytes);
  if (failure !== undefined) send(failure);
}

/**
 * Draws page 1 with pdf.js on @napi-rs/canvas. Returns the failure to report
 * if it could not (the caller may try PDFium first), or undefined when it sent
 * the thumbnail, or the answer for a PDF that needs a password.
 */
async function renderPdfWithPdfjs(job: RenderJob, bytes: Buffer): Promise<WorkerMessage | undefined> {
  const fail = (reason: 'unreadable' | 'render-failed', detail: string): WorkerMessage => ({ id: job.id, stage: 'failed', reason, detail });
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
      return undefined;
    }
    return fail('unreadable', describe(error));
  }
  try {
    send({ id: job.id, stage: 'opened', pageCount: document.numPages });
    const page = await document.getPage(1);
    const unscaled = page.getViewport({ scale: 1 });
    const size = thumbnailSize(unscaled.width, unscaled.height, job.width);
    if (size === undefined) return fail('render-failed', 'page 1 has no usable size');
    const viewport = page.getViewport({ scale: size.scale });
    const factory = document.canvasFactory as {
      create(
        width: number,
        height: number,
      ): { canvas: { toBuffer(type: 'image/png'): Buffer }; context: { fillStyle: string; fillRect(x: number, y: number, w: number, h: number): void } };
    };
    const { canvas, context } = factory.create(size.width, size.height);
    context.fillStyle = '#ffffff';
    context.fillRect(0, 0, size.width, size.height);
    await page.render({ canvas: canvas as never, canvasContext: context as never, viewport, background: '#ffffff' }).promise;
    send({ id: job.id, stage: 'rendered', png: canvas.toBuffer('image/png') });
    return undefined;
  } catch (error) {
    return fail('render-failed', describe(error));
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
    send({
      id: job.id,
      stage: 'failed',
      reason: 'unreadable',
      detail: `the image is ${width}×${height} pixels; at most ${MAX_IMAGE_PIXELS} pixels are accepted`,
    });
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
// The pool sends jobs only after this (a warm-up that fails still leaves the renderers usable).
void warmUp()
  .catch(() => undefined)
  .finally(() => {
    warmingUp = false;
    send({ stage: 'ready' });
  });
