import Fastify, { type FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Authenticator, scopeIncludes } from './auth/authenticator.ts';
import type { Config } from './config.ts';
import { requireAuth } from './http/auth-hook.ts';
import { routedScimUrl, SCIM_PREFIX } from './http/scim-answers.ts';
import { scimRoutes } from './http/scim-routes.ts';
import { ScimGroups } from './scim/scim-groups.ts';
import { ScimUsers } from './scim/scim-users.ts';
import { CONSOLE_PREFIX, consoleRoutes } from './http/console-routes.ts';
import { healthRoutes } from './http/health-routes.ts';
import { API_PREFIX, DOCS_PREFIX, registerOpenApi, registerOpenApiRoutes } from './http/openapi.ts';
import { clientErrorHandler, frameworkErrorHandler, installProblemHandlers, refusePathsNamingNothing, watchAllowedMethods } from './http/problem-handlers.ts';
import { compileTextParameters } from './http/query-validator.ts';
import { installRequestDeadlines, serverTimeoutOptions } from './http/request-deadlines.ts';
import { AnswerReplay, replayingServer } from './http/answer-replay.ts';
import { continueWhenRead } from './http/expect-continue.ts';
import { closeLingering } from './http/lingering-close.ts';
import { installMetrics } from './http/metrics.ts';
import { RequestLog, requestId, standardOutputLog } from './http/request-log.ts';
import { signatoryRoutes } from './http/signatory-routes.ts';
import { SignatoryLookup } from './services/signatory-lookup.ts';
import { documentRoutes } from './http/document-routes.ts';
import { compileBody } from './http/body-validator.ts';
import { directoryRoutes } from './http/directory-routes.ts';
import { DirectoryService } from './directory/directory-service.ts';
import { blobStorePlugin } from './plugins/blob-store.ts';
import { databasePlugin } from './plugins/database.ts';
import { documentsPlugin } from './plugins/documents.ts';
import { searchIndexesPlugin } from './plugins/search-indexes.ts';
import { VERSION } from './version.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** Checks credentials and tokens for the API and SCIM; what it counts is shown at /metrics. */
    authenticator: Authenticator;
    /** Sends repeated GETs' answers again while nothing changed (what it replayed is counted). */
    answerReplay: AnswerReplay;
  }
}

export interface AppOptions {
  /** Where logs go; defaults to standard output. */
  logStream?: NodeJS.WritableStream;
  /** Clock for time-dependent rules (login back-off); tests move it. */
  now?: () => number;
}

/**
 * Builds the whole service: database (migrated), documents, search indexes, services, routes,
 * OpenAPI. The server, the tests and the benchmarks all use this one function. Each resource is a
 * plugin that closes itself; they close in the reverse of the order they are registered in
 * (search indexes, render pool, then the database; the blob store holds nothing open).
 */
export async function buildApp(config: Config, options: AppOptions = {}): Promise<FastifyInstance> {
  // Made once the database is open; until then every request goes to Fastify.
  let replay: AnswerReplay | undefined;
  let stopLingering = () => {};
  const app = Fastify({
    serverFactory: (handler, fastifyOptions) => {
      const server = replayingServer(() => replay, handler, fastifyOptions as Parameters<typeof replayingServer>[2]);
      stopLingering = closeLingering(server);
      continueWhenRead(server);
      return server;
    },
    logger: { level: config.logLevel, stream: options.logStream ?? standardOutputLog() },
    logController: new RequestLog(),
    genReqId: requestId,
    frameworkErrors: frameworkErrorHandler,
    clientErrorHandler,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    routerOptions: { maxParamLength: 200 },
    rewriteUrl: (request) => routedScimUrl(request.url ?? '/'),
    // Migrating a large database, or taking a search index copy, may take longer than Fastify's 10 s default.
    pluginTimeout: 0,
    ...serverTimeoutOptions(config.timeouts),
    // Behind trusted proxies, the client's address (request.ip) is read from X-Forwarded-For.
    trustProxy: config.trustedProxies.length > 0 ? [...config.trustedProxies] : false,
  }).withTypeProvider<TypeBoxTypeProvider>();
  try {
    await app.register(databasePlugin, { config });
    await app.register(blobStorePlugin, { config });
    await app.register(documentsPlugin, { config });
    await app.register(searchIndexesPlugin, { config });
  } catch (error) {
    // Whatever opened before the failure (the database, render workers) must not keep the process alive.
    await app.close().catch(() => {});
    throw error;
  }
  const { database, documents, renderer, searchIndexes } = app;
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  // Once shutdown starts, answers still in flight close their connection, so a
  // keep-alive client cannot hold the process open for the keep-alive timeout.
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
    replay?.stop();
    stopLingering();
  });
  app.addHook('onSend', async (_request, reply) => {
    if (closing) reply.header('connection', 'close');
  });
  app.setValidatorCompiler((route) => (route.httpPart === 'body' ? compileBody(route) : compileTextParameters(route)));
  // Bodies are JSON only: without Fastify's text/plain parser, other types answer 415.
  app.removeContentTypeParser('text/plain');
  installProblemHandlers(app);
  refusePathsNamingNothing(app);
  installRequestDeadlines(app, config.timeouts);
  const addMethodNotAllowed = watchAllowedMethods(app, [DOCS_PREFIX, SCIM_PREFIX, CONSOLE_PREFIX]);
  await registerOpenApi(app, VERSION, config.publicBaseUrl);

  // Both keep what they read between requests while the database reports no commit by another connection.
  const lookup = new SignatoryLookup(database.db, config.maxPageSize, { changes: database.changes, indexes: searchIndexes });
  const authenticator = new Authenticator(database.db, config.login, {
    ...(options.now !== undefined ? { now: options.now } : {}),
    changes: database.changes,
  });
  const directory = new DirectoryService(database.db, config.maxPageSize);
  replay = new AnswerReplay(
    database.changes,
    async (header, address, orgId, asOf) => {
      const passes = await authenticator.recheck(header, asOf, address);
      return passes !== undefined && scopeIncludes(passes.scope, orgId) ? passes.validUntil : undefined;
    },
    app.log,
    // A request waiting for a renewal spends its handler's time (request-deadlines.ts counts it).
    { now: options.now, renewalWaitMs: Math.floor(config.timeouts.handlerMs / 2) },
  );
  app.decorate('authenticator', authenticator);
  app.decorate('answerReplay', replay);
  const observeReplayed = installMetrics(
    app,
    { token: config.metricsToken, slowRequestMs: config.slowRequestMs },
    { authenticator, renderer, searchIndexes: () => searchIndexes.status(), replay },
  );

  replay.onReplayed = (reqId, route, status, seconds) => observeReplayed(reqId, 'GET', route, status, seconds);
  await app.register(healthRoutes, {
    searchIndexes: () => searchIndexes.status(),
    notReadyBecause: async () => {
      if (!renderer.ready) return 'No render worker is up to draw thumbnails.';
      try {
        await database.ping();
        return undefined;
      } catch {
        return 'The database is not reachable.';
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
      await admin.register(signatoryRoutes, { lookup, replay });
      await admin.register(documentRoutes, {
        documents,
        maxPageSize: config.maxPageSize,
        maxDocumentBytes: config.maxDocumentBytes,
        uploadMemoryBytes: config.uploadMemoryBytes,
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
  return app;
}
