// What a bucket's lifecycle rules say about one version or upload: whether a rule's filter
// covers it, and when the earliest action falls due. Pure functions of the rules, the subject
// and the length of a lifecycle day; the index (ops/lifecycle-index.ts), the executor and the
// `x-amz-expiration` header all ask here, so they cannot disagree.
//
// S3's timing: a rule of N days acts at the first midnight UTC at or after the object's creation
// plus N days (AWS rounds "to the next day midnight UTC"); a rule with a Date acts on that date's
// midnight, on every object created before or after it. `dayMs` is the length of a lifecycle
// day: 86,400,000 in production; the setting `lifecycle.day` shortens it for tests of a running
// service, as Ceph RGW's `rgw_lc_debug_interval` does (midnight is then a multiple of dayMs).
//
// Persists: nothing.

import type { LifecycleRuleRecord } from './index/lifecycle-schema.js';
import type { ObjectTag, ObjectVersionRecord } from './index/schema.js';

export const DAY_MS = 86_400_000;

/** The action a due entry stands for. */
export type LifecycleAction = 'expire-current' | 'expire-noncurrent' | 'remove-marker' | 'abort';

export interface Due {
  readonly due: number;
  readonly action: LifecycleAction;
  readonly ruleId: string;
}

/** What a rule's filter reads of a version or an upload. */
export interface FilterSubject {
  readonly key: string;
  readonly tags?: readonly ObjectTag[] | undefined;
  /** Undefined for uploads and delete markers: size filters then never match. */
  readonly size?: number | undefined;
}

/** The first multiple of `dayMs` at or after `ms` (midnight UTC when dayMs is a day). */
export function nextMidnight(ms: number, dayMs: number): number {
  return Math.ceil(ms / dayMs) * dayMs;
}

export function filterCovers(rule: LifecycleRuleRecord, subject: FilterSubject): boolean {
  const { filter } = rule;
  if (filter.prefix !== undefined && !subject.key.startsWith(filter.prefix)) return false;
  for (const wanted of filter.tags ?? []) {
    if (!subject.tags?.some((tag) => tag.key === wanted.key && tag.value === wanted.value))
      return false;
  }
  if (filter.sizeGreaterThan !== undefined || filter.sizeLessThan !== undefined) {
    if (subject.size === undefined) return false;
    if (filter.sizeGreaterThan !== undefined && !(subject.size > filter.sizeGreaterThan))
      return false;
    if (filter.sizeLessThan !== undefined && !(subject.size < filter.sizeLessThan)) return false;
  }
  return true;
}

function earliest(found: Due | undefined, candidate: Due): Due {
  return found === undefined || candidate.due < found.due ? candidate : found;
}

function enabled(rules: readonly LifecycleRuleRecord[] | undefined): LifecycleRuleRecord[] {
  return (rules ?? []).filter((rule) => rule.status === 'Enabled');
}

/** The current version's expiry (a version that is not a delete marker). */
export function currentExpiry(
  rules: readonly LifecycleRuleRecord[] | undefined,
  version: Pick<ObjectVersionRecord, 'key' | 'tags' | 'size' | 'lastModified'>,
  dayMs: number,
): Due | undefined {
  let found: Due | undefined;
  for (const rule of enabled(rules)) {
    const expiration = rule.expiration;
    if (!expiration || !filterCovers(rule, version)) continue;
    if (expiration.days !== undefined) {
      const due = nextMidnight(version.lastModified + expiration.days * dayMs, dayMs);
      found = earliest(found, { due, action: 'expire-current', ruleId: rule.id });
    }
    if (expiration.date !== undefined)
      found = earliest(found, { due: expiration.date, action: 'expire-current', ruleId: rule.id });
  }
  return found;
}

/**
 * A delete marker that is its key's only version (an "expired object delete marker"): removed at
 * once by a rule with ExpiredObjectDeleteMarker, or after the days of an Expiration by days (S3
 * removes such markers for those rules too). Markers have no tags or size: a rule with a tag or
 * size filter does not cover them.
 */
