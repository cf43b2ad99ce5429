// Tenant delete: one transaction that makes the tenant `deleted`, then a background purge that
// removes its contents in bounded batches, each its own transaction.
//
// Invariants:
// - `deleteTenant` accepts only a disabled tenant (409 otherwise). A disabled tenant is frozen:
//   every data-plane command refuses a tenant that is not active, so nothing can add a version,
//   a retention or a legal hold after the admin process planned the delete.
// - From the commit of `deleteTenant` on, the tenant is `deleted` to every reader (the data
//   plane and the admin API): there is never a half-deleted tenant that looks active. Its
//   `deletion` field says whether the purge has finished.
// - The purge never removes a protected version (legal hold ON, or retention until a future
//   time, or lock fields it cannot read: fail-closed). It stops with `deletion.blockedAt` set
//   instead; the admin process refuses such deletes with 412 before they start.
// - Each batch releases chunk references exactly as a versioned delete does (objects.ts
//   `removeVersion`), so usage stays exact while the purge runs and compaction reclaims the
//   bytes once chunks are dead. A version with more references than a batch allows is released
//   in parts: the released prefix is cut from its record in the same transaction.
// - A crash between batches loses nothing: the next engine start finds every tenant whose
//   deletion has not completed and resumes it (TenantPurger.start).
// - Webhooks: no delivery request for the tenant's events starts after the delete commits (the
//   delivery loop discards the rows of a deleted tenant), and before its first batch the purge
//   ends the requests that were already in flight and waits for them (`endDeliveries`). The
//   batches then drop the outbox rows, notification configs and delivery status of every
//   bucket the tenant has or had (one deleted earlier whose outbox had not drained included).
//   So once `deletion.completedAt` is set, no webhook for the tenant is sent or on its way, and
//   none is sent later. A tenant delete emits no object-removed events.
//
// Order: each bucket's multipart uploads (parts release their chunk references), then its
// versions, then the bucket record, which carries the bucket's versioning, object lock, CORS
// rules and policy; object tags, retention and legal holds live on the versions. After the last
// bucket: accounts, idempotency records, notification state, access keys, the quota, and last
// the usage record (its per-bucket counters included) with `completedAt` in the same batch.
//
// Persists: TenantRecord.deletion; removes every record above. The tenant record stays as a
// tombstone so its id is never reused. Kept by design: audit rows (until audit retention
// removes them), admin tokens limited to the tenant (operator credentials, revoked with
// `lightwell admin-token revoke`; they can still read the tombstone and the audit rows), and
// dead chunk records, which compaction drops after `storage.dead_chunk_grace`.

import {
  DB,
  tenantKey,
  tenantChildRange,
  bucketKeyPrefix,
  objectKey,
  versionKey,
  CHUNK_REF_SIZE,
  type TenantRecord,
  type BucketRecord,
  type ObjectVersionRecord,
  type AccessKeyRecord,
  type UsageRecord,
  type MultipartPartRecord,
} from '../index/schema.js';
import type { EngineContext } from './context.js';
import type { IndexStore } from '../index/store.js';
import { requireReason, revokeTenantKeys } from './control.js';
import {
  loadUsage,
  saveUsage,
  removeVersion,
  releaseChunkRefs,
  removeBucketName,
} from './objects.js';
import { dropBucketNotifications } from './notifications.js';
import { releasePart } from './multipart.js';
import { Conflict, NotFound } from '../../util/errors.js';
import type { Logger } from '../../util/log.js';

/** Versions removed per purge transaction. */
export const PURGE_VERSIONS_PER_BATCH = 128;
/** Chunk references released per purge transaction. */
export const PURGE_CHUNK_REFS_PER_BATCH = 4096;
/** Accounts, keys and other small records removed per purge transaction. */
export const PURGE_RECORDS_PER_BATCH = 1000;
/** How often the purger looks for unfinished deletes besides being woken. */
export const PURGE_POLL_MS = 5000;

export interface VersionProtection {
  readonly legalHeld: boolean;
  readonly retained: boolean;
}

/**
 * Whether object lock protects a version at `now`. Fail-closed: lock fields that are present
 * but unreadable count as protection.
 */
export function versionProtection(version: ObjectVersionRecord, now: number): VersionProtection {
  const record = version as unknown as { legalHold?: unknown; retention?: unknown };
  const hold = record.legalHold;
  const legalHeld = hold !== undefined && hold !== null && hold !== 'OFF' && hold !== false;
  let retained = false;
  const retention = record.retention;
  if (retention !== undefined && retention !== null) {
    const until =
      typeof retention === 'object'
        ? (retention as { retainUntil?: unknown }).retainUntil
        : retention;
    const ms =
      typeof until === 'number'
        ? until
        : typeof until === 'string'
          ? Date.parse(until)
          : Number.NaN;
    retained = !Number.isFinite(ms) || ms > now;
  }
  return { legalHeld, retained };
}

