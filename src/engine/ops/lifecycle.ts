// Lifecycle commands: a bucket's configuration (put and delete), one step of the reindex that
// follows a change of it, and the execution of one due entry of the due-date index.
//
// Invariants:
// - A configuration change commits with a reindex job (`lifecycle-jobs`) in one transaction; the
//   job then walks the bucket's versions and uploads (or, after a delete, its index entries) in
//   bounded steps, each its own transaction, and resumes after a restart. Until it is done an
//   entry may still carry the old rules' time: the execution below re-derives the due time
//   from the rules as they are, and moves or drops an entry that is not due.
// - One due entry is one command: it is checked, acted on through the same engine functions
//   the data plane's deletes use (so usage, chunk references, events and the index stay exact),
//   and audited, all in the command's transaction. Every precondition is checked before the
//   first write, so a command that refuses writes nothing (CommandBatch's rule).
// - Object lock wins: a version under retention or legal hold is never removed by a rule; its
//   entry moves to the end of the retention (or a day later, for a legal hold).
//
// Persists: `buckets` (lifecycle), `lifecycle-jobs`, and through lifecycle-index.ts the index.

import {
  DB,
  bucketKeyPrefix,
  tenantChildKey,
  tenantKey,
  versionKey,
  multipartUploadKey,
  type BucketRecord,
  type MultipartUploadRecord,
  type ObjectVersionRecord,
  type TenantRecord,
} from '../index/schema.js';
import {
  bucketSubjectRange,
  decodeDueKey,
  decodeSubjectKey,
  jobKey,
  SUBJECT_UPLOAD,
  type DecodedSubject,
  type LifecycleDueRecord,
  type LifecycleJobRecord,
  type LifecycleRuleRecord,
} from '../index/lifecycle-schema.js';
import { newerNoncurrentMax, uploadAbortDue, type LifecycleAction } from '../lifecycle-rules.js';
import {
  chainPlaceOf,
  lifecycleDayMs,
  lifecycleOfUpload,
  reindexVersion,
  setDue,
  versionDue,
} from './lifecycle-index.js';
import { requireActiveTenant } from './control.js';
import { deleteObject, findNullVersion, requireBucket } from './objects.js';
import { abortMultipartUpload } from './multipart.js';
import { writeAudit } from './audit.js';
import { versionProtection } from './tenant-delete.js';
import type { EngineContext } from './context.js';
import { BadRequest } from '../../util/errors.js';

/** S3's limit on the rules of one configuration. */
export const LIFECYCLE_RULES_MAX = 1000;
/** Versions, uploads or index entries one reindex step visits. */
export const REINDEX_STEP_MAX = 1000;

const wakers = new Set<() => void>();

/** Lets the executor hear of configuration changes (a hint; it also polls). */
export function onLifecycleChange(wake: () => void): () => void {
  wakers.add(wake);
  return () => wakers.delete(wake);
}

function wakeSoon(): void {
  // The hint fires after this transaction: the executor's reads then see it.
  setImmediate(() => {
    for (const wake of wakers) wake();
  });
}

function startJob(
  context: EngineContext,
  bucket: BucketRecord,
  phase: LifecycleJobRecord['phase'],
): void {
  const job: LifecycleJobRecord = {
    bucketId: bucket.id,
    tenantId: bucket.tenantId,
    bucket: bucket.name,
    phase,
    startedAt: context.now(),
  };
  context.store.put(DB.lifecycleJobs, jobKey(bucket.id), job);
  wakeSoon();
}

/**
 * Stores a bucket's rules, as src/service/lifecycle.ts validated them, and starts the reindex.
 * The engine checks only what its own index relies on (a list within the limit, ids unique).
 */
export function putBucketLifecycle(
  context: EngineContext,
  args: { tenantId: string; bucket: string; rules: LifecycleRuleRecord[] },
): LifecycleRuleRecord[] {
  requireActiveTenant(context, args.tenantId);
  const bucket = requireBucket(context, args.tenantId, args.bucket);
  const rules = args.rules as unknown;
  if (!Array.isArray(rules) || rules.length === 0 || rules.length > LIFECYCLE_RULES_MAX)
    throw BadRequest(`a lifecycle configuration holds 1 to ${LIFECYCLE_RULES_MAX} rules`);
  const ids = new Set((rules as LifecycleRuleRecord[]).map((rule) => rule.id));
  if (ids.size !== rules.length) throw BadRequest('lifecycle rule ids must be unique');
  bucket.lifecycle = args.rules;
  context.store.put(DB.buckets, tenantChildKey(bucket.tenantId, bucket.name), bucket);
  startJob(context, bucket, 'versions');
  return args.rules;
}

/** Removes a bucket's rules (nothing to remove is fine, as on S3) and clears its entries. */
export function deleteBucketLifecycle(
  context: EngineContext,
  args: { tenantId: string; bucket: string },
): void {
  requireActiveTenant(context, args.tenantId);
  const bucket = requireBucket(context, args.tenantId, args.bucket);
  if (bucket.lifecycle === undefined) return;
  delete bucket.lifecycle;
  context.store.put(DB.buckets, tenantChildKey(bucket.tenantId, bucket.name), bucket);
  startJob(context, bucket, 'clear');
}

