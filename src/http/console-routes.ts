import { existsSync } from 'node:fs';
import path from 'node:path';
import fastifyStatic from '@fastify/static';
import type { FastifyPluginAsync } from 'fastify';
import { sendProblem } from './problem-handlers.ts';

export const CONSOLE_PREFIX = '/console';

/** Where `npm ci` (console/build.ts) puts the built console. */
export const CONSOLE_BUILD_DIR = path.join(import.meta.dirname, '..', '..', 'dist', 'console');

/**
 * The console may load only what this server serves: no inline script, no other origin, no frames.
 * Thumbnails are fetched with the credential and shown as blob: URLs; the upload's answer is a data: URI.
 */
const CONTENT_SECURITY_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' blob: data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const SECURITY_HEADERS = {
  'content-security-policy': CONTENT_SECURITY_POLICY,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'permissions-policy': 'camera=(), microphone=(), geolocation=()',
};

/**
 * The admin console (contract section 11): static files only, answered without auth; everything
 * it shows comes from the public API, which needs the credential. Hashed assets are immutable;
 * index.html is revalidated so that a new build is picked up at once.
 */
export const consoleRoutes: FastifyPluginAsync<{ root?: string }> = async (app, { root = CONSOLE_BUILD_DIR }) => {
  app.addHook('onSend', async (_request, reply) => {
    reply.headers(SECURITY_HEADERS);
  });
  if (!existsSync(path.join(root, 'index.html'))) {
    app.get(`${CONSOLE_PREFIX}/*`, { schema: { hide: true } }, async (_request, reply) =>
      sendProblem(reply, 'service-unavailable', 'The console is not built: run `npm run build:console` (npm ci does it).'),
    );
    return;
  }
  app.get(CONSOLE_PREFIX, { schema: { hide: true } }, async (_request, reply) => reply.redirect(`${CONSOLE_PREFIX}/`, 301));
  await app.register(fastifyStatic, {
    root,
    prefix: `${CONSOLE_PREFIX}/`,
    decorateReply: false,
    cacheControl: false,
    serveDotFiles: false,
    setHeaders: (reply, file) => {
      reply.header('cache-control', file.includes(`${path.sep}assets${path.sep}`) ? 'public, max-age=31536000, immutable' : 'no-cache');
    },
  });
};
