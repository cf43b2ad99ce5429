// Idempotency keys of object PUTs: a key is bound to a fingerprint (the object key, the client's
// checksum headers, the content length and the user metadata) and to the result of its first
// successful commit. A retry with the same fingerprint gets that result again without storing
// anything; a retry with another fingerprint is refused (422 `idempotency_key_reused`); a retry
// while the first request still runs is refused (409 `idempotency_key_in_use`). Keys expire after
// `idempotency.ttl`. A `running` record whose request died is taken over by a retry: at once when
// the gateway process that held it is gone (a gateway that fails a request frees the key itself,
// but one that crashed cannot), else after RUNNING_STALE_MS. A key is begun only for an active
// tenant, so none is written after a tenant delete has purged the tenant's keys.

import {
  DB,
  idempotencyKey,
  type IdempotencyRecord,
  type ObjectVersionRecord,
} from '../index/schema.js';
import type { EngineContext } from './context.js';
import { requireActiveTenant } from './control.js';
import type { IndexStore } from '../index/store.js';
import { IdempotencyKeyInUse, IdempotencyKeyReused } from '../../util/errors.js';
import { processAlive } from '../data-dir.js';

const RUNNING_STALE_MS = 15 * 60_000;

export type BeginResult = { replay: ObjectVersionRecord } | { started: true };

export function beginIdempotent(
  context: EngineContext,
  args: { tenantId: string; bucket: string; key: string; fingerprint: string; ownerPid?: number },
): BeginResult {
  requireActiveTenant(context, args.tenantId);
  const now = context.now();
  const dbKey = idempotencyKey(args.tenantId, args.bucket, args.key);
  const existing = context.store.get<IdempotencyRecord>(DB.idempotency, dbKey);
  if (existing && existing.expiresAt > now) {
    if (existing.fingerprint !== args.fingerprint) {
      throw IdempotencyKeyReused('this Idempotency-Key was used with a different body or metadata');
    }
    if (existing.state === 'done' && existing.result) return { replay: existing.result };
    if (stillRunning(existing, now)) {
      throw IdempotencyKeyInUse('a request with this Idempotency-Key is still running', {
        retryAfterSeconds: 1,
      });
    }
  }
  const ttl = context.settings.duration('idempotency.ttl');
  const record: IdempotencyRecord = {
    state: 'running',
    fingerprint: args.fingerprint,
    startedAt: now,
    expiresAt: now + ttl,
  };
  const owner = args.ownerPid;
  if (owner !== undefined && Number.isSafeInteger(owner) && owner > 0) record.ownerPid = owner;
  context.store.put(DB.idempotency, dbKey, record);
  return { started: true };
}

/** Whether the request that began a `running` record may still be running. */
function stillRunning(record: IdempotencyRecord, now: number): boolean {
  if (now - record.startedAt >= RUNNING_STALE_MS) return false;
  return record.ownerPid === undefined || processAlive(record.ownerPid);
}

/** Inside the commit's transaction: the key now replays this result. */
export function completeIdempotent(
  context: EngineContext,
  args: {
    tenantId: string;
    bucket: string;
    key: string;
    fingerprint: string;
    result: ObjectVersionRecord;
  },
): void {
  const now = context.now();
  const record: IdempotencyRecord = {
    state: 'done',
    fingerprint: args.fingerprint,
    startedAt: now,
    expiresAt: now + context.settings.duration('idempotency.ttl'),
    result: args.result,
  };
  context.store.put(DB.idempotency, idempotencyKey(args.tenantId, args.bucket, args.key), record);
}

/** The first request failed: free the key so that a retry can run. */
export function abandonIdempotent(
  context: EngineContext,
  args: { tenantId: string; bucket: string; key: string; fingerprint: string },
): void {
  const dbKey = idempotencyKey(args.tenantId, args.bucket, args.key);
  const existing = context.store.get<IdempotencyRecord>(DB.idempotency, dbKey);
  if (existing?.state === 'running' && existing.fingerprint === args.fingerprint)
    context.store.remove(DB.idempotency, dbKey);
}

/** Removes expired keys, at most `limit` per call. */
export function expireIdempotency(store: IndexStore, now: number, limit: number): number {
  const doomed: Buffer[] = [];
  for (const { key, value } of store.range<IdempotencyRecord>(DB.idempotency, {})) {
    if (value.expiresAt <= now) doomed.push(Buffer.from(key));
    if (doomed.length >= limit) break;
  }
  for (const key of doomed) store.remove(DB.idempotency, key);
  return doomed.length;
}
