// A minimal HTTP/1.1 keep-alive client on node:net, built to cost the client as little CPU as
// possible so that a 2-core machine spends its time in the server under test.
//
// One connection carries one request at a time (no pipelining). A request head and body go out
// with socket.write under cork, and the body is written one slice at a time with backpressure:
// a slice is filled into one of two reusable buffers while the other is being flushed, and the
// writer waits for 'drain' whenever write() says so. Responses are read into one static buffer
// per connection (net `onread`), so no Buffer is allocated per read; the incremental parser
// counts body bytes and folds them into a CRC32 without copying. Only small control-plane
// bodies (JSON) are collected, and those are copied.
//
// Invariants: at most one request is in flight per connection; bytes that arrive with no request
// in flight, or after the end of a response, are a protocol error that closes the connection.

import assert from 'node:assert/strict';
import * as net from 'node:net';
import * as tls from 'node:tls';
import { performance } from 'node:perf_hooks';
import { BenchError } from './bench-error.js';
import { type BodyPlan, fillSlice } from './data.js';
import { ResponseParser, type ParsedResponse } from './http1-parser.js';

export type { ParsedResponse } from './http1-parser.js';

/** Where requests go: parsed once from a URL such as `http://127.0.0.1:9000`. */
export interface Target {
  readonly host: string;
  readonly port: number;
  readonly tls: boolean;
  readonly insecure: boolean;
  /** Value of the Host header. */
  readonly hostHeader: string;
  /** Path prefix of the URL (usually empty), prepended to every request path. */
  readonly basePath: string;
}

export interface RequestSpec {
  readonly method: string;
  /** Path and query, starting with `/`. */
  readonly path: string;
  /** Extra header lines, each ending in CRLF. Host and Content-Length are added. */
  readonly headers?: string;
  readonly body?: BodyPlan | Buffer | null;
  /** Fold the response body into a CRC32 (IEEE: twice as fast as CRC32C here). */
  readonly crc?: boolean;
  /** Keep the response body (small JSON answers only). */
  readonly collect?: boolean;
}

export interface ResponseResult extends ParsedResponse {
  readonly latencyMs: number;
  /** Request body bytes actually written. */
  readonly bodySent: number;
}

export interface ConnectionOptions {
  /** Idle time after which a request fails. */
  readonly idleTimeoutMs?: number;
  /** Called as request body slices are handed to the socket (live progress). */
  readonly onBodyBytes?: (bytes: number) => void;
}

const SLICE_BYTES = 1024 * 1024;
const READ_BUFFER_BYTES = 256 * 1024;
const IDLE_TIMEOUT_MS = 120_000;

export function parseTarget(url: string, insecure = false): Target {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch (cause) {
    throw new BenchError(`not a URL: ${url}`, { cause });
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new BenchError(`unsupported protocol in ${url}: use http:// or https://`);
  }
  const secure = parsed.protocol === 'https:';
  const port = parsed.port === '' ? (secure ? 443 : 80) : Number(parsed.port);
  return {
    host: parsed.hostname.replace(/^\[|\]$/g, ''),
    port,
    tls: secure,
    insecure,
    hostHeader: parsed.host,
    basePath: parsed.pathname.replace(/\/+$/, ''),
  };
}

interface Slot {
  buffer: Buffer;
  busy: boolean;
  waiter: (() => void) | null;
  /** Bumped on every write and forced release, so a late callback cannot free a newer write. */
  generation: number;
}

interface Pending {
  resolve(response: ParsedResponse): void;
  reject(error: Error): void;
}

export class Http1Connection {
  private socket: net.Socket | null = null;
  private readonly parser = new ResponseParser();
  private readonly readBuffer = Buffer.allocUnsafe(READ_BUFFER_BYTES);
  private readonly slots: Slot[] = [];
  private pending: Pending | null = null;
  private drainWaiter: (() => void) | null = null;
  private writeAborted = false;
  private closeError: Error | null = null;
  /** Connections opened so far, including reconnects after a close. */
  connects = 0;
  /** Socket reads that delivered response bytes. */
  reads = 0;
  /** Times the body writer waited for 'drain' (backpressure from the socket). */
  drainWaits = 0;

  constructor(
    private readonly target: Target,
    private readonly options: ConnectionOptions = {},
  ) {}

