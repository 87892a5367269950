/**
 * The one registry of problem codes. Every error the API sends is one of these,
 * as RFC 9457 problem details with the stable `code`. docs/api.md's error table lists
 * them all (a test fails when one is missing there).
 */
export const PROBLEMS = {
  'invalid-parameter': { status: 400, title: 'Invalid request parameters' },
  'malformed-request': { status: 400, title: 'Malformed request' },
  unauthorized: { status: 401, title: 'Authentication required' },
  forbidden: { status: 403, title: 'Not allowed for this organization' },
  'route-not-found': { status: 404, title: 'No such resource' },
  'organization-not-found': { status: 404, title: 'Organization not found' },
  'room-not-found': { status: 404, title: 'Signing room not found' },
  'document-not-found': { status: 404, title: 'Document not found' },
  'user-not-found': { status: 404, title: 'User not found' },
  'method-not-allowed': { status: 405, title: 'Method not allowed' },
  'request-timeout': { status: 408, title: 'Request timeout' },
  'organization-exists': { status: 409, title: 'Organization exists already' },
  'user-exists': { status: 409, title: 'User exists already' },
  'room-exists': { status: 409, title: 'Signing room exists already' },
  'email-taken': { status: 409, title: 'Email belongs to another user' },
  'user-name-taken': { status: 409, title: 'userName belongs to another user' },
  'room-has-documents': { status: 409, title: 'Signing room holds documents' },
  'idempotency-key-document-deleted': { status: 409, title: 'The document of this idempotency key was deleted' },
  'precondition-failed': { status: 412, title: 'Precondition failed' },
  'payload-too-large': { status: 413, title: 'Request too large' },
  'uri-too-long': { status: 414, title: 'URL too long' },
  'unsupported-media-type': { status: 415, title: 'Unsupported media type' },
  'document-unreadable': { status: 422, title: 'Document cannot be opened' },
  'document-encrypted': { status: 422, title: 'Document needs a password' },
  'idempotency-key-reused': { status: 422, title: 'Idempotency key used for another request' },
  'too-many-requests': { status: 429, title: 'Too many failed logins' },
  'headers-too-large': { status: 431, title: 'Request headers too large' },
  'internal-error': { status: 500, title: 'Internal server error' },
  'service-unavailable': { status: 503, title: 'Service unavailable' },
} as const satisfies Record<string, { status: number; title: string }>;

export type ProblemCode = keyof typeof PROBLEMS;

/** One bad request parameter, as listed in a 400's `errors[]`. */
export interface ParameterError {
  parameter: string;
  message: string;
}

/** An RFC 9457 problem details body as sent on the wire. */
export interface ProblemBody {
  type: string;
  title: string;
  status: number;
  detail: string;
  instance: string;
  code: ProblemCode;
  errors?: ParameterError[];
}

/** Builds the `type` URI of a problem code. */
export function problemType(code: ProblemCode): string {
  return `urn:signroom:problem:${code}`;
}

/** An error that leaves the API as the problem `code` with a human `detail`. */
export class ProblemError extends Error {
  readonly code: ProblemCode;
  readonly statusCode: number;
  readonly errors: ParameterError[] | undefined;
  readonly headers: Readonly<Record<string, string>>;

  constructor(code: ProblemCode, detail: string, options: { errors?: ParameterError[]; headers?: Record<string, string> } = {}) {
    super(detail);
    this.name = 'ProblemError';
    this.code = code;
    this.statusCode = PROBLEMS[code].status;
    this.errors = options.errors;
    this.headers = options.headers ?? {};
  }
}

/**
 * The problem body for `code` at `instance` (the request path). A 400 always
 * names what was wrong in `errors` (contract section 5): when the caller names
 * nothing more precise, the request as a whole.
 */
export function problemBody(code: ProblemCode, detail: string, instance: string, errors?: ParameterError[]): ProblemBody {
  const { status, title } = PROBLEMS[code];
  const body: ProblemBody = { type: problemType(code), title, status, detail, instance, code };
  if (errors !== undefined) body.errors = errors;
  else if (status === 400) body.errors = [{ parameter: 'request', message: detail }];
  return body;
}
