import type { FastifyReply } from 'fastify';
import type { ScimError } from '../scim/scim-error.ts';

/** Where each organization's SCIM service is (contract section 9): the "tenant URL" an administrator gives the identity provider. */
export const SCIM_PREFIX = '/scim/v2/organizations';

/** The media type of SCIM answers (RFC 7644 §3.1). */
export const SCIM_JSON = 'application/scim+json; charset=utf-8';

/** Whether a request is for the SCIM service: its errors are SCIM errors, those met before routing included. */
export function isScimRequest(url: string): boolean {
  const pathname = url.split('?', 1)[0]!;
  return pathname === SCIM_PREFIX || pathname.startsWith(`${SCIM_PREFIX}/`);
}

/** Answers with the SCIM error. */
export function sendScimError(reply: FastifyReply, error: ScimError): FastifyReply {
  if (error.status === 503) reply.header('retry-after', '5');
  return reply.code(error.status).type(SCIM_JSON).send(JSON.stringify(error.body()));
}

/**
 * A SCIM request's URL as routed: a tenant URL pasted with a trailing slash makes identity
 * providers ask for `…/acme//Users` or `…/Users/`, which mean the same resource; repeated
 * slashes are one and a trailing one goes. Other URLs are left as they are.
 */
export function routedScimUrl(url: string): string {
  if (!url.startsWith('/scim/')) return url;
  const query = url.indexOf('?');
  const pathname = query === -1 ? url : url.slice(0, query);
  const tidied = pathname.replace(/\/{2,}/g, '/').replace(/(.)\/$/, '$1');
  return tidied === pathname ? url : `${tidied}${query === -1 ? '' : url.slice(query)}`;
}
