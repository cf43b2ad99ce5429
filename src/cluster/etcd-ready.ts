// Waiting for etcd to answer: after this node's member starts, and before a node serves in
// cluster mode. The wait names what it waits for and ends with `unavailable` after
// ETCD_READY_MS_MAX (a member that cannot reach a quorum never becomes ready).

import { Unavailable } from '../util/errors.js';
import type { Registry } from './registry.js';

export const ETCD_READY_MS_MAX = 60_000;
const POLL_MS = 250;

export async function waitForEtcd(
  registry: Registry,
  what: string,
  timeoutMs = ETCD_READY_MS_MAX,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      // A linearizable read needs a leader and a quorum: a member that answers it is in service.
      await registry.client.get(registry.key('cluster')).exec();
      return;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline)
      throw Unavailable(
        `${what} did not answer within ${timeoutMs} ms (${(last as Error).message})`,
      );
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}