/** A tenant whose delete committed and whose purge has not finished (nor stopped). */
export function purgePending(tenant: TenantRecord): boolean {
  return (
    tenant.state === 'deleted' &&
    tenant.deletion !== undefined &&
    tenant.deletion.completedAt === undefined &&
    tenant.deletion.blockedAt === undefined
  );
}

export function pendingPurges(store: IndexStore): string[] {
  const found: string[] = [];
  for (const { value } of store.range<TenantRecord>(DB.tenants, {}))
    if (purgePending(value)) found.push(value.id);
  return found;
}

const wakers = new Set<(tenantId: string) => void>();

/**
 * Makes a disabled tenant `deleted` and starts its purge. The admin process has already checked
 * (on the frozen, disabled tenant) that no version is protected; the purge checks again.
 */
export function deleteTenant(
  context: EngineContext,
  args: { tenantId: string; reason: string },
): TenantRecord {
  const reason = requireReason(args.reason);
  const tenant = context.store.get<TenantRecord>(DB.tenants, tenantKey(args.tenantId));
  if (!tenant) throw NotFound(`tenant ${args.tenantId} not found`);
  if (tenant.state === 'deleted') throw Conflict(`tenant ${args.tenantId} is already deleted`);
  if (tenant.state !== 'disabled')
    throw Conflict(`tenant ${args.tenantId} must be disabled before it is deleted`);
  revokeTenantKeys(context, {
    tenantId: tenant.id,
    reason: `tenant deleted: ${reason}`,
    dryRun: false,
  });
  tenant.state = 'deleted';
  tenant.deletion = { startedAt: context.now(), reason };
  context.store.put(DB.tenants, tenantKey(tenant.id), tenant);
  // A hint only: the purger's batches run in later transactions, which see this one.
  setImmediate(() => {
    for (const wake of wakers) wake(tenant.id);
  });
  return tenant;
}

export interface PurgeBatchResult {
  /** The purge finished (or there was nothing to purge). */
  done: boolean;
  /** The purge stopped at a protected version and will not resume by itself. */
  blocked: boolean;
  versionsRemoved: number;
  bucketsRemoved: number;
}

interface Budget {
  versions: number;
  refs: number;
}

/** One bounded step of a tenant's purge; call again until `done` or `blocked`. */
export function purgeTenantBatch(
  context: EngineContext,
  args: { tenantId: string },
): PurgeBatchResult {
  const result: PurgeBatchResult = {
    done: true,
    blocked: false,
    versionsRemoved: 0,
    bucketsRemoved: 0,
  };
  const tenant = context.store.get<TenantRecord>(DB.tenants, tenantKey(args.tenantId));
  if (!tenant || !purgePending(tenant)) return result;
  const usage = loadUsage(context, tenant.id);
  const budget: Budget = { versions: PURGE_VERSIONS_PER_BATCH, refs: PURGE_CHUNK_REFS_PER_BATCH };
  const buckets = [
    ...context.store.range<BucketRecord>(DB.buckets, { ...tenantChildRange(tenant.id), limit: 64 }),
  ];
  for (const { key, value: bucket } of buckets) {
    const outcome = purgeBucket(context, { tenant, bucket, usage, budget, result });
    if (outcome === 'blocked') {
      saveUsage(context, usage);
      blockPurge(
        context,
        tenant,
        `bucket ${bucket.name} holds a version under retention or legal hold`,
      );
      return { ...result, done: false, blocked: true };
    }
    if (outcome === 'more') {
      saveUsage(context, usage);
      return { ...result, done: false };
    }
    context.store.remove(DB.buckets, Buffer.from(key));
    removeBucketName(context, tenant.id, bucket.name);
    result.bucketsRemoved += 1;
  }
  saveUsage(context, usage);
  if (buckets.length > 0 || !purgeTenantRecords(context, tenant.id))
    return { ...result, done: false };
  context.store.remove(DB.usage, tenantKey(tenant.id));
  tenant.deletion = {
    ...(tenant.deletion ?? { startedAt: context.now(), reason: '' }),
    completedAt: context.now(),
  };
  context.store.put(DB.tenants, tenantKey(tenant.id), tenant);
  return result;
}

