// What every engine command sees: the index (inside the command's transaction), key material,
// the clock, and the counters helper. Commands check every precondition before their first
// write, so a command that throws leaves nothing behind even before its child transaction is
// rolled back.

import type { IndexStore } from '../index/store.js';
import { DB, META_COUNTERS, type Counters } from '../index/schema.js';
import type { Settings } from '../../util/config.js';
import type { SegmentSyncer } from '../segments/segment-syncer.js';

export interface EngineContext {
  readonly store: IndexStore;
  /** Replaced only by a master-key rotation (master-key-rotation.ts), inside its commit. */
  masterKey: Buffer;
  readonly settings: Settings;
  now(): number;
  /** Makes worker-written segment data durable before a commit references it (engine only). */
  readonly syncer?: SegmentSyncer;
  /**
   * Counter values taken elsewhere (a cluster member's tenant numbers and bucket ids come from
   * etcd, docs/cluster.md §4; a replicated version's sequence from its coordinator): the next
   * `nextCounter` of each answers it, once, instead of the local counter.
   */
  readonly reserved?: { [K in keyof Counters]?: number | undefined };
  /** A replica's multipart upload takes the id its coordinator chose (docs/cluster.md §8). */
  readonly uploadId?: string;
}

const initialCounters: Counters = {
  nextTenantNum: 1,
  nextBucketId: 1,
  nextSegmentId: 1,
  nextSeq: 1,
};

/** Takes the next value of a counter; inside a transaction. */
export function nextCounter(context: EngineContext, name: keyof Counters): number {
  const reserved = context.reserved?.[name];
  if (reserved !== undefined && context.reserved !== undefined) {
    context.reserved[name] = undefined;
    return reserved;
  }
  const counters = context.store.get<Counters>(DB.meta, META_COUNTERS) ?? { ...initialCounters };
  const value = counters[name];
  counters[name] = value + 1;
  context.store.put(DB.meta, META_COUNTERS, counters);
  return value;
}
