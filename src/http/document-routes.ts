import type { IncomingMessage } from 'node:http';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { etagOf, matchesIfNoneMatch } from '../domain/entity-tags.ts';
import { effectivePageSize } from '../domain/paging.ts';
import { decodePayload, type PayloadResult } from '../domain/payload.ts';
import { JsonBodyError, parseUploadBody, uploadBodyLimit } from '../domain/upload-body.ts';
import { ProblemError } from '../errors.ts';
import { ByteBudget } from '../lib/byte-budget.ts';
import { readRequestBody } from './request-body.ts';
import {
  ContentDispositionHeader,
  ContentHeaders,
  ContentValidatorHeaders,
  DOCUMENT_MEDIA_TYPES,
  DocumentBytes,
  DocumentListQuery,
  DocumentMetadata,
  DocumentPage,
  DocumentPathParams,
  LocationHeader,
  UploadBody,
  UploadHeaders,
  UploadResponse,
} from '../schemas/documents.ts';
import { adminProblemResponses } from '../schemas/problem.ts';
import { IfNoneMatchHeaders, NotModified, withETag } from '../schemas/directory.ts';
import { RoomPathParams } from '../schemas/signatory-lookup.ts';
import type { DocumentService } from '../services/documents.ts';

export interface DocumentRouteOptions {
  documents: DocumentService;
  /** Bytes of upload bodies held at once in this process. */
  uploadMemoryBytes: number;
  maxPageSize: number;
  maxDocumentBytes: number;
  /** Path prefix of the API, for Location headers (not "prefix": Fastify would take that as the route prefix). */
  apiPrefix: string;
}

const ROOM = '/organizations/:organizationId/rooms/:signingRoomId/documents';
const DOCUMENT = `${ROOM}/:documentId`;

