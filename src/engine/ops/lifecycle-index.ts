// The lifecycle due-date index, kept in the transaction of every change that moves a due time:
// a version written or removed (PUT, copy, complete, delete, delete marker, a replaced null
// version), its tags changed, an upload begun or ended, and the reindex steps that follow a
// configuration change (ops/lifecycle.ts).
//
// Invariants:
// - `setDue` is the only writer of `lifecycle-due` and `lifecycle-subjects`; it keeps exactly one
//   pair per subject (lifecycle-schema.ts).
// - A bucket without rules costs a write or a removal nothing here. A row that a configuration
//   delete has not cleared yet may outlive its version; the clear job, or the executor (which
//   finds the version gone), drops it.
// - The due time of a version depends on its neighbours in the key's chain (noncurrent since
//   its successor's creation; a delete marker is "expired" only while it is the only version;
//   NewerNoncurrentVersions counts the noncurrent versions above it). A write at the head moves
//   the head and the versions just below it; a removal moves the head and the removed version's
//   older neighbour; versions deeper in the chain only grow less eligible, which the executor's
//   check at the due time catches.
//
// Persists: `lifecycle-due`, `lifecycle-subjects`.

import {
  DB,
  versionKey,
  versionRange,
  type BucketRecord,
  type MultipartUploadRecord,
  type ObjectVersionRecord,
} from '../index/schema.js';
import {
  dueKey,
  uploadSubjectKey,
  versionSubjectKey,
  type LifecycleDueRecord,
  type LifecycleSubjectRecord,
} from '../index/lifecycle-schema.js';
import {
  currentExpiry,
  loneMarkerExpiry,
  newerNoncurrentMax,
  noncurrentExpiry,
  uploadAbortDue,
  DAY_MS,
  type Due,
} from '../lifecycle-rules.js';
import type { IndexStore } from '../index/store.js';
import type { EngineContext } from './context.js';

/** The length of a lifecycle day (setting `lifecycle.day`). */
export function lifecycleDayMs(context: Pick<EngineContext, 'settings'>): number {
  const day = context.settings.duration('lifecycle.day');
  return day > 0 ? day : DAY_MS;
}

/**
 * Makes the subject's entry due at `due`, or removes it (undefined). Writes nothing when the
 * entry is already so. Inside a transaction.
 */
export function setDue(
  store: IndexStore,
  subject: Buffer,
  due: number | undefined,
  where: LifecycleDueRecord,
): void {
  const held = store.get<LifecycleSubjectRecord>(DB.lifecycleSubjects, subject);
  if (held?.due === due) return;
  if (held) store.remove(DB.lifecycleDue, dueKey(held.due, subject));
  if (due === undefined) {
    if (held) store.remove(DB.lifecycleSubjects, subject);
    return;
  }
  store.put(DB.lifecycleSubjects, subject, { due });
  store.put(DB.lifecycleDue, dueKey(due, subject), {
    tenantId: where.tenantId,
    bucket: where.bucket,
  });
}

/** A version's place in its key's chain, as far as its due time depends on it. */
export interface ChainPlace {
  /** The next newer version (undefined: this one is the key's current version). */
  newer: ObjectVersionRecord | undefined;
  /** How many versions are newer, counted up to the limit asked for. */
  newerCount: number;
  /** Whether an older version exists. */
  hasOlder: boolean;
}

/** Reads the place of `version` in its chain, counting at most `countMax` newer versions. */
export function chainPlaceOf(
  store: IndexStore,
  bucketId: number,
  version: ObjectVersionRecord,
  countMax: number,
): ChainPlace {
  const own = versionKey(bucketId, version.key, version.seq);
  const chain = versionRange(bucketId, version.key);
  let newer: ObjectVersionRecord | undefined;
  let newerCount = 0;
  for (const entry of store.range<ObjectVersionRecord>(DB.versions, {
    start: own,
    end: chain.start,
    reverse: true,
    limit: countMax + 1,
  })) {
    if (entry.value.seq === version.seq) continue;
    newer ??= entry.value;
    newerCount += 1;
  }
  let hasOlder = false;
  for (const entry of store.range<ObjectVersionRecord>(DB.versions, {
    start: own,
    end: chain.end,
    limit: 2,
  })) {
    if (entry.value.seq !== version.seq) hasOlder = true;
  }
  return { newer, newerCount, hasOlder };
}

/** When the bucket's rules act on `version` at `place`; undefined: never (as things stand). */
export function versionDue(
  bucket: Pick<BucketRecord, 'lifecycle'>,
  version: ObjectVersionRecord,
  place: ChainPlace,
  dayMs: number,
): Due | undefined {
  const rules = bucket.lifecycle;
  if (!rules || rules.length === 0) return undefined;
  if (place.newer === undefined) {
    if (!version.deleteMarker) return currentExpiry(rules, version, dayMs);
    return place.hasOlder ? undefined : loneMarkerExpiry(rules, version, dayMs);
  }
  return noncurrentExpiry(rules, {
    version,
    since: place.newer.lastModified,
    newerNoncurrent: place.newerCount - 1,
    dayMs,
  });
}

