// The node-to-node transport (docs/cluster.md §7): an HTTP/1.1 listener on `cluster.listen` for
// messages between nodes, and the client that sends them. Never reachable with public
// credentials: every request is signed (signing.ts) with the key the receiver names for the path
// (the cluster secret, or a waiting node's join secret), and anything unsigned is a 401.
//
// Control messages are small JSON documents: a body over MESSAGE_BYTES_MAX is refused (413) before
// it is read whole. Answers are JSON; failures are `{code, message}` with the error's status.

import type { Logger } from '../util/log.js';
import { callRpc, JSON_CODEC, startRpcListener } from './node-rpc.js';

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

export function startTransport(options: {
  host: string;
  port: number;
  routes: ReadonlyMap<string, TransportRoute>;
  log: Logger;
}): Promise<TransportServer> {
  const routes = new Map(
    [...options.routes].map(([path, route]) => [
      path,
      {
        key: route.key,
        handler: (from: string, body: Record<string, unknown>) => route.handler({ from, body }),
      },
    ]),
  );
  return startRpcListener({
    host: options.host,
    port: options.port,
    codec: JSON_CODEC,
    bytesMax: MESSAGE_BYTES_MAX,
    requestMs: CALL_MS_MAX,
    routes,
    log: options.log,
    what: 'cluster.listen',
    // A join in flight (it waits for etcd) finishes; only idle connections are cut.
    closeBusy: false,
  });
}

/**
 * Sends one message to the node at `address` (HOST:PORT), signed with `key` as node `from`.
 * A refusal by the node comes back as the error it answered; an unreachable node is
 * `unavailable`.
 */
export function callNode(options: {
  address: string;
  path: string;
  body: Record<string, unknown>;
  key: Buffer;
  from: string;
  timeoutMs?: number;
}): Promise<Record<string, unknown>> {
  return callRpc({
    address: options.address,
    path: `${TRANSPORT_PREFIX}/${options.path}`,
    codec: JSON_CODEC,
    body: options.body,
    key: options.key,
    from: options.from,
    timeoutMs: options.timeoutMs ?? CALL_MS_MAX,
  });
}
