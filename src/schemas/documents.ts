import { Type } from 'typebox';
import { pageOf, PageQuery } from './page.ts';
import type { ResponseHeader } from './problem.ts';
import { RoomPathParams } from './signatory-lookup.ts';

export const DocumentPathParams = Type.Object({
  ...RoomPathParams.properties,
  documentId: Type.String({ description: 'Document id (UUID)' }),
});

export const UploadBody = Type.Object(
  {
    payload: Type.String({
      minLength: 1,
      description:
        'The file in base64 (RFC 4648, standard or URL-safe alphabet, padding optional, white space ignored), ' +
        'optionally behind a data:<type>;base64, header. PDF, PNG or JPEG, recognised by content.',
    }),
    name: Type.Optional(
      Type.Union([Type.String({ maxLength: 255 }), Type.Null()], { description: 'A name to store with the document; null is the same as none' }),
    ),
  },
  { title: 'DocumentUpload', description: 'Other fields are ignored' },
);

export const UploadHeaders = Type.Object({
  'idempotency-key': Type.Optional(
    Type.String({
      maxLength: 255,
      pattern: '^[\\x21-\\x7E]+$',
      description: 'Retries with the same key and body return the first response and create nothing new',
    }),
  ),
});

export const UploadResponse = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    thumbnail: Type.String({ description: 'data:image/png;base64,… of page 1, SIGNROOM_THUMBNAIL_WIDTH pixels wide' }),
  },
  { title: 'DocumentUploaded' },
);

/** The media types a document is stored and served as (recognised by content at upload). */
export const DOCUMENT_MEDIA_TYPES = ['application/pdf', 'image/png', 'image/jpeg'] as const;

export const DocumentMetadata = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    name: Type.Union([Type.String(), Type.Null()]),
    mediaType: Type.String({ enum: [...DOCUMENT_MEDIA_TYPES] }),
    size: Type.Integer({ description: 'Bytes' }),
    sha256: Type.String({ description: 'Hex SHA-256 of the bytes' }),
    pageCount: Type.Integer(),
    createdAt: Type.String({ format: 'date-time' }),
    uploadedBy: Type.String({ description: 'Username of the credential that uploaded it' }),
    thumbnail: Type.Unsafe<'rendered' | 'placeholder'>({
      type: 'string',
      enum: ['rendered', 'placeholder'],
      description: 'Whether the thumbnail shows page 1',
    }),
  },
  { title: 'DocumentMetadata' },
);

export const DocumentPage = pageOf(DocumentMetadata, {
  title: 'DocumentPage',
  description: 'A Spring Data page of documents, newest first',
});

export const DocumentListQuery = Type.Object({ ...PageQuery });

/** The `Location` of a stored document (201 of the upload). */
export const LocationHeader: ResponseHeader = {
  type: 'string',
  format: 'uri-reference',
  description: "The new document's path: /admin/api/v3/organizations/{organizationId}/rooms/{signingRoomId}/documents/{documentId}",
};

export const ContentHeaders = Type.Object({
  'if-none-match': Type.Optional(
    Type.String({
      description:
        'Entity tags of copies the client holds (RFC 9110 section 13.1.2), or "*": when one matches the ETag, ' +
        'the answer is 304 Not Modified without a body',
    }),
  ),
});

/** Headers of the content route's 200 and 304 (RFC 9110 section 15.4.5: a 304 repeats ETag and Cache-Control). */
export const ContentValidatorHeaders: Readonly<Record<string, ResponseHeader>> = {
  ETag: {
    type: 'string',
    pattern: '^"[0-9a-f]{64}"$',
    description: 'Strong entity tag: the hex SHA-256 of the bytes, quoted',
  },
  'Cache-Control': {
    type: 'string',
    enum: ['private, no-cache'],
    description: 'Private caches may keep the bytes but must revalidate them (If-None-Match) before each use',
  },
};

export const ContentDispositionHeader: ResponseHeader = {
  type: 'string',
  description: 'Only when the document has a name: inline; filename="<ASCII fallback>"; filename*=UTF-8\'\'<percent-encoded name> (RFC 6266)',
};

/** The bytes of a document in its stored media type. */
export const DocumentBytes = Type.String({ format: 'binary', description: 'The original bytes, as uploaded' });
