// The rebalance's work (docs/cluster.md §9), resumable from a checkpoint: first the
// checksum-verifying scrub of the tenant's (or one bucket's) chunks on this node, step by step,
// then on a cluster member the replicas' repair bucket by bucket (the engine's `clusterRepair`
// for one bucket at a time: every member pushes what that bucket's other replicas lack, and
// reclaims what it no longer holds). The checkpoint records where each phase has got to (the
// scrub's cursor and figures and the corrupt chunks it found; the last bucket repaired and the
// sums so far), and the work calls `checkpointed` after each scrub step and each bucket, so a
// job (repair-jobs.ts) stores it and a restarted node resumes it there: nothing done before the
// checkpoint is done again, and what was done after it is only checked again (a repair sends
// only what a replica lacks).
//
// `cluster.rebalance_objects_per_s` (0: no limit) paces the replicas phase between buckets by
// the objects its members checked (each check reads the index and asks the other replicas), on
// top of each member's own cap on the bytes it sends (repair.ts), so that an operator can keep a
// large rebalance from crowding out client traffic.
//
// A dry run also reports the partitions whose buckets have copies to send and the bytes of those
// buckets (their logical bytes as this node's index counts them: an upper bound of the move).

import type { CorruptChunk, ScrubArgs, ScrubCursor } from '../engine/ops/tenant-scrub.js';
import { DB, tenantChildRange, type BucketRecord } from '../engine/index/schema.js';
import { partitionOf, PARTITIONS } from '../cluster/layout.js';
import type { AdminServices } from './request.js';
import { bytesOfPartitions } from './layout-routes.js';
import { zeroCounts, type ScrubCounts } from '../console/scrub-jobs.js';

/** Corrupt chunks a report lists at most (all are counted). */
const CORRUPT_LISTED_MAX = 1000;
/** A scrub stores its checkpoint at most this often (each bucket of the replicas phase always). */
const SCRUB_CHECKPOINT_MS = 2_000;

export interface RebalanceArgs extends Record<string, unknown> {
  readonly tenantId: string;
  readonly bucket?: string;
  readonly dryRun: boolean;
}

/** Where a rebalance has got to; what a running job shows is its `progress` part. */
export interface RebalanceCheckpoint extends Record<string, unknown> {
  progress: {
    phase: 'scrub' | 'replicas' | 'done';
    scrub: ScrubCounts;
    bucketsDone: number;
    bucketsTotal: number;
  };
  scrubCursor?: ScrubCursor;
  corrupt: CorruptChunk[];
  /** The last bucket (by name) whose replicas are repaired. */
  afterBucket?: string;
  /** The corrupt chunks were sent for repair (with the first bucket). */
  chunksSent: boolean;
  replication?: Replication;
  single?: boolean;
  /** Partitions of buckets a dry run found copies to send for. */
  partitionsToMove: number[];
}

interface Replication {
  counts: Record<string, number>;
  nodes: Record<string, unknown>;
  chunks?: { repaired: number; unrepaired: number };
}

export function newCheckpoint(): RebalanceCheckpoint {
  return {
    progress: { phase: 'scrub', scrub: zeroCounts(), bucketsDone: 0, bucketsTotal: 0 },
    corrupt: [],
    chunksSent: false,
    partitionsToMove: [],
  };
}

/** The rebalance from `checkpoint` to its end: its report. */
export async function runRebalance(
  services: AdminServices,
  args: RebalanceArgs,
  checkpoint: RebalanceCheckpoint,
  checkpointed: () => Promise<void>,
): Promise<Record<string, unknown>> {
  const { tenantId, bucket, dryRun } = args;
  if (checkpoint.progress.phase === 'scrub') {
    await scrub(services, args, checkpoint, checkpointed);
    checkpoint.progress.phase = 'replicas';
    await checkpointed();
  }
  if (checkpoint.progress.phase === 'replicas') {
    await replicas(services, args, checkpoint, checkpointed);
    checkpoint.progress.phase = 'done';
  }
  const target =
    bucket === undefined ? `tenants/${tenantId}` : `tenants/${tenantId}/buckets/${bucket}`;
  const replication = checkpoint.replication;
  const moved = checkpoint.partitionsToMove;
  return {
    dryRun,
    applied: !dryRun,
    action: 'rebalanceRepair',
    target,
    mode: checkpoint.single === true ? 'single-node-scrub' : 'cluster-rebalance',
    complete: true,
    counts: { ...checkpoint.progress.scrub },
    corrupt: checkpoint.corrupt,
    ...(replication === undefined ? {} : { replication }),
    ...(checkpoint.single === true || !dryRun
      ? {}
      : {
          partitions: {
            partitionCount: PARTITIONS,
            partitionsToMove: moved.length,
            bytesToMove: bytesOfPartitions(services.store, moved),
          },
        }),
    blockers: [],
  };
}

