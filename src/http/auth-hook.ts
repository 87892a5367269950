import { createHmac, randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { scopeIncludes, type Authenticator, type AuthOutcome } from '../auth/authenticator.ts';
import { bearerToken } from '../domain/api-token.ts';
import type { CredentialScope } from '../repositories/credential-repository.ts';
import { afterPendingReads } from './after-pending-reads.ts';
import { arrivedAt } from './arrival.ts';
import { sendProblem } from './problem-handlers.ts';

export const WWW_AUTHENTICATE = 'Basic realm="signroom", charset="UTF-8"';

declare module 'fastify' {
  interface FastifyRequest {
    /** Who acts (set by the auth hook): the Basic credential's username, or `token:<id>` for an API token. */
    username?: string;
    /** The organizations the credential covers (set by the auth hook). */
    credentialScope?: CredentialScope;
    /**
     * When the request arrived (`performance.now()`, set by the auth hook): what
     * the server keeps between requests is used only if it is at least as new as this moment.
     */
    receivedAt?: number;
    /** Until when (the authenticator's clock) the credential is sure to pass again unchanged (set by the auth hook). */
    authValidUntil?: number;
  }
}

const CHALLENGE = { 'www-authenticate': WWW_AUTHENTICATE };

/**
 * Requires Basic auth or an API token (Bearer) on every route of the scope, then checks that the
 * credential covers the path's organization (a token covers its one): 401 (or 429), then 403,
 * both before parameters are validated.
 */
export function requireAuth(scope: FastifyInstance, authenticator: Authenticator): void {
  scope.addHook('onRequest', async (request, reply) => {
    // Passed on by the answer replay: it arrived earlier, and the replay already waited for what was read before then.
    const arrived = arrivedAt(request.raw);
    request.receivedAt = arrived ?? performance.now();
    if (arrived === undefined) await afterPendingReads();
    const outcome = await authenticator.authenticate(request.headers.authorization, request.receivedAt, request.ip);
    logAuthOutcome(request, outcome);
    switch (outcome.kind) {
      case 'missing':
        return sendProblem(reply, 'unauthorized', 'This API needs HTTP Basic authentication or an API token (Authorization: Bearer).', { headers: CHALLENGE });
      case 'malformed':
        return sendProblem(reply, 'unauthorized', 'The Authorization header is not valid HTTP Basic credentials.', {
          headers: CHALLENGE,
        });
      case 'rejected':
        if (outcome.delayMs > 0) await delay(outcome.delayMs);
        if (bearerToken(request.headers.authorization ?? '') !== undefined)
          return sendProblem(reply, 'unauthorized', 'Unknown or revoked API token.', { headers: CHALLENGE });
        return sendProblem(reply, 'unauthorized', 'Unknown username or wrong password.', { headers: CHALLENGE });
      case 'throttled':
        return sendProblem(
          reply,
          'too-many-requests',
          outcome.by === 'username'
            ? `Too many failed logins for this username; try again in ${outcome.retryAfterSeconds} s.`
            : `Too many failed logins from this address; try again in ${outcome.retryAfterSeconds} s.`,
          { headers: { 'retry-after': String(outcome.retryAfterSeconds) } },
        );
      case 'busy':
        return sendProblem(reply, 'service-unavailable', 'The server is busy checking other passwords; try again in a moment.', {
          headers: { 'retry-after': String(outcome.retryAfterSeconds) },
        });
      case 'authenticated': {
        request.username = outcome.username;
        request.credentialScope = outcome.scope;
        request.authValidUntil = outcome.validUntil;
        const orgId = organizationOf(request);
        if (orgId !== undefined && !scopeIncludes(outcome.scope, orgId)) {
          return sendProblem(reply, 'forbidden', `This credential is not allowed to act on organization "${orgId}".`);
        }
        return undefined;
      }
    }
  });
}

/**
 * Logs what an operator needs to see of authentication: failed logins, throttling and a full
 * hash queue, with the client's address and the username as a short hash (never the name itself,
 * which may be a password typed in the wrong box).
 */
export function logAuthOutcome(request: FastifyRequest, outcome: AuthOutcome): void {
  switch (outcome.kind) {
    case 'rejected':
      request.log.warn({ event: 'login.failed', user: userTag(outcome.username), client: request.ip }, 'login failed');
      return;
    case 'throttled':
      request.log.warn(
        { event: 'login.throttled', by: outcome.by, user: userTag(outcome.username), client: request.ip, retryAfterSeconds: outcome.retryAfterSeconds },
        'login refused: too many failures',
      );
      return;
    case 'busy':
      request.log.warn({ event: 'login.busy', client: request.ip }, 'login refused: every password hash slot is taken');
      return;
    case 'missing':
    case 'malformed':
    case 'authenticated':
      return;
  }
}

/** Keys the usernames' tags in this process's log: a tag cannot be looked up in a dictionary of names or passwords. */
const TAG_KEY = randomBytes(32);

/** A username as a short keyed hash that tells the same name again within this process's log (`token` for an API token). */
function userTag(username: string | undefined): string {
  return username === undefined ? 'token' : createHmac('sha256', TAG_KEY).update(username).digest('hex').slice(0, 12);
}

function organizationOf(request: FastifyRequest): string | undefined {
  const params = request.params as Record<string, unknown> | undefined;
  const orgId = params?.['organizationId'];
  return typeof orgId === 'string' ? orgId : undefined;
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
