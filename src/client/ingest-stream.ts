// The ingest stream of lightwell/client: many objects over one WebSocket (docs/ingest-protocol.md).
//
// `put` queues an object and resolves with its metadata once the server acknowledged its durable
// commit (or rejects with the problem object). Objects are sent in the order they were put, each
// only while the window has room: puts beyond it wait here, and a body is sent as credit comes
// back. Every object carries an idempotency key (the caller's, or a random one) and a CRC32C
// (unless the caller gave checksums), so that after a lost connection the stream reconnects and
// resends every object without an ACK, in sequence order, and a resend of an object that had
// committed is replayed by the server instead of written twice. A 409
// `idempotency_key_in_use` (the first attempt still committing) is retried.

import { EventEmitter } from 'node:events';
import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import WebSocket from 'ws';
import { crc32c } from '../util/crc32c.js';
import type { ChecksumAlg } from '../engine/checksums.js';
import {
  CLOSE_NORMAL,
  CLOSE_UNAUTHORIZED,
  DATA_FIXED_BYTES,
  FRAME_CREDIT,
  FRAME_WELCOME,
  PROTOCOL_VERSION,
  decodeServerFrame,
  encodeData,
  encodeHello,
  encodeObject,
  encodeToken,
  objectHeaderBytes,
  type ObjectHeader,
  type WelcomeFrame,
} from '../ingest/frames.js';
import { WindowCount } from '../ingest/stream-rules.js';
import { LightwellProblem, clientProblem, type ProblemFields } from './problem.js';

/** A body the stream can read again (a resend after a reconnect reads it anew). */
export interface BodyFile {
  readonly size: number;
  /** The body's bytes from the start, in order. */
  open(): AsyncIterable<Uint8Array>;
}

export type Body = Uint8Array | string | BodyFile;

export interface PutOptions {
  readonly contentType?: string;
  readonly metadata?: Readonly<Record<string, string>>;
  /** Base64 digests by algorithm (`{CRC32C: '…'}`), as the PUT's X-Service-Checksum-* headers. */
  readonly checksums?: Readonly<Partial<Record<ChecksumAlg, string>>>;
  readonly idempotencyKey?: string;
  /** Write only if the key has no object (If-None-Match: *). */
  readonly ifNoneMatch?: boolean;
  /** Write only if the current object matches (If-Match). */
  readonly ifMatch?: string;
  /** A bucket other than the stream's. */
  readonly bucket?: string;
}

export interface PutResult {
  readonly key: string;
  readonly versionId?: string;
  readonly size: number;
  readonly etag: string;
  readonly checksums: Record<string, string>;
  readonly [field: string]: unknown;
}

export interface PutItem extends PutOptions {
  readonly key: string;
  readonly body: Body;
}

/** What putAll yields: an object's result, or its key and the problem that refused it. */
export type PutOutcome = PutResult | { readonly key: string; readonly error: LightwellProblem };

export interface Progress {
  readonly objectsAcknowledged: number;
  readonly bytesAcknowledged: number;
  readonly objectsFailed: number;
  readonly bytesSent: number;
  readonly reconnects: number;
}

export interface IngestOptions {
  /** Reconnect attempts in a row before the stream gives up (default 10). */
  readonly reconnectAttempts?: number;
}

/** What the stream needs of its client: the endpoint and a current token. */
export interface TokenSource {
  readonly endpoint: string;
  token(renew?: boolean): Promise<string>;
  /** Whether the client can mint a new token (it has an access key and secret). */
  readonly renewable: boolean;
  /** When the current token expires, ms since the epoch, when known. */
  tokenExpiresAt(): number | undefined;
}

interface Entry {
  readonly key: string;
  readonly body: Body;
  readonly size: number;
  readonly header: Omit<ObjectHeader, 'sequence'>;
  /** The OBJECT frame's bytes before the body. */
  readonly headerBytes: number;
  sequence: number;
  readonly resolve: (result: PutResult) => void;
  readonly reject: (error: LightwellProblem) => void;
  settled: boolean;
}

/** Close codes after which reconnecting cannot help. */
const FATAL_CLOSES = new Set([4400, 4403, 4404, 4408, 4413, 4426, 4429]);
const RETRY_IN_USE_MS = 200;
const RECONNECT_BASE_MS = 100;
const RECONNECT_MAX_MS = 5000;

