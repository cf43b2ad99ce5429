// The node-to-node data transport (docs/cluster.md §7): replicas of objects between the engines
// of a cluster's members. An HTTP/1.1 listener of the engine process on the port after
// `cluster.listen`'s (7001 for 7000), never the public port; every request signed with the
// cluster secret (signing.ts), refused unsigned (401) or too old.
//
// Messages are msgpack maps, so chunk records travel as bytes. One message holds at most
// DATA_MESSAGE_BYTES_MAX bytes: an object is copied as a sequence of record batches, each
// verified and made durable by the receiver before it answers, so neither side ever holds a whole
// large object.

import { callRpc, MSGPACK_CODEC, startRpcListener } from './node-rpc.js';
import type { Logger } from '../util/log.js';

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
  const colon = options.address.lastIndexOf(':');
  const key = (): Buffer => options.secret;
  return startRpcListener({
    host: options.address.slice(0, colon).replace(/^\[|\]$/g, ''),
    port: Number(options.address.slice(colon + 1)),
    codec: MSGPACK_CODEC,
    bytesMax: DATA_MESSAGE_BYTES_MAX,
    requestMs: DATA_CALL_MS_MAX * 2,
    routes: new Map([...options.handlers].map(([path, handler]) => [path, { key, handler }])),
    log: options.log,
    what: 'cluster data port',
    // A data message is bounded in time by its sender; a closing node does not wait for it.
    closeBusy: true,
  });
}

/** Sends one data message; a refusal comes back as the error the node answered. */
export function callData(options: {
  address: string;
  name: string;
  body: Record<string, unknown>;
  secret: Buffer;
  from: string;
  timeoutMs?: number;
}): Promise<Record<string, unknown>> {
  return callRpc({
    address: options.address,
    path: DATA_PREFIX + options.name,
    codec: MSGPACK_CODEC,
    body: options.body,
    key: options.secret,
    from: options.from,
    timeoutMs: options.timeoutMs ?? DATA_CALL_MS_MAX,
  });
}
