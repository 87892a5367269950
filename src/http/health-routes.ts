import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { problemResponse } from '../schemas/problem.ts';
import { sendProblem } from './problem-handlers.ts';

const Status = Type.Object({ status: Type.String() });

const Readiness = Type.Object({
  status: Type.String(),
  searchIndexes: Type.Object(
    {
      organizations: Type.Integer({ description: 'Organizations whose in-memory search index is loaded' }),
      loading: Type.Integer({ description: 'Index loads waiting or running; meanwhile those lookups are answered by the database' }),
    },
    { description: 'In-memory search indexes of large organizations (SIGNROOM_SEARCH_MEMORY_MB, SIGNROOM_SEARCH_MIN_USERS)' },
  ),
});

/** `/livez` (the process runs) and `/readyz` (the process can serve: database reachable, render pool up). */
export const healthRoutes: FastifyPluginAsyncTypebox<{
  /** Why the process cannot serve now, in a sentence; undefined when it can. */
  notReadyBecause: () => Promise<string | undefined>;
  searchIndexes: () => { organizations: number; loading: number };
}> = async (app, { notReadyBecause, searchIndexes }) => {
  app.get(
    '/livez',
    {
      schema: {
        tags: ['operations'],
        operationId: 'livez',
        summary: 'Liveness: 200 while the process runs',
        security: [],
        response: { 200: Status },
      },
    },
    async () => ({ status: 'live' }),
  );
  app.get(
    '/readyz',
    {
      schema: {
        tags: ['operations'],
        operationId: 'readyz',
        summary: 'Readiness: 200 when the database is migrated and reachable and the render pool is up, 503 otherwise',
        security: [],
        // The handler sends no Retry-After here, unlike the API's 503 (problemResponses).
        response: { 200: Readiness, 503: problemResponse(503) },
      },
    },
    async (_request, reply) => {
      const reason = await notReadyBecause();
      if (reason === undefined) return { status: 'ready', searchIndexes: searchIndexes() };
      return sendProblem(reply, 'service-unavailable', reason);
    },
  );
};
