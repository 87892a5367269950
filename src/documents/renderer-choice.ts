/**
 * Which renderer draws page 1 first. PDFium is the default (fast, faithful on most files);
 * pdf.js goes first for what PDFium draws unlike poppler and pdf.js draws like it, as measured
 * over the shared corpus with `npm run bench:fidelity` (docs/decisions.md, "Thumbnails: which
 * renderer first"): text in a CJK font the file does not embed, JBIG2 images (refinement, custom
 * template pixels, halftone grids), CIE-based grey and RGB (CalGray, CalRGB), and tiling patterns.
 */
const PDFJS_FIRST_NAMES = ['/JBIG2Decode', '/CalGray', '/CalRGB'].map((name) => Buffer.from(name, 'latin1'));
const PATTERN_TYPE = Buffer.from('/PatternType', 'latin1');

/** Whether the bytes hold a tiling pattern (`/PatternType 1`, any white space between). */
function hasTilingPattern(bytes: Buffer): boolean {
  for (let at = bytes.indexOf(PATTERN_TYPE); at !== -1; at = bytes.indexOf(PATTERN_TYPE, at + PATTERN_TYPE.length)) {
    let next = at + PATTERN_TYPE.length;
    while (next < bytes.length && (bytes[next] === 0x20 || bytes[next] === 0x0a || bytes[next] === 0x0d || bytes[next] === 0x09 || bytes[next] === 0x0c))
      next++;
    // "1" and not the start of a longer number.
    if (bytes[next] === 0x31 && !(bytes[next + 1]! >= 0x30 && bytes[next + 1]! <= 0x39)) return true;
  }
  return false;
}

export function pdfjsFirst(bytes: Buffer, nonEmbeddedCjkFont: boolean): boolean {
  return nonEmbeddedCjkFont || PDFJS_FIRST_NAMES.some((name) => bytes.includes(name)) || hasTilingPattern(bytes);
}
