import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import { withNamedSchemas } from './openapi-components.ts';

export const API_PREFIX = '/admin/api/v3';
export const OPENAPI_PATH = `${API_PREFIX}/openapi.json`;
export const DOCS_PREFIX = '/docs';

/** Collects the route schemas into an OpenAPI 3.1 document. Register before any route. */
export async function registerOpenApi(app: FastifyInstance, version: string, publicBaseUrl: string): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'signroom administration API',
        version,
        license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
        description:
          'Signing-room administration: signatory lookup, documents, the directory and its audit trail. Every error ' +
          'is RFC 9457 problem details (application/problem+json) with a stable `code`.',
      },
      servers: [{ url: publicBaseUrl, description: 'This server (SIGNROOM_PUBLIC_BASE_URL, or the host it is reached at)' }],
      components: {
        securitySchemes: {
          basicAuth: { type: 'http', scheme: 'basic' },
          apiToken: { type: 'http', scheme: 'bearer', description: 'An API token of the organization (`bin/signroom token create ORG`): `srt_…`' },
        },
      },
      security: [{ basicAuth: [] }, { apiToken: [] }],
      tags: [
        { name: 'signatories', description: 'Who can be chosen for a signing room' },
        { name: 'documents', description: 'Documents of a signing room' },
        { name: 'directory', description: 'Organizations, users, signing rooms and their members, one change at a time' },
        { name: 'audit', description: 'The audit trail of an organization' },
        { name: 'operations', description: 'Health and API description (no authentication)' },
      ],
    },
    // The schemas with a title as components, each place a $ref (openapi-components.ts).
    transformObject: (documents) =>
      'openapiObject' in documents ? withNamedSchemas(documents.openapiObject as Record<string, unknown>) : documents.swaggerObject,
  });
}

/** Serves the document as JSON and the interactive docs at /docs. Register after the routes. */
export async function registerOpenApiRoutes(app: FastifyInstance): Promise<void> {
  app.get(OPENAPI_PATH, { schema: { hide: true } }, async (_request, reply) => reply.header('cache-control', 'no-cache').send(app.swagger()));
  await app.register(swaggerUi, {
    routePrefix: DOCS_PREFIX,
    uiConfig: { docExpansion: 'list', deepLinking: true },
    staticCSP: true,
  });
}
