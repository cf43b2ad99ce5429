// Idempotency keys of object PUTs: a key is bound to a fingerprint (the object key, the client's
// checksum headers, the content length and the user metadata) and to the result of its first
// successful commit. A retry with the same fingerprint gets that result again without storing
// anything; a retry with another fingerprint is refused (422 `idempotency_key_reused`); a retry
// while the first request still runs is refused (409 `idempotency_key_in_use`). Keys expire after
// `idempotency.ttl`. A `running` record whose request died is taken over by a retry: at once when
// the gateway process that held it is gone (a gateway that fails a request frees the key itself,
// but one that crashed cannot), else after RUNNING_STALE_MS. A key is begun only for an active
// tenant, so none is written after a tenant delete has purged the tenant's keys.
//
// Each begin draws a claim id, kept in the record and carried by the request's commit and
// abandon: only the holder of the current claim may complete or free the key. A gateway's pid
// being gone does not mean its last commit has been read (it may still sit in the engine's socket
// buffer), so without this a commit of the dead request arriving after a retry took the key over
// would write a second version under one key.

import {
  DB,
  idempotencyKey,
  type IdempotencyRecord,
  type ObjectVersionRecord,
} from '../index/schema.js';
import type { EngineContext } from './context.js';
import { requireActiveTenant } from './control.js';
import { EncodedRecord, type IndexStore } from '../index/store.js';
import { encodeValue } from '../../format/values.js';
import { IdempotencyKeyInUse, IdempotencyKeyReused } from '../../util/errors.js';
import { processAlive } from '../data-dir.js';
import { randomBytes } from 'node:crypto';
import assert from 'node:assert/strict';

const RUNNING_STALE_MS = 15 * 60_000;
/** A claim id's random bytes (hex in the record). */
const CLAIM_BYTES = 8;

export type BeginResult = { replay: ObjectVersionRecord } | { started: true; claim: string };

/** What a request that began a key carries to its commit or abandon. */
export interface HeldKey {
  key: string;
  fingerprint: string;
  /** From `beginIdempotent`; absent from a gateway of a release without claims. */
  claim?: string;
  /** Not begun: the commit begins and completes the key (`replayInCommit`). */
  inCommit?: boolean;
}

export function beginIdempotent(
  context: EngineContext,
  args: { tenantId: string; bucket: string; key: string; fingerprint: string; ownerPid?: number },
): BeginResult {
  requireActiveTenant(context, args.tenantId);
  const now = context.now();
  const dbKey = idempotencyKey(args.tenantId, args.bucket, args.key);
  const first = firstResultOf(context, dbKey, args.fingerprint, now);
  if (first) return { replay: first };
  const ttl = context.settings.duration('idempotency.ttl');
  const claim = randomBytes(CLAIM_BYTES).toString('hex');
  const record: IdempotencyRecord = {
    state: 'running',
    fingerprint: args.fingerprint,
    startedAt: now,
    expiresAt: now + ttl,
    claim,
  };
  const owner = args.ownerPid;
  if (owner !== undefined && Number.isSafeInteger(owner) && owner > 0) record.ownerPid = owner;
  context.store.put(DB.idempotency, dbKey, record);
  return { started: true, claim };
}

/**
 * The result a key replays; undefined when the key is free (none, expired, or its request is
 * gone). Throws 422 for another fingerprint and 409 while the first request still runs.
 */
function firstResultOf(
  context: EngineContext,
  dbKey: Buffer,
  fingerprint: string,
  now: number,
): ObjectVersionRecord | undefined {
  const existing = context.store.get<IdempotencyRecord>(DB.idempotency, dbKey);
  if (!existing || existing.expiresAt <= now) return undefined;
  if (existing.fingerprint !== fingerprint) {
    throw IdempotencyKeyReused('this Idempotency-Key was used with a different body or metadata');
  }
  if (existing.state === 'done' && existing.result) return existing.result;
  if (stillRunning(existing, now)) {
    throw IdempotencyKeyInUse('a request with this Idempotency-Key is still running', {
      retryAfterSeconds: 1,
    });
  }
  return undefined;
}

/**
 * Begin and commit in one: for a write whose body was stored before its commit (HeldKey
 * `inCommit`), the commit's transaction decides the key as `beginIdempotent` would, before it
 * writes anything: the first result to replay (the caller answers it and writes nothing; the
 * bytes it stored are the first request's, deduplicated, or garbage), or undefined, and the
 * commit then completes the key. One engine command per write instead of two.
 */
