import type { FastifyBodyParser, FastifyInstance } from 'fastify';
import { ProblemError } from '../errors.ts';

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The parser of JSON request bodies (RFC 8259: UTF-8): Fastify's own, on text read strictly. Read
 * as a string by Fastify, bytes that are not UTF-8 (Latin-1 text, a declared `charset=latin1`)
 * became U+FFFD and were stored so: now such a body is 400, a charset other than UTF-8 is 415.
 * An empty body is no body: clients send a JSON content type with a DELETE too.
 */
export function jsonBodyParser(app: FastifyInstance): FastifyBodyParser<Buffer> {
  const json = app.getDefaultJsonParser('error', 'error');
  return (request, body, done) => {
    const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(request.headers['content-type'] ?? '')?.[1]?.toLowerCase();
    // US-ASCII is UTF-8's first half: its bytes are checked as UTF-8's are.
    if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8' && charset !== 'us-ascii') {
      done(new ProblemError('unsupported-media-type', `JSON bodies are UTF-8; this one says charset=${charset}.`));
      return;
    }
    let text: string;
    try {
      text = UTF8.decode(body);
    } catch {
      done(
        new ProblemError('malformed-request', 'The body is not valid UTF-8 (JSON bodies are UTF-8).', {
          errors: [{ parameter: 'body', message: 'must be UTF-8' }],
        }),
      );
      return;
    }
    if (text === '') done(null, undefined);
    else void json(request, text, done);
  };
}
