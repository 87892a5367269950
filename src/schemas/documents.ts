import { Type } from 'typebox';
import { pageOf, PageQuery } from './page.ts';
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
    name: Type.Optional(Type.String({ maxLength: 255, description: 'A name to store with the document' })),
  },
  { description: 'Other fields are ignored' },
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

export const UploadResponse = Type.Object({
  id: Type.String({ format: 'uuid' }),
  thumbnail: Type.String({ description: 'data:image/png;base64,… of page 1, SIGNROOM_THUMBNAIL_WIDTH pixels wide' }),
});

export const DocumentMetadata = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    name: Type.Union([Type.String(), Type.Null()]),
    mediaType: Type.String({ enum: ['application/pdf', 'image/png', 'image/jpeg'] }),
    size: Type.Integer({ description: 'Bytes' }),
    sha256: Type.String({ description: 'Hex SHA-256 of the bytes' }),
    pageCount: Type.Integer(),
    createdAt: Type.String({ format: 'date-time' }),
    uploadedBy: Type.String({ description: 'Username of the credential that uploaded it' }),
    thumbnail: Type.String({ enum: ['rendered', 'placeholder'], description: 'Whether the thumbnail shows page 1' }),
  },
  { title: 'DocumentMetadata' },
);

export const DocumentPage = pageOf(DocumentMetadata, {
  title: 'DocumentPage',
  description: 'A Spring Data page of documents, newest first',
});

export const DocumentListQuery = Type.Object({ ...PageQuery });
