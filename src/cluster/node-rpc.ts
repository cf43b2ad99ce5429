// What the two node-to-node listeners share (docs/cluster.md §7): the control transport
// (transport.ts, small JSON messages) and the data transport (data-transport.ts, msgpack batches
// of chunk records). Both are HTTP/1.1 POSTs signed with a key (signing.ts) and answered in
// their codec; a refusal is `{code, message}` with the error's status, turned back into the same
// Lightwell error by the caller. Only the codec, the size limit and the time limits differ.

import {
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { unlink } from 'node:fs/promises';
import { pack, unpack } from 'msgpackr';
import {
  BadRequest,
  NotFound,
  PayloadTooLarge,
  Unavailable,
  isLightwellError,
  fromWire,
} from '../util/errors.js';
import type { Logger } from '../util/log.js';
import { signRequest, verifyRequest } from './signing.js';

/** How a transport's messages are written: both ways, requests and answers. */
export interface Codec {
  readonly contentType: string;
  encode(value: unknown): Buffer;
  /** The message as a map; a malformed one is a BadRequest. */
  decode(bytes: Buffer): Record<string, unknown>;
}

function asMap(value: unknown, what: string): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw BadRequest(`${what} must be a map`);
  return value as Record<string, unknown>;
}

export const JSON_CODEC: Codec = {
  contentType: 'application/json',
  encode: (value) => Buffer.from(JSON.stringify(value)),
  decode: (bytes) => {
    let value: unknown;
    try {
      value = bytes.length === 0 ? {} : JSON.parse(bytes.toString('utf8'));
    } catch {
      throw BadRequest('node-to-node message is not JSON');
    }
    return asMap(value, 'a node-to-node message');
  },
};

export const MSGPACK_CODEC: Codec = {
  contentType: 'application/msgpack',
  encode: (value) => pack(value),
  decode: (bytes) => {
    let value: unknown;
    try {
      value = bytes.length === 0 ? {} : unpack(bytes);
    } catch {
      throw BadRequest('a data message is not msgpack');
    }
    return asMap(value, 'a data message');
  },
};

/** One path a listener serves: the key that signs it now (none: refused), and its handler. */
export interface RpcRoute {
  readonly key: () => Buffer | undefined;
  readonly handler: (from: string, body: Record<string, unknown>) => Promise<unknown>;
}

/**
 * Requests under `prefix` that a listener hands on whole, unread, to the listener on the local
 * socket `socketPath` (the engine's data transport behind `cluster.listen`): that listener checks
 * their signature and answers in its own codec.
 */
export interface RpcForward {
  readonly prefix: string;
  readonly socketPath: string;
  readonly codec: Codec;
}

export interface RpcListenerOptions {
  readonly host: string;
  readonly port: number;
  /** Listen on this local socket instead of host:port (a stale one is replaced). */
  readonly socketPath?: string;
  readonly forward?: RpcForward;
  readonly codec: Codec;
  readonly bytesMax: number;
  readonly requestMs: number;
  readonly routes: ReadonlyMap<string, RpcRoute>;
  readonly log: Logger;
  /** What the listener is called in errors and logs. */
  readonly what: string;
  /** On close, also cut connections with a request in flight (else only idle ones). */
  readonly closeBusy: boolean;
}

export interface RpcListener {
  readonly port: number;
  close(): Promise<void>;
}

/** How long a kept-alive connection may sit idle here: well past any caller's own idle time. */
const IDLE_CONNECTION_MS = 65_000;

export async function startRpcListener(options: RpcListenerOptions): Promise<RpcListener> {
  const server = createServer((request, response) => {
    const forward = options.forward;
    if (forward !== undefined && (request.url ?? '').startsWith(forward.prefix)) {
      forwardOne(forward, request, response, options.log);
      return;
    }
    serveOne(options, request, response).catch((error: unknown) => {
      options.log.error({ err: error }, `${options.what} request failed`);
      if (!response.headersSent)
        answer(options.codec, response, 500, { code: 'internal', message: 'internal' });
    });
  });
  server.headersTimeout = 10_000;
  server.requestTimeout = options.requestMs;
  // The caller ends an idle kept-alive connection, never this side: Node's default agent (the
  // `cluster.listen` forwarder's) drops a free socket after 5 s, the same as Node's default
  // server idle time, and a message written as this side closed it met ECONNRESET (a 503 for a
  // message never seen). undici (callRpc) takes this hint, less a second.
  server.keepAliveTimeout = IDLE_CONNECTION_MS;
  const socketPath = options.socketPath;
  // Only the engine that holds the data directory binds its socket: one left by a crash is stale.
  if (socketPath !== undefined) await unlink(socketPath).catch(() => undefined);
  const where = socketPath ?? `${options.host}:${options.port}`;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        Unavailable(`${options.what} ${where} is not available (${error.code ?? error.message})`),
      ),
    );
    if (socketPath !== undefined) server.listen({ path: socketPath, exclusive: true }, resolve);
    else server.listen({ host: options.host, port: options.port, exclusive: true }, resolve);
  });
  const bound = server.address();
  const port = typeof bound === 'object' && bound !== null ? bound.port : options.port;
  return { port, close: () => closeServer(server, options.closeBusy) };
}

