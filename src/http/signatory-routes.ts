import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { adminProblemResponses } from '../schemas/problem.ts';
import { LookupQuery, RoomPathParams, SignatoryPage } from '../schemas/signatory-lookup.ts';
import type { LookupRequest, SignatoryLookup } from '../services/signatory-lookup.ts';
import type { AnswerReplay } from './answer-replay.ts';

/** Seed operation 1: GET …/signatories/lookup. */
export const signatoryRoutes: FastifyPluginAsyncTypebox<{ lookup: SignatoryLookup; replay: AnswerReplay }> = async (app, { lookup, replay }) => {
  app.get(
    '/organizations/:organizationId/rooms/:signingRoomId/signatories/lookup',
    {
      schema: {
        operationId: 'lookupSignatories',
        tags: ['signatories'],
        summary: 'Search the users who can be chosen as signatories of a signing room',
        description:
          "Candidates are the organization's users (external ones only when the organization allows external " +
          'signatories), filtered, ordered by a total order (sortBy, then lastname, firstname, email, id; folded, ' +
          'code-point order) and paged Spring-Data style.',
        params: RoomPathParams,
        querystring: LookupQuery,
        response: { 200: SignatoryPage, ...adminProblemResponses(400, 404) },
      },
      // A repeated lookup, the database unchanged, is answered again without the framework.
      onSend: replay.replayable,
    },
    async (request, reply) => {
      const { organizationId, signingRoomId } = request.params;
      const query = request.query as LookupRequest;
      // Once the directory changed, a replayed answer is computed again by the lookup alone.
      replay.renewable(request, { orgId: organizationId, answer: (asOf) => lookup.lookup(organizationId, signingRoomId, query, asOf) });
      // Already the UTF-8 JSON of a SignatoryPage (cached whole for repeated lookups): Fastify sends
      // a Buffer as it is, without the serializer, where the type provider expects the object.
      const json = await lookup.lookup(organizationId, signingRoomId, query, request.receivedAt);
      return reply.type('application/json; charset=utf-8').send(json as never);
    },
  );
};
