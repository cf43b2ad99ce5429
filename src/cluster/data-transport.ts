// The node-to-node data transport (docs/cluster.md §7): replicas of objects between the engines
// of a cluster's members. An HTTP/1.1 listener of the engine process on the port after
// `cluster.listen`'s (7001 for 7000), never the public port; every request signed with the
// cluster secret (signing.ts), refused unsigned (401) or too old.
//
// Messages are msgpack maps, so chunk records travel as bytes. One message holds at most
// DATA_MESSAGE_BYTES_MAX bytes: an object is copied as a sequence of record batches, each
// verified and made durable by the receiver before it answers, so neither side ever holds a whole
// large object.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
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

export const DATA_PREFIX = '/cluster/v1/data/';
/** The largest message: a batch of chunk records (a record alone may be up to a chunk's size). */
export const DATA_MESSAGE_BYTES_MAX = 64 * 1024 * 1024;
/** Records are batched up to this many bytes per message. */
export const DATA_BATCH_BYTES = 8 * 1024 * 1024;
/** The longest one data message may take. */
export const DATA_CALL_MS_MAX = 30_000;

export type DataHandler = (from: string, body: Record<string, unknown>) => Promise<unknown>;

/** The data address of a member whose `cluster.listen` is `address`: the next port. */
export function dataAddressOf(address: string): string {
  const colon = address.lastIndexOf(':');
  return `${address.slice(0, colon)}:${Number(address.slice(colon + 1)) + 1}`;
}

export async function startDataTransport(options: {
  address: string;
  secret: Buffer;
  handlers: ReadonlyMap<string, DataHandler>;
  log: Logger;
}): Promise<{ close(): Promise<void> }> {
  const server = createServer((request, response) => {
    serveOne(options, request, response).catch((error: unknown) => {
      options.log.error({ err: error }, 'node-to-node data request failed');
      if (!response.headersSent) answer(response, 500, { code: 'internal', message: 'internal' });
    });
  });
  server.headersTimeout = 10_000;
  server.requestTimeout = DATA_CALL_MS_MAX * 2;
  const colon = options.address.lastIndexOf(':');
  const host = options.address.slice(0, colon).replace(/^\[|\]$/g, '');
  const port = Number(options.address.slice(colon + 1));
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        Unavailable(
          `cluster data port ${options.address} is not available (${error.code ?? error.message})`,
        ),
      ),
    );
    server.listen({ host, port, exclusive: true }, () => resolve());
  });
  return { close: () => closeServer(server) };
}

async function serveOne(
  options: { secret: Buffer; handlers: ReadonlyMap<string, DataHandler>; log: Logger },
  request: IncomingMessage,
  response: ServerResponse,
): Promise<void> {
  const path = request.url ?? '';
  try {
    const handler = options.handlers.get(path);
    if (request.method !== 'POST' || handler === undefined)
      throw NotFound(`no node-to-node data message ${request.method ?? ''} ${path}`);
    const body = await readBody(request);
    const from = verifyRequest(options.secret, {
      method: 'POST',
      path,
      headers: request.headers,
      body,
      nowMs: Date.now(),
    });
    const parsed = body.length === 0 ? {} : (unpack(body) as unknown);
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
      throw BadRequest('a data message is a msgpack map');
    answer(response, 200, (await handler(from, parsed as Record<string, unknown>)) ?? {});
  } catch (error) {
    if (!isLightwellError(error)) throw error;
    if (error.status >= 500) options.log.warn({ err: error, path }, 'data message refused');
    answer(response, error.status, { code: error.code, message: error.message });
  }
}

async function readBody(request: IncomingMessage): Promise<Buffer> {
  const declared = Number(request.headers['content-length'] ?? NaN);
  if (declared > DATA_MESSAGE_BYTES_MAX) throw PayloadTooLarge('data message is too large');
  const parts: Buffer[] = [];
  let length = 0;
  for await (const part of request as AsyncIterable<Buffer>) {
    length += part.length;
    if (length > DATA_MESSAGE_BYTES_MAX) throw PayloadTooLarge('data message is too large');
    parts.push(part);
  }
  return Buffer.concat(parts);
}

function answer(response: ServerResponse, status: number, body: unknown): void {
  const bytes = pack(body);
  response.writeHead(status, {
    'Content-Type': 'application/msgpack',
    'Content-Length': bytes.length,
  });
  response.end(bytes);
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

/** Sends one data message; a refusal comes back as the error the node answered. */
export async function callData(options: {
  address: string;
  name: string;
  body: Record<string, unknown>;
  secret: Buffer;
  from: string;
  timeoutMs?: number;
}): Promise<Record<string, unknown>> {
  const path = DATA_PREFIX + options.name;
  const body = pack(options.body);
  const headers = signRequest(options.secret, {
    method: 'POST',
    path,
    node: options.from,
    body,
    nowMs: Date.now(),
  });
  let response: Response;
  let bytes: Buffer;
  try {
    response = await fetch(`http://${options.address}${path}`, {
      method: 'POST',
      headers: { ...headers, 'Content-Type': 'application/msgpack' },
      body,
      signal: AbortSignal.timeout(options.timeoutMs ?? DATA_CALL_MS_MAX),
    });
    bytes = Buffer.from(await response.arrayBuffer());
  } catch (cause) {
    throw Unavailable(`node at ${options.address} is not reachable`, {}, { cause });
  }
  const parsed = unpack(bytes) as Record<string, unknown>;
  if (response.ok) return parsed;
  const code = typeof parsed['code'] === 'string' ? parsed['code'] : 'internal';
  const message = typeof parsed['message'] === 'string' ? parsed['message'] : 'refused';
  throw fromWire({ code, message: `node at ${options.address}: ${message}`, details: {} });
}