/**
 * Streams one request to the local listener and its answer back, neither held whole; a local
 * listener that is not there (the engine restarting, or not yet a member) is a 503.
 */
function forwardOne(
  forward: RpcForward,
  request: IncomingMessage,
  response: ServerResponse,
  log: Logger,
): void {
  const upstream = httpRequest({
    socketPath: forward.socketPath,
    method: request.method,
    path: request.url,
    headers: request.headers,
  });
  upstream.on('response', (answer) => {
    response.writeHead(answer.statusCode ?? 502, answer.headers);
    answer.pipe(response);
    answer.on('error', () => response.destroy());
  });
  upstream.on('error', (error: NodeJS.ErrnoException) => {
    if (response.headersSent) {
      response.destroy();
      return;
    }
    log.warn({ err: error }, 'the data transport behind cluster.listen is not answering');
    request.resume();
    answer(forward.codec, response, 503, {
      code: 'unavailable',
      message: `this node's data transport is not running (${error.code ?? error.message})`,
    });
  });
  request.on('error', () => upstream.destroy());
  response.on('close', () => {
    if (!response.writableFinished) upstream.destroy();
  });
  request.pipe(upstream);
}

async function serveOne(
  options: RpcListenerOptions,
  request: IncomingMessage,
  response: ServerResponse,
): Promise<void> {
  const path = request.url ?? '';
  try {
    const route = options.routes.get(path);
    if (request.method !== 'POST' || route === undefined)
      throw NotFound(`no ${options.what} message ${request.method ?? ''} ${path}`);
    const body = await readBody(request, options.bytesMax, options.what);
    const key = route.key();
    if (key === undefined) throw Unavailable(`this node does not accept ${path} now`);
    const from = verifyRequest(key, {
      method: 'POST',
      path,
      headers: request.headers,
      body,
      nowMs: Date.now(),
    });
    const result = await route.handler(from, options.codec.decode(body));
    answer(options.codec, response, 200, result ?? {});
  } catch (error) {
    if (!isLightwellError(error)) throw error;
    if (error.status >= 500) options.log.warn({ err: error, path }, `${options.what} refused`);
    answer(options.codec, response, error.status, { code: error.code, message: error.message });
  }
}

async function readBody(request: IncomingMessage, bytesMax: number, what: string): Promise<Buffer> {
  const declared = Number(request.headers['content-length'] ?? NaN);
  if (declared > bytesMax) throw PayloadTooLarge(`${what} message is too large`);
  const parts: Buffer[] = [];
  let length = 0;
  for await (const part of request as AsyncIterable<Buffer>) {
    length += part.length;
    if (length > bytesMax) throw PayloadTooLarge(`${what} message is too large`);
    parts.push(part);
  }
  return Buffer.concat(parts);
}

function answer(codec: Codec, response: ServerResponse, status: number, body: unknown): void {
  const bytes = codec.encode(body);
  response.writeHead(status, { 'Content-Type': codec.contentType, 'Content-Length': bytes.length });
  response.end(bytes);
}

function closeServer(server: Server, closeBusy: boolean): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    if (closeBusy) server.closeAllConnections();
    else server.closeIdleConnections();
  });
}

/**
 * Sends one message (`path` is the whole request path) to the node at `address` (HOST:PORT),
 * signed with `key` as node `from`. A refusal by the node comes back as the error it answered;
 * an unreachable node, or an answer that is not in the codec, is `unavailable`.
 */
export async function callRpc(options: {
  address: string;
  path: string;
  codec: Codec;
  body: Record<string, unknown>;
  key: Buffer;
  from: string;
  timeoutMs: number;
}): Promise<Record<string, unknown>> {
  const { address, path, codec } = options;
  const body = codec.encode(options.body);
  const headers = signRequest(options.key, {
    method: 'POST',
    path,
    node: options.from,
    body,
    nowMs: Date.now(),
  });
  let response: Response;
  let bytes: Buffer;
  try {
    response = await fetch(`http://${address}${path}`, {
      method: 'POST',
      headers: { ...headers, 'Content-Type': codec.contentType },
      body,
      signal: AbortSignal.timeout(options.timeoutMs),
    });
    bytes = Buffer.from(await response.arrayBuffer());
  } catch (cause) {
    throw Unavailable(`node at ${address} is not reachable`, {}, { cause });
  }
  let parsed: Record<string, unknown>;
  try {
    parsed = codec.decode(bytes);
  } catch {
    throw Unavailable(`node at ${address} answered ${response.status}, not ${codec.contentType}`);
  }
  if (response.ok) return parsed;
  const code = typeof parsed['code'] === 'string' ? parsed['code'] : 'internal';
  const message = typeof parsed['message'] === 'string' ? parsed['message'] : 'refused';
  throw fromWire({ code, message: `node at ${address}: ${message}`, details: {} });
}