/** Seed operation 2 (upload) and the retrieval routes that follow from it. */
export const documentRoutes: FastifyPluginAsyncTypebox<DocumentRouteOptions> = async (app, options) => {
  const { documents } = options;
  const bodyLimit = uploadBodyLimit(options.maxDocumentBytes);

  // Upload bodies are read into one buffer and parsed from raw bytes, so the
  // payload is decoded in place without becoming a string first; the decoded
  // bytes travel beside the body, which keeps a short stand-in for schema
  // validation.
  const decodedPayloads = new WeakMap<object, PayloadResult>();
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { bodyLimit }, async (request: FastifyRequest, stream: IncomingMessage) => {
    const raw = await readRequestBody(stream, request.headers['content-length'], bodyLimit);
    try {
      const parsed = parseUploadBody(raw);
      if (parsed.payload !== undefined && typeof parsed.value === 'object' && parsed.value !== null) {
        decodedPayloads.set(parsed.value, parsed.payload);
      }
      return parsed.value;
    } catch (error) {
      if (!(error instanceof JsonBodyError)) throw error;
      throw new ProblemError('malformed-request', error.message, { errors: [{ parameter: 'body', message: error.message }] });
    }
  });

  // Upload bodies share one budget: each is counted, once its sender is authenticated, from before
  // its body is read until its answer is sent (the body and its decoded bytes live that long).
  const bodies = new ByteBudget(options.uploadMemoryBytes);
  const holds = new WeakMap<FastifyRequest, { release: () => void; working: boolean; closed: boolean }>();
  const reserveBody = (request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void) => {
    // A client gone while its credential was checked: its answer's close has passed, so a hold
    // taken now would never be given back. Nothing is read or stored for it.
    if (reply.raw.destroyed) {
      done(new ProblemError('malformed-request', 'The client closed the connection before its upload was read.'));
      return;
    }
    const declared = Number(request.headers['content-length']);
    const release = bodies.tryReserve(Number.isSafeInteger(declared) && declared >= 0 && declared <= bodyLimit ? declared : bodyLimit);
    if (release === undefined) {
      request.log.warn({ event: 'upload.memory-full', heldBytes: bodies.reserved }, 'upload refused: the upload memory budget is taken');
      done(
        new ProblemError('service-unavailable', 'The server is holding as many uploads as its memory allows; send this one again in a moment.', {
          headers: { 'retry-after': '5' },
        }),
      );
      return;
    }
    // Given back once the answer is sent and the upload's work has ended, whichever comes last:
    // a client that goes away does not free what the handler still holds.
    holds.set(request, { release, working: false, closed: false });
    reply.raw.once('close', () => {
      const hold = holds.get(request);
      if (hold === undefined) return;
      hold.closed = true;
      if (!hold.working) hold.release();
    });
    done();
  };
  /** The handler's part of a hold: runs the upload, then gives the body's bytes back if the answer is gone already. */
  const holding = async <T>(request: FastifyRequest, work: () => Promise<T>): Promise<T> => {
    const hold = holds.get(request);
    if (hold !== undefined) hold.working = true;
    try {
      return await work();
    } finally {
      if (hold !== undefined) {
        hold.working = false;
        if (hold.closed) hold.release();
      }
    }
  };

  app.post(
    ROOM,
    {
      bodyLimit,
      onRequest: reserveBody,
      schema: {
        operationId: 'uploadDocument',
        tags: ['documents'],
        summary: 'Upload a document (base64 in JSON) and get its id and a thumbnail of page 1',
        params: RoomPathParams,
        headers: UploadHeaders,
        body: UploadBody,
        response: {
          201: {
            ...UploadResponse,
            description: 'Stored (or the replay of the first upload with this Idempotency-Key); the Location header names the document',
            headers: { Location: LocationHeader },
          },
          ...adminProblemResponses(400, 404, 409, 413, 415, 422),
        },
      },
    },
    async (request, reply) => {
      const { organizationId, signingRoomId } = request.params;
      const result = await holding(request, () =>
        documents.upload({
          orgId: organizationId,
          roomId: signingRoomId,
          username: request.username ?? '',
          actor: { actor: request.username ?? '', requestId: request.id },
          payload: decodedPayloads.get(request.body) ?? decodePayload(request.body.payload),
          name: request.body.name ?? undefined,
          idempotencyKey: request.headers['idempotency-key'],
        }),
      );
      if (result.placeholderReason !== undefined) {
        request.log.warn({ event: 'thumbnail.placeholder', documentId: result.id, reason: result.placeholderReason }, 'stored with the placeholder thumbnail');
      }
      const location = `${options.apiPrefix}/organizations/${encodeURIComponent(organizationId)}/rooms/${encodeURIComponent(signingRoomId)}/documents/${result.id}`;
      return reply
        .code(201)
        .header('location', location)
        .send({ id: result.id, thumbnail: `data:image/png;base64,${Buffer.from(result.thumbnailPng).toString('base64')}` });
    },
  );

  app.get(
    ROOM,
    {
      schema: {
        operationId: 'listDocuments',
        tags: ['documents'],
        summary: "A page of the room's documents, newest first",
        params: RoomPathParams,
        querystring: DocumentListQuery,
        response: { 200: DocumentPage, ...adminProblemResponses(400, 404) },
      },
    },
    async (request) => {
      const { organizationId, signingRoomId } = request.params;
      const query = request.query as { page: number; size: number };
      return documents.list(organizationId, signingRoomId, query.page, effectivePageSize(query.size, options.maxPageSize));
    },
  );

  app.get(
    DOCUMENT,
    {
      schema: {
        operationId: 'getDocument',
        tags: ['documents'],
        summary: "A document's metadata, with an ETag (If-None-Match answers 304)",
        params: DocumentPathParams,
        headers: IfNoneMatchHeaders,
        response: { 200: withETag(DocumentMetadata, "The document's metadata"), 304: NotModified, ...adminProblemResponses(404) },
      },
    },
    async (request, reply) => {
      const metadata = await documents.metadata(request.params.organizationId, request.params.signingRoomId, request.params.documentId);
      // A document never changes: its metadata's tag is a digest of it, as a directory resource's is.
      const etag = etagOf(metadata);
      reply.header('etag', etag);
      if (matchesIfNoneMatch(request.headers['if-none-match'], etag)) return reply.code(304).send(null);
      return metadata;
    },
  );

  app.get(
    `${DOCUMENT}/content`,
    {
      schema: {
        operationId: 'getDocumentContent',
        tags: ['documents'],
        summary: 'The original bytes, with their media type and an ETag (If-None-Match answers 304)',
        params: DocumentPathParams,
        headers: ContentHeaders,
        response: {
          // One entry per media type served; the handler sends a Buffer, which Fastify never passes to the serializer.
          200: {
            description: "The bytes, in the document's media type (mediaType of its metadata)",
            headers: { ...ContentValidatorHeaders, 'Content-Disposition': ContentDispositionHeader },
            content: Object.fromEntries(DOCUMENT_MEDIA_TYPES.map((type) => [type, { schema: DocumentBytes }])),
          },
          // No body: `type: 'null'` is how @fastify/swagger leaves out `content`.
          304: { description: 'Not modified: If-None-Match matched the ETag', type: 'null', headers: ContentValidatorHeaders },
          ...adminProblemResponses(404),
        },
      },
    },
    async (request, reply) => {
      const { metadata, bytes } = await documents.content(request.params.organizationId, request.params.signingRoomId, request.params.documentId);
      const etag = `"${metadata.sha256}"`;
      const raw = binary(reply);
      raw.header('etag', etag).header('cache-control', 'private, no-cache');
      if (matchesIfNoneMatch(request.headers['if-none-match'], etag)) return raw.code(304).send();
      if (metadata.name !== null) raw.header('content-disposition', contentDisposition(metadata.name));
      return raw.type(metadata.mediaType).send(bytes);
    },
  );

  app.get(
    `${DOCUMENT}/thumbnail`,
    {
      schema: {
        operationId: 'getDocumentThumbnail',
        tags: ['documents'],
        summary: 'The thumbnail of page 1 (PNG)',
        params: DocumentPathParams,
        response: {
          200: {
            description: 'PNG, SIGNROOM_THUMBNAIL_WIDTH pixels wide (a placeholder when page 1 could not be rendered)',
            content: { 'image/png': { schema: Type.String({ format: 'binary' }) } },
          },
          ...adminProblemResponses(404),
        },
      },
    },
    async (request, reply) => {
      const png = await documents.thumbnail(request.params.organizationId, request.params.signingRoomId, request.params.documentId);
      return binary(reply).type('image/png').send(Buffer.from(png));
    },
  );

  app.delete(
    DOCUMENT,
    {
      schema: {
        operationId: 'deleteDocument',
        tags: ['documents'],
        summary: 'Delete a document',
        params: DocumentPathParams,
        // No body is expected, but one sent anyway meets this scope's parser: 415 if not JSON, 400 if malformed, 413 over the body limit.
        response: { 204: { description: 'Deleted', type: 'null' }, ...adminProblemResponses(400, 404, 413, 415) },
      },
    },
    async (request, reply) => {
      await documents.delete(request.params.organizationId, request.params.signingRoomId, request.params.documentId, {
        actor: request.username ?? '',
        requestId: request.id,
      });
      return binary(reply).code(204).send();
    },
  );
};

/** The reply without the JSON response typing, for bytes and empty bodies. */
function binary(reply: unknown): FastifyReply {
  return reply as FastifyReply;
}

/** `inline` with the name as an ASCII fallback and in full (RFC 6266, RFC 8187 encoding). */
export function contentDisposition(name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]|["\\]/g, '_');
  const encoded = encodeURIComponent(name).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `inline; filename="${ascii}"; filename*=UTF-8''${encoded}`;
}
