// The server side of the binary ingest transport (docs/ingest-protocol.md): the WebSocket route
// `/api/v1/ingest` on the public listener's uWebSockets.js app. This module is the transport
// only: it decodes frames, keeps the order and window rules, feeds each object's body to a
// `BodySource` and sends one ACK per object. What an object is (authentication, scopes, the
// bucket, quota, checksums, the commit) is the backend's, the same pipeline as a native PUT.
//
// Memory: bodies are handed on as they arrive; the window bounds the objects in flight, and a
// body the upload pipeline cannot take yet (`BodySource.pauseReading`, as for an HTTP body)
// withholds the credit of its bytes, which holds the client back.

import type { TemplatedApp, WebSocket, HttpResponse, HttpRequest } from 'uWebSockets.js';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { ChecksumAlg } from '../engine/checksums.js';
import type { BodySource } from '../service/body.js';
import { canonicalAddress, nextRequestId } from '../http/exchange.js';
import { errorAnswer, problemJson, toProblem } from '../http/error-answer.js';
import { errorCode, isLightwellError, Unavailable } from '../util/errors.js';
import type { Logger } from '../util/log.js';
import {
  CLOSE_FORBIDDEN,
  CLOSE_HELLO_TIMEOUT,
  CLOSE_INTERNAL,
  CLOSE_MALFORMED,
  CLOSE_NOT_FOUND,
  CLOSE_TOO_BIG,
  CLOSE_TOO_LARGE,
  CLOSE_UNAUTHORIZED,
  CLOSE_UNAVAILABLE,
  CLOSE_VERSION,
  FRAME_DATA,
  FRAME_HELLO,
  FRAME_OBJECT,
  FRAME_TOKEN,
  FrameError,
  PROTOCOL_VERSION,
  decodeClientFrame,
  encodeAck,
  encodeCredit,
  encodeWelcome,
  type DataFrame,
  type HelloFrame,
  type ObjectFrame,
} from './frames.js';
import { StreamRules, type Window } from './stream-rules.js';

/** Who a connection's token names, as the backend found it. */
export interface IngestCaller {
  readonly accessKeyId: string;
  readonly tenantId: string;
  /** When the token expires, ms since the epoch. */
  readonly tokenExpiresAt: number;
}

/** One object to write, as an OBJECT frame gave it (validated by the backend). */
export interface IngestPut {
  readonly requestId: string;
  readonly remoteAddress: string;
  readonly bucket: string;
  readonly key: string;
  readonly size: number;
  /** Undefined: application/octet-stream. */
  readonly contentType: string | undefined;
  readonly metadata: Record<string, string>;
  readonly checksums: Map<ChecksumAlg, Buffer>;
  readonly idempotencyKey: string | undefined;
  readonly ifMatch: string | undefined;
  readonly ifNoneMatch: boolean;
}

/** The domain side: what the native API does for a bearer token, a bucket and a PUT. */
export interface IngestBackend {
  readonly objectBytesMax: number;
  /** The token's caller; throws 401 (bad, expired, revoked, tenant disabled). */
  authenticate(token: string): IngestCaller;
  /** Throws what reading `bucket` with `token` for a write would (404, 403). */
  checkBucket(token: string, bucket: string): void;
  /** Objects of at most this many bytes, whole in their OBJECT frame, go to `put` whole. */
  readonly wholeBytesMax: number;
  /**
   * Writes one object through the native PUT's pipeline: resolves with what a PUT's 200 body
   * carries once the commit is durable, or rejects with the refusal (audited either way). Must
   * attach `body.onBody` before it returns; a Buffer is the whole body (see `wholeBytesMax`).
   */
  put(
    token: string,
    request: IngestPut,
    body: BodySource | Buffer,
  ): Promise<Record<string, unknown>>;
  /**
   * `put` of many whole bodies (each of at most `wholeBytesMax` bytes) with one token: each
   * object checked, written, audited and answered on its own through `answer`, as its own `put`
   * would be; what a batch shares is the work around them.
   */
  putBatch(
    token: string,
    requests: readonly IngestPut[],
    bodies: readonly Buffer[],
    answer: IngestAnswer,
  ): void;
}

