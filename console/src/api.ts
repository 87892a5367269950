/**
 * The console's only way to the server: the public admin API, with the Basic credential the
 * person signed in with. `credentials: 'omit'` keeps the browser from answering a 401 with its
 * own password prompt (the Fetch standard prompts only when credentials are included).
 */

export const API = '/admin/api/v3';

export interface Credential {
  username: string;
  password: string;
}

/** RFC 9457 problem details as the API sends them. */
export interface Problem {
  status: number;
  code?: string;
  title?: string;
  detail?: string;
  errors?: { parameter: string; message: string }[];
}

/** An answer other than 2xx, or no answer at all (`status` 0: the server could not be reached). */
export class ApiError extends Error {
  readonly problem: Problem;
  readonly retryAfter: number | undefined;
  constructor(problem: Problem, retryAfter?: number) {
    super(problem.detail ?? problem.title ?? `HTTP ${problem.status}`);
    this.problem = problem;
    this.retryAfter = retryAfter;
  }
  get status(): number {
    return this.problem.status;
  }
}

export interface Page<T> {
  content: T[];
  totalElements: number;
  totalPages: number;
  number: number;
  size: number;
  first: boolean;
  last: boolean;
}

export interface Organization {
  id: string;
  name: string;
  settings: { externalSignatories: boolean };
}

export interface Room {
  id: string;
  name: string;
  memberCount: number;
}

export type UserStatus = 'active' | 'pending' | 'suspended';

export interface User {
  id: string;
  firstname: string | null;
  lastname: string | null;
  email: string;
  external: boolean;
  status: UserStatus;
}

export interface Signatory {
  displayName: string;
  email: string;
  roomMember: boolean;
  requiresInvitation: boolean;
}

export interface DocumentInfo {
  id: string;
  name: string | null;
  mediaType: string;
  size: number;
  pageCount: number;
  createdAt: string;
}

/** A resource with the ETag it was read at, for If-Match. */
export interface Tagged<T> {
  body: T;
  etag: string;
}

/** `Basic base64(utf8(username:password))` (RFC 7617). */
export function basicAuthorization({ username, password }: Credential): string {
  const bytes = new TextEncoder().encode(`${username}:${password}`);
  let binary = '';
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return `Basic ${btoa(binary)}`;
}

/** One path segment, escaped. */
export function segment(value: string): string {
  return encodeURIComponent(value);
}

export function query(parameters: Record<string, string | number | undefined>): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(parameters)) if (value !== undefined && value !== '') search.set(name, String(value));
  const text = search.toString();
  return text === '' ? '' : `?${text}`;
}

interface CallOptions {
  method?: string;
  body?: unknown;
  contentType?: string;
  ifMatch?: string;
  signal?: AbortSignal;
}

/** What the page is told of every answer, so that it can react once for all views. */
export interface ClientEvents {
  /** Whether the server answered at all: the page says it is away, and recovers when it is back. */
  reachable?: (reachable: boolean) => void;
  /** The credential stopped working (revoked or changed): the page signs out. */
  unauthorized?: (error: ApiError) => void;
}

/** The page size asked for when a whole list is wanted (the server's maximum is 2000 unless configured lower). */
const ALL_PAGE_SIZE = 500;

export class ApiClient {
  readonly #authorization: string;
  readonly #events: ClientEvents;

  constructor(credential: Credential, events: ClientEvents = {}) {
    this.#authorization = basicAuthorization(credential);
    this.#events = events;
  }

  async #send(path: string, options: CallOptions): Promise<Response> {
    const headers: Record<string, string> = { authorization: this.#authorization, accept: 'application/json' };
    if (options.body !== undefined) headers['content-type'] = options.contentType ?? 'application/json';
    if (options.ifMatch !== undefined) headers['if-match'] = options.ifMatch;
    let response: Response;
    try {
      response = await fetch(`${API}${path}`, {
        method: options.method ?? 'GET',
        headers,
        credentials: 'omit',
        cache: 'no-store',
        ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
        ...(options.signal !== undefined ? { signal: options.signal } : {}),
      });
    } catch (error) {
      if (options.signal?.aborted === true) throw error;
      this.#events.reachable?.(false);
      throw new ApiError({ status: 0, code: 'unreachable' });
    }
    // A proxy or a server shutting down answers 502-504: the server is away as well.
    this.#events.reachable?.(response.status < 502 || response.status > 504);
    if (!response.ok) {
      const error = await problemOf(response);
      if (error.status === 401) this.#events.unauthorized?.(error);
      throw error;
    }
    return response;
  }

  async json<T>(path: string, options: CallOptions = {}): Promise<T> {
    const response = await this.#send(path, options);
    return (await response.json()) as T;
  }

  async tagged<T>(path: string, options: CallOptions = {}): Promise<Tagged<T>> {
    const response = await this.#send(path, options);
    return { body: (await response.json()) as T, etag: response.headers.get('etag') ?? '' };
  }

  async noContent(path: string, options: CallOptions = {}): Promise<void> {
    await this.#send(path, options);
  }

  /** Every element of a paged list, page after page (the server may clamp any page size). */
  async all<T>(path: string, signal?: AbortSignal): Promise<T[]> {
    const elements: T[] = [];
    const separator = path.includes('?') ? '&' : '?';
    for (let page = 0; ; page++) {
      const answer = await this.json<Page<T>>(`${path}${separator}page=${page}&size=${ALL_PAGE_SIZE}`, signal !== undefined ? { signal } : {});
      elements.push(...answer.content);
      if (answer.last || answer.content.length === 0) return elements;
    }
  }

  async blob(path: string, signal?: AbortSignal): Promise<Blob> {
    const response = await this.#send(path, signal !== undefined ? { signal } : {});
    return response.blob();
  }
}

async function problemOf(response: Response): Promise<ApiError> {
  let problem: Problem = { status: response.status };
  try {
    const body = (await response.json()) as Partial<Problem>;
    if (typeof body === 'object' && body !== null) problem = { ...body, status: response.status };
  } catch {
    // Not JSON (a proxy's page): the status alone says enough.
  }
  const retryAfter = Number(response.headers.get('retry-after'));
  return new ApiError(problem, Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter : undefined);
}
