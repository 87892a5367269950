/**
 * What the render worker learns from a PDF's font dictionaries before drawing,
 * by reading its bytes (objects inside compressed object streams are not seen,
 * and such files are drawn as they are).
 *
 * 1. Drawing needs no `/ToUnicode` map for a font whose program is embedded:
 * the map only says which Unicode text a glyph stands for (copying,
 * searching), and the glyphs themselves come from the embedded program.
 * PDFium reads the map anyway when it loads the font, and some producers
 * (TCPDF, common for generated contracts and invoices) write one covering all
 * 65,536 codes, which then takes most of a thumbnail's time. So PDFium is
 * given a copy of the file in which the `/ToUnicode` entries of embedded fonts
 * are blanked out with spaces of the same length: every byte offset, and so
 * the cross-reference table, stays valid. The stored document is never changed.
 * Only composite (Type 0) fonts lose the map, and only when their glyphs are
 * chosen without it: an embedded CIDFontType0 (CFF) program, or an embedded
 * CIDFontType2 (TrueType) program with an explicit CIDToGIDMap. A font that is
 * not embedded keeps its map (PDFium picks a substitute font's glyphs by
 * Unicode), and so does a simple TrueType font, for the same reason: blanking
 * one changed a corpus file's thumbnail.
 *
 * 2. Text in a Chinese, Japanese or Korean font that the file does not embed
 * needs a CJK font from the system, and the server has none. PDFium then draws
 * nothing at all; pdf.js, like poppler without CJK fonts, draws a box for each
 * character, which at least shows that text is there. Such files go to pdf.js.
 */