/**
 * Where `IngestBackend.putBatch` answers object `index` of its batch: the PUT's 200 body, or
 * `undefined` and the refusal. Called once per object; must not throw.
 */
export type IngestAnswer = (
  index: number,
  json: Record<string, unknown> | undefined,
  error?: unknown,
) => void;

export interface IngestOptions {
  readonly windowObjects: number;
  readonly windowBytes: number;
  /** The largest body bytes of one frame; the frame limit adds room for the largest header. */
  readonly bodyFrameBytes: number;
  readonly helloTimeoutMs: number;
  /** How often every connection's key and tenant are checked again. */
  readonly recheckIntervalMs: number;
}

export const INGEST_DEFAULTS: IngestOptions = {
  windowObjects: 512,
  windowBytes: 8 * 1024 * 1024,
  bodyFrameBytes: 1024 * 1024,
  helloTimeoutMs: 10_000,
  recheckIntervalMs: 1000,
};

/**
 * Bytes of whole small objects (copied out of their frames, credited at once) one listener holds
 * until their ACKs at most; an object beyond it streams through the upload pipeline's arena,
 * which withholds its credit while it cannot take the bytes.
 */
const WHOLE_HELD_BYTES_MAX = 16 * 1024 * 1024;
/**
 * Whole bodies up to SLAB_BODY_BYTES_MAX are copied into shared slabs of SLAB_BYTES: one
 * ArrayBuffer for many small objects instead of one each (an allocation outside the heap that
 * V8 accounts and collects per object). A slab counts whole towards WHOLE_HELD_BYTES_MAX from
 * its allocation until the last object copied into it is settled, so the bound holds.
 */
export const SLAB_BYTES = 256 * 1024;
export const SLAB_BODY_BYTES_MAX = 16 * 1024;
/** Idle slabs kept for reuse (see `Slabs`). */
const SLABS_KEPT = 8;
/** Room for an OBJECT frame's largest header beside its body bytes. */
const HEADER_ROOM_BYTES = 4096;
const CLOSE_REASON_BYTES_MAX = 123;
const OVERSIZE_SLACK_BYTES = 64 * 1024;
export const INGEST_PATH = '/ingest';

/** The state of one connection (uWS user data). */
interface Connection {
  readonly remoteAddress: string;
  readonly id: string;
  ws?: WebSocket<Connection>;
  token?: string;
  caller?: IngestCaller;
  bucket: string;
  rules?: StreamRules;
  /** The object whose body is still coming. */
  open?: ObjectBody | undefined;
  /** Body bytes to credit back in the next CREDIT frame. */
  credit: number;
  /** ACK frames to send at the end of this turn (`flush`). */
  readonly queued: Uint8Array[];
  /** Objects whose ACK is not sent yet. */
  pending: number;
  objects: number;
  closed: boolean;
  helloTimer?: NodeJS.Timeout;
}

/**
 * One object's body, fed from frames, read by the backend's upload pipeline. WebSockets cannot
 * stop reading (uWS has no pause for them): the pipeline's pause withholds the credit of the
 * bytes it parks instead, so the client stops sending once the window is used up.
 */
class ObjectBody implements BodySource {
  private handler: ((chunk: ArrayBuffer, isLast: boolean) => void) | undefined;
  private readonly abortHandlers: Array<() => void> = [];
  private paused = false;
  private received = 0;
  /** Bytes fed while the pipeline was paused: credited when it resumes or the object ends. */
  private withheld = 0;
  aborted = false;

  constructor(
    private readonly size: number,
    private readonly credit: (bytes: number) => void,
  ) {}

  onBody(handler: (chunk: ArrayBuffer, isLast: boolean) => void): void {
    this.handler = handler;
  }

  onAbort(handler: () => void): void {
    if (this.aborted) handler();
    else this.abortHandlers.push(handler);
  }

