// One HTTP exchange on uWebSockets.js: the request's parts copied out of uWS's stack-only
// request object, and the only functions that write responses.
//
// uWS rules kept here: `onAborted` is attached before the first await; every write after the
// first tick happens inside `res.cork()`; nothing touches `res` after an abort or after the
// response ended. Errors map to HTTP in one place, `sendProblem`: the problem object of the
// specs (RFC 9457 fields plus `code`, `message`, `requestId`), with `X-Request-Id` on it as on
// every response.

import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { isUtf8 } from 'node:buffer';
import { randomBytes } from 'node:crypto';
import { BadRequest, PayloadTooLarge, errorCode, isLightwellError } from '../util/errors.js';
import type { Logger } from '../util/log.js';
import type { RouteDoc } from './router.js';
import { jsonTextProblem, refuseUndeclaredFields, refuseUnclearQuery } from './strict-input.js';

/** Characters of a request path that logs and problem objects repeat. */
const PATH_SHOWN_CHARS_MAX = 512;

/** `path`, cut to PATH_SHOWN_CHARS_MAX: a refused request may have a URL of up to 64 KiB. */
function clipped(path: string): string {
  return path.length > PATH_SHOWN_CHARS_MAX ? `${path.slice(0, PATH_SHOWN_CHARS_MAX)}…` : path;
}

/** The challenge of a 401 from an API that takes bearer tokens. */
const BEARER_CHALLENGE = 'Bearer realm="lightwell"';
/** The challenge of a 401 where an access key id and secret are expected. */
export const BASIC_CHALLENGE = 'Basic realm="lightwell", charset="UTF-8"';

/**
 * A peer's address as settings and audit readers write it. uWebSockets.js gives the peers of an
 * IPv6 listener in full hex (`0000:0000:0000:0000:0000:ffff:7f00:0001` for 127.0.0.1): an
 * IPv4-mapped address becomes dotted IPv4, any other IPv6 address its compressed form (`::1`).
 */
export function canonicalAddress(text: string): string {
  if (!text.includes(':')) return text;
  // An IPv6 listener asks for every request; a URL parse per request is not free.
  let canonical = canonicalAddresses.get(text);
  if (canonical === undefined) {
    canonical = canonicalIpv6(text);
    if (canonicalAddresses.size >= CANONICAL_ADDRESSES_MAX) canonicalAddresses.clear();
    canonicalAddresses.set(text, canonical);
  }
  return canonical;
}

const CANONICAL_ADDRESSES_MAX = 4096;
const canonicalAddresses = new Map<string, string>();

