/** Entity tags, and the conditional request headers of RFC 9110 section 13.1, as pure rules over their text. */
import { createHash } from 'node:crypto';

/** A strong ETag of a representation: a digest of its JSON (a directory resource's carries its `updatedAt`). */
export function etagOf(body: object): string {
  return `"${createHash('sha256').update(JSON.stringify(body)).digest('base64url').slice(0, 27)}"`;
}

/**
 * An If-Match header (section 13.1.1, `"*" / #entity-tag`): `*`, its entity tags (weak ones kept,
 * to be compared strongly and so never to match), undefined when there is none, or `malformed`.
 */
export function ifMatchTags(header: string | undefined): '*' | string[] | 'malformed' | undefined {
  if (header === undefined) return undefined;
  const tags = header.split(',').map((tag) => tag.trim());
  // "*" stands alone.
  if (tags.length === 1 && tags[0] === '*') return '*';
  return tags.every((tag) => /^(W\/)?"[\x21\x23-\x7e\x80-\xff]*"$/.test(tag)) ? tags : 'malformed';
}

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
