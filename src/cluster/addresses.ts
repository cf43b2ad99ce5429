// Where a cluster node listens and how its etcd member is reached (docs/cluster.md §3):
// `cluster.listen` for the node-to-node transport, `cluster.etcd_client_listen` and
// `cluster.etcd_peer_listen` for its etcd member (default: the host of `cluster.listen`, ports
// 2379 and 2380), or `cluster.etcd_endpoints` for an external etcd (then no member runs here).
//
// Addresses are advertised to other nodes as they are given, so a wildcard host (0.0.0.0, ::)
// is refused: nobody could reach it.

import { BadRequest } from '../util/errors.js';
import { parseListen, type ListenAddress, type Settings } from '../util/config.js';

export const ETCD_CLIENT_PORT = 2379;
export const ETCD_PEER_PORT = 2380;

export interface ClusterAddresses {
  readonly listen: ListenAddress;
  readonly listenText: string;
  readonly clientUrl: string;
  readonly peerUrl: string;
  /** The external etcd's client URLs; empty when this node runs its own member. */
  readonly external: readonly string[];
}

export function clusterEndpoints(settings: Settings): ClusterAddresses {
  const listen = concrete(settings.string('cluster.listen'), 'cluster.listen');
  const hostText = listen.host.includes(':') ? `[${listen.host}]` : listen.host;
  const client = settings.string('cluster.etcd_client_listen') || `${hostText}:${ETCD_CLIENT_PORT}`;
  const peer = settings.string('cluster.etcd_peer_listen') || `${hostText}:${ETCD_PEER_PORT}`;
  concrete(client, 'cluster.etcd_client_listen');
  concrete(peer, 'cluster.etcd_peer_listen');
  const external = settings
    .string('cluster.etcd_endpoints')
    .split(',')
    .map((url) => url.trim())
    .filter((url) => url !== '');
  for (const url of external)
    if (!/^https?:\/\/[^/\s]+$/.test(url))
      throw BadRequest(`cluster.etcd_endpoints: expected http(s)://HOST:PORT, got ${url}`);
  return {
    listen,
    listenText: `${hostText}:${listen.port}`,
    clientUrl: `http://${client}`,
    peerUrl: `http://${peer}`,
    external,
  };
}

function concrete(value: string, name: string): ListenAddress {
  const address = parseListen(value, name);
  if (address.host === '0.0.0.0' || address.host === '::' || address.port === 0)
    throw BadRequest(
      `${name} must name an address other nodes can reach (a host and a port other than 0), ` +
        `got ${JSON.stringify(value)}`,
    );
  return address;
}
