// What every HTTP API answers for an error: one table from a catalogue error to its status, the
// HTTP headers it carries and the members its body may add, and the renderers that turn that
// answer into a body in an API's own form (problem+json here; the S3 adapter brings its XML).
//
// The domain raises catalogue errors (src/util/errors.ts) and puts what an answer needs in their
// `details`; only this table reads those details. A failure of the service (a corrupt record, a
// segment I/O error, any unknown throw) reaches a client as `internal` or `unavailable`, without
// its own code or message: CLIENT_5XX_CODES is the one list of 5xx codes a client may see.

import { isLightwellError, type ErrorDetails } from '../util/errors.js';

/** The challenge of a 401 from an API that takes bearer tokens. */
export const BEARER_CHALLENGE = 'Bearer realm="lightwell"';

/**
 * The 5xx codes a client may see: 507 (the tenant's quota) and 501 (a feature this release does
 * not have) answer what the client asked for; `unavailable` is a passing state. Any other 5xx
 * error becomes `internal` (or `unavailable` when its status is 503) on its way out.
 */
export const CLIENT_5XX_CODES: ReadonlySet<string> = new Set([
  'internal',
  'unavailable',
  'quota_exceeded',
  'not_implemented',
]);

/** The 5xx errors that reach a client with their own code and message. */
const SHOWN_5XX_CODES: ReadonlySet<string> = new Set([
  'unavailable',
  'quota_exceeded',
  'not_implemented',
]);

/** What a client is told of an error, before an API puts it in its own form. */
export interface ErrorAnswer {
  readonly status: number;
  /** The public code (spec/DECISIONS.md). */
  readonly code: string;
  readonly title: string;
  readonly message: string;
  /** HTTP headers the answer carries in every API's form (Allow, WWW-Authenticate, ...). */
  readonly headers: Readonly<Record<string, string>>;
  /** Members a problem body adds for this error (a refused tenant delete's plan). */
  readonly members: Readonly<Record<string, unknown>>;
  /**
   * How the listener logs it: a `refusal` of the request (info), a `passing` state (503, warn),
   * or a `failure` of the service (error, with its stack).
   */
  readonly kind: 'refusal' | 'passing' | 'failure';
  /** The catalogue code the error was raised with (before it was hidden as `internal`). */
  readonly raisedCode: string | undefined;
}

/** The request an error answers: what a body may repeat of it. */
export interface ErrorRequest {
  /** The path, already cut to what logs and bodies show. */
  readonly path: string;
  readonly requestId: string;
  readonly method: string;
}