export class IngestStream extends EventEmitter {
  private socket: WebSocket | undefined;
  private welcome: WelcomeFrame | undefined;
  private count: WindowCount | undefined;
  /** Objects put and not yet sent, in order. */
  private readonly queue: Entry[] = [];
  /** Objects sent and not acknowledged, by sequence. */
  private readonly sent = new Map<number, Entry>();
  private nextSequence = 0;
  private sending = false;
  /** The connection whose socket holds this turn's frames (`corkTurn`). */
  private corked: WebSocket | undefined;
  private wake: (() => void) | undefined;
  private closing = false;
  private failed: LightwellProblem | undefined;
  private attempts = 0;
  private renewTimer: NodeJS.Timeout | undefined;
  private readonly idle = new Set<() => void>();
  private readonly progress = {
    objectsAcknowledged: 0,
    bytesAcknowledged: 0,
    objectsFailed: 0,
    bytesSent: 0,
    reconnects: 0,
  };

  constructor(
    private readonly client: TokenSource,
    readonly bucket: string,
    private readonly options: IngestOptions = {},
  ) {
    super();
    this.connect();
  }

  /** Resolves once the object is durable; rejects with the problem that refused it. */
  put(key: string, body: Body, options: PutOptions = {}): Promise<PutResult> {
    if (this.closing) return Promise.reject(clientProblem('closed', 'the stream is closing'));
    if (this.failed) return Promise.reject(this.failed);
    return new Promise<PutResult>((resolve, reject) => {
      const size = typeof body === 'string' ? Buffer.byteLength(body) : sizeOf(body);
      let header: Omit<ObjectHeader, 'sequence'>;
      let headerBytes: number;
      try {
        header = headerOf(key, size, body, options);
        headerBytes = objectHeaderBytes({ ...header, sequence: 0 });
      } catch (error) {
        // What the frame cannot carry (an empty key, a field over its limit) is the caller's.
        const message = error instanceof Error ? error.message : String(error);
        reject(new LightwellProblem({ status: 400, code: 'bad_request', message }));
        return;
      }
      this.queue.push({
        key,
        body,
        size,
        header,
        headerBytes,
        sequence: -1,
        resolve,
        reject,
        settled: false,
      });
      this.pump();
    });
  }

  /**
   * Puts every item of `source`, taking the next one only while the window has room (bounded
   * memory), and yields each outcome as it is acknowledged.
   */
  async *putAll(source: Iterable<PutItem> | AsyncIterable<PutItem>): AsyncGenerator<PutOutcome> {
    const iterator =
      Symbol.asyncIterator in source ? source[Symbol.asyncIterator]() : source[Symbol.iterator]();
    const outcomes: PutOutcome[] = [];
    let active = 0;
    let done = false;
    let wake: (() => void) | undefined;
    const notify = (): void => {
      const resume = wake;
      wake = undefined;
      resume?.();
    };
    const onRoom = (): void => notify();
    this.on('room', onRoom);
    try {
      for (;;) {
        while (!done && this.hasRoom()) {
          const next = await iterator.next();
          if (next.done === true) {
            done = true;
            break;
          }
          const { key, body, ...options } = next.value;
          active += 1;
          this.put(key, body, options)
            .then(
              (result) => outcomes.push(result),
              (error: unknown) => outcomes.push({ key, error: error as LightwellProblem }),
            )
            .finally(() => {
              active -= 1;
              notify();
            });
        }
        while (outcomes.length > 0) yield outcomes.shift() as PutOutcome;
        if (done && active === 0) return;
        if (!done && this.hasRoom()) continue;
        await new Promise<void>((resolve) => (wake = resolve));
      }
    } finally {
      this.off('room', onRoom);
    }
  }

  /** Waits for every acknowledgement, then closes the connection. */
  async close(): Promise<void> {
    this.closing = true;
    if (this.queue.length > 0 || this.sent.size > 0)
      await new Promise<void>((resolve) => this.idle.add(resolve));
    clearTimeout(this.renewTimer);
    this.socket?.close(CLOSE_NORMAL);
    this.socket = undefined;
  }

  /** Counts so far (also sent as `progress` events after each acknowledgement). */
  stats(): Progress {
    return { ...this.progress };
  }

