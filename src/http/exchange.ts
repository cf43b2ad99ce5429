// One HTTP exchange on uWebSockets.js: the request's parts copied out of uWS's stack-only
// request object, and the only functions that write responses.
//
// uWS rules kept here: `onAborted` is attached before the first await; every write after the
// first tick happens inside `res.cork()`; nothing touches `res` after an abort or after the
// response ended. Errors are answered in one place, `sendError`, through the table of
// error-answer.ts and the renderer of the API the path is mounted on, with `X-Request-Id` on
// them as on every response.

import type { AccessLogInput } from '../engine/ops/access-log.js';
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { isUtf8 } from 'node:buffer';
import { randomBytes } from 'node:crypto';
import { BadRequest, PayloadTooLarge } from '../util/errors.js';
import { errorAnswer, problemJson, REASONS, type ErrorRenderer } from './error-answer.js';
import type { Logger } from '../util/log.js';
import type { RouteDoc } from './router.js';
import { jsonTextProblem, refuseUndeclaredFields, refuseUnclearQuery } from './strict-input.js';

/** Characters of a request path that logs and problem objects repeat. */
const PATH_SHOWN_CHARS_MAX = 512;

/** `path`, cut to PATH_SHOWN_CHARS_MAX: a refused request may have a URL of up to 64 KiB. */
function clipped(path: string): string {
  return path.length > PATH_SHOWN_CHARS_MAX ? `${path.slice(0, PATH_SHOWN_CHARS_MAX)}…` : path;
}

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

/** A new request id (every answer carries one as X-Request-Id; WebSocket upgrades too). */
export function nextRequestId(): string {
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
  /** S3 bucket logging: the request's access-log record, made when the row is (its status). */
  accessLog?: (status: number) => AccessLogInput;
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
  /** Request body bytes received, and response body bytes handed to uWS (metrics). */
  bytesIn = 0;
  bytesOut = 0;
  readonly audit: AuditContext = { action: 'unrouted' };
  /**
   * Headers a problem answer carries too, set once the handler knows them: a signed URL's
   * Access-Control-* headers, so that a browser can read why its request failed.
   */
  problemHeaders: Readonly<Record<string, string>> = NO_HEADERS;
  /** The operation's description: the query and JSON body it declares (see strict-input.ts). */
  routeDoc: RouteDoc | undefined;
  /** How errors are answered: the renderer of the API this path is mounted on (server.ts). */
  errors: ErrorRenderer = problemJson;
  /**
   * Whether the query is held to what the operation declares (`refuseUnclearQuery`): the native
   * APIs are; the S3 API is not (SDKs add parameters such as `x-id`).
   */
  strictQuery = true;
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
      this.bytesIn += chunk.byteLength;
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
      } else {
        this.bytesOut += body === undefined ? 0 : Buffer.byteLength(body);
        this.res.end(body ?? '');
      }
    });
  }

  sendJson(status: number, value: unknown, headers: Readonly<Record<string, string>> = {}): void {
    this.send(status, { 'Content-Type': 'application/json', ...headers }, JSON.stringify(value));
  }

  /**
   * Answers `error` in the form of the API this exchange's path is mounted on (`errors`, set by
   * the listener), through the one table of error-answer.ts, and logs it by its kind.
   */
  sendError(error: unknown, log: Logger): void {
    const answer = errorAnswer(error);
    if (answer.kind === 'failure')
      log.error({ err: error, requestId: this.requestId }, 'request failed');
    else if (answer.kind === 'passing')
      log.warn(
        { code: answer.raisedCode, reason: (error as Error).message, requestId: this.requestId },
        'request not served now',
      );
    else
      log.info(
        {
          code: answer.code,
          status: answer.status,
          requestId: this.requestId,
          path: clipped(this.path),
        },
        'request refused',
      );
    const rendered = this.errors.render(answer, {
      path: clipped(this.path),
      requestId: this.requestId,
      method: this.method,
    });
    const headers =
      this.problemHeaders === NO_HEADERS
        ? rendered.headers
        : { ...this.problemHeaders, ...rendered.headers };
    this.send(rendered.status, headers, rendered.body);
  }

  /**
   * 400 for a query parameter that the operation does not declare, when it changes state, and
   * for a declared one given twice (see strict-input.ts). Authentication calls it once the
   * caller is known, so that a request without credentials is a 401 whatever its query.
   */
  refuseUnclearQuery(): void {
    if (this.strictQuery && this.routeDoc && this.rawQuery !== '')
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

function bodyLength(headers: Readonly<Record<string, string>>): number | undefined {
  const length = headers['Content-Length'];
  return length === undefined ? undefined : Number(length);
}

export function statusLine(status: number): string {
  return `${status} ${REASONS[status] ?? 'Unknown'}`;
}
