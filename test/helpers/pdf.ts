/** Builds small, valid PDFs for tests, with a correct cross-reference table. */
import { constants, deflateRawSync, deflateSync } from 'node:zlib';

export interface PdfPage {
  width: number;
  height: number;
  /** Content stream operators, e.g. `0 0 0 rg 0 0 100 100 re f`. */
  content: string;
  rotate?: number;
  /** A crop box [x0 y0 x1 y1]. */
  cropBox?: [number, number, number, number];
  /** Store the content stream Flate-compressed. */
  compress?: boolean;
}

/** A PDF with the given pages; text can use the standard font /F1 (Helvetica). */
export function makePdf(pages: PdfPage[]): Buffer {
  const objects: string[] = [];
  const add = (body: string) => {
    objects.push(body);
    return objects.length;
  };
  const catalog = add('');
  const pageTree = add('');
  const font = add('<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>');
  const kids: number[] = [];
  for (const page of pages) {
    const data = page.compress === true ? deflateSync(Buffer.from(page.content, 'latin1')).toString('latin1') : page.content;
    const filter = page.compress === true ? ' /Filter /FlateDecode' : '';
    const stream = add(`<< /Length ${Buffer.byteLength(data, 'latin1')}${filter} >>\nstream\n${data}\nendstream`);
    const extras = [page.rotate !== undefined ? `/Rotate ${page.rotate}` : '', page.cropBox !== undefined ? `/CropBox [${page.cropBox.join(' ')}]` : ''].join(
      ' ',
    );
    kids.push(
      add(
        `<< /Type /Page /Parent ${pageTree} 0 R /MediaBox [0 0 ${page.width} ${page.height}] ${extras} ` +
          `/Resources << /Font << /F1 ${font} 0 R >> >> /Contents ${stream} 0 R >>`,
      ),
    );
  }
  objects[catalog - 1] = `<< /Type /Catalog /Pages ${pageTree} 0 R >>`;
  objects[pageTree - 1] = `<< /Type /Pages /Kids [${kids.map((k) => `${k} 0 R`).join(' ')}] /Count ${kids.length} >>`;
  return rawPdf(objects);
}

/** An A4 page whose top half is black and which says "Hello" in Helvetica. */
export function topHalfBlackPdf(): Buffer {
  return makePdf([{ width: 595, height: 842, content: '0 0 0 rg 0 421 595 421 re f BT 0 0 1 rg /F1 60 Tf 50 200 Td (Hello) Tj ET' }]);
}

