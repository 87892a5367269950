/** Builds small, valid PDFs for tests, with a correct cross-reference table. */
import { deflateSync } from 'node:zlib';

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
