// Object lock and the attributes a new version is born with, as every transport asks for them:
// the retention and legal hold a write requests (S3's x-amz-object-lock-* headers; the native
// API's retention routes), a bucket's lock configuration, who may bypass GOVERNANCE retention,
// and whether a version may be deleted (for the lifecycle executor).
//
// The rules that decide against the stored state (may this retention be shortened, may this
// version go) run in the engine's transaction (engine/ops/object-lock.ts), where no other write
// can come between the check and the change; this module is their one door for transports:
// parse and check what the client sent, decide the bypass, and send the command.
//
// Invariants:
// - GOVERNANCE retention is bypassed only when the request asks for it and its key is
//   admin-scoped for the bucket; the audit row of such a request says so (reason
//   `bypass-governance-retention`). The native API never asks.
// - COMPLIANCE retention and legal holds are never bypassed.
//
// Persists: nothing itself; buckets and versions through the engine (`setObjectLockConfig`,
// `putRetention`, `putLegalHold`, and the write commands' `lock` and `tags`).

import type { CommandArgs } from '../engine/commands.js';
import type { VersionTarget } from '../engine/ops/object-meta.js';
import type {
  BucketRecord,
  ObjectTag,
  ObjectVersionRecord,
  RetentionMode,
  ServerSideEncryption,
} from '../engine/index/schema.js';
import {
  deletionBlock,
  isRetentionMode,
  type LockDefault,
  type NewVersionLock,
} from '../engine/ops/object-lock.js';
import { allows } from '../security/scopes.js';
import { BadRequest } from '../util/errors.js';
import type { RequestContext } from './context.js';
import type { ObjectService } from './objects.js';

export { DEFAULT_RETENTION_DAYS_MAX, YEAR_DAYS } from '../engine/ops/object-lock.js';
export type { LockDefault, NewVersionLock };

/** What the audit row of a request that bypassed GOVERNANCE retention gives as its reason. */
export const BYPASS_AUDIT_REASON = 'bypass-governance-retention';

/**
 * The attributes a new version is written with besides its bytes: its lock, its tags and the
 * S3 encryption it reports (encryption.ts).
 */
export interface NewVersionAttributes {
  readonly lock?: NewVersionLock | undefined;
  readonly tags?: readonly ObjectTag[] | undefined;
  readonly sse?: ServerSideEncryption | undefined;
}

/** The attributes as the commands that write a version take them (`putObject`, ...). */
export interface NewVersionArgs {
  lock?: NewVersionLock;
  tags?: ObjectTag[];
  sse?: ServerSideEncryption;
}

/** Adds a new version's attributes to the arguments of a write command. */
export function addNewVersionAttributes(
  attributes: NewVersionAttributes | undefined,
  args: NewVersionArgs,
): void {
  if (attributes?.lock !== undefined) args.lock = { ...attributes.lock };
  if (attributes?.tags !== undefined) args.tags = attributes.tags.map((tag) => ({ ...tag }));
  if (attributes?.sse !== undefined) args.sse = { ...attributes.sse };
}

/**
 * True while a version may not be deleted by anyone: a legal hold, or an unexpired retention of
 * either mode (an expiry never bypasses GOVERNANCE). The lifecycle executor asks this before
 * expiring a version; the engine's delete checks the same rule again when it commits.
 */
export function isDeletionBlocked(version: ObjectVersionRecord, now: number): boolean {
  return deletionBlock(version, now, false) !== undefined;
}

/**
 * An ISO 8601 date-time with a zone (S3's RetainUntilDate: `2030-01-01T00:00:00Z`, with any
 * fraction of a second): epoch milliseconds, or a 400.
 */
export function parseLockDate(text: string): number {
  const match =
    /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:?\d{2})$/i.exec(
      text.trim(),
    );
  if (!match) throw BadRequest('the retain-until date must be an ISO 8601 date-time with a zone');
  const [date = '', time = '', fraction = '', zone = 'Z'] = match.slice(1);
  const ms = fraction === '' ? '' : `.${fraction.padEnd(3, '0').slice(0, 3)}`;
  const normalizedZone =
    zone.toUpperCase() === 'Z' ? 'Z' : zone.replace(/^([+-]\d{2})(\d{2})$/, '$1:$2');
  const value = Date.parse(`${date}T${time}${ms}${normalizedZone}`);
  if (!Number.isFinite(value)) throw BadRequest('the retain-until date is not a valid date');
  return value;
}