  /** Whether a put now would be sent at once rather than wait in the queue. */
  private hasRoom(): boolean {
    if (this.queue.length > 0) return false;
    if (!this.count) return this.sent.size === 0;
    return this.count.inFlight.size < this.count.window.windowObjects;
  }

  private connect(): void {
    this.open().catch((error: unknown) => this.lost(error));
  }

  private async open(): Promise<void> {
    const token = await this.client.token(this.attempts > 0 && this.client.renewable);
    const url = new URL('/api/v1/ingest', this.client.endpoint);
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    const socket = new WebSocket(url, { perMessageDeflate: false, maxPayload: 1 << 20 });
    this.socket = socket;
    socket.binaryType = 'nodebuffer';
    socket.on('open', () =>
      socket.send(encodeHello({ version: PROTOCOL_VERSION, token, bucket: this.bucket })),
    );
    socket.on('message', (data: Buffer) => this.message(socket, data));
    socket.on('close', (code: number, reason: Buffer) =>
      this.closed(socket, code, reason.toString()),
    );
    socket.on('error', () => {
      // The close event that follows says what to do.
    });
  }

  private message(socket: WebSocket, data: Buffer): void {
    if (socket !== this.socket) return;
    let frame;
    try {
      frame = decodeServerFrame(data);
    } catch (error) {
      socket.close(4400, 'malformed frame from the server');
      this.emit('error', error);
      return;
    }
    if (frame.type === FRAME_WELCOME) {
      this.welcome = frame;
      this.count = new WindowCount(frame);
      this.attempts = 0;
      this.scheduleRenewal(frame.tokenExpiresAt);
      this.resend();
      this.pump();
    } else if (frame.type === FRAME_CREDIT) {
      this.count?.credit(frame.bytes);
      this.wakeSender();
    } else {
      this.acknowledged(frame.sequence, frame.refused, frame.json);
    }
  }

  private acknowledged(sequence: number, refused: boolean, json: unknown): void {
    const entry = this.sent.get(sequence);
    this.count?.settle(sequence);
    if (!entry) return;
    this.sent.delete(sequence);
    const problem = json as ProblemFields;
    if (refused && problem.code === 'idempotency_key_in_use') {
      // The first attempt is still committing: ask again shortly.
      setTimeout(() => {
        // A new sequence number (they only grow on a connection); the same idempotency key.
        entry.sequence = -1;
        this.queue.unshift(entry);
        this.pump();
      }, RETRY_IN_USE_MS).unref();
      return;
    }
    entry.settled = true;
    if (refused) {
      this.progress.objectsFailed += 1;
      entry.reject(new LightwellProblem(problem));
    } else {
      this.progress.objectsAcknowledged += 1;
      this.progress.bytesAcknowledged += entry.size;
      entry.resolve(json as PutResult);
    }
    this.emit('progress', this.stats());
    this.emit('room');
    this.wakeSender();
    this.checkIdle();
  }

  private checkIdle(): void {
    if (this.queue.length > 0 || this.sent.size > 0) return;
    for (const resolve of this.idle) resolve();
    this.idle.clear();
  }

  /** Puts the objects without an ACK back at the head of the queue, in sequence order. */
  private resend(): void {
    const unacknowledged = [...this.sent.values()].sort((a, b) => a.sequence - b.sequence);
    this.sent.clear();
    this.queue.unshift(...unacknowledged);
  }

  private closed(socket: WebSocket, code: number, reason: string): void {
    if (socket !== this.socket) return;
    this.socket = undefined;
    this.welcome = undefined;
    this.count = undefined;
    this.wakeSender();
    if (this.closing && this.queue.length === 0 && this.sent.size === 0) return;
    if (FATAL_CLOSES.has(code) || (code === CLOSE_UNAUTHORIZED && !this.client.renewable)) {
      this.fail(closeProblem(code, reason));
      return;
    }
    this.lost(clientProblem('connection_lost', `closed with ${code}: ${reason}`));
  }