function blockPurge(context: EngineContext, tenant: TenantRecord, reason: string): void {
  if (!tenant.deletion) return;
  tenant.deletion = { ...tenant.deletion, blockedAt: context.now(), blockedReason: reason };
  context.store.put(DB.tenants, tenantKey(tenant.id), tenant);
}

/** Removes versions of one bucket within the budget: 'empty' when none are left. */
function purgeBucket(
  context: EngineContext,
  args: {
    tenant: TenantRecord;
    bucket: BucketRecord;
    usage: UsageRecord;
    budget: Budget;
    result: PurgeBatchResult;
  },
): 'empty' | 'more' | 'blocked' {
  const { tenant, bucket, usage, budget, result } = args;
  const start = bucketKeyPrefix(bucket.id);
  const end = Buffer.concat([start, Buffer.from([0xff])]);
  if (budget.versions <= 0 || budget.refs <= 0) return 'more';
  if (!purgeBucketUploads(context, args)) return 'more';
  if (budget.versions <= 0 || budget.refs <= 0) return 'more';
  const limit = budget.versions;
  const page = [...context.store.range<ObjectVersionRecord>(DB.versions, { start, end, limit })];
  const now = context.now();
  for (const { value: version } of page) {
    const protection = versionProtection(version, now);
    if (protection.legalHeld || protection.retained) return 'blocked';
    const refs = version.chunks.length / CHUNK_REF_SIZE;
    if (refs > budget.refs) {
      releaseVersionPart(context, { tenant, bucket, version, usage, refs: budget.refs });
      budget.refs = 0;
      return 'more';
    }
    budget.refs -= refs;
    budget.versions -= 1;
    const current = objectKey(bucket.id, version.key);
    if (context.store.has(DB.objects, current)) {
      context.store.remove(DB.objects, current);
      usage.objects -= 1;
    }
    removeVersion(context, { tenant, bucket, version, usage });
    result.versionsRemoved += 1;
  }
  if (page.length === limit) return 'more';
  // No versions left; `objects` only ever copies a version, but leave nothing behind.
  const strays = [
    ...context.store.range(DB.objects, { start, end, limit: PURGE_RECORDS_PER_BATCH }),
  ];
  for (const { key } of strays) context.store.remove(DB.objects, Buffer.from(key));
  return strays.length === PURGE_RECORDS_PER_BATCH ? 'more' : 'empty';
}

/**
 * Aborts the bucket's multipart uploads within the budget: each part holds one reference per
 * chunk until then (multipart.ts). Returns true when none are left.
 */
function purgeBucketUploads(
  context: EngineContext,
  args: { tenant: TenantRecord; bucket: BucketRecord; usage: UsageRecord; budget: Budget },
): boolean {
  const { store } = context;
  const { tenant, bucket, usage, budget } = args;
  const start = bucketKeyPrefix(bucket.id);
  const end = Buffer.concat([start, Buffer.from([0xff])]);
  const limit = budget.versions;
  const parts = [...store.range<MultipartPartRecord>(DB.multipartParts, { start, end, limit })];
  for (const { key, value } of parts) {
    // A part is released whole, so one batch may pass the reference budget by one part.
    releasePart(context, { tenantNum: tenant.num, part: value, usage });
    store.remove(DB.multipartParts, Buffer.from(key));
    budget.refs -= value.chunks.length / CHUNK_REF_SIZE;
    budget.versions -= 1;
    if (budget.refs <= 0) return false;
  }
  if (parts.length === limit) return false;
  const uploads = [...store.range(DB.multipart, { start, end, limit: PURGE_RECORDS_PER_BATCH })];
  for (const { key } of uploads) store.remove(DB.multipart, Buffer.from(key));
  return uploads.length < PURGE_RECORDS_PER_BATCH;
}

/** Releases the first `refs` chunk references of a large version and cuts them from its record. */
function releaseVersionPart(
  context: EngineContext,
  args: {
    tenant: TenantRecord;
    bucket: BucketRecord;
    version: ObjectVersionRecord;
    usage: UsageRecord;
    refs: number;
  },
): void {
  const { tenant, bucket, version, usage, refs } = args;
  const cut = refs * CHUNK_REF_SIZE;
  const chunks = Buffer.from(version.chunks);
  releaseChunkRefs(context, tenant.num, chunks.subarray(0, cut), usage);
  version.chunks = Buffer.from(chunks.subarray(cut));
  context.store.put(DB.versions, versionKey(bucket.id, version.key, version.seq), version);
}

/**
 * Removes the tenant's accounts, idempotency records, notification state, keys and quota;
 * true when none are left.
 */