/** Assembles a PDF from raw object bodies (object 1 must be the catalog), with a correct xref. */
export function rawPdf(objects: string[]): Buffer {
  let out = '%PDF-1.7\n%\xe2\xe3\xcf\xd3\n';
  const offsets: number[] = [];
  objects.forEach((body, index) => {
    offsets.push(Buffer.byteLength(out, 'latin1'));
    out += `${index + 1} 0 obj\n${body}\nendobj\n`;
  });
  const xref = Buffer.byteLength(out, 'latin1');
  out += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`;
  for (const offset of offsets) out += `${String(offset).padStart(10, '0')} 00000 n \n`;
  out += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(out, 'latin1');
}

/**
 * PDFs that try the render budget (issue 18): each must be answered, 201 with a thumbnail or the
 * placeholder, and soon. `scan600dpi` is an A4 page holding one 600 dpi greyscale JPEG.
 */
export async function hostilePdfs(): Promise<Record<string, Buffer>> {
  const sharp = (await import('sharp')).default;
  const lines = Array.from(
    { length: 120 },
    (_, i) =>
      `<text x="300" y="${400 + i * 55}" font-size="40" font-family="sans-serif">Line ${i}: the quick brown fox jumps over the lazy dog, 600 dpi scan.</text>`,
  ).join('');
  const scan = await sharp(
    Buffer.from(`<svg xmlns="http://www.w3.org/2000/svg" width="4960" height="7016"><rect width="100%" height="100%" fill="#f4f1ea"/>${lines}</svg>`),
  )
    .toColourspace('b-w')
    .jpeg({ quality: 85 })
    .toBuffer();
  return {
    // 200 KB that inflate to 104 MB of drawing operators: an operator list that does not end.
    decompressionBomb: makePdf([{ width: 595, height: 842, content: '0 0 1 1 re f\n'.repeat(8_000_000), compress: true }]),
    // A form XObject that draws itself.
    selfDrawingForm: rawPdf([
      '<< /Type /Catalog /Pages 2 0 R >>',
      '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
      '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /XObject << /X 5 0 R >> >> /Contents 4 0 R >>',
      streamObject('', '/X Do'),
      streamObject('/Type /XObject /Subtype /Form /BBox [0 0 595 842] /Resources << /XObject << /X 5 0 R >> >>', '0 0 0 rg 0 0 9 9 re f /X Do'),
    ]),
    // A page tree whose node is its own kid.
    pageTreeCycle: rawPdf([
      '<< /Type /Catalog /Pages 2 0 R >>',
      '<< /Type /Pages /Kids [2 0 R 3 0 R] /Count 2 >>',
      '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] >>',
    ]),
    // 200 × 200 inches.
    hugePage: makePdf([{ width: 14_400, height: 14_400, content: '0 0 0 rg 0 7200 14400 7200 re f' }]),
    scan600dpi: rawPdf([
      '<< /Type /Catalog /Pages 2 0 R >>',
      '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
      '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /XObject << /Im 5 0 R >> >> /Contents 4 0 R >>',
      streamObject('', 'q 595 0 0 842 0 0 cm /Im Do Q'),
      streamObject(
        '/Type /XObject /Subtype /Image /Width 4960 /Height 7016 /ColorSpace /DeviceGray /BitsPerComponent 8 /Filter /DCTDecode',
        scan.toString('latin1'),
      ),
    ]),
  };
}

/** A stream object's body with its exact /Length (`content` as latin1 characters, one per byte). */
function streamObject(dictionary: string, content: string): string {
  return `<< ${dictionary} /Length ${content.length} >>\nstream\n${content}\nendstream`;
}

/**
 * A Flate-compressed stream object of `times` copies of `chunk` (which must be
 * one repeated byte), built from a single compressed copy: each copy is
 * compressed on its own and ends on a full flush, so copies can follow one
 * another, and the Adler-32 of a repeated byte has a closed form.
 */
function flateStream(chunk: Buffer, times: number): string {
  const byte = chunk[0]!;
  if (!chunk.every((b) => b === byte)) throw new Error('flateStream repeats a chunk of one byte value');
  const segment = deflateRawSync(chunk, { level: 9, finishFlush: constants.Z_FULL_FLUSH });
  const n = BigInt(chunk.length) * BigInt(times);
  const a = (1n + BigInt(byte) * n) % 65521n;
  const b = (n + (BigInt(byte) * n * (n + 1n)) / 2n) % 65521n;
  const adler = Buffer.alloc(4);
  adler.writeUInt32BE(Number((b << 16n) | a));
  // zlib header, the copies, a final empty block, the checksum.
  const data = Buffer.concat([Buffer.from([0x78, 0xda]), ...Array.from({ length: times }, () => segment), Buffer.from([0x03, 0x00]), adler]);
  return `<< /Length ${data.length} /Filter /FlateDecode >>\nstream\n${data.toString('latin1')}\nendstream`;
}

/**
 * An image bomb of the kind issue 24 names: page 1 draws an RGB image of `side` × `side` pixels
 * with a soft mask of the same size (400 MB of pixels at 10,000 a side), both Flate-compressed runs
 * of one value, in a file of a few hundred KB. Drawing it takes seconds of a renderer's CPU.
 */
export function imageBomb(side = 10_000): Buffer {
  const rgbRows = (side * side * 3) / (1 << 20);
  const maskRows = (side * side) / (1 << 20);
  return rawPdf([
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /XObject << /Im 5 0 R >> >> /Contents 4 0 R >>',
    streamObject('', 'q 595 0 0 842 0 0 cm /Im Do Q'),
    flateStream(Buffer.alloc(1 << 20, 0x80), Math.ceil(rgbRows)).replace(
      '<< /Length',
      `<< /Type /XObject /Subtype /Image /Width ${side} /Height ${side} /ColorSpace /DeviceRGB /BitsPerComponent 8 /SMask 6 0 R /Length`,
    ),
    flateStream(Buffer.alloc(1 << 20, 0xff), Math.ceil(maskRows)).replace(
      '<< /Length',
      `<< /Type /XObject /Subtype /Image /Width ${side} /Height ${side} /ColorSpace /DeviceGray /BitsPerComponent 8 /Length`,
    ),
  ]);
}

/**
 * 1.2 MB whose first content stream of page 1 inflates to 1.2 GB (of spaces), then a second one
 * draws the top half black: the renderer holds the inflated stream whole, so a render passes
 * hundreds of MiB within a fraction of a second; with memory to spare it would draw the page.
 */
export function contentStreamBomb(): Buffer {
  return rawPdf([
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents [4 0 R 5 0 R] >>',
    flateStream(Buffer.alloc(1 << 20, 0x20), 1200),
    '<< /Length 27 >>\nstream\n0 0 0 rg 0 421 595 421 re f\nendstream',
  ]);
}