  /** Reconnects after a pause that doubles with each attempt, or gives up. */
  private lost(error: unknown): void {
    this.attempts += 1;
    if (this.attempts > (this.options.reconnectAttempts ?? 10)) {
      this.fail(
        error instanceof LightwellProblem ? error : clientProblem('connection_lost', String(error)),
      );
      return;
    }
    this.progress.reconnects += 1;
    const delay = Math.min(RECONNECT_MAX_MS, RECONNECT_BASE_MS * 2 ** (this.attempts - 1));
    setTimeout(() => this.connect(), delay).unref();
  }

  /** Rejects every object not acknowledged: nothing more will be sent. */
  private fail(problem: LightwellProblem): void {
    this.failed = problem;
    const entries = [...this.sent.values(), ...this.queue.splice(0)];
    this.sent.clear();
    for (const entry of entries) {
      if (entry.settled) continue;
      entry.settled = true;
      this.progress.objectsFailed += 1;
      entry.reject(problem);
    }
    this.checkIdle();
    this.emit('room');
  }

  private scheduleRenewal(expiresAt: number): void {
    clearTimeout(this.renewTimer);
    if (!this.client.renewable) return;
    // Renewed when four fifths of its remaining life have passed.
    const delay = Math.max(1000, (expiresAt - Date.now()) * 0.8);
    this.renewTimer = setTimeout(() => void this.renew(), Math.min(delay, 2 ** 31 - 1));
    this.renewTimer.unref();
  }

  private async renew(): Promise<void> {
    const socket = this.socket;
    try {
      const token = await this.client.token(true);
      if (socket && socket === this.socket && socket.readyState === WebSocket.OPEN) {
        socket.send(encodeToken(token));
        this.scheduleRenewal(this.client.tokenExpiresAt() ?? Date.now() + 3_600_000);
      }
    } catch (error) {
      this.emit('error', error);
    }
  }

