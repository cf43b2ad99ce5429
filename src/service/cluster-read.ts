// Reads on a cluster member (docs/cluster.md §8): before a read resolves the current version of
// a key, the node's engine makes its copy as new as a majority of the key's replicas hold
// (cluster/replication.ts). A single node, which has no cluster revision in its index, skips
// this at the cost of one local read.

import type { IndexStore } from '../engine/index/store.js';
import type { EngineClient } from '../engine/protocol.js';
import { DB, type BucketRecord } from '../engine/index/schema.js';
import { META_CLUSTER_REVISION } from '../engine/command-router.js';

/** Undefined when nothing is to be done (a single node, or a version named by its id). */
export function freshenForRead(
  store: IndexStore,
  engine: EngineClient,
  bucket: BucketRecord,
  key: string,
  versionId: string | null,
): Promise<void> | undefined {
  if (versionId !== null || !store.has(DB.meta, META_CLUSTER_REVISION)) return undefined;
  return engine
    .call('clusterFreshen', { tenantId: bucket.tenantId, bucket: bucket.name, key })
    .then(() => store.refresh());
}