export function loneMarkerExpiry(
  rules: readonly LifecycleRuleRecord[] | undefined,
  marker: Pick<ObjectVersionRecord, 'key' | 'lastModified'>,
  dayMs: number,
): Due | undefined {
  let found: Due | undefined;
  for (const rule of enabled(rules)) {
    const expiration = rule.expiration;
    if (!expiration || !filterCovers(rule, { key: marker.key })) continue;
    if (expiration.expiredObjectDeleteMarker === true)
      found = earliest(found, {
        due: marker.lastModified,
        action: 'remove-marker',
        ruleId: rule.id,
      });
    if (expiration.days !== undefined) {
      const due = nextMidnight(marker.lastModified + expiration.days * dayMs, dayMs);
      found = earliest(found, { due, action: 'remove-marker', ruleId: rule.id });
    }
  }
  return found;
}

/**
 * A noncurrent version (or delete marker): `since` is when it became noncurrent (its successor's
 * creation), `newerNoncurrent` how many noncurrent versions are newer than it. A rule with
 * NewerNoncurrentVersions N keeps the N newest noncurrent versions whatever their age.
 */
export function noncurrentExpiry(
  rules: readonly LifecycleRuleRecord[] | undefined,
  args: {
    version: Pick<ObjectVersionRecord, 'key' | 'tags' | 'size' | 'deleteMarker'>;
    since: number;
    newerNoncurrent: number;
    dayMs: number;
  },
): Due | undefined {
  const { version, since, newerNoncurrent, dayMs } = args;
  const subject: FilterSubject = version.deleteMarker
    ? { key: version.key }
    : { key: version.key, tags: version.tags, size: version.size };
  let found: Due | undefined;
  for (const rule of enabled(rules)) {
    const noncurrent = rule.noncurrentExpiration;
    if (!noncurrent || !filterCovers(rule, subject)) continue;
    const keep = noncurrent.newerNoncurrentVersions;
    if (keep !== undefined && newerNoncurrent < keep) continue;
    const due = nextMidnight(since + noncurrent.noncurrentDays * dayMs, dayMs);
    found = earliest(found, { due, action: 'expire-noncurrent', ruleId: rule.id });
  }
  return found;
}

/** An incomplete multipart upload (filters by prefix only: S3 refuses tags with this action). */
export function uploadAbortDue(
  rules: readonly LifecycleRuleRecord[] | undefined,
  upload: { key: string; initiatedAt: number },
  dayMs: number,
): Due | undefined {
  let found: Due | undefined;
  for (const rule of enabled(rules)) {
    const abort = rule.abortIncompleteMultipartUpload;
    if (!abort || !filterCovers(rule, { key: upload.key })) continue;
    const due = nextMidnight(upload.initiatedAt + abort.daysAfterInitiation * dayMs, dayMs);
    found = earliest(found, { due, action: 'abort', ruleId: rule.id });
  }
  return found;
}

/** The largest NewerNoncurrentVersions of the enabled rules (0: none keeps versions by count). */
export function newerNoncurrentMax(rules: readonly LifecycleRuleRecord[] | undefined): number {
  let max = 0;
  for (const rule of enabled(rules))
    max = Math.max(max, rule.noncurrentExpiration?.newerNoncurrentVersions ?? 0);
  return max;
}

/**
 * S3's `x-amz-expiration` value for a current version a rule will expire:
 * `expiry-date="Fri, 23 Dec 2012 00:00:00 GMT", rule-id="picture-deletion-rule"`.
 */
export function expirationHeader(
  rules: readonly LifecycleRuleRecord[] | undefined,
  version: Pick<ObjectVersionRecord, 'key' | 'tags' | 'size' | 'lastModified' | 'deleteMarker'>,
  dayMs: number,
): string | undefined {
  if (version.deleteMarker) return undefined;
  const due = currentExpiry(rules, version, dayMs);
  if (!due) return undefined;
  // A header carries visible ASCII only: anything else in an id shows as `?`.
  const ruleId = due.ruleId.replace(/[^\x20-\x7e]/g, '?').replace(/["\\]/g, (char) => `\\${char}`);
  return `expiry-date="${new Date(due.due).toUTCString()}", rule-id="${ruleId}"`;
}
