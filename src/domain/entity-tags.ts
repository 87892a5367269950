/**
 * RFC 9110 section 13.1.2, If-None-Match: true when the header is `*` or lists the entity tag,
 * compared weakly (`W/"x"` matches `"x"`): the client holds this version, and a GET answers 304.
 */
export function matchesIfNoneMatch(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  return header.split(',').some((candidate) => {
    const tag = candidate.trim();
    return tag === '*' || tag === etag || tag === `W/${etag}`;
  });
}