  /** Sends one request and resolves with its complete response. */
  async request(spec: RequestSpec): Promise<ResponseResult> {
    assert.equal(this.pending, null, 'one request in flight per connection');
    const socket = await this.connected();
    const bodyLength = spec.body ? spec.body.length : 0;
    this.parser.begin({
      noBody: spec.method === 'HEAD',
      crc: spec.crc ?? false,
      collect: spec.collect ?? false,
    });
    const started = performance.now();
    const response = new Promise<ParsedResponse>((resolve, reject) => {
      this.pending = { resolve, reject };
    });
    this.writeAborted = false;
    const head = renderHead(this.target, spec, bodyLength);
    const writing = this.writeRequest(socket, head, spec.body ?? null).catch(() => -1);
    let parsed: ParsedResponse;
    try {
      parsed = await response;
    } finally {
      this.pending = null;
      this.writeAborted = true;
      this.wakeWriters();
    }
    const bodySent = await writing;
    if (bodySent !== bodyLength || !parsed.keepAlive) this.dropSocket();
    return { ...parsed, latencyMs: performance.now() - started, bodySent: Math.max(0, bodySent) };
  }

  close(): void {
    this.dropSocket();
  }

  private dropSocket(): void {
    const socket = this.socket;
    this.socket = null;
    if (socket && !socket.destroyed) socket.destroy();
  }

  private async connected(): Promise<net.Socket> {
    if (this.socket && !this.socket.destroyed) return this.socket;
    this.closeError = null;
    const socket = this.openSocket();
    this.socket = socket;
    this.connects += 1;
    await new Promise<void>((resolve, reject) => {
      const onError = (error: Error): void => reject(error);
      socket.once('error', onError);
      socket.once(this.target.tls ? 'secureConnect' : 'connect', () => {
        socket.off('error', onError);
        resolve();
      });
    });
    return socket;
  }

  private openSocket(): net.Socket {
    const { host, port } = this.target;
    let socket: net.Socket;
    if (this.target.tls) {
      const rejectUnauthorized = !this.target.insecure;
      socket = tls.connect({ host, port, servername: host, rejectUnauthorized });
      socket.on('data', (chunk: Buffer) => this.onBytes(chunk, chunk.length));
    } else {
      const onread = {
        buffer: this.readBuffer,
        callback: (count: number): boolean => {
          this.onBytes(this.readBuffer, count);
          return true;
        },
      };
      socket = net.connect({ host, port, noDelay: true, onread });
    }
    const idleMs = this.options.idleTimeoutMs ?? IDLE_TIMEOUT_MS;
    socket.setTimeout(idleMs, () => {
      socket.destroy(new BenchError(`no progress for ${idleMs} ms`));
    });
    socket.on('error', (error) => {
      this.closeError ??= error;
    });
    socket.on('close', () => this.onClose(socket));
    socket.on('drain', () => this.wakeDrain());
    return socket;
  }

  private onBytes(buffer: Buffer, end: number): void {
    this.reads += 1;
    const pending = this.pending;
    if (!pending) {
      this.fail(new BenchError('bytes arrived with no request in flight'));
      return;
    }
    let position: number;
    try {
      position = this.parser.feed(buffer, 0, end);
    } catch (error) {
      this.fail(error as Error);
      return;
    }
    if (!this.parser.done) return;
    if (position < end) {
      this.fail(new BenchError(`${end - position} bytes after the end of a response`));
      return;
    }
    this.pending = null;
    pending.resolve(this.parser.result());
  }

  /** A protocol error: fails the request in flight, if any, and drops the connection. */
  private fail(error: Error): void {
    this.closeError = error;
    const pending = this.pending;
    this.pending = null;
    pending?.reject(error);
    this.dropSocket();
  }

  private onClose(socket: net.Socket): void {
    if (this.socket === socket) this.socket = null;
    this.wakeWriters();
    const pending = this.pending;
    if (!pending) return;
    this.pending = null;
    if (this.parser.endOfStream()) {
      pending.resolve(this.parser.result());
      return;
    }
    const reason = this.closeError ? `: ${this.closeError.message}` : '';
    pending.reject(
      new BenchError(`connection closed before the response ended${reason}`, {
        cause: this.closeError,
      }),
    );
  }

  private async writeRequest(
    socket: net.Socket,
    head: string,
    body: Buffer | BodyPlan | null,
  ): Promise<number> {
    if (body === null) {
      socket.write(head, 'latin1');
      return 0;
    }
    if (Buffer.isBuffer(body)) {
      socket.cork();
      socket.write(head, 'latin1');
      const ok = socket.write(body);
      socket.uncork();
      this.options.onBodyBytes?.(body.length);
      if (!ok) await this.waitDrain(socket);
      return body.length;
    }
    return this.writePlan(socket, head, body);
  }

