// Object lock's rules where they must hold: in the transaction that changes a version or a
// bucket. A bucket's lock configuration (enabled, default retention in days or years), the lock
// a new version is written with (explicit, else the bucket's default), which retention changes
// are allowed, and whether a version may be deleted. They are S3's rules (AWS "Object Lock"):
//
// - A version with legal hold ON cannot be deleted, whatever its retention.
// - Under COMPLIANCE retention (until a future date) a version cannot be deleted, and its
//   retention can only be extended in the same mode, by anyone.
// - Under GOVERNANCE retention the same holds unless the request bypasses governance retention
//   (S3's `x-amz-bypass-governance-retention`): then it may be deleted, shortened, removed or
//   made COMPLIANCE. Who may bypass is the service's decision (service/object-lock.ts): the
//   engine only obeys the flag it is sent.
// - A retention whose date has passed protects nothing and may be replaced freely.
//
// The service layer (src/service/object-lock.ts) is where the transports meet these rules; it
// re-exports the deletion predicate for the lifecycle executor.
//
// Persists: BucketRecord.objectLock and .lockDefault; ObjectVersionRecord.retention and
// .legalHold (through the commands that write versions).

import {
  DB,
  tenantChildKey,
  type BucketRecord,
  type ObjectVersionRecord,
  type RetentionMode,
} from '../index/schema.js';
import type { EngineContext } from './context.js';
import { requireActiveTenant } from './control.js';
import { requireBucket } from './objects.js';
import { BadRequest, Conflict, Forbidden } from '../../util/errors.js';

const DAY_MS = 86_400_000;
/** A default retention's years are 365 days each, as S3 counts them. */
export const YEAR_DAYS = 365;
/** The longest default retention accepted (100 years), so dates stay far inside Date's range. */
export const DEFAULT_RETENTION_DAYS_MAX = 100 * YEAR_DAYS;

/** A bucket's default retention: a mode and a period of days or years (exactly one). */
export interface LockDefault {
  mode: RetentionMode;
  days?: number;
  years?: number;
}

/** The lock a new version is written with, as the request gave it. */
export interface NewVersionLock {
  mode?: RetentionMode;
  retainUntil?: number;
  legalHold?: 'ON' | 'OFF';
}

export function isRetentionMode(value: unknown): value is RetentionMode {
  return value === 'GOVERNANCE' || value === 'COMPLIANCE';
}

/** Checks a default retention's shape (the transports parse it; the engine trusts nothing). */
export function checkLockDefault(rule: unknown): LockDefault {
  const { mode, days, years } = (rule ?? {}) as Record<string, unknown>;
  if (!isRetentionMode(mode)) throw BadRequest('the default mode is GOVERNANCE or COMPLIANCE');
  if ((days === undefined) === (years === undefined))
    throw BadRequest('a default retention has either days or years');
  const period = days ?? years;
  const limit = days !== undefined ? DEFAULT_RETENTION_DAYS_MAX : DEFAULT_RETENTION_DAYS_MAX / 365;
  if (!Number.isSafeInteger(period) || (period as number) < 1 || (period as number) > limit)
    throw BadRequest(`the default retention period is 1 to ${limit} ${days ? 'days' : 'years'}`);
  return days !== undefined ? { mode, days: days as number } : { mode, years: years as number };
}

/**
 * Sets a bucket's object lock configuration: enables object lock (a bucket whose versioning is
 * Enabled may be given it after creation; never Unversioned or Suspended, as S3 refuses with
 * 409), and sets or clears its default retention.
 */
export function setObjectLockConfig(
  context: EngineContext,
  args: { tenantId: string; bucket: string; rule?: unknown },
): BucketRecord {
  requireActiveTenant(context, args.tenantId);
  const bucket = requireBucket(context, args.tenantId, args.bucket);
  if (!bucket.objectLock && bucket.versioning !== 'Enabled')
    throw Conflict('object lock needs a bucket whose versioning is Enabled');
  const rule =
    args.rule === undefined || args.rule === null ? undefined : checkLockDefault(args.rule);
  bucket.objectLock = true;
  if (rule) bucket.lockDefault = rule;
  else delete bucket.lockDefault;
  context.store.put(DB.buckets, tenantChildKey(args.tenantId, args.bucket), bucket);
  return bucket;
}

