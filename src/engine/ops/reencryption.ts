// Re-encryption jobs in the index: the job row of a tenant, the chunks queued for a second look,
// and the commands that start, pause and resume a job. The background work is
// src/engine/reencryption.ts, whose header states the invariants.
//
// Persists: `meta` rows `reencrypt\0<tenant num>` (the job) and
// `reencrypt-recheck\0<tenant num><chunk id>` (queued chunks), docs/on-disk-format.md §5.

import { Buffer } from 'node:buffer';
import { DB, tenantKey, type TenantRecord } from '../index/schema.js';
import type { EngineContext } from './context.js';
import { Conflict } from '../../util/errors.js';

export const REENCRYPT_PREFIX = 'reencrypt\0';
export const RECHECK_PREFIX = 'reencrypt-recheck\0';

export type ReencryptionState = 'running' | 'paused' | 'settling' | 'complete';

export interface ReencryptionRecord {
  tenantId: string;
  tenantNum: number;
  state: ReencryptionState;
  /** `retiredAt` of the newest retired key when the pass began: the rotation it covers. */
  rotatedAt: number;
  startedAt: number;
  updatedAt: number;
  finishedAt?: number;
  /** The last chunk entry handled (its index key); absent before the first. */
  cursor?: Buffer;
  /** Chunk entries of the tenant when the pass began (counted by the runner). */
  chunksTotal?: number;
  chunksScanned: number;
  chunksRewritten: number;
  bytesRewritten: number;
  chunksUnreadable: number;
  unreadable: Array<{ chunkId: string; problem: string }>;
  /** Segments pinned by uploads in flight when the pass reached its end (`settling`). */
  pinned?: number[];
  keysDropped?: number;
}

/** The value of a queued chunk's row: its key says everything. */
export const QUEUED = { queued: true } as const;

export function jobKey(tenantNum: number): Buffer {
  const key = Buffer.alloc(REENCRYPT_PREFIX.length + 4);
  key.write(REENCRYPT_PREFIX, 0, 'latin1');
  key.writeUInt32BE(tenantNum, REENCRYPT_PREFIX.length);
  return key;
}

export function recheckPrefix(tenantNum: number): Buffer {
  const key = Buffer.alloc(RECHECK_PREFIX.length + 4);
  key.write(RECHECK_PREFIX, 0, 'latin1');
  key.writeUInt32BE(tenantNum, RECHECK_PREFIX.length);
  return key;
}

export function recheckKey(tenantNum: number, chunkId: Uint8Array): Buffer {
  return Buffer.concat([recheckPrefix(tenantNum), chunkId]);
}

export function after(key: Buffer): Buffer {
  return Buffer.concat([key, Buffer.from([0])]);
}

export function prefixEnd(prefix: Buffer): Buffer {
  return Buffer.concat([prefix, Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff])]);
}

/** The tenant's job, if it has one. */
export function reencryptionOf(
  context: Pick<EngineContext, 'store'>,
  tenantNum: number,
): ReencryptionRecord | undefined {
  return context.store.get<ReencryptionRecord>(DB.meta, jobKey(tenantNum));
}

/** The runner's wake-ups, called after a change it should act on at once. */
export const wakers = new Set<() => void>();

/**
 * A new pass for the tenant's retired keys (inside a transaction): after a rotation, or when an
 * operator starts one. A paused job stays paused. A tenant with no retired key needs none.
 */
export function startReencryption(
  context: EngineContext,
  tenant: TenantRecord,
): ReencryptionRecord | undefined {
  const newest = tenant.retiredKeys?.[0];
  if (newest === undefined) return undefined;
  const existing = reencryptionOf(context, tenant.num);
  const now = context.now();
  const job: ReencryptionRecord = {
    tenantId: tenant.id,
    tenantNum: tenant.num,
    state: existing?.state === 'paused' ? 'paused' : 'running',
    rotatedAt: newest.retiredAt,
    startedAt: now,
    updatedAt: now,
    chunksScanned: 0,
    chunksRewritten: 0,
    bytesRewritten: 0,
    chunksUnreadable: 0,
    unreadable: [],
  };
  context.store.put(DB.meta, jobKey(tenant.num), job);
  for (const wake of wakers) queueMicrotask(wake);
  return job;
}

/**
 * The console's command: start a pass (when none is active), pause or resume one. A dry run
 * answers the job as it would be and changes nothing.
 */
export function setReencryption(
  context: EngineContext,
  args: { tenantId: string; paused?: boolean; dryRun?: boolean },
): ReencryptionRecord | null {
  const tenant = context.store.get<TenantRecord>(DB.tenants, tenantKey(args.tenantId));
  if (!tenant || tenant.state === 'deleted') throw Conflict(`tenant ${args.tenantId} is deleted`);
  const existing = reencryptionOf(context, tenant.num);
  const active = existing !== undefined && existing.state !== 'complete';
  if (!active && (tenant.retiredKeys?.length ?? 0) === 0) {
    if (args.paused === true) throw Conflict(`tenant ${tenant.id} has no re-encryption to pause`);
    return existing ?? null;
  }
  const dryRun = args.dryRun === true;
  let job: ReencryptionRecord;
  if (active) {
    job = { ...existing, updatedAt: context.now() };
    if (args.paused === true && job.state === 'running') job.state = 'paused';
    if (args.paused === false && job.state === 'paused') job.state = 'running';
    if (!dryRun) context.store.put(DB.meta, jobKey(tenant.num), job);
  } else if (dryRun) {
    job = {
      tenantId: tenant.id,
      tenantNum: tenant.num,
      state: 'running',
      rotatedAt: tenant.retiredKeys?.[0]?.retiredAt ?? 0,
      startedAt: context.now(),
      updatedAt: context.now(),
      chunksScanned: 0,
      chunksRewritten: 0,
      bytesRewritten: 0,
      chunksUnreadable: 0,
      unreadable: [],
    };
  } else {
    job = startReencryption(context, tenant) as ReencryptionRecord;
    if (args.paused === true) {
      job.state = 'paused';
      context.store.put(DB.meta, jobKey(tenant.num), job);
    }
  }
  if (!dryRun) for (const wake of wakers) queueMicrotask(wake);
  return job;
}

/**
 * Called by a commit that created chunk entries (inside its transaction): while the tenant's
 * job is active, each is queued for a second look (see the header). One index read per commit
 * that created any; nothing at all for a tenant without a job.
 */
export function noteNewChunks(
  context: EngineContext,
  tenantNum: number,
  chunkIds: readonly Uint8Array[],
): void {
  if (chunkIds.length === 0) return;
  const job = reencryptionOf(context, tenantNum);
  if (!job || job.state === 'complete') return;
  for (const chunkId of chunkIds)
    context.store.put(DB.meta, recheckKey(tenantNum, chunkId), QUEUED);
}