  private wakeSender(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  private pump(): void {
    if (this.sending) {
      this.wakeSender();
      return;
    }
    this.sending = true;
    void this.send().finally(() => {
      this.sending = false;
    });
  }

  /** Sends queued objects while the connection is up and the window has room. */
  private async send(): Promise<void> {
    for (;;) {
      const socket = this.socket;
      const count = this.count;
      const welcome = this.welcome;
      const entry = this.queue[0];
      if (!entry) return;
      if (!socket || !count || !welcome) return;
      const frameBody = welcome.frameBytesMax - DATA_FIXED_BYTES;
      const first = Math.min(entry.size, welcome.frameBytesMax - entry.headerBytes, frameBody);
      // A body that fits one frame waits for the credit to go whole.
      if (count.inFlight.size >= count.window.windowObjects || !count.admitsBytes(first)) {
        await new Promise<void>((resolve) => (this.wake = resolve));
        continue;
      }
      this.queue.shift();
      this.corkTurn(socket);
      if (entry.sequence < 0) entry.sequence = this.nextSequence++;
      this.sent.set(entry.sequence, entry);
      count.inFlight.add(entry.sequence);
      const ok = await this.sendBody(socket, count, entry, first, frameBody);
      if (!ok) return;
      this.emit('room');
    }
  }

  /**
   * Holds the frames sent in this turn of the event loop in the socket's buffer and writes them
   * together at its end: `ws` writes each message at once, a syscall per small object. The
   * TCP socket is `ws`'s `_socket` (it has no public cork); without one, frames go singly.
   */
  private corkTurn(socket: WebSocket): void {
    if (this.corked === socket) return;
    const raw = (socket as unknown as { _socket?: Partial<Socket> })._socket;
    if (typeof raw?.cork !== 'function' || typeof raw.uncork !== 'function') return;
    raw.cork();
    this.corked = socket;
    setImmediate(() => {
      if (this.corked === socket) this.corked = undefined;
      raw.uncork?.();
    });
  }

  /** Sends an object's frames; false when the connection went away meanwhile. */
  private async sendBody(
    socket: WebSocket,
    count: WindowCount,
    entry: Entry,
    first: number,
    frameBody: number,
  ): Promise<boolean> {
    const header = { ...entry.header, sequence: entry.sequence };
    const chunks = bodyChunks(entry.body);
    let pending = await takeBytes(chunks, first);
    socket.send(encodeObject(header, pending));
    count.outstanding += pending.length;
    this.progress.bytesSent += pending.length;
    let sent = pending.length;
    while (sent < entry.size) {
      if (socket !== this.socket) return false;
      const room = Math.min(count.room, frameBody, entry.size - sent);
      if (room <= 0) {
        await new Promise<void>((resolve) => (this.wake = resolve));
        continue;
      }
      pending = await takeBytes(chunks, room);
      if (socket !== this.socket) return false;
      socket.send(encodeData(entry.sequence, pending));
      count.outstanding += pending.length;
      this.progress.bytesSent += pending.length;
      sent += pending.length;
    }
    return socket === this.socket;
  }
}

/**
 * The problem of a connection the server closed for good: the close codes 4400–4599 are 4000
 * plus an HTTP status, and the reason is `code: message` (docs/ingest-protocol.md).
 */
function closeProblem(code: number, reason: string): LightwellProblem {
  const match = /^([a-z_]+): (.*)$/s.exec(reason);
  const status = code >= 4400 && code < 4600 ? code - 4000 : 0;
  return new LightwellProblem({
    status,
    code: match?.[1] ?? 'connection_refused',
    message: match?.[2] ?? `the server closed the connection with ${code}: ${reason}`,
    closeCode: code,
  });
}

function sizeOf(body: Uint8Array | BodyFile): number {
  return body instanceof Uint8Array ? body.length : body.size;
}

/** The header of an object; every one gets an idempotency key and, unless given, a CRC32C. */
function headerOf(
  key: string,
  size: number,
  body: Body,
  options: PutOptions,
): Omit<ObjectHeader, 'sequence'> {
  const checksums: Array<[ChecksumAlg, Uint8Array]> = Object.entries(options.checksums ?? {}).map(
    ([alg, digest]) => [alg as ChecksumAlg, Buffer.from(digest, 'base64')],
  );
  if (checksums.length === 0 && typeof body !== 'object') {
    checksums.push(['CRC32C', crc32cBytes(Buffer.from(body))]);
  } else if (checksums.length === 0 && body instanceof Uint8Array) {
    checksums.push(['CRC32C', crc32cBytes(body)]);
  }
  return {
    size,
    bucket: options.bucket ?? '',
    key,
    contentType: options.contentType ?? '',
    metadata: Object.entries(options.metadata ?? {}),
    checksums,
    // Without a checksum the server cannot take an idempotency key: a BodyFile put without
    // checksums is then not resent safely; the CLI gives its files' CRC32C.
    idempotencyKey: options.idempotencyKey ?? (checksums.length > 0 ? randomUUID() : ''),
    ifMatch: options.ifMatch ?? '',
    ifNoneMatch: options.ifNoneMatch ?? false,
  };
}

function crc32cBytes(bytes: Uint8Array): Uint8Array {
  const digest = Buffer.alloc(4);
  digest.writeUInt32BE(crc32c(bytes) >>> 0);
  return digest;
}

/** Reads a body in pieces of up to `max` bytes. */
interface ChunkReader {
  next(max: number): Promise<Uint8Array>;
}

function bodyChunks(body: Body): ChunkReader {
  if (typeof body === 'string' || body instanceof Uint8Array) {
    const bytes = typeof body === 'string' ? Buffer.from(body) : body;
    let offset = 0;
    return {
      next: (max) => {
        const part = bytes.subarray(offset, offset + max);
        offset += part.length;
        return Promise.resolve(part);
      },
    };
  }
  const iterator = body.open()[Symbol.asyncIterator]();
  let rest: Uint8Array = new Uint8Array(0);
  return {
    next: async (max) => {
      while (rest.length === 0) {
        const next = await iterator.next();
        if (next.done === true) throw clientProblem('body_changed', 'the body ended early');
        rest = next.value;
      }
      const part = rest.subarray(0, max);
      rest = rest.subarray(part.length);
      return part;
    },
  };
}

function takeBytes(chunks: ChunkReader, count: number): Promise<Uint8Array> {
  if (count === 0) return Promise.resolve(new Uint8Array(0));
  return gather(chunks, count);
}

/** Exactly `count` bytes (one copy only when they span pieces). */
async function gather(chunks: ChunkReader, count: number): Promise<Uint8Array> {
  const first = await chunks.next(count);
  if (first.length === count) return first;
  const parts = [first];
  let length = first.length;
  while (length < count) {
    const part = await chunks.next(count - length);
    parts.push(part);
    length += part.length;
  }
  return Buffer.concat(parts);
}