/** The scrub, step by step from the checkpoint's cursor. */
async function scrub(
  services: AdminServices,
  args: RebalanceArgs,
  checkpoint: RebalanceCheckpoint,
  checkpointed: () => Promise<void>,
): Promise<void> {
  const counts = checkpoint.progress.scrub;
  let saved = performance.now();
  for (;;) {
    const request: ScrubArgs = { tenantId: args.tenantId, verify: !args.dryRun };
    if (args.bucket !== undefined) request.bucket = args.bucket;
    if (checkpoint.scrubCursor !== undefined) request.cursor = checkpoint.scrubCursor;
    const step = await services.engine.call('scrubTenantChunks', request);
    for (const field of Object.keys(counts) as Array<keyof ScrubCounts>)
      counts[field] += step[field];
    for (const entry of step.corrupt)
      if (checkpoint.corrupt.length < CORRUPT_LISTED_MAX) checkpoint.corrupt.push(entry);
    if (step.cursor === undefined) {
      delete checkpoint.scrubCursor;
      return;
    }
    checkpoint.scrubCursor = step.cursor;
    if (performance.now() - saved >= SCRUB_CHECKPOINT_MS) {
      saved = performance.now();
      await checkpointed();
    }
  }
}

/** The replicas' repair, one bucket at a time after the checkpoint's last one. */
async function replicas(
  services: AdminServices,
  args: RebalanceArgs,
  checkpoint: RebalanceCheckpoint,
  checkpointed: () => Promise<void>,
): Promise<void> {
  const names = bucketNames(services, args);
  checkpoint.progress.bucketsTotal = names.length;
  const pace = new Pace(services.settings.int('cluster.rebalance_objects_per_s'));
  const corrupt = () => (checkpoint.chunksSent ? [] : checkpoint.corrupt.map((e) => e.chunkId));
  if (names.length === 0) {
    const result = await services.engine.call('clusterRepair', {
      tenantId: args.tenantId,
      dryRun: args.dryRun,
      corrupt: corrupt(),
    });
    if (result === null) checkpoint.single = true;
    else checkpoint.replication = merge(undefined, result);
    return;
  }
  for (const bucket of names) {
    if (checkpoint.afterBucket !== undefined && bucket.name <= checkpoint.afterBucket) continue;
    const result = await services.engine.call('clusterRepair', {
      tenantId: args.tenantId,
      dryRun: args.dryRun,
      bucket: bucket.name,
      corrupt: corrupt(),
    });
    if (result === null) {
      checkpoint.single = true;
      return;
    }
    const sum = merge(checkpoint.replication, result);
    checkpoint.replication = sum;
    checkpoint.chunksSent = true;
    const copies = (result.counts['copiesSent'] ?? 0) + (result.counts['deletesSent'] ?? 0);
    const partition = partitionOf(bucket.id);
    if (args.dryRun && copies > 0 && !checkpoint.partitionsToMove.includes(partition))
      checkpoint.partitionsToMove.push(partition);
    checkpoint.afterBucket = bucket.name;
    checkpoint.progress.bucketsDone += 1;
    await checkpointed();
    await pace.spend(result.counts['objectsChecked'] ?? 0);
  }
}

function bucketNames(services: AdminServices, args: RebalanceArgs): BucketRecord[] {
  const found: BucketRecord[] = [];
  for (const { value } of services.store.range<BucketRecord>(
    DB.buckets,
    tenantChildRange(args.tenantId),
  ))
    if (args.bucket === undefined || value.name === args.bucket) found.push(value);
  return found.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** One bucket's report added to the sums so far: counts, each node's counts (or error), chunks. */
function merge(sum: Replication | undefined, next: Replication): Replication {
  const nodes: Record<string, unknown> = { ...(sum?.nodes ?? {}) };
  for (const [id, value] of Object.entries(next.nodes)) nodes[id] = addUp(nodes[id], value);
  const chunks =
    next.chunks === undefined
      ? sum?.chunks
      : {
          repaired: (sum?.chunks?.repaired ?? 0) + next.chunks.repaired,
          unrepaired: (sum?.chunks?.unrepaired ?? 0) + next.chunks.unrepaired,
        };
  return {
    counts: addUp(sum?.counts, next.counts) as Record<string, number>,
    nodes,
    ...(chunks === undefined ? {} : { chunks }),
  };
}

/** Numbers added field by field, objects within; an `error` (a member that failed) is kept. */
function addUp(a: unknown, b: unknown): unknown {
  if (typeof b === 'number') return (typeof a === 'number' ? a : 0) + b;
  if (b === null || typeof b !== 'object') return b;
  if (a === null || typeof a !== 'object') return b;
  if ('error' in a) return a;
  if ('error' in b) return b;
  const out: Record<string, unknown> = { ...(a as Record<string, unknown>) };
  for (const [key, value] of Object.entries(b)) out[key] = addUp(out[key], value);
  return out;
}

/** At most `perS` on average (0: no limit): waits when what was done runs ahead of the clock. */
class Pace {
  private readonly started = performance.now();
  private done = 0;

  constructor(private readonly perS: number) {}

  async spend(count: number): Promise<void> {
    if (this.perS <= 0) return;
    this.done += count;
    const due = (this.done / this.perS) * 1000 - (performance.now() - this.started);
    if (due > 0) await new Promise((resolve) => setTimeout(resolve, due));
  }
}
