/** Thumbnail geometry (contract section 4): fixed width, aspect kept, height capped at twice the width. */

export interface ThumbnailSize {
  /** Scale from page (or image) units to thumbnail pixels. */
  scale: number;
  width: number;
  /** Visible height: the top of a taller page. */
  height: number;
}

/** The thumbnail size of a page or image of the given size, or undefined when that size is unusable. */
export function thumbnailSize(pageWidth: number, pageHeight: number, thumbnailWidth: number): ThumbnailSize | undefined {
  if (!Number.isFinite(pageWidth) || !Number.isFinite(pageHeight) || pageWidth <= 0 || pageHeight <= 0) return undefined;
  const scale = thumbnailWidth / pageWidth;
  const fullHeight = Math.max(1, Math.round(pageHeight * scale));
  return { scale, width: thumbnailWidth, height: Math.min(fullHeight, 2 * thumbnailWidth) };
}