  pauseReading(): void {
    this.paused = true;
  }

  resumeReading(): void {
    this.paused = false;
    this.release();
  }

  /** Hands on body bytes (copied: uWS's message is gone when its handler returns). */
  feed(bytes: Uint8Array): void {
    this.received += bytes.length;
    const isLast = this.received === this.size;
    if (bytes.length > 0 || isLast) {
      const copy = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
      this.handler?.(copy as ArrayBuffer, isLast);
    }
    if (this.paused && !this.aborted) this.withheld += bytes.length;
    else this.credit(bytes.length);
  }

  /** The object was acknowledged or abandoned: nothing of it is parked any more. */
  release(): void {
    if (this.withheld === 0) return;
    const bytes = this.withheld;
    this.withheld = 0;
    this.credit(bytes);
  }

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    for (const handler of this.abortHandlers.splice(0)) handler();
  }
}

export interface IngestServer {
  /** Stops taking objects, waits up to `graceMs` for the ACKs in flight, then closes all. */
  close(graceMs?: number): Promise<void>;
  readonly connections: number;
}

/** Registers `/api/v1/ingest` on `app`; `prefix` is the API's (`/api/v1`). */
export function ingestRoute(
  app: TemplatedApp,
  prefix: string,
  backend: IngestBackend,
  log: Logger,
  options: IngestOptions = INGEST_DEFAULTS,
): IngestServer {
  const connections = new Set<Connection>();
  const window: Window = { windowObjects: options.windowObjects, windowBytes: options.windowBytes };
  const frameBytesMax = options.bodyFrameBytes + HEADER_ROOM_BYTES;
  const idPrefix = randomBytes(6).toString('base64url');
  let connectionCount = 0;
  let draining = false;
  /** Bytes of whole objects and slabs held now (WHOLE_HELD_BYTES_MAX). */
  let wholeHeld = 0;
  const slabs = new Slabs((bytes) => (wholeHeld += bytes));

  const end = (connection: Connection, code: number, reason: string): void => {
    if (connection.closed) return;
    // ACKs still queued for this turn go out first: they answer objects settled before the end.
    for (const frame of connection.queued.splice(0)) send(connection, frame);
    connection.closed = true;
    const text = Buffer.from(reason).subarray(0, CLOSE_REASON_BYTES_MAX).toString();
    connection.ws?.end(code, text.replace(/\uFFFD$/, ''));
  };

  const refuse = (connection: Connection, error: unknown): void => {
    if (isLightwellError(error) && typeof error.details['closeCode'] === 'number') {
      end(connection, error.details['closeCode'], `${error.code}: ${error.message}`);
      return;
    }
    const problem = toProblem(error);
    const code = closeCodeOf(problem.status);
    if (code === CLOSE_INTERNAL) log.error({ err: error }, 'ingest connection failed');
    end(connection, code, `${problem.code}: ${problem.message}`);
  };

  const send = (connection: Connection, bytes: Uint8Array): void => {
    if (!connection.closed) connection.ws?.send(bytes, true);
  };

  /**
   * Frames sent outside uWS's own handlers (ACKs and credits, from settled commits) wait for the
   * end of the turn and go out corked, all of a connection's in one write: uWS writes a frame
   * sent outside a cork at once, a syscall each.
   */
  const flushing = new Set<Connection>();
  const flush = (): void => {
    for (const connection of flushing) {
      const bytes = connection.credit;
      connection.credit = 0;
      connection.rules?.credit(bytes);
      const frames = connection.queued.splice(0);
      if (bytes > 0) frames.push(encodeCredit(bytes));
      if (connection.closed || !connection.ws) continue;
      const ws = connection.ws;
      ws.cork(() => {
        for (const frame of frames) ws.send(frame, true);
      });
    }
    flushing.clear();
  };
  const schedule = (connection: Connection): void => {
    if (flushing.size === 0) setImmediate(flush);
    flushing.add(connection);
  };
  const credit = (connection: Connection, bytes: number): void => {
    if (bytes === 0 || connection.closed) return;
    connection.credit += bytes;
    schedule(connection);
  };
  const creditOf =
    (connection: Connection) =>
    (bytes: number): void =>
      credit(connection, bytes);

  const hello = (connection: Connection, frame: HelloFrame): void => {
    clearTimeout(connection.helloTimer);
    if (frame.version !== PROTOCOL_VERSION)
      throw FrameError(
        `unsupported version ${frame.version}; supported: ${PROTOCOL_VERSION}`,
        CLOSE_VERSION,
      );
    const caller = backend.authenticate(frame.token);
    if (frame.bucket !== '') backend.checkBucket(frame.token, frame.bucket);
    connection.token = frame.token;
    connection.caller = caller;
    connection.bucket = frame.bucket;
    connection.rules = new StreamRules(window);
    send(
      connection,
      encodeWelcome({
        version: PROTOCOL_VERSION,
        ...window,
        frameBytesMax,
        objectBytesMax: backend.objectBytesMax,
        tokenExpiresAt: caller.tokenExpiresAt,
      }),
    );
  };

  const begin = (connection: Connection, frame: ObjectFrame): void => {
    const rules = connection.rules as StreamRules;
    if (frame.size > backend.objectBytesMax)
      throw FrameError(
        `object ${frame.sequence} is ${frame.size} bytes, over ${backend.objectBytesMax}`,
        CLOSE_TOO_LARGE,
      );
    if (draining) throw Unavailable('the server is shutting down');
    const complete = rules.begin(frame);
    connection.pending += 1;
    connection.objects += 1;
    const request = putOf(connection, frame, `${idPrefix}${connection.id}-${connection.objects}`);
    // A small object whole in its frame goes to the backend whole: copied once, then stored and
    // committed with the others of its turn, as one batch (`batched`).
    const slabbed = complete && frame.size <= SLAB_BODY_BYTES_MAX;
    const whole =
      complete &&
      frame.size <= backend.wholeBytesMax &&
      wholeHeld + (slabbed ? slabs.growth(frame.size) : frame.size) <= WHOLE_HELD_BYTES_MAX;
    let body: Buffer | ObjectBody;
    let settled: () => void;
    if (whole && slabbed) {
      const copy = slabs.copy(frame.body);
      body = copy.bytes;
      settled = copy.release;
    } else if (whole) {
      body = copyOf(frame.body);
      wholeHeld += frame.size;
      settled = () => (wholeHeld -= frame.size);
    } else {
      const streamed = new ObjectBody(frame.size, creditOf(connection));
      body = streamed;
      settled = () => streamed.release();
    }
    if (!complete) connection.open = body as ObjectBody;
    if (whole) {
      batched(connection, frame.sequence, request, body as Buffer, settled);
      credit(connection, frame.body.length);
      return;
    }
    // The backend checks the key and tenant again for every object: a 401 refuses the object
    // and ends the connection (see `refusal`).
    let written: Promise<Record<string, unknown>>;
    try {
      written = backend.put(connection.token as string, request, body);
    } catch (error) {
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- passed on as is
      written = Promise.reject(error);
    }
    // One reaction for either outcome (not a `finally` as well: a promise and a callback less
    // per object).
    written.then(
      (json) => {
        settled();
        acknowledge(connection, frame.sequence, 200, json);
      },
      (error: unknown) => {
        settled();
        refusal(connection, frame.sequence, error, request.requestId);
      },
    );
    (body as ObjectBody).feed(frame.body);
  };

  /**
   * The whole small objects of this turn, by token: handed to the backend as one batch each
   * (`putBatch`) at the end of the turn, or once a batch holds BATCH_OBJECTS_MAX.
   */
  const turn = new Map<string, TurnBatch>();
  const batched = (
    connection: Connection,
    sequence: number,
    request: IngestPut,
    body: Buffer,
    settled: () => void,
  ): void => {
    const token = connection.token as string;
    let batch = turn.get(token);
    if (batch === undefined) {
      if (turn.size === 0) setImmediate(sendTurn);
      batch = new TurnBatch(token);
      turn.set(token, batch);
    }
    batch.entries.push({ connection, sequence, requestId: request.requestId, settled });
    batch.requests.push(request);
    batch.bodies.push(body);
    if (batch.requests.length >= BATCH_OBJECTS_MAX) {
      turn.delete(token);
      sendBatch(batch);
    }
  };
  const sendTurn = (): void => {
    const batches = [...turn.values()];
    turn.clear();
    for (const batch of batches) sendBatch(batch);
  };
  const sendBatch = (batch: TurnBatch): void => {
    const answered = new Uint8Array(batch.entries.length);
    // The backend checks the key and tenant again for every object: a 401 refuses the object
    // and ends the connection (see `refusal`).
    const answer: IngestAnswer = (index, json, error) => {
      const entry = batch.entries[index] as TurnEntry;
      if (answered[index] !== 0) return;
      answered[index] = 1;
      entry.settled();
      if (json !== undefined) acknowledge(entry.connection, entry.sequence, 200, json);
      else refusal(entry.connection, entry.sequence, error, entry.requestId);
    };
    try {
      backend.putBatch(batch.token, batch.requests, batch.bodies, answer);
    } catch (error) {
      for (let index = 0; index < batch.entries.length; index += 1) answer(index, undefined, error);
    }
  };

  const acknowledge = (
    connection: Connection,
    sequence: number,
    status: number,
    json: unknown,
  ): void => {
    connection.pending -= 1;
    connection.rules?.settle(sequence);
    if (connection.closed) return;
    connection.queued.push(encodeAck({ sequence, status, refused: status !== 200, json }));
    schedule(connection);
  };

  const refusal = (
    connection: Connection,
    sequence: number,
    error: unknown,
    requestId: string,
  ): void => {
    const answer = errorAnswer(error);
    if (answer.kind === 'failure') log.error({ err: error, requestId }, 'ingest object failed');
    // The native API's problem object, as its PUT would answer.
    const rendered = problemJson.render(answer, {
      path: prefix + INGEST_PATH,
      requestId,
      method: 'PUT',
    });
    acknowledge(connection, sequence, answer.status, JSON.parse(rendered.body));
    // A key revoked (or its tenant disabled) while the object was committing ends the connection.
    if (errorCode(error) === 'unauthorized') end(connection, CLOSE_UNAUTHORIZED, answer.message);
  };

  const data = (connection: Connection, frame: DataFrame): void => {
    const open = connection.open;
    if ((connection.rules as StreamRules).data(frame)) connection.open = undefined;
    open?.feed(frame.body);
  };

  const message = (connection: Connection, bytes: Uint8Array): void => {
    const frame = decodeClientFrame(bytes);
    if (!connection.rules) {
      if (frame.type !== FRAME_HELLO) throw FrameError('the first frame must be HELLO');
      hello(connection, frame);
      return;
    }
    switch (frame.type) {
      case FRAME_HELLO:
        throw FrameError('HELLO after WELCOME');
      case FRAME_OBJECT:
        begin(connection, frame);
        return;
      case FRAME_DATA:
        data(connection, frame);
        return;
      case FRAME_TOKEN: {
        const caller = backend.authenticate(frame.token);
        if (caller.accessKeyId !== connection.caller?.accessKeyId)
          throw FrameError('TOKEN names another access key', CLOSE_UNAUTHORIZED);
        connection.token = frame.token;
        connection.caller = caller;
      }
    }
  };

  app.ws<Connection>(prefix + INGEST_PATH, {
    // Beyond this, uWS drops the connection unread (no close frame); up to it, 1009 says why.
    maxPayloadLength: frameBytesMax + OVERSIZE_SLACK_BYTES,
    // ACKs waiting to be sent are bounded by the window; this only catches a bug.
    maxBackpressure: 64 * 1024 * 1024,
    idleTimeout: 120,
    sendPingsAutomatically: true,
    compression: 0,
    upgrade: (res: HttpResponse, req: HttpRequest, context) => {
      // Every answer of the public port carries X-Request-Id, the 101 of an upgrade included
      // (uWS writes headers given after the status into its 101 answer).
      const requestId = nextRequestId();
      if (draining) {
        const rendered = problemJson.render(
          errorAnswer(Unavailable('the server is shutting down')),
          { path: prefix + INGEST_PATH, requestId, method: 'GET' },
        );
        res.writeStatus('503 Service Unavailable');
        for (const [name, value] of Object.entries(rendered.headers)) res.writeHeader(name, value);
        res.writeHeader('X-Request-Id', requestId).end(rendered.body);
        return;
      }
      connectionCount += 1;
      const connection: Connection = {
        remoteAddress: canonicalAddress(Buffer.from(res.getRemoteAddressAsText()).toString()),
        id: connectionCount.toString(36),
        bucket: '',
        credit: 0,
        queued: [],
        pending: 0,
        objects: 0,
        closed: false,
      };
      res.writeStatus('101 Switching Protocols').writeHeader('X-Request-Id', requestId);
      res.upgrade(
        connection,
        req.getHeader('sec-websocket-key'),
        req.getHeader('sec-websocket-protocol'),
        req.getHeader('sec-websocket-extensions'),
        context,
      );
    },
    open: (ws) => {
      const connection = ws.getUserData();
      connection.ws = ws;
      connections.add(connection);
      connection.helloTimer = setTimeout(
        () => end(connection, CLOSE_HELLO_TIMEOUT, 'no HELLO in time'),
        options.helloTimeoutMs,
      );
    },
    message: (ws, bytes, isBinary) => {
      const connection = ws.getUserData();
      if (connection.closed) return;
      try {
        if (!isBinary) throw FrameError('a text message; frames are binary');
        if (bytes.byteLength > frameBytesMax)
          throw FrameError(
            `a frame of ${bytes.byteLength} bytes, over ${frameBytesMax}`,
            CLOSE_TOO_BIG,
          );
        message(connection, new Uint8Array(bytes));
      } catch (error) {
        refuse(connection, error);
      }
    },
    close: (ws) => {
      const connection = ws.getUserData();
      connection.closed = true;
      clearTimeout(connection.helloTimer);
      connections.delete(connection);
      // Nothing of an object whose body was still coming is committed.
      connection.open?.abort();
      connection.open = undefined;
    },
  });

  const recheck = setInterval(() => {
    for (const connection of connections) {
      if (connection.token === undefined || connection.closed) continue;
      try {
        backend.authenticate(connection.token);
      } catch (error) {
        refuse(connection, error);
      }
    }
  }, options.recheckIntervalMs);
  recheck.unref();

  return {
    get connections() {
      return connections.size;
    },
    close: async (graceMs = 10_000) => {
      draining = true;
      clearInterval(recheck);
      const deadline = Date.now() + graceMs;
      const busy = (): boolean => [...connections].some((c) => c.pending > 0 && !c.closed);
      while (busy() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
      for (const connection of connections)
        end(connection, CLOSE_UNAVAILABLE, 'unavailable: the server is shutting down');
    },
  };
}

/** Objects in one `putBatch` at most; more in a turn make another batch. */
const BATCH_OBJECTS_MAX = 1024;

/** One whole small object waiting in its turn's batch (`putBatch`). */
interface TurnEntry {
  readonly connection: Connection;
  readonly sequence: number;
  readonly requestId: string;
  /** Lets go of the body's bytes once the object is answered. */
  readonly settled: () => void;
}

/** A turn's whole small objects sent with one token. */
class TurnBatch {
  readonly entries: TurnEntry[] = [];
  readonly requests: IngestPut[] = [];
  readonly bodies: Buffer[] = [];

  constructor(readonly token: string) {}
}

/**
 * The current slab of small whole bodies and the count of its bodies not settled; exported for
 * its test.
 */
export class Slabs {
  private slab: Buffer | undefined;
  private used = 0;
  private live = 0;

  /** `held(bytes)` adds to (or, negative, takes from) the bytes held. */
  constructor(private readonly held: (bytes: number) => void) {}

  /** The bytes held would grow by this to copy `size` more bytes. */
  growth(size: number): number {
    return this.slab !== undefined && this.used + size <= SLAB_BYTES ? 0 : SLAB_BYTES;
  }

  /** A copy of `bytes` in the current slab (a new one when it is full). */
  copy(bytes: Uint8Array): { bytes: Buffer; release: () => void } {
    assert(bytes.length <= SLAB_BODY_BYTES_MAX, 'a slab holds small bodies only');
    if (this.slab === undefined || this.used + bytes.length > SLAB_BYTES) this.replace();
    const slab = this.slab as Buffer;
    const copy = slab.subarray(this.used, this.used + bytes.length);
    copy.set(bytes);
    // 8-byte aligned, as Buffer's own pool keeps its slices.
    this.used += (bytes.length + 7) & ~7;
    this.live += 1;
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      if (slab === this.slab) this.live -= 1;
      else this.retired(slab);
    };
    return { bytes: copy, release };
  }

  /** Bodies of retired slabs still held, by slab. */
  private readonly retiredLive = new Map<Buffer, number>();

  /**
   * Slabs whose bodies were all settled, kept for the next ones (at most SLABS_KEPT, outside
   * the bound: they hold no body): a fresh slab costs an allocation and the page faults of its
   * first writes, which had been a copy's main cost.
   */
  private readonly free: Buffer[] = [];

  private replace(): void {
    this.used = 0;
    if (this.slab !== undefined && this.live === 0) return; // nothing of it is held: refilled
    if (this.slab !== undefined) this.retiredLive.set(this.slab, this.live);
    this.slab = this.free.pop() ?? Buffer.allocUnsafeSlow(SLAB_BYTES);
    this.live = 0;
    this.held(SLAB_BYTES);
  }

  private retired(slab: Buffer): void {
    const live = (this.retiredLive.get(slab) ?? 0) - 1;
    assert(live >= 0, 'a retired slab releases each of its bodies once');
    if (live > 0) {
      this.retiredLive.set(slab, live);
      return;
    }
    this.retiredLive.delete(slab);
    this.held(-SLAB_BYTES);
    if (this.free.length < SLABS_KEPT) this.free.push(slab);
  }
}