/**
 * The lock a new version (not a delete marker) is written with: the request's retention and
 * legal hold, else the bucket's default retention. A lock asked for in a bucket without object
 * lock is refused, as S3 refuses it. Writes nothing: a command calls it with its preconditions,
 * before its first write, and assigns the result to the version it builds.
 */
export function newVersionLock(
  context: EngineContext,
  bucket: BucketRecord,
  lock: NewVersionLock | undefined,
): Pick<ObjectVersionRecord, 'retention' | 'legalHold'> {
  const asked = lock !== undefined && (lock.mode !== undefined || lock.legalHold !== undefined);
  if (asked && !bucket.objectLock)
    throw BadRequest(`bucket ${bucket.name} has no object lock configuration`);
  const locked: Pick<ObjectVersionRecord, 'retention' | 'legalHold'> = {};
  if (!bucket.objectLock) return locked;
  const now = context.now();
  if (lock?.mode !== undefined) {
    if (!isRetentionMode(lock.mode)) throw BadRequest('mode must be GOVERNANCE or COMPLIANCE');
    const until = lock.retainUntil;
    if (typeof until !== 'number' || !Number.isFinite(until) || until <= now)
      throw BadRequest('the retain-until date must be in the future');
    locked.retention = { mode: lock.mode, retainUntil: until };
  } else if (bucket.lockDefault) {
    const rule = bucket.lockDefault;
    const days = rule.days ?? (rule.years ?? 0) * YEAR_DAYS;
    locked.retention = { mode: rule.mode, retainUntil: now + days * DAY_MS };
  }
  // Typed by the caller, but received over the engine's socket: checked as unknown.
  const hold: unknown = lock?.legalHold;
  if (hold !== undefined) {
    if (hold !== 'ON' && hold !== 'OFF') throw BadRequest('legal hold is ON or OFF');
    locked.legalHold = hold;
  }
  return locked;
}

/**
 * Why a version may not be deleted now (undefined: it may). `bypassGovernance` lifts a
 * GOVERNANCE retention, never COMPLIANCE nor a legal hold.
 */
export function deletionBlock(
  version: ObjectVersionRecord,
  now: number,
  bypassGovernance = false,
): 'legal-hold' | 'compliance' | 'governance' | undefined {
  if (version.legalHold === 'ON') return 'legal-hold';
  const retention = version.retention;
  if (retention === undefined || retention.retainUntil <= now) return undefined;
  if (retention.mode === 'COMPLIANCE') return 'compliance';
  return bypassGovernance ? undefined : 'governance';
}

/** Refuses (403) the delete of a version that its lock protects. */
export function refuseLockedDelete(
  version: ObjectVersionRecord,
  now: number,
  bypassGovernance: boolean,
): void {
  const block = deletionBlock(version, now, bypassGovernance);
  if (block === undefined) return;
  const why =
    block === 'legal-hold'
      ? 'a legal hold'
      : block === 'compliance'
        ? 'COMPLIANCE retention'
        : 'GOVERNANCE retention (not bypassed)';
  throw Forbidden(`version ${version.versionId} of ${version.key} is protected by ${why}`, {
    lock: block,
  });
}

/**
 * Checks a change of a version's retention to `next` (undefined: removed). Extending in the same
 * mode is always allowed; anything else on an active retention needs it to be GOVERNANCE and
 * bypassed (COMPLIANCE may only be extended).
 */
export function checkRetentionChange(
  current: ObjectVersionRecord['retention'],
  next: { mode: RetentionMode; retainUntil: number } | undefined,
  now: number,
  bypassGovernance: boolean,
): void {
  if (current === undefined || current.retainUntil <= now) return;
  const extends_ =
    next !== undefined && next.mode === current.mode && next.retainUntil >= current.retainUntil;
  if (extends_) return;
  if (current.mode === 'COMPLIANCE')
    throw Forbidden('COMPLIANCE retention can only be extended, never shortened or changed');
  if (!bypassGovernance)
    throw Forbidden(
      'GOVERNANCE retention can only be extended unless governance retention is bypassed',
    );
}