function canonicalIpv6(text: string): string {
  let compressed: string;
  try {
    compressed = new URL(`http://[${text}]/`).hostname.slice(1, -1);
  } catch {
    return text;
  }
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(compressed);
  if (!mapped) return compressed;
  const high = Number.parseInt(mapped[1] ?? '0', 16);
  const low = Number.parseInt(mapped[2] ?? '0', 16);
  return `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;
}

/** The default of `problemHeaders`: shared, so that a request allocates nothing for it. */
const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

export const JSON_BODY_BYTES_MAX = 1024 * 1024;
/**
 * Bytes of a request head, URL and headers, that a request may carry (refused with 431
 * `bad_request`). uWS's own limit (UWS_HTTP_MAX_HEADERS_SIZE, set by the binaries) is
 * higher, so that a request between the two is answered here, with a problem object; only one
 * over uWS's limit gets uWS's bare 431.
 */
export const HEADER_BYTES_MAX = 16 * 1024;

// Request ids: a random per-process prefix and a counter, unique without a syscall per request.
const requestIdPrefix = randomBytes(6).toString('base64url');
let requestCounter = 0;

function nextRequestId(): string {
  requestCounter += 1;
  return `${requestIdPrefix}${requestCounter.toString(36).padStart(6, '0')}`;
}

/** Receives a request body: each delivery (uWS neuters `chunk` on return), the last flagged. */
export type BodyHandler = (chunk: ArrayBuffer, isLast: boolean) => void;

/** What the audit row of this exchange says; handlers fill it in as they learn it. */
export interface AuditContext {
  action: string;
  actor?: string;
  tenantId?: string;
  resource?: string;
  reason?: string;
  dryRun?: boolean;
  /** The row went to the engine with the mutation; the sink skips it. */
  written?: boolean;
}

/**
 * uWebSockets.js's floor for a request body, in bytes a second: it re-arms its 10 s idle timer
 * only for every 160 KB received, so a slower body is cut after 10 s, without an answer.
 */
export const UWS_BODY_RATE_MIN = 16 * 1024;
/** A slow body has the idle timer re-armed at most this often (two epoll_ctl calls each). */
const BODY_REARM_INTERVAL_MS = 1000;

export class Exchange {
  readonly method: string;
  readonly path: string;
  /** The query string, without its `?` ('' when there is none). */
  readonly rawQuery: string;
  private parsedQuery: URLSearchParams | undefined;
  readonly headers: Readonly<Record<string, string>>;
  /** Bytes of the request head: the URL with its query, and every header line. */
  readonly headerBytes: number;
  readonly requestId: string;
  readonly remoteAddress: string;
  readonly startedAt = performance.now();
  aborted = false;
  done = false;
  status = 0;
  readonly audit: AuditContext = { action: 'unrouted' };
  /**
   * Headers a problem answer carries too, set once the handler knows them: a signed URL's
   * Access-Control-* headers, so that a browser can read why its request failed.
   */
  problemHeaders: Readonly<Record<string, string>> = NO_HEADERS;
  /** The operation's description: the query and JSON body it declares (see strict-input.ts). */
  routeDoc: RouteDoc | undefined;
  private readonly abortHandlers: Array<() => void> = [];
  /** Set by `filterBody`: what `onBody` wraps its handler in. */
  private bodyFilter: ((handler: BodyHandler) => BodyHandler) | undefined;

  /**
   * @param bodyRateMin the slowest request body kept open, in bytes a second (`onBody`); 0 leaves
   *   uWebSockets.js's own floor (UWS_BODY_RATE_MIN), and so does anything above it.
   */
  constructor(
    readonly res: HttpResponse,
    req: HttpRequest,
    private readonly bodyRateMin = 0,
  ) {
    this.method = req.getCaseSensitiveMethod().toUpperCase();
    this.path = req.getUrl();
    // uWS answers undefined when the URL has no `?`, although its typings say string.
    const query = req.getQuery() as string | undefined;
    this.rawQuery = query ?? '';
    const headers: Record<string, string> = {};
    let headerBytes = this.path.length + this.rawQuery.length;
    req.forEach((name, value) => {
      // ": " and CRLF; names are ASCII (uWS refuses others), values may be latin-1 or UTF-8
      headerBytes += name.length + Buffer.byteLength(value) + 4;
      headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
    });
    this.headers = headers;
    this.headerBytes = headerBytes;
    this.requestId = nextRequestId();
    this.remoteAddress = canonicalAddress(Buffer.from(res.getRemoteAddressAsText()).toString());
    res.onAborted(() => {
      this.aborted = true;
      if (!this.done) this.status = 499;
      for (const handler of this.abortHandlers) handler();
    });
  }

  /** The query parameters, parsed on first use (most requests have none). */
  get query(): URLSearchParams {
    this.parsedQuery ??= new URLSearchParams(this.rawQuery);
    return this.parsedQuery;
  }

  /** The first value of query parameter `name`; null when absent, without parsing an empty query. */
  queryParam(name: string): string | null {
    return this.rawQuery === '' ? null : this.query.get(name);
  }

  header(name: string): string | undefined {
    return this.headers[name];
  }

  onAbort(handler: () => void): void {
    if (this.aborted) handler();
    else this.abortHandlers.push(handler);
  }

  /**
   * Reading of the request body is paused. uWS also holds back writes on a paused socket, and
   * resuming re-arms its idle timer, so a finished body stays paused until the response.
   */
  private readingPaused = false;

  pauseReading(): void {
    if (this.readingPaused || this.aborted) return;
    this.readingPaused = true;
    this.res.pause();
  }

  /**
   * uWS re-arms its 10 s idle timer for every 160 KB it delivers, also on a paused socket (it
   * goes on reading until the receive buffer is empty), so a socket paused for longer would time
   * out. Pausing again stops the timer; call this for every delivery while paused.
   */
  keepPaused(): void {
    if (this.readingPaused && !this.aborted) this.res.pause();
  }

  /**
   * Streams the request body to `handler` (attach before the handler's first await), keeping a
   * paused socket paused through what uWS delivers after `pauseReading` (see `keepPaused`), and
   * a body that arrives at `bodyRateMin` or faster open (see `keepTimerArmed`).
   */
  onBody(handler: BodyHandler): void {
    const filtered = this.bodyFilter ? this.bodyFilter(handler) : handler;
    this.res.onData((chunk, isLast) => {
      if (this.readingPaused) this.keepPaused();
      else if (!isLast) this.keepTimerArmed(chunk.byteLength);
      filtered(chunk, isLast);
    });
  }

  /**
   * Has every `onBody` handler receive the body through `filter` (a transport's decoding and
   * checking of its framing, such as S3's aws-chunked bodies); set once, before any `onBody`.
   */
  filterBody(filter: (handler: BodyHandler) => BodyHandler): void {
    if (this.bodyFilter) throw new TypeError('the body filter is set once');
    this.bodyFilter = filter;
  }

  resumeReading(): void {
    if (!this.readingPaused || this.aborted) return;
    this.readingPaused = false;
    this.res.resume();
    this.timerArmedAt = performance.now();
    this.bytesSinceArmed = 0;
  }

  /** When uWS's idle timer was last armed (as far as this exchange knows), and bytes since. */
  private timerArmedAt = this.startedAt;
  private bytesSinceArmed = 0;

  /**
   * Re-arms uWS's idle timer (`resume()` arms it; the `pause()` before it has no other effect
   * here) when the body has come at `bodyRateMin` or faster, on average, since the timer was
   * last armed. A body slower than that for the whole of uWS's 10 s timer is cut by uWS, as one
   * that sends nothing is; so is any body under uWS's own floor when `bodyRateMin` is 0.
   */
  private keepTimerArmed(bytes: number): void {
    if (this.bodyRateMin <= 0 || this.bodyRateMin >= UWS_BODY_RATE_MIN || !this.open) return;
    this.bytesSinceArmed += bytes;
    const now = performance.now();
    const elapsed = now - this.timerArmedAt;
    // uWS re-arms the timer itself for a body at its own floor, unseen here: such a body has the
    // bytes for any elapsed time, however long, and is re-armed here too.
    if (elapsed < BODY_REARM_INTERVAL_MS) return;
    if (this.bytesSinceArmed * 1000 < this.bodyRateMin * elapsed) return;
    this.res.pause();
    this.res.resume();
    this.timerArmedAt = now;
    this.bytesSinceArmed = 0;
  }

  get open(): boolean {
    return !this.aborted && !this.done;
  }

  /** Writes status and headers inside a cork; `body` ends the response. */
  send(status: number, headers: Readonly<Record<string, string>>, body?: string | Buffer): void {
    if (!this.open) return;
    this.done = true;
    this.status = status;
    this.resumeReading();
    this.res.cork(() => {
      this.res.writeStatus(statusLine(status));
      this.res.writeHeader('X-Request-Id', this.requestId);
      // for-in: no array of entries per response (headers are plain records).
      for (const name in headers) {
        if (name !== 'Content-Length') this.res.writeHeader(name, headers[name] as string);
      }
      if (this.method === 'HEAD' || status === 204 || status === 304) {
        // A 204 never has a Content-Length (RFC 9110 §8.6); a HEAD reports the GET's. uWS's
        // endWithoutBody(undefined) writes `Content-Length: 2^63`, and endWithoutBody(n > 0)
        // closes the connection, so the header is written here and the connection kept.
        // A HEAD of a route that answers a body (JSON, a problem) reports that body's length.
        const length =
          status === 204 || this.method !== 'HEAD'
            ? undefined
            : (bodyLength(headers) ?? (body === undefined ? undefined : Buffer.byteLength(body)));
        if (length !== undefined) this.res.writeHeader('Content-Length', String(length));
        this.res.endWithoutBody();
      } else this.res.end(body ?? '');
    });
  }

  sendJson(status: number, value: unknown, headers: Readonly<Record<string, string>> = {}): void {
    this.send(status, { 'Content-Type': 'application/json', ...headers }, JSON.stringify(value));
  }

  sendProblem(error: unknown, log: Logger): void {
    const problem = toProblem(error);
    // 501 (a feature this release does not have) and 507 (the tenant's quota) answer what the
    // client asked for, as a 4xx does; 503 is a passing state. Only the rest is a failure of
    // the service, logged with its stack.
    if (problem.status >= 500 && !ANSWERS_NOT_FAILURES.has(problem.status))
      log.error({ err: error, requestId: this.requestId }, 'request failed');
    else if (problem.status === 503)
      log.warn(
        { code: errorCode(error), reason: (error as Error).message, requestId: this.requestId },
        'request not served now',
      );
    else
      log.info(
        {
          code: problem.code,
          status: problem.status,
          requestId: this.requestId,
          path: clipped(this.path),
        },
        'request refused',
      );
    const headers: Record<string, string> = {
      ...this.problemHeaders,
      'Content-Type': 'application/problem+json',
    };
    const retryAfter = isLightwellError(error) ? error.details['retryAfterSeconds'] : undefined;
    if (typeof retryAfter === 'number')
      headers['Retry-After'] = String(Math.max(1, Math.ceil(retryAfter)));
    // A 503 (the engine unreachable or restarting, a reclaimed chunk, a stop in progress) is
    // worth retrying soon: RFC 9110 §10.2.3 lets the server say when.
    else if (problem.status === 503) headers['Retry-After'] = '1';
    const details = isLightwellError(error) ? error.details : {};
    if (problem.status === 405 && typeof details['allow'] === 'string')
      headers['Allow'] = details['allow'];
    // RFC 9110 §11.6.1: a 401 names how to authenticate (`challenge` where it is not a bearer
    // token, as at POST /auth/token); §15.5.17: a 416 names the representation's length.
    if (problem.status === 401)
      headers['WWW-Authenticate'] =
        typeof details['challenge'] === 'string' ? details['challenge'] : BEARER_CHALLENGE;
    if (problem.status === 416 && typeof details['size'] === 'number')
      headers['Content-Range'] = `bytes */${details['size']}`;
    // A read that met a delete marker says so, as S3 does (404 or 405).
    if (typeof details['deleteMarkerVersionId'] === 'string') {
      headers['X-Service-Delete-Marker'] = 'true';
      headers['X-Service-Version-Id'] = details['deleteMarkerVersionId'];
    }
    const body = {
      type: `https://lightwell.dev/problems/${problem.code}`,
      title: problem.title,
      status: problem.status,
      detail: problem.message,
      instance: clipped(this.path),
      code: problem.code,
      message: problem.message,
      requestId: this.requestId,
      // A refused tenant delete (or its dry run) lists what is in its way, as its plan would.
      ...(Array.isArray(details['blockers']) ? { blockers: details['blockers'] } : {}),
    };
    this.send(problem.status, headers, JSON.stringify(body));
  }

  /**
   * 400 for a query parameter that the operation does not declare, when it changes state, and
   * for a declared one given twice (see strict-input.ts). Authentication calls it once the
   * caller is known, so that a request without credentials is a 401 whatever its query.
   */
  refuseUnclearQuery(): void {
    if (this.routeDoc && this.rawQuery !== '')
      refuseUnclearQuery(this.method, this.routeDoc, this.query);
  }

  /**
   * The request body (at most `limit` bytes) parsed as JSON, undefined when empty; 400 when it
   * is not UTF-8 or not JSON, or carries a field that the operation's JSON body schema does not
   * declare (strict-input.ts).
   */
  async readJson(limit = JSON_BODY_BYTES_MAX): Promise<unknown> {
    const value = await this.readJsonUnchecked(limit);
    const body = this.routeDoc?.requestBody;
    if (body?.contentType === 'application/json') refuseUndeclaredFields(value, body.schema);
    return value;
  }

  /** `readJson` without the check of its fields: for a caller that checks another schema. */
  readJsonUnchecked(limit = JSON_BODY_BYTES_MAX): Promise<unknown> {
    const declared = Number(this.header('content-length') ?? '0');
    if (declared > limit)
      return Promise.reject(PayloadTooLarge(`JSON bodies are limited to ${limit} bytes`));
    return new Promise((resolve, reject) => {
      const parts: Buffer[] = [];
      let length = 0;
      this.onBody((chunk, isLast) => {
        length += chunk.byteLength;
        if (length > limit) {
          reject(PayloadTooLarge(`JSON bodies are limited to ${limit} bytes`));
          return;
        }
        parts.push(Buffer.from(chunk.slice(0)));
        if (!isLast) return;
        const bytes = Buffer.concat(parts);
        // `toString` would put U+FFFD for each invalid byte, and a name with it would be stored
        // as another name: refused, as a path that is not UTF-8 is (router.ts).
        if (!isUtf8(bytes)) {
          reject(BadRequest('the request body is not valid UTF-8'));
          return;
        }
        const text = bytes.toString('utf8');
        if (text.trim().length === 0) {
          resolve(undefined);
          return;
        }
        let value: unknown;
        try {
          value = JSON.parse(text);
        } catch {
          reject(BadRequest('the request body is not valid JSON'));
          return;
        }
        const problem = jsonTextProblem(text);
        if (problem) {
          reject(problem);
          return;
        }
        resolve(value);
      });
      this.onAbort(() => reject(BadRequest('the client went away')));
    });
  }
}