/** An error put in an API's form: its status, headers (with Content-Type) and body. */
export interface RenderedError {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

/**
 * How an API writes its errors. The listener gives every error of a request to the renderer of
 * the API its path is mounted on (http/server.ts), with the answer from `errorAnswer`.
 */
export interface ErrorRenderer {
  render(answer: ErrorAnswer, request: ErrorRequest): RenderedError;
}

type HeaderRule = (details: ErrorDetails) => Record<string, string>;

/** The headers of a read that met a delete marker (404 or 405), as S3 sends them. */
const deleteMarker: HeaderRule = (details) =>
  typeof details['deleteMarkerVersionId'] === 'string'
    ? {
        'X-Service-Delete-Marker': 'true',
        'X-Service-Version-Id': details['deleteMarkerVersionId'],
      }
    : {};

/** RFC 9110 §10.2.3: when to try again, from the error's own estimate. */
const retryAfter: HeaderRule = (details) =>
  typeof details['retryAfterSeconds'] === 'number'
    ? { 'Retry-After': String(Math.max(1, Math.ceil(details['retryAfterSeconds']))) }
    : {};

/**
 * The table: public code → the headers its details become. A code that is not here carries no
 * header of its own; every 503 says to retry after a second (below).
 */
const HEADER_RULES: Readonly<Record<string, HeaderRule>> = {
  // RFC 9110 §11.6.1: a 401 names how to authenticate (`challenge` where it is not a bearer
  // token, as at POST /auth/token or a signed URL).
  unauthorized: (details) => ({
    'WWW-Authenticate':
      typeof details['challenge'] === 'string' ? details['challenge'] : BEARER_CHALLENGE,
  }),
  not_found: deleteMarker,
  method_not_allowed: (details) => ({
    ...(typeof details['allow'] === 'string' ? { Allow: details['allow'] } : {}),
    ...deleteMarker(details),
  }),
  // RFC 9110 §15.5.17: a 416 names the representation's length.
  invalid_range: (details): Record<string, string> =>
    typeof details['size'] === 'number' ? { 'Content-Range': `bytes */${details['size']}` } : {},
  rate_limited: retryAfter,
  idempotency_key_in_use: retryAfter,
};

/** A refused tenant delete (or its dry run) shows its whole plan: what it touches and blocks it. */
const planMembers = (details: ErrorDetails): Record<string, unknown> => ({
  ...(details['counts'] !== null && typeof details['counts'] === 'object'
    ? { counts: details['counts'] }
    : {}),
  ...(Array.isArray(details['blockers']) ? { blockers: details['blockers'] } : {}),
});

const MEMBER_RULES: Readonly<Record<string, (details: ErrorDetails) => Record<string, unknown>>> = {
  conflict: planMembers,
  precondition_failed: planMembers,
};

const NONE: Readonly<Record<string, never>> = Object.freeze({});

/** What a client is told of `error` (the one table; see the module comment). */
export function errorAnswer(error: unknown): ErrorAnswer {
  if (!isLightwellError(error) || (error.status >= 500 && !SHOWN_5XX_CODES.has(error.code))) {
    const passing = isLightwellError(error) && error.status === 503;
    return {
      status: passing ? 503 : 500,
      code: passing ? 'unavailable' : 'internal',
      title: passing ? titleOf(503) : 'Internal error',
      message: passing ? 'the service is temporarily unavailable; retry' : 'internal error',
      headers: passing ? RETRY_SOON : NONE,
      members: NONE,
      kind: passing ? 'passing' : 'failure',
      raisedCode: isLightwellError(error) ? error.code : undefined,
    };
  }
  const { status, code, details } = error;
  const rule = HEADER_RULES[code];
  let headers = rule ? rule(details) : NONE;
  // A 503 (the engine restarting, a stop in progress) is worth retrying soon.
  if (status === 503 && headers['Retry-After'] === undefined)
    headers = { ...headers, ...RETRY_SOON };
  const members = MEMBER_RULES[code]?.(details) ?? NONE;
  // 501 and 507 answer what the client asked for, as a 4xx does.
  const kind = status === 503 ? 'passing' : status === 500 ? 'failure' : 'refusal';
  return {
    status,
    code,
    title: titleOf(status),
    message: error.message,
    headers,
    members,
    kind,
    raisedCode: code,
  };
}

const RETRY_SOON: Readonly<Record<string, string>> = Object.freeze({ 'Retry-After': '1' });

/** The problem object of the specs: RFC 9457 fields plus `code`, `message`, `requestId`. */
export const problemJson: ErrorRenderer = {
  render(answer, request) {
    const body = {
      type: `https://lightwell.dev/problems/${answer.code}`,
      title: answer.title,
      status: answer.status,
      detail: answer.message,
      instance: request.path,
      code: answer.code,
      message: answer.message,
      requestId: request.requestId,
      ...answer.members,
    };
    return {
      status: answer.status,
      headers: { ...answer.headers, 'Content-Type': 'application/problem+json' },
      body: JSON.stringify(body),
    };
  },
};

export interface Problem {
  status: number;
  code: string;
  title: string;
  message: string;
}

/** The status, code, title and message of `errorAnswer`: what an entry of a batch repeats. */
export function toProblem(error: unknown): Problem {
  const { status, code, title, message } = errorAnswer(error);
  return { status, code, title, message };
}

export const REASONS: Readonly<Record<number, string>> = {
  200: 'OK',
  201: 'Created',
  204: 'No Content',
  206: 'Partial Content',
  304: 'Not Modified',
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  411: 'Length Required',
  412: 'Precondition Failed',
  413: 'Payload Too Large',
  416: 'Range Not Satisfiable',
  422: 'Unprocessable Content',
  429: 'Too Many Requests',
  431: 'Request Header Fields Too Large',
  500: 'Internal Server Error',
  501: 'Not Implemented',
  503: 'Service Unavailable',
  507: 'Insufficient Storage',
};

function titleOf(status: number): string {
  return REASONS[status] ?? 'Error';
}