/** The bucket ids with a reindex job, for the executor (outside a transaction is fine). */
export function pendingJobs(context: Pick<EngineContext, 'store'>): number[] {
  return [...context.store.range<LifecycleJobRecord>(DB.lifecycleJobs, {})].map(
    ({ value }) => value.bucketId,
  );
}

/** The exclusive successor of `key`: the first key a range after it may hold. */
function after(key: Buffer): Buffer {
  return Buffer.concat([key, Buffer.from([0])]);
}

/** One bounded step of a bucket's reindex job; `done` once the job is gone. */
export function reindexStep(
  context: EngineContext,
  args: { bucketId: number; limit?: number },
): { done: boolean; visited: number } {
  const { store } = context;
  const job = store.get<LifecycleJobRecord>(DB.lifecycleJobs, jobKey(args.bucketId));
  if (!job) return { done: true, visited: 0 };
  const limit = args.limit ?? REINDEX_STEP_MAX;
  const found = store.get<BucketRecord>(DB.buckets, tenantChildKey(job.tenantId, job.bucket));
  const bucket = found?.id === job.bucketId ? found : undefined;
  if (!bucket && job.phase !== 'clear') {
    job.phase = 'clear';
    delete job.after;
  }
  const prefix = bucketKeyPrefix(job.bucketId);
  const whole = { start: prefix, end: Buffer.concat([prefix, Buffer.from([0xff])]) };
  const range =
    job.phase === 'clear'
      ? bucketSubjectRange(job.bucketId)
      : job.after
        ? { start: after(job.after), end: whole.end }
        : whole;
  if (job.phase === 'clear' && job.after) range.start = after(job.after);
  const db =
    job.phase === 'versions'
      ? DB.versions
      : job.phase === 'uploads'
        ? DB.multipart
        : DB.lifecycleSubjects;
  const page = [...store.range<object>(db, { ...range, limit })];
  const where = { tenantId: job.tenantId, bucket: job.bucket };
  for (const { key, value } of page) {
    if (job.phase === 'versions' && bucket)
      reindexVersion(context, bucket, value as ObjectVersionRecord);
    else if (job.phase === 'uploads' && bucket)
      lifecycleOfUpload(context, bucket, value as MultipartUploadRecord, true);
    else setDue(store, Buffer.from(key), undefined, where);
  }
  const last = page.at(-1);
  if (last && page.length === limit) {
    job.after = Buffer.from(last.key);
  } else if (job.phase === 'versions') {
    job.phase = 'uploads';
    delete job.after;
  } else {
    store.remove(DB.lifecycleJobs, jobKey(job.bucketId));
    return { done: true, visited: page.length };
  }
  store.put(DB.lifecycleJobs, jobKey(job.bucketId), job);
  return { done: false, visited: page.length };
}

/** What running one due entry did. */
export type LifecycleOutcome =
  | LifecycleAction
  /** The entry was gone already (another pass, or a write, moved it). */
  | 'gone'
  /** Its subject or bucket is gone, or no rule covers it any more. */
  | 'dropped'
  /** A rule covers it, but later than this entry said (a reindex had not reached it). */
  | 'moved'
  /** Object lock holds the version: the entry moved to when the lock can end. */
  | 'held'
  /** The tenant is disabled: lifecycle waits a day and looks again. */
  | 'paused';

/**
 * The object-lock hook: until when a lock forbids removing `version`, or undefined when nothing
 * does. Lifecycle never bypasses a lock (a governance bypass is a person's decision, not a
 * rule's); a legal hold has no end, so the version is looked at again a day later.
 */
export function lockHoldsUntil(
  version: ObjectVersionRecord,
  now: number,
  dayMs: number,
): number | undefined {
  // The same fail-closed reading of the lock fields as a tenant purge's: a lock field that is
  // present but unreadable protects.
  const protection = versionProtection(version, now);
  if (protection.legalHeld) return now + dayMs;
  if (!protection.retained) return undefined;
  const until = version.retention?.retainUntil;
  return typeof until === 'number' && until > now ? until : now + dayMs;
}

/** Runs the entry of `lifecycle-due` under `dueKey` if it is still there and due. */
export function runLifecycleEntry(
  context: EngineContext,
  args: { dueKey: Buffer },
): LifecycleOutcome {
  const { store } = context;
  const raw = Buffer.from(args.dueKey);
  const where = store.get<LifecycleDueRecord>(DB.lifecycleDue, raw);
  if (!where) return 'gone';
  const { subject } = decodeDueKey(raw);
  const decoded = decodeSubjectKey(subject);
  const tenant = store.get<TenantRecord>(DB.tenants, tenantKey(where.tenantId));
  const found = store.get<BucketRecord>(DB.buckets, tenantChildKey(where.tenantId, where.bucket));
  if (!tenant || tenant.state === 'deleted' || found?.id !== decoded.bucketId) {
    setDue(store, Buffer.from(subject), undefined, where);
    return 'dropped';
  }
  const dayMs = lifecycleDayMs(context);
  if (tenant.state !== 'active') {
    setDue(store, Buffer.from(subject), context.now() + dayMs, where);
    return 'paused';
  }
  return decoded.kind === SUBJECT_UPLOAD
    ? runUpload(context, { bucket: found, decoded, subject: Buffer.from(subject), dayMs })
    : runVersion(context, { bucket: found, decoded, subject: Buffer.from(subject), dayMs });
}