/** Statuses of 500 and above that are answers to the request rather than failures. */
const ANSWERS_NOT_FAILURES: ReadonlySet<number> = new Set([501, 503, 507]);

function bodyLength(headers: Readonly<Record<string, string>>): number | undefined {
  const length = headers['Content-Length'];
  return length === undefined ? undefined : Number(length);
}

export interface Problem {
  status: number;
  code: string;
  title: string;
  message: string;
}

/**
 * What a client is told of `error`: its own status, code and message, except for a failure of
 * the service, which is `internal` (or `unavailable`) without its details.
 */
export function toProblem(error: unknown): Problem {
  if (isLightwellError(error)) {
    const known = error;
    const status = known.status;
    // Internal conditions never leak their details to clients.
    if (
      status >= 500 &&
      known.code !== 'unavailable' &&
      known.code !== 'quota_exceeded' &&
      known.code !== 'not_implemented'
    ) {
      return {
        status: status === 503 ? 503 : 500,
        code: status === 503 ? 'unavailable' : 'internal',
        title: status === 503 ? titleOf(503) : 'Internal error',
        message:
          status === 503 ? 'the service is temporarily unavailable; retry' : 'internal error',
      };
    }
    return { status, code: known.code, title: titleOf(status), message: known.message };
  }
  return { status: 500, code: 'internal', title: 'Internal error', message: 'internal error' };
}

const reasons: Record<number, string> = {
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

export function statusLine(status: number): string {
  return `${status} ${reasons[status] ?? 'Unknown'}`;
}

function titleOf(status: number): string {
  return reasons[status] ?? 'Error';
}
