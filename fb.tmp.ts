import { PDFiumLibrary } from '@hyzyla/pdfium';
import { rawPdf } from './test/helpers/pdf.ts';
function formBomb(levels: number, fanOut: number): Buffer {
  // Object 4+k is form k; form 0 fills a small square, form k draws form k-1 fanOut times.
  const objects = ['<< /Type /Catalog /Pages 2 0 R >>', '<< /Type /Pages /Kids [3 0 R] /Count 1 >>'];
  const top = 4 + levels;
  const pageContent = `/F${levels} Do`;
  objects.push(`<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /XObject << /F${levels} ${top} 0 R >> >> /Contents ${top + 1} 0 R >>`);
  for (let k = 0; k <= levels; k++) {
    const content = k === 0 ? '0 0 1 1 re f' : Array.from({ length: fanOut }, (_, i) => `q 1 0 0 1 ${i % 7} ${i % 5} cm /F${k - 1} Do Q`).join('\n');
    const resources = k === 0 ? '' : `/Resources << /XObject << /F${k - 1} ${4 + k - 1} 0 R >> >>`;
    objects.push(`<< /Type /XObject /Subtype /Form /BBox [0 0 595 842] ${resources} /Length ${content.length} >>\nstream\n${content}\nendstream`);
  }
  objects.push(`<< /Length ${pageContent.length} >>\nstream\n${pageContent}\nendstream`);
  return rawPdf(objects);
}
const lib = await PDFiumLibrary.init();
for (const [levels, fan] of [[5, 10], [6, 10]] as const) {
  const pdf = formBomb(levels, fan);
  const doc = await lib.loadDocument(pdf);
  const t = performance.now();
  try { await doc.getPage(0).render({ scale: 200 / 595, render: 'bitmap' as never, colorSpace: 'BGRA' }); } catch (e) { console.log('err', (e as Error).message); }
  console.log(levels, fan, pdf.length, 'bytes', (performance.now() - t).toFixed(0), 'ms', (process.memoryUsage().rss / 1e6).toFixed(0), 'MB rss');
  doc.destroy();
}