// Quantifiers are bounded, and numbers must start a digit run, so hostile
// bytes (long runs of digits or spaces) cannot make a search quadratic.
const TO_UNICODE = /\/ToUnicode\s{1,32}\d{1,10}\s{1,32}\d{1,5}\s{1,32}R/g;
const OBJECT_HEADER = /(?<!\d)(\d{1,10})\s{1,32}\d{1,5}\s{1,32}obj\b/g;
const DESCENDANT = /\/DescendantFonts\s{0,32}\[\s{0,32}(\d{1,10})\s{1,32}\d{1,5}\s{1,32}R/;
const DESCENDANT_REFERENCE = /\/DescendantFonts\s{1,32}(\d{1,10})\s{1,32}\d{1,5}\s{1,32}R/;
const DESCRIPTOR = /\/FontDescriptor\s{1,32}(\d{1,10})\s{1,32}\d{1,5}\s{1,32}R/;
const FONT_FILE = /\/FontFile[23]\s{1,32}\d{1,10}\s{1,32}\d{1,5}\s{1,32}R/;
const ANY_FONT_FILE = /\/FontFile[23]?\s{1,32}\d{1,10}\s{1,32}\d{1,5}\s{1,32}R/;
const CJK_ORDERING = /\/Ordering\s{0,32}\((?:GB1|CNS1|Japan1|Korea1)\)/;
const SYSTEM_INFO_REFERENCE = /\/CIDSystemInfo\s{1,32}(\d{1,10})\s{1,32}\d{1,5}\s{1,32}R/;
const FIRST_REFERENCE = /^\s{0,32}\[\s{0,32}(\d{1,10})\s{1,32}\d{1,5}\s{1,32}R/;
const TYPE0 = /\/Subtype\s{0,32}\/Type0\b/;
const TYPE0_GLOBAL = new RegExp(TYPE0.source, 'g');
const CID_TYPE0 = /\/Subtype\s{0,32}\/CIDFontType0\b/;
const CID_TO_GID_MAP = /\/CIDToGIDMap\s{0,32}(?:\/Identity\b|\d{1,10}\s{1,32}\d{1,5}\s{1,32}R)/;
/** A dictionary is read up to its object's end or stream, and no further than this. */
const MAX_OBJECT_TEXT = 64 * 1024;
/** Real files have tens of fonts; past this many maps (or composite fonts) the file is left as it is. */
const MAX_MAPS = 1000;
/**
 * Larger files are left as they are: the scan's cost grows with the file, and
 * what it saves (a cost per font) matters for small documents.
 */
const MAX_SCANNED_BYTES = 4 * 1024 * 1024;

/** What the worker needs to know of a PDF's fonts, from one reading of its bytes. */
export interface FontFindings {
  /** The file with the `/ToUnicode` entries of embedded composite fonts blanked out, or undefined when there are none. */
  withoutMaps: Buffer | undefined;
  /** Whether it has a Chinese, Japanese or Korean composite font whose program it does not embed. */
  nonEmbeddedCjk: boolean;
}

/** Reads the font dictionaries once for both questions (see the top of this file). */
export function inspectFonts(pdf: Buffer): FontFindings {
  const findings: FontFindings = { withoutMaps: undefined, nonEmbeddedCjk: false };
  if (pdf.length > MAX_SCANNED_BYTES) return findings;
  const hasMaps = pdf.indexOf('/ToUnicode') !== -1;
  const hasComposite = pdf.indexOf('Type0') !== -1;
  if (!hasMaps && !hasComposite) return findings;
  const text = pdf.toString('latin1');
  const objects = new ObjectIndex(text);
  if (hasMaps) findings.withoutMaps = blankedMaps(pdf, text, objects);
  if (hasComposite) findings.nonEmbeddedCjk = hasNonEmbeddedCjk(text, objects);
  return findings;
}

/** The file with the `/ToUnicode` entries of embedded fonts blanked out, or undefined when there are none. */
export function withoutEmbeddedFontMaps(pdf: Buffer): Buffer | undefined {
  return inspectFonts(pdf).withoutMaps;
}

/** Whether the file has a Chinese, Japanese or Korean composite font whose program it does not embed. */
export function usesNonEmbeddedCjkFont(pdf: Buffer): boolean {
  return inspectFonts(pdf).nonEmbeddedCjk;
}

function blankedMaps(pdf: Buffer, text: string, objects: ObjectIndex): Buffer | undefined {
  let result: Buffer | undefined;
  let maps = 0;
  for (const match of text.matchAll(TO_UNICODE)) {
    if (++maps > MAX_MAPS) return undefined;
    const font = objects.dictionaryAt(match.index);
    if (font === undefined || !objects.drawsWithoutMap(font)) continue;
    result ??= Buffer.from(pdf);
    result.fill(0x20, match.index, match.index + match[0].length);
  }
  return result;
}

function hasNonEmbeddedCjk(text: string, objects: ObjectIndex): boolean {
  let fonts = 0;
  for (const match of text.matchAll(TYPE0_GLOBAL)) {
    if (++fonts > MAX_MAPS) return false;
    const font = objects.dictionaryAt(match.index);
    if (font !== undefined && objects.isNonEmbeddedCjk(font)) return true;
  }
  return false;
}

/** Where each object of the file starts (the last definition wins, as with incremental updates). */
class ObjectIndex {
  readonly #text: string;
  readonly #starts: number[] = [];
  readonly #byNumber = new Map<number, number>();
  readonly #bodies = new Map<number, string>();

  constructor(text: string) {
    this.#text = text;
    for (const header of text.matchAll(OBJECT_HEADER)) {
      const start = header.index + header[0].length;
      this.#starts.push(start);
      this.#byNumber.set(Number(header[1]), start);
    }
  }

  /** Where the object that holds `position` starts (its text may end before it). */
  #objectStart(position: number): number | undefined {
    const starts = this.#starts;
    let low = 0;
    let high = starts.length - 1;
    let found = -1;
    while (low <= high) {
      const middle = (low + high) >> 1;
      if (starts[middle]! <= position) {
        found = middle;
        low = middle + 1;
      } else {
        high = middle - 1;
      }
    }
    return found === -1 ? undefined : starts[found];
  }

  /**
   * The innermost dictionary (`<< … >>`) around `position` within its object: the
   * font dictionary itself when fonts are written inline, several to an object.
   */
  dictionaryAt(position: number): string | undefined {
    const start = this.#objectStart(position);
    if (start === undefined) return undefined;
    const body = this.#body(start);
    const at = position - start;
    if (at >= body.length) return undefined;
    let depth = 0;
    let open = -1;
    for (let i = at - 1; i > 0; i--) {
      if (body[i] === '>' && body[i - 1] === '>') {
        depth++;
        i--;
      } else if (body[i] === '<' && body[i - 1] === '<') {
        if (depth === 0) {
          open = i - 1;
          break;
        }
        depth--;
        i--;
      }
    }
    if (open === -1) return undefined;
    depth = 0;
    for (let i = at; i < body.length - 1; i++) {
      if (body[i] === '<' && body[i + 1] === '<') {
        depth++;
        i++;
      } else if (body[i] === '>' && body[i + 1] === '>') {
        if (depth === 0) return body.slice(open, i + 2);
        depth--;
        i++;
      }
    }
    return undefined;
  }

  /** The text of object `number`, up to its end, its stream, or MAX_OBJECT_TEXT. */
  object(number: number): string | undefined {
    const start = this.#byNumber.get(number);
    return start === undefined ? undefined : this.#body(start);
  }

  #body(start: number): string {
    let body = this.#bodies.get(start);
    if (body === undefined) {
      const window = this.#text.slice(start, start + MAX_OBJECT_TEXT);
      const ends = [window.indexOf('endobj'), window.indexOf('stream')].filter((at) => at !== -1);
      body = ends.length === 0 ? window : window.slice(0, Math.min(...ends));
      this.#bodies.set(start, body);
    }
    return body;
  }

  /** Whether a font dictionary is a Type 0 font whose embedded descendant maps codes to glyphs without Unicode. */
  drawsWithoutMap(font: string): boolean {
    if (!TYPE0.test(font)) return false;
    const descendant = this.#descendant(font);
    if (descendant === undefined || !(CID_TYPE0.test(descendant) || CID_TO_GID_MAP.test(descendant))) return false;
    const descriptor = DESCRIPTOR.exec(descendant);
    if (descriptor === null) return false;
    const body = this.object(Number(descriptor[1]));
    return body !== undefined && FONT_FILE.test(body);
  }

  /** Whether a Type 0 font dictionary's descendant is a CJK font (by its character collection) with no embedded program. */
  isNonEmbeddedCjk(font: string): boolean {
    const descendant = this.#descendant(font);
    if (descendant === undefined) return false;
    const reference = SYSTEM_INFO_REFERENCE.exec(descendant);
    const systemInfo = reference === null ? descendant : (this.object(Number(reference[1])) ?? '');
    if (!CJK_ORDERING.test(systemInfo)) return false;
    const descriptor = DESCRIPTOR.exec(descendant);
    if (descriptor === null) return true;
    // A descriptor out of sight (in an object stream) may well embed the program: assume it does.
    const body = this.object(Number(descriptor[1]));
    return body !== undefined && !ANY_FONT_FILE.test(body);
  }

  /** A Type 0 font's descendant font dictionary, or undefined when it has none or it is out of sight. */
  #descendant(font: string): string | undefined {
    const inline = DESCENDANT.exec(font);
    if (inline !== null) return this.object(Number(inline[1]));
    const reference = DESCENDANT_REFERENCE.exec(font);
    const array = reference === null ? undefined : this.object(Number(reference[1]));
    const first = array === undefined ? null : FIRST_REFERENCE.exec(array);
    return first === null ? undefined : this.object(Number(first[1]));
  }
}
