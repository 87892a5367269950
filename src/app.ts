import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import Fastify, { type FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Authenticator } from './auth/authenticator.ts';
import type { Config } from './config.ts';
import { openMigratedDatabase, type DatabaseHandle } from './db/database.ts';
import { requireAuth } from './http/auth-hook.ts';
import { SCIM_PREFIX, scimRoutes } from './http/scim-routes.ts';
import { ScimGroups } from './scim/scim-groups.ts';
import { ScimUsers } from './scim/scim-users.ts';
import { CONSOLE_PREFIX, consoleRoutes } from './http/console-routes.ts';
import { healthRoutes } from './http/health-routes.ts';
import { API_PREFIX, DOCS_PREFIX, registerOpenApi, registerOpenApiRoutes } from './http/openapi.ts';
import { clientErrorHandler, frameworkErrorHandler, installProblemHandlers, watchAllowedMethods } from './http/problem-handlers.ts';
import { compileTextParameters } from './http/query-validator.ts';
import { signatoryRoutes } from './http/signatory-routes.ts';
import { SignatoryLookup } from './services/signatory-lookup.ts';
import { removeOrphanedResults, serverSearchIndexes } from './search-index/index.ts';
import { DocumentService } from './services/documents.ts';
import { openBlobStore } from './documents/blob-store.ts';
import { RenderPool } from './documents/render-pool.ts';
import { documentRoutes } from './http/document-routes.ts';
import { compileBody } from './http/body-validator.ts';
import { directoryRoutes } from './http/directory-routes.ts';
import { DirectoryService } from './directory/directory-service.ts';

const VERSION = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export interface AppOptions {
  /** Where logs go; defaults to standard output. */
  logStream?: NodeJS.WritableStream;
  /** Clock for time-dependent rules (login back-off); tests move it. */
  now?: () => number;
}

/**
 * Builds the whole service: database (migrated), services, routes, OpenAPI.
 * The server, the tests and the benchmarks all use this one function.
 */
export async function buildApp(config: Config, options: AppOptions = {}): Promise<FastifyInstance> {
  const { database } = await openMigratedDatabase(config);
  return createServer(config, database, options);
}

async function createServer(config: Config, database: DatabaseHandle, options: AppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    logger: {
      level: config.logLevel,
      ...(options.logStream !== undefined ? { stream: options.logStream } : {}),
    },
    genReqId: (request) => {
      const given = request.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    frameworkErrors: frameworkErrorHandler,
    clientErrorHandler,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    routerOptions: { maxParamLength: 200 },
  }).withTypeProvider<TypeBoxTypeProvider>();

  const blobs = await openBlobStore(database, config.dataDir);
  const renderer = new RenderPool(config.render);
  const searchIndexes = serverSearchIndexes(config, database.db, app.log);
  app.addHook('onClose', async () => {
    await searchIndexes.close();
    await renderer.close();
    await database.close();
  });
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  // Once shutdown starts, answers still in flight close their connection, so a
  // keep-alive client cannot hold the process open for the keep-alive timeout.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  app.addHook('onSend', async (_request, reply) => {
    if (closing) reply.header('connection', 'close');
  });
  app.setValidatorCompiler((route) => (route.httpPart === 'body' ? compileBody(route) : compileTextParameters(route)));
  // Bodies are JSON only: without Fastify's text/plain parser, other types answer 415.
  app.removeContentTypeParser('text/plain');
  installProblemHandlers(app);
  const addMethodNotAllowed = watchAllowedMethods(app, [DOCS_PREFIX, SCIM_PREFIX, CONSOLE_PREFIX]);
  await registerOpenApi(app, VERSION, config.publicBaseUrl);

  // Both keep what they read between requests while the database reports no commit by another connection.
  const lookup = new SignatoryLookup(database.db, config.maxPageSize, { changes: database.changes, indexes: searchIndexes });
  const authenticator = new Authenticator(database.db, config.login, {
    ...(options.now !== undefined ? { now: options.now } : {}),
    changes: database.changes,
  });
  const documents = new DocumentService(database.db, blobs, renderer, {
    maxBytes: config.maxDocumentBytes,
    thumbnailWidth: config.thumbnailWidth,
  });
  const directory = new DirectoryService(database.db, config.maxPageSize);
  const recovered = await documents.recover();
  if (recovered.temporaryFiles + recovered.orphanBlobs > 0) app.log.info(recovered, 'removed what an interrupted upload left behind');

  await app.register(healthRoutes, {
    searchIndexes: () => searchIndexes.status(),
    isReady: async () => {
      if (!renderer.ready) return false;
      try {
        await database.ping();
        return true;
      } catch {
        return false;
      }
    },
  });
  await app.register(
    async (admin) => {
      admin.addHook('onSend', async (_request, reply) => {
        // Answers depend on the credential: not for shared caches, unless a route says otherwise.
        if (!reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
      });
      requireAuth(admin, authenticator);
      await admin.register(signatoryRoutes, { lookup });
      await admin.register(documentRoutes, {
        documents,
        maxPageSize: config.maxPageSize,
        maxDocumentBytes: config.maxDocumentBytes,
        apiPrefix: API_PREFIX,
      });
      await admin.register(directoryRoutes, { directory, apiPrefix: API_PREFIX });
    },
    { prefix: API_PREFIX },
  );
  await app.register(scimRoutes, {
    prefix: SCIM_PREFIX,
    authenticator,
    directory,
    users: new ScimUsers(database.db, directory),
    groups: new ScimGroups(database.db, directory),
    publicBaseUrl: config.publicBaseUrl,
  });
  await registerOpenApiRoutes(app);
  await app.register(consoleRoutes);
  await app.register(addMethodNotAllowed);
  // Indexes kept on disk are taken before the server listens; those read from the database load in
  // the background, and until an organization's index is held, its lookups are answered by the database.
  app.addHook('onReady', async () => {
    await searchIndexes.preload();
    searchIndexes.watch(database.changes);
    removeOrphanedResults().then(
      (removed) => removed > 0 && app.log.info({ removed }, 'search index: removed result files left by servers that stopped mid-load'),
      (error: unknown) => app.log.warn({ err: error }, 'search index: could not remove result files left by stopped servers'),
    );
  });
  return app;
}
