// The node-to-node transport (docs/cluster.md §7): an HTTP/1.1 listener on `cluster.listen` for
// messages between nodes, and the client that sends them. Never reachable with public
// credentials: every request is signed (signing.ts) with the key the receiver names for the path
// (the cluster secret, or a waiting node's join secret), and anything unsigned is a 401.
//
// Control messages are small JSON documents: a body over MESSAGE_BYTES_MAX is refused (413) before
// it is read whole. Answers are JSON; failures are `{code, message}` with the error's status.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
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

export const MESSAGE_BYTES_MAX = 64 * 1024;
export const TRANSPORT_PREFIX = '/cluster/v1';
/** The longest a control message may take (a join waits for etcd to start). */
export const CALL_MS_MAX = 60_000;

export type MessageHandler = (message: {
  from: string;
  body: Record<string, unknown>;
}) => Promise<Record<string, unknown>>;

export interface TransportRoute {
  /** The key that signs requests on this path now, or undefined when none is accepted. */
  readonly key: () => Buffer | undefined;
  readonly handler: MessageHandler;
}

export interface TransportServer {
  readonly port: number;
  close(): Promise<void>;
}

export async function startTransport(options: {
  host: string;
  port: number;
  routes: ReadonlyMap<string, TransportRoute>;
  log: Logger;
}): Promise<TransportServer> {
  const server = createServer((request, response) => {
    serveOne(options, request, response).catch((error: unknown) => {
      options.log.error({ err: error }, 'node-to-node request failed');
      if (!response.headersSent) answer(response, 500, { code: 'internal', message: 'internal' });
    });
  });
  server.headersTimeout = 10_000;
  server.requestTimeout = CALL_MS_MAX;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        Unavailable(
          `cluster.listen ${options.host}:${options.port} is not available (${error.code ?? error.message})`,
        ),
      ),
    );
    server.listen({ host: options.host, port: options.port, exclusive: true }, () => resolve());
  });
  const bound = server.address();
  const port = typeof bound === 'object' && bound !== null ? bound.port : options.port;
  return { port, close: () => closeServer(server) };
}

async function serveOne(
  options: { routes: ReadonlyMap<string, TransportRoute>; log: Logger },
  request: IncomingMessage,
  response: ServerResponse,
): Promise<void> {
  const path = request.url ?? '';
  try {
    const route = options.routes.get(path);
    if (request.method !== 'POST' || route === undefined)
      throw NotFound(`no node-to-node message ${request.method ?? ''} ${path}`);
    const body = await readMessage(request);
    const key = route.key();
    if (key === undefined) throw Unavailable(`this node does not accept ${path} now`);
    const from = verifyRequest(key, {
      method: 'POST',
      path,
      headers: request.headers,
      body,
      nowMs: Date.now(),
    });
    const parsed = parseMessage(body);
    answer(response, 200, await route.handler({ from, body: parsed }));
  } catch (error) {
    if (!isLightwellError(error)) throw error;
    if (error.status >= 500) options.log.warn({ err: error, path }, 'node-to-node request refused');
    answer(response, error.status, { code: error.code, message: error.message });
  }
}

async function readMessage(request: IncomingMessage): Promise<Buffer> {
  const declared = Number(request.headers['content-length'] ?? NaN);
  if (declared > MESSAGE_BYTES_MAX) throw PayloadTooLarge('node-to-node message is too large');
  const parts: Buffer[] = [];
  let length = 0;
  for await (const part of request as AsyncIterable<Buffer>) {
    length += part.length;
    if (length > MESSAGE_BYTES_MAX) throw PayloadTooLarge('node-to-node message is too large');
    parts.push(part);
  }
  return Buffer.concat(parts);
}

function parseMessage(body: Buffer): Record<string, unknown> {
  let value: unknown;
  try {
    value = body.length === 0 ? {} : JSON.parse(body.toString('utf8'));
  } catch {
    throw BadRequest('node-to-node message is not JSON');
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw BadRequest('node-to-node message must be a JSON object');
  return value as Record<string, unknown>;
}

function answer(response: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  response.writeHead(status, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(text),
  });
  response.end(text);
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
  });
}

/**
 * Sends one message to the node at `address` (HOST:PORT), signed with `key` as node `from`.
 * A refusal by the node comes back as the error it answered; an unreachable node is
 * `unavailable`.
 */
export async function callNode(options: {
  address: string;
  path: string;
  body: Record<string, unknown>;
  key: Buffer;
  from: string;
  timeoutMs?: number;
}): Promise<Record<string, unknown>> {
  const path = `${TRANSPORT_PREFIX}/${options.path}`;
  const body = Buffer.from(JSON.stringify(options.body));
  const headers = signRequest(options.key, {
    method: 'POST',
    path,
    node: options.from,
    body,
    nowMs: Date.now(),
  });
  let response: Response;
  try {
    response = await fetch(`http://${options.address}${path}`, {
      method: 'POST',
      headers: { ...headers, 'Content-Type': 'application/json' },
      body,
      signal: AbortSignal.timeout(options.timeoutMs ?? CALL_MS_MAX),
    });
  } catch (cause) {
    throw Unavailable(`node at ${options.address} is not reachable`, {}, { cause });
  }
  const text = await response.text();
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw Unavailable(`node at ${options.address} answered ${response.status}, not JSON`);
  }
  if (response.ok) return parsed;
  const code = typeof parsed['code'] === 'string' ? parsed['code'] : 'internal';
  const message = typeof parsed['message'] === 'string' ? parsed['message'] : 'refused';
  throw fromWire({ code, message: `node at ${options.address}: ${message}`, details: {} });
}