export function replayInCommit(
  context: EngineContext,
  args: { tenantId: string; bucket: string; key: string; fingerprint: string },
): ObjectVersionRecord | undefined {
  const dbKey = idempotencyKey(args.tenantId, args.bucket, args.key);
  return firstResultOf(context, dbKey, args.fingerprint, context.now());
}

/**
 * Before a commit writes anything: the request must still hold its claim on the key, or the key
 * was taken over (its gateway seemed dead, or it ran past the stale time) and the retry that took
 * it decides; 409 idempotency_key_in_use. A commit without a claim id (an older gateway) is not
 * checked.
 */
export function requireClaim(
  context: EngineContext,
  args: { tenantId: string; bucket: string } & HeldKey,
): void {
  if (args.claim === undefined) return;
  const dbKey = idempotencyKey(args.tenantId, args.bucket, args.key);
  const existing = context.store.peek<IdempotencyRecord>(DB.idempotency, dbKey);
  if (existing?.state !== 'running' || existing.claim !== args.claim) {
    throw IdempotencyKeyInUse('another request with this Idempotency-Key took it over', {
      retryAfterSeconds: 1,
    });
  }
}

/** Whether the request that began a `running` record may still be running. */
function stillRunning(record: IdempotencyRecord, now: number): boolean {
  if (now - record.startedAt >= RUNNING_STALE_MS) return false;
  return record.ownerPid === undefined || processAlive(record.ownerPid);
}

/**
 * Inside the commit's transaction: the key now replays this result. `encoded` is the result as
 * the commit already encoded it for `versions` (store.encode): the row is then spliced from
 * those bytes instead of encoding the version a second time (`doneRowBytes`).
 */
export function completeIdempotent(
  context: EngineContext,
  args: {
    tenantId: string;
    bucket: string;
    key: string;
    fingerprint: string;
    result: ObjectVersionRecord;
  },
  encoded?: EncodedRecord,
): void {
  const now = context.now();
  const record: IdempotencyRecord = {
    state: 'done',
    fingerprint: args.fingerprint,
    startedAt: now,
    expiresAt: now + context.settings.duration('idempotency.ttl'),
    result: args.result,
  };
  const dbKey = idempotencyKey(args.tenantId, args.bucket, args.key);
  if (encoded === undefined) context.store.put(DB.idempotency, dbKey, record);
  else context.store.put(DB.idempotency, dbKey, new EncodedRecord(doneRowBytes(record, encoded)));
}

/** `0xa6 "result"`: the msgpack fixstr of the done row's last key. */
const RESULT_KEY = Buffer.from([0xa6, ...Buffer.from('result', 'latin1')]);
/** msgpack fixmap headers of the row's four leading fields and of all five. */
const FIXMAP_4 = 0x84;
const FIXMAP_5 = 0x85;

/**
 * The bytes `encodeValue(1, record)` gives for a `done` row (docs/on-disk-format.md §2.6, one
 * byte string per value and key order), made from the result's own encoding: the four leading
 * fields encoded as a map of four, its header turned into a map of five, then the `result` key
 * and the version's msgpack body. A value's body is a msgpack map, so its bytes nest as they
 * are; test/engine/idempotency-row.test.ts checks the splice against `encodeValue`.
 */
export function doneRowBytes(record: IdempotencyRecord, encoded: EncodedRecord): Buffer {
  const head = encodeValue(1, {
    state: record.state,
    fingerprint: record.fingerprint,
    startedAt: record.startedAt,
    expiresAt: record.expiresAt,
  });
  assert.equal(head[1], FIXMAP_4, 'four defined fields encode as a fixmap');
  assert.equal(encoded.bytes[0], 1, 'the result is a schema version 1 value');
  const out = Buffer.allocUnsafe(head.length + RESULT_KEY.length + encoded.bytes.length - 1);
  head.copy(out, 0);
  out[1] = FIXMAP_5;
  RESULT_KEY.copy(out, head.length);
  encoded.bytes.copy(out, head.length + RESULT_KEY.length, 1);
  return out;
}

/** The first request failed: free the key so that a retry can run. */
export function abandonIdempotent(
  context: EngineContext,
  args: { tenantId: string; bucket: string } & HeldKey,
): void {
  const dbKey = idempotencyKey(args.tenantId, args.bucket, args.key);
  const existing = context.store.get<IdempotencyRecord>(DB.idempotency, dbKey);
  const held = args.claim === undefined || existing?.claim === args.claim;
  if (existing?.state === 'running' && existing.fingerprint === args.fingerprint && held)
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