interface EntryTarget {
  readonly bucket: BucketRecord;
  readonly decoded: DecodedSubject;
  readonly subject: Buffer;
  readonly dayMs: number;
}

function runVersion(context: EngineContext, target: EntryTarget): LifecycleOutcome {
  const { store } = context;
  const { bucket, decoded, subject, dayMs } = target;
  const where = { tenantId: bucket.tenantId, bucket: bucket.name };
  const now = context.now();
  const version = store.get<ObjectVersionRecord>(
    DB.versions,
    versionKey(bucket.id, decoded.key, decoded.seq),
  );
  if (!version) {
    setDue(store, subject, undefined, where);
    return 'dropped';
  }
  const place = chainPlaceOf(store, bucket.id, version, newerNoncurrentMax(bucket.lifecycle) + 1);
  const wanted = versionDue(bucket, version, place, dayMs);
  if (!wanted || wanted.due > now) {
    setDue(store, subject, wanted?.due, where);
    return wanted ? 'moved' : 'dropped';
  }
  // The version a rule would remove: itself, except when expiring the current version of a
  // Suspended bucket, which replaces the key's null version (S3's null delete marker).
  const removed =
    wanted.action !== 'expire-current' || bucket.versioning === 'Unversioned'
      ? version
      : bucket.versioning === 'Suspended'
        ? findNullVersion(context, bucket.id, version.key)
        : undefined;
  const heldUntil = removed && lockHoldsUntil(removed, now, dayMs);
  if (heldUntil !== undefined) {
    setDue(store, subject, heldUntil, where);
    return 'held';
  }
  const named = { tenantId: bucket.tenantId, bucket: bucket.name, key: version.key };
  if (wanted.action === 'expire-current') deleteObject(context, named);
  else deleteObject(context, { ...named, versionId: version.versionId });
  auditExpiry(context, {
    bucket,
    action: wanted.action,
    resource: `${bucket.name}/${version.key}`,
    versionId: wanted.action === 'expire-current' ? undefined : version.versionId,
    ruleId: wanted.ruleId,
  });
  return wanted.action;
}

function runUpload(context: EngineContext, target: EntryTarget): LifecycleOutcome {
  const { store } = context;
  const { bucket, decoded, subject, dayMs } = target;
  const where = { tenantId: bucket.tenantId, bucket: bucket.name };
  const upload = store.get<MultipartUploadRecord>(
    DB.multipart,
    multipartUploadKey(bucket.id, decoded.key, decoded.uploadId),
  );
  if (!upload) {
    setDue(store, subject, undefined, where);
    return 'dropped';
  }
  const wanted = uploadAbortDue(bucket.lifecycle, upload, dayMs);
  if (!wanted || wanted.due > context.now()) {
    setDue(store, subject, wanted?.due, where);
    return wanted ? 'moved' : 'dropped';
  }
  abortMultipartUpload(context, {
    tenantId: bucket.tenantId,
    bucket: bucket.name,
    key: upload.key,
    uploadId: upload.uploadId,
  });
  auditExpiry(context, {
    bucket,
    action: 'abort',
    resource: `${bucket.name}/${upload.key}`,
    versionId: undefined,
    ruleId: wanted.ruleId,
  });
  return 'abort';
}

/** Audit actions of lifecycle's changes, by what a rule did. */
const AUDIT_ACTIONS: Readonly<Record<LifecycleAction, string>> = {
  'expire-current': 'lifecycle:ExpireObject',
  'expire-noncurrent': 'lifecycle:ExpireNoncurrentVersion',
  'remove-marker': 'lifecycle:RemoveExpiredDeleteMarker',
  abort: 'lifecycle:AbortIncompleteMultipartUpload',
};

function auditExpiry(
  context: EngineContext,
  args: {
    bucket: BucketRecord;
    action: LifecycleAction;
    resource: string;
    versionId: string | undefined;
    ruleId: string;
  },
): void {
  writeAudit(context, {
    requestId: 'lifecycle',
    tenantId: args.bucket.tenantId,
    actor: 'lifecycle',
    action: AUDIT_ACTIONS[args.action],
    resource:
      args.versionId === undefined ? args.resource : `${args.resource}?versionId=${args.versionId}`,
    outcome: 'allowed',
    status: 204,
    reason: `rule ${args.ruleId}`,
  });
}