/**
 * A new version's lock from its three parts as the client sent them (absent: not sent): a mode
 * and a date go together, the date in the future; the legal hold is ON or OFF.
 */
export function newVersionLockOf(
  input: {
    readonly mode?: string | undefined;
    readonly retainUntil?: string | undefined;
    readonly legalHold?: string | undefined;
  },
  now: number,
): NewVersionLock | undefined {
  const lock: NewVersionLock = {};
  if ((input.mode === undefined) !== (input.retainUntil === undefined))
    throw BadRequest('an object lock mode and a retain-until date must be given together');
  if (input.mode !== undefined && input.retainUntil !== undefined) {
    if (!isRetentionMode(input.mode)) throw BadRequest('the lock mode is GOVERNANCE or COMPLIANCE');
    const until = parseLockDate(input.retainUntil);
    if (until <= now) throw BadRequest('the retain-until date must be in the future');
    lock.mode = input.mode;
    lock.retainUntil = until;
  }
  if (input.legalHold !== undefined) {
    if (input.legalHold !== 'ON' && input.legalHold !== 'OFF')
      throw BadRequest('the legal hold status is ON or OFF');
    lock.legalHold = input.legalHold;
  }
  return lock.mode === undefined && lock.legalHold === undefined ? undefined : lock;
}

/**
 * Whether this request bypasses GOVERNANCE retention: it asks to, and its key is admin-scoped
 * for the object. A request that asks without the scope is served without the bypass (as S3
 * ignores the header without s3:BypassGovernanceRetention), so a protected version stays.
 */
export function governanceBypass(
  ctx: RequestContext,
  target: { readonly bucket: string; readonly key: string },
  requested: boolean,
): boolean {
  if (!requested) return false;
  const allowed = allows(ctx.principal.scope, { verb: 'admin', ...target });
  if (allowed) ctx.audit.reason = BYPASS_AUDIT_REASON;
  return allowed;
}

/** Sets a bucket's object lock configuration (enabling it) and its default retention. */
export function putObjectLockConfig(
  objects: ObjectService,
  ctx: RequestContext,
  bucket: BucketRecord,
  rule: LockDefault | undefined,
): Promise<BucketRecord> {
  const args: CommandArgs<'setObjectLockConfig'> = {
    tenantId: ctx.principal.tenant.id,
    bucket: bucket.name,
  };
  if (rule !== undefined) args.rule = { ...rule };
  return objects.commit(ctx, 'setObjectLockConfig', args, 200);
}

/** A version to change: its bucket, key and version id (undefined: the current version). */
export interface VersionAddress {
  readonly bucket: BucketRecord;
  readonly key: string;
  readonly versionId?: string | undefined;
}

function versionArgs(ctx: RequestContext, target: VersionAddress): VersionTarget {
  const args: VersionTarget = {
    tenantId: ctx.principal.tenant.id,
    bucket: target.bucket.name,
    key: target.key,
  };
  if (target.versionId !== undefined) args.versionId = target.versionId;
  return args;
}

/**
 * Sets, extends or (retention undefined) removes a version's retention. Anything but an
 * extension in the same mode needs `bypass` (governanceBypass) and GOVERNANCE.
 */
export function putRetention(
  objects: ObjectService,
  ctx: RequestContext,
  target: VersionAddress,
  retention: { readonly mode: RetentionMode; readonly retainUntil: number } | undefined,
  bypass: boolean,
  status = 200,
): Promise<ObjectVersionRecord> {
  const args: CommandArgs<'putRetention'> = {
    ...versionArgs(ctx, target),
    mode: retention?.mode ?? null,
  };
  if (retention !== undefined) args.retainUntil = retention.retainUntil;
  if (bypass) args.bypassGovernance = true;
  return objects.commit(ctx, 'putRetention', args, status);
}

/** Sets a version's legal hold. */
export function putLegalHold(
  objects: ObjectService,
  ctx: RequestContext,
  target: VersionAddress,
  status: 'ON' | 'OFF',
  answerStatus = 200,
): Promise<ObjectVersionRecord> {
  const args: CommandArgs<'putLegalHold'> = { ...versionArgs(ctx, target), status };
  return objects.commit(ctx, 'putLegalHold', args, answerStatus);
}