function purgeTenantRecords(context: EngineContext, tenantId: string): boolean {
  const { store } = context;
  let left = PURGE_RECORDS_PER_BATCH;
  for (const db of [DB.accounts, DB.idempotency] as const) {
    const entries = [...store.range(db, { ...tenantChildRange(tenantId), limit: left })];
    for (const { key } of entries) store.remove(db, Buffer.from(key));
    left -= entries.length;
    if (left <= 0) return false;
  }
  for (const bucketId of notifiedBuckets(store, tenantId)) {
    const { removed, done } = dropBucketNotifications(store, { bucketId, limit: left });
    left -= removed;
    if (!done || left <= 0) return false;
  }
  const keys: Buffer[] = [];
  for (const { key, value } of store.range<AccessKeyRecord>(DB.accessKeys, {})) {
    if (value.tenantId !== tenantId) continue;
    keys.push(Buffer.from(key));
    if (keys.length === left) break;
  }
  for (const key of keys) store.remove(DB.accessKeys, key);
  if (keys.length === left) return false;
  store.remove(DB.quotas, tenantKey(tenantId));
  return true;
}

/**
 * Buckets of the tenant, current or deleted earlier, that still have a notification config or
 * delivery status. Every bucket with outbox rows has a status record (notifications.ts keeps
 * `pending` equal to its rows), so these cover every outbox row of the tenant.
 */
function notifiedBuckets(store: IndexStore, tenantId: string): number[] {
  const found = new Set<number>();
  for (const db of [DB.notifications, DB.outboxStatus] as const) {
    for (const { value } of store.range<{ tenantId: string; bucketId: number }>(db, {})) {
      if (value.tenantId === tenantId) found.add(value.bucketId);
    }
  }
  return [...found];
}

/**
 * The engine's background purge: on start it resumes every unfinished delete, and
 * `deleteTenant` wakes it. Batches run one after another, each in its own transaction, with
 * the event loop free in between so data-path commands interleave.
 */
export class TenantPurger {
  private readonly wanted = new Set<string>();
  private running: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly options: {
      context: EngineContext;
      log: Logger;
      pollMs?: number;
      /** Ends the webhook requests in flight for a tenant's events and waits until they have. */
      endDeliveries?: (tenantId: string) => Promise<void>;
    },
  ) {}

  start(): void {
    wakers.add(this.wake);
    this.timer = setInterval(() => this.wake(), this.options.pollMs ?? PURGE_POLL_MS);
    this.timer.unref();
    for (const tenantId of pendingPurges(this.options.context.store)) {
      this.options.log.info({ tenantId }, 'resuming an interrupted tenant delete');
      this.wake(tenantId);
    }
  }

  readonly wake = (tenantId?: string): void => {
    if (this.stopped) return;
    if (tenantId !== undefined) this.wanted.add(tenantId);
    this.running ??= this.drain().finally(() => {
      this.running = undefined;
      if (this.wanted.size > 0 && !this.stopped) this.wake();
    });
  };

  private async drain(): Promise<void> {
    const { context, log } = this.options;
    for (const tenantId of pendingPurges(context.store)) this.wanted.add(tenantId);
    while (this.wanted.size > 0 && !this.stopped) {
      const tenantId = this.wanted.values().next().value as string;
      this.wanted.delete(tenantId);
      try {
        await this.purge(tenantId);
      } catch (error) {
        log.error({ err: error, tenantId }, 'tenant purge batch failed; retrying on the next poll');
      }
    }
  }

  private async purge(tenantId: string): Promise<void> {
    const { context, log } = this.options;
    // Once a transaction after the delete has committed, the delivery loop sees the tenant
    // deleted and starts no request for it; the requests it began before end here, so none is
    // still on its way when the purge completes.
    const tenant = await context.store.transact(() =>
      context.store.get<TenantRecord>(DB.tenants, tenantKey(tenantId)),
    );
    if (!tenant || !purgePending(tenant)) return;
    await this.options.endDeliveries?.(tenantId);
    const totals = { versions: 0, buckets: 0, batches: 0 };
    while (!this.stopped) {
      const batch = await context.store.transact(() => purgeTenantBatch(context, { tenantId }));
      totals.versions += batch.versionsRemoved;
      totals.buckets += batch.bucketsRemoved;
      totals.batches += 1;
      if (batch.blocked)
        log.error(
          { tenantId },
          'tenant delete stopped: a version is under retention or legal hold',
        );
      if (batch.done || batch.blocked) break;
      await new Promise((resolve) => setImmediate(resolve));
    }
    if (totals.versions + totals.buckets > 0) log.info({ tenantId, ...totals }, 'tenant purge');
  }

  async stop(): Promise<void> {
    this.stopped = true;
    wakers.delete(this.wake);
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }
}