/**
 * A copy of a whole body out of its frame (uWS's message is gone when its handler returns),
 * without the zero-fill and element-wise path of `Buffer.from` for a typed array.
 */
function copyOf(bytes: Uint8Array): Buffer {
  const copy = Buffer.allocUnsafe(bytes.length);
  copy.set(bytes);
  return copy;
}

function putOf(connection: Connection, frame: ObjectFrame, requestId: string): IngestPut {
  const metadata: Record<string, string> = {};
  for (const [name, value] of frame.metadata) metadata[name.toLowerCase()] = value;
  return {
    requestId,
    remoteAddress: connection.remoteAddress,
    bucket: frame.bucket === '' ? connection.bucket : frame.bucket,
    key: frame.key,
    size: frame.size,
    contentType: frame.contentType === '' ? undefined : frame.contentType,
    metadata,
    checksums: new Map(frame.checksums.map(([alg, digest]) => [alg, Buffer.from(digest)])),
    idempotencyKey: frame.idempotencyKey === '' ? undefined : frame.idempotencyKey,
    ifMatch: frame.ifMatch === '' ? undefined : frame.ifMatch,
    ifNoneMatch: frame.ifNoneMatch,
  };
}

/** The close code of a refusal that ends a connection (HELLO, TOKEN, revocation). */
function closeCodeOf(status: number): number {
  switch (status) {
    case 401:
      return CLOSE_UNAUTHORIZED;
    case 403:
      return CLOSE_FORBIDDEN;
    case 404:
      return CLOSE_NOT_FOUND;
    case 400:
      return CLOSE_MALFORMED;
    case 503:
      return CLOSE_UNAVAILABLE;
    default:
      return CLOSE_INTERNAL;
  }
}