/** Sets the entry of one version from the bucket's rules and its place. Inside a transaction. */
export function reindexVersion(
  context: EngineContext,
  bucket: BucketRecord,
  version: ObjectVersionRecord,
): void {
  const place = chainPlaceOf(
    context.store,
    bucket.id,
    version,
    newerNoncurrentMax(bucket.lifecycle) + 1,
  );
  const due = versionDue(bucket, version, place, lifecycleDayMs(context));
  setDue(context.store, versionSubjectKey(bucket.id, version.key, version.seq), due?.due, {
    tenantId: bucket.tenantId,
    bucket: bucket.name,
  });
}

/**
 * After `version` became its key's newest: the entries of the head and of the versions below it
 * whose place changed (the previous head became noncurrent; with NewerNoncurrentVersions N, the
 * version N + 1 below the new head now has N noncurrent versions above it).
 */
export function lifecycleAfterWrite(
  context: EngineContext,
  bucket: BucketRecord,
  version: ObjectVersionRecord,
): void {
  if (!bucket.lifecycle || bucket.lifecycle.length === 0) return;
  const keep = newerNoncurrentMax(bucket.lifecycle);
  const depth = keep > 0 ? keep + 2 : 2;
  const chain = [
    ...context.store.range<ObjectVersionRecord>(DB.versions, {
      ...versionRange(bucket.id, version.key),
      limit: depth,
    }),
  ];
  chain.forEach(({ value }, index) => {
    if (index < 2 || index === depth - 1) reindexVersion(context, bucket, value);
  });
}

/**
 * After `version` was inserted below its key's head (a replica's copy of an older version,
 * replica-version.ts): its own entry, and those of the versions below it whose place it moved
 * (its older neighbour's noncurrent time, the one NewerNoncurrentVersions + 1 below it).
 */
export function lifecycleAfterInsert(
  context: EngineContext,
  bucket: BucketRecord,
  version: ObjectVersionRecord,
): void {
  if (!bucket.lifecycle || bucket.lifecycle.length === 0) return;
  const below = newerNoncurrentMax(bucket.lifecycle) + 2;
  for (const { value } of context.store.range<ObjectVersionRecord>(DB.versions, {
    start: versionKey(bucket.id, version.key, version.seq),
    end: versionRange(bucket.id, version.key).end,
    limit: below + 1,
  }))
    reindexVersion(context, bucket, value);
}

/**
 * After `removed` left its chain: its own entry goes, and the head's and its older neighbour's
 * are set again.
 */
export function lifecycleAfterRemove(
  context: EngineContext,
  bucket: BucketRecord,
  removed: ObjectVersionRecord,
): void {
  // Without rules the bucket's rows are being cleared (or were never written): a row left for a
  // removed version is dropped by the clear job, or by the executor when it comes due (its
  // version is gone), so the data path pays nothing here.
  if (!bucket.lifecycle || bucket.lifecycle.length === 0) return;
  const where = { tenantId: bucket.tenantId, bucket: bucket.name };
  setDue(context.store, versionSubjectKey(bucket.id, removed.key, removed.seq), undefined, where);
  const chain = versionRange(bucket.id, removed.key);
  const gone = versionKey(bucket.id, removed.key, removed.seq);
  for (const { value } of context.store.range<ObjectVersionRecord>(DB.versions, {
    ...chain,
    limit: 1,
  }))
    reindexVersion(context, bucket, value);
  for (const { value } of context.store.range<ObjectVersionRecord>(DB.versions, {
    start: gone,
    end: chain.end,
    limit: 1,
  }))
    reindexVersion(context, bucket, value);
}

/** Sets (or, with `present` false, removes) the entry of a multipart upload. */
export function lifecycleOfUpload(
  context: EngineContext,
  bucket: BucketRecord,
  upload: Pick<MultipartUploadRecord, 'key' | 'uploadId' | 'initiatedAt'>,
  present: boolean,
): void {
  const subject = uploadSubjectKey(bucket.id, upload.key, upload.uploadId);
  const due = present
    ? uploadAbortDue(bucket.lifecycle, upload, lifecycleDayMs(context))?.due
    : undefined;
  if (due === undefined && !context.store.has(DB.lifecycleSubjects, subject)) return;
  setDue(context.store, subject, due, { tenantId: bucket.tenantId, bucket: bucket.name });
}

/** Removes a multipart upload's entry, its bucket's rules unknown (the bucket may be gone). */
export function forgetUpload(
  store: IndexStore,
  upload: Pick<MultipartUploadRecord, 'bucketId' | 'key' | 'uploadId' | 'tenantId' | 'bucket'>,
): void {
  const subject = uploadSubjectKey(upload.bucketId, upload.key, upload.uploadId);
  if (!store.has(DB.lifecycleSubjects, subject)) return;
  setDue(store, subject, undefined, { tenantId: upload.tenantId, bucket: upload.bucket });
}