  /**
   * Writes a planned body in slices, double-buffered: slice k+1 is filled while slice k
   * flushes, and the writer waits for 'drain' whenever write() returns false.
   */
  private async writePlan(socket: net.Socket, head: string, plan: BodyPlan): Promise<number> {
    if (plan.length === 0) {
      socket.write(head, 'latin1');
      return 0;
    }
    let index = 0;
    let piece = await this.preparePiece(plan, 0, index);
    socket.cork();
    socket.write(head, 'latin1');
    let ok = this.writePiece(socket, piece, index, plan);
    socket.uncork();
    let offset = piece.length;
    while (offset < plan.length) {
      index ^= 1;
      piece = await this.preparePiece(plan, offset, index);
      if (!ok) await this.waitDrain(socket);
      if (this.writeAborted || socket.destroyed) break;
      ok = this.writePiece(socket, piece, index, plan);
      offset += piece.length;
    }
    return offset;
  }

  /** The next slice: a template view when unstamped, else filled into a free slot. */
  private async preparePiece(plan: BodyPlan, offset: number, index: number): Promise<Buffer> {
    if (plan.seed === null) {
      const from = offset % plan.template.length;
      const count = Math.min(plan.length - offset, plan.template.length - from, SLICE_BYTES);
      return plan.template.subarray(from, from + count);
    }
    const slot = this.slot(index, Math.min(plan.length, SLICE_BYTES));
    if (slot.busy) {
      await new Promise<void>((resolve) => {
        slot.waiter = resolve;
      });
    }
    const count = fillSlice(plan, offset, slot.buffer);
    return slot.buffer.subarray(0, count);
  }

  private writePiece(socket: net.Socket, piece: Buffer, index: number, plan: BodyPlan): boolean {
    this.options.onBodyBytes?.(piece.length);
    if (plan.seed === null) return socket.write(piece);
    const slot = this.slots[index];
    assert.ok(slot !== undefined);
    slot.busy = true;
    slot.generation += 1;
    const generation = slot.generation;
    return socket.write(piece, () => {
      if (slot.generation === generation) releaseSlot(slot);
    });
  }

  private slot(index: number, bytes: number): Slot {
    let slot = this.slots[index];
    if (slot === undefined) {
      slot = { buffer: Buffer.allocUnsafe(bytes), busy: false, waiter: null, generation: 0 };
      this.slots[index] = slot;
    } else if (slot.buffer.length < bytes && !slot.busy) {
      slot.buffer = Buffer.allocUnsafe(bytes);
    }
    return slot;
  }

  private waitDrain(socket: net.Socket): Promise<void> {
    if (socket.destroyed || this.writeAborted || socket.writableLength === 0) {
      return Promise.resolve();
    }
    this.drainWaits += 1;
    return new Promise((resolve) => {
      this.drainWaiter = resolve;
    });
  }

  private wakeDrain(): void {
    const waiter = this.drainWaiter;
    this.drainWaiter = null;
    waiter?.();
  }

  /**
   * Releases a writer stuck on drain or on a slot: the response ended (so the server has read
   * every byte it will read, and the kernel holds them) or the socket closed.
   */
  private wakeWriters(): void {
    this.wakeDrain();
    for (const slot of this.slots) {
      slot.generation += 1;
      releaseSlot(slot);
    }
  }
}

function releaseSlot(slot: Slot): void {
  slot.busy = false;
  const waiter = slot.waiter;
  slot.waiter = null;
  waiter?.();
}

/** The request line and headers through the empty line, as they go on the wire (latin1). */
export function renderHead(target: Target, spec: RequestSpec, bodyLength: number): string {
  const length =
    spec.body || spec.method === 'PUT' || spec.method === 'POST'
      ? `Content-Length: ${bodyLength}\r\n`
      : '';
  return (
    `${spec.method} ${target.basePath}${spec.path} HTTP/1.1\r\n` +
    `Host: ${target.hostHeader}\r\n${spec.headers ?? ''}${length}\r\n`
  );
}

export interface JsonResponse {
  readonly status: number;
  readonly json: unknown;
  readonly text: string;
  readonly headers: Readonly<Record<string, string>>;
}

/** One control-plane call with a JSON (or empty) body on a fresh connection. */
export async function jsonRequest(
  target: Target,
  options: {
    method: string;
    path: string;
    headers?: string;
    json?: unknown;
    /** How long the answer may make no progress (default 60 s). */
    idleTimeoutMs?: number;
  },
): Promise<JsonResponse> {
  const connection = new Http1Connection(target, {
    idleTimeoutMs: options.idleTimeoutMs ?? 60_000,
  });
  try {
    const body = options.json === undefined ? null : Buffer.from(JSON.stringify(options.json));
    const headers = (options.headers ?? '') + (body ? 'Content-Type: application/json\r\n' : '');
    const response = await connection.request({
      method: options.method,
      path: options.path,
      headers,
      body,
      collect: true,
    });
    const text = response.body ? response.body.toString('utf8') : '';
    let json: unknown = null;
    try {
      json = text === '' ? null : JSON.parse(text);
    } catch {
      json = null;
    }
    return { status: response.status, json, text, headers: response.headers };
  } finally {
    connection.close();
  }
}
