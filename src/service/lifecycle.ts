// Bucket lifecycle configuration: the rule model every transport fills in (S3's XML today, the
// console's JSON later), its validation with S3's rules, and the `x-amz-expiration` answer for
// an object a rule will expire.
//
// A refusal is a `bad_request` whose `details.reason` names S3's error class, so each transport
// can answer in its own form: `malformed` (S3 `MalformedXML`: the document's shape is wrong),
// `invalid_argument` (`InvalidArgument`: a value is out of range), `invalid_request`
// (`InvalidRequest`: values that cannot go together) and `not_implemented` (transitions:
// Lightwell has one storage class).
//
// Invariants:
// - What `validateLifecycle` returns is what the engine stores (LifecycleRuleRecord) and what
//   GetBucketLifecycleConfiguration renders: a rule's filter keeps the form it was written in.
// - Rule ids are unique, 1 to 255 characters; a rule without one gets a random id.
//
// Persists: nothing itself; `putLifecycle` and `deleteLifecycle` commit through the engine.

import { randomBytes } from 'node:crypto';
import type {
  LifecycleFilterRecord,
  LifecycleRuleRecord,
} from '../engine/index/lifecycle-schema.js';
import {
  DB,
  bucketNameKey,
  tenantChildKey,
  type BucketNameRecord,
  type BucketRecord,
  type ObjectTag,
  type ObjectVersionRecord,
} from '../engine/index/schema.js';
import type { IndexStore } from '../engine/index/store.js';
import { DAY_MS, expirationHeader } from '../engine/lifecycle-rules.js';
import { LIFECYCLE_RULES_MAX } from '../engine/ops/lifecycle.js';
import type { Settings } from '../util/config.js';
import { BadRequest, type LightwellError } from '../util/errors.js';

export const RULE_ID_CHARS_MAX = 255;
export const NEWER_NONCURRENT_MAX = 100;
/** Days at most in any rule (about 274 years: beyond it a date stops being a date). */
export const RULE_DAYS_MAX = 100_000;
export const TAG_KEY_CHARS_MAX = 128;
export const TAG_VALUE_CHARS_MAX = 256;
export const FILTER_TAGS_MAX = 10;

/** A number as a transport carries it: XML text, or JSON. */
type Numeric = string | number;

export interface LifecycleFilterInput {
  /** How many predicates the element held directly (`<Filter>` takes at most one). */
  readonly predicates: number;
  readonly prefix?: string | undefined;
  readonly tags?: readonly ObjectTag[] | undefined;
  readonly sizeGreaterThan?: Numeric | undefined;
  readonly sizeLessThan?: Numeric | undefined;
  /** The `<And>` element, when the filter used one. */
  readonly and?: Omit<LifecycleFilterInput, 'and'> | undefined;
}

export interface LifecycleRuleInput {
  readonly id?: string | undefined;
  readonly status?: string | undefined;
  /** The legacy top-level `<Prefix>`. */
  readonly prefix?: string | undefined;
  readonly filter?: LifecycleFilterInput | undefined;
  readonly expiration?:
    | {
        readonly days?: Numeric | undefined;
        readonly date?: string | undefined;
        readonly expiredObjectDeleteMarker?: string | boolean | undefined;
      }
    | undefined;
  readonly noncurrentExpiration?:
    | {
        readonly noncurrentDays?: Numeric | undefined;
        readonly newerNoncurrentVersions?: Numeric | undefined;
      }
    | undefined;
  readonly abortIncompleteMultipartUpload?:
    { readonly daysAfterInitiation?: Numeric | undefined } | undefined;
  /** Transition and NoncurrentVersionTransition entries: their Days or Date, as written. */
  readonly transitions?: readonly { days?: Numeric; date?: string }[] | undefined;
}

type Reason = 'malformed' | 'invalid_argument' | 'invalid_request' | 'not_implemented';

function refuse(reason: Reason, message: string): LightwellError {
  return BadRequest(message, { reason });
}

/** A whole number from `min` to `max`, or the refusal `name` deserves. */
function wholeNumber(value: Numeric, name: string, min: number, max: number): number {
  const text = String(value).trim();
  const number = /^[0-9]{1,15}$/.test(text) ? Number(text) : Number.NaN;
  if (!(number >= min && number <= max))
    throw refuse('invalid_argument', `'${name}' must be a whole number from ${min} to ${max}`);
  return number;
}

/**
 * An ISO 8601 date at midnight UTC (`2027-01-01`, `2027-01-01T00:00:00Z`,
 * `2027-01-01T00:00:00.000Z`), in ms.
 */
export function lifecycleDateOf(text: string): number {
  const match =
    /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,3}))?(Z|[+-]00:?00))?$/.exec(
      text.trim(),
    );
  if (!match) throw refuse('invalid_argument', `'Date' must be an ISO 8601 date: ${clip(text)}`);
  const [, year, month, day, hours, minutes, seconds, millis] = match;
  const ms = Date.UTC(Number(year), Number(month) - 1, Number(day));
  const back = new Date(ms);
  if (
    Number.isNaN(ms) ||
    back.getUTCDate() !== Number(day) ||
    back.getUTCMonth() + 1 !== Number(month)
  )
    throw refuse('invalid_argument', `'Date' is not a calendar date: ${clip(text)}`);
  if ([hours, minutes, seconds, millis].some((part) => part !== undefined && Number(part) !== 0))
    throw refuse('invalid_argument', "'Date' must be at midnight UTC");
  return ms;
}

function clip(text: string): string {
  return text.length > 64 ? `${text.slice(0, 64)}…` : text;
}

function checkTags(tags: readonly ObjectTag[]): ObjectTag[] {
  if (tags.length > FILTER_TAGS_MAX)
    throw refuse('invalid_argument', `a filter names at most ${FILTER_TAGS_MAX} tags`);
  const keys = new Set<string>();
  for (const tag of tags) {
    if (tag.key.length === 0 || tag.key.length > TAG_KEY_CHARS_MAX)
      throw refuse('invalid_argument', `a tag key has 1 to ${TAG_KEY_CHARS_MAX} characters`);
    if (tag.value.length > TAG_VALUE_CHARS_MAX)
      throw refuse('invalid_argument', `a tag value has at most ${TAG_VALUE_CHARS_MAX} characters`);
    if (keys.has(tag.key)) throw refuse('invalid_request', 'Duplicate Tag Keys are not allowed');
    keys.add(tag.key);
  }
  return tags.map((tag) => ({ key: tag.key, value: tag.value }));
}

/** The predicates of a `<Filter>` or its `<And>`, into `record`. */
function predicatesOf(
  input: Omit<LifecycleFilterInput, 'and'>,
  record: LifecycleFilterRecord,
): void {
  if (input.prefix !== undefined) record.prefix = input.prefix;
  if (input.tags !== undefined && input.tags.length > 0) record.tags = checkTags(input.tags);
  const sizeMax = Number.MAX_SAFE_INTEGER;
  if (input.sizeGreaterThan !== undefined)
    record.sizeGreaterThan = wholeNumber(
      input.sizeGreaterThan,
      'ObjectSizeGreaterThan',
      0,
      sizeMax,
    );
  if (input.sizeLessThan !== undefined)
    record.sizeLessThan = wholeNumber(input.sizeLessThan, 'ObjectSizeLessThan', 1, sizeMax);
  if (
    record.sizeGreaterThan !== undefined &&
    record.sizeLessThan !== undefined &&
    record.sizeGreaterThan >= record.sizeLessThan
  )
    throw refuse(
      'invalid_request',
      "'ObjectSizeGreaterThan' must be less than 'ObjectSizeLessThan'",
    );
}

function filterOf(rule: LifecycleRuleInput): LifecycleFilterRecord {
  const { prefix, filter } = rule;
  if (prefix !== undefined && filter !== undefined)
    throw refuse('malformed', 'a rule has a Filter or a Prefix, not both');
  if (filter === undefined) {
    if (prefix === undefined) throw refuse('malformed', 'a rule needs a Filter or a Prefix');
    return { form: 'prefix', prefix };
  }
  if (filter.predicates > 1)
    throw refuse('malformed', 'a Filter holds one of Prefix, Tag, ObjectSize… or And');
  if (filter.and === undefined) {
    const record: LifecycleFilterRecord = { form: 'filter' };
    predicatesOf(filter, record);
    return record;
  }
  if (filter.and.predicates < 2) throw refuse('malformed', 'And combines at least two predicates');
  const record: LifecycleFilterRecord = { form: 'and' };
  predicatesOf(filter.and, record);
  return record;
}

function expirationRecordOf(
  input: NonNullable<LifecycleRuleInput['expiration']>,
): NonNullable<LifecycleRuleRecord['expiration']> {
  const record: NonNullable<LifecycleRuleRecord['expiration']> = {};
  if (input.days !== undefined) record.days = wholeNumber(input.days, 'Days', 1, RULE_DAYS_MAX);
  if (input.date !== undefined) record.date = lifecycleDateOf(input.date);
  const marker = input.expiredObjectDeleteMarker;
  if (marker !== undefined) {
    const text = String(marker).trim();
    if (text !== 'true' && text !== 'false')
      throw refuse('malformed', 'ExpiredObjectDeleteMarker is true or false');
    record.expiredObjectDeleteMarker = text === 'true';
  }
  if (record.days !== undefined && record.date !== undefined)
    throw refuse('malformed', 'an Expiration has Days or Date, not both');
  if (marker !== undefined && (record.days !== undefined || record.date !== undefined))
    throw refuse(
      'malformed',
      'ExpiredObjectDeleteMarker cannot be specified with Days or Date in an Expiration',
    );
  if (record.days === undefined && record.date === undefined && marker === undefined)
    throw refuse('malformed', 'an Expiration needs Days, Date or ExpiredObjectDeleteMarker');
  return record;
}

function ruleOf(input: LifecycleRuleInput): LifecycleRuleRecord {
  const id = input.id === undefined || input.id === '' ? randomId() : input.id;
  if (id.length > RULE_ID_CHARS_MAX)
    throw refuse('invalid_argument', `a rule ID has at most ${RULE_ID_CHARS_MAX} characters`);
  if (input.status !== 'Enabled' && input.status !== 'Disabled')
    throw refuse('malformed', 'Status must be Enabled or Disabled');
  const rule: LifecycleRuleRecord = { id, status: input.status, filter: filterOf(input) };
  if (input.expiration !== undefined) rule.expiration = expirationRecordOf(input.expiration);
  const noncurrent = input.noncurrentExpiration;
  if (noncurrent !== undefined) {
    if (noncurrent.noncurrentDays === undefined)
      throw refuse('malformed', 'NoncurrentVersionExpiration needs NoncurrentDays');
    rule.noncurrentExpiration = {
      noncurrentDays: wholeNumber(noncurrent.noncurrentDays, 'NoncurrentDays', 1, RULE_DAYS_MAX),
    };
    if (noncurrent.newerNoncurrentVersions !== undefined)
      rule.noncurrentExpiration.newerNoncurrentVersions = wholeNumber(
        noncurrent.newerNoncurrentVersions,
        'NewerNoncurrentVersions',
        1,
        NEWER_NONCURRENT_MAX,
      );
  }
  const abort = input.abortIncompleteMultipartUpload;
  if (abort !== undefined) {
    if (abort.daysAfterInitiation === undefined)
      throw refuse('malformed', 'AbortIncompleteMultipartUpload needs DaysAfterInitiation');
    rule.abortIncompleteMultipartUpload = {
      daysAfterInitiation: wholeNumber(
        abort.daysAfterInitiation,
        'DaysAfterInitiation',
        1,
        RULE_DAYS_MAX,
      ),
    };
  }
  checkActions(input, rule);
  return rule;
}

/** The combinations S3 refuses, and transitions, which Lightwell does not do. */
function checkActions(input: LifecycleRuleInput, rule: LifecycleRuleRecord): void {
  const transitions = input.transitions ?? [];
  for (const transition of transitions) {
    if (transition.days !== undefined) wholeNumber(transition.days, 'Days', 0, RULE_DAYS_MAX);
    if (transition.date !== undefined) lifecycleDateOf(transition.date);
  }
  const filter = rule.filter;
  const tagged = filter.tags !== undefined;
  const sized = filter.sizeGreaterThan !== undefined || filter.sizeLessThan !== undefined;
  if (rule.abortIncompleteMultipartUpload && (tagged || sized))
    throw refuse(
      'invalid_request',
      'AbortIncompleteMultipartUpload cannot be specified with a Tag or ObjectSize filter',
    );
  if (rule.expiration?.expiredObjectDeleteMarker === true && tagged)
    throw refuse(
      'invalid_request',
      'ExpiredObjectDeleteMarker cannot be specified with a Tag filter',
    );
  const acts =
    rule.expiration !== undefined ||
    rule.noncurrentExpiration !== undefined ||
    rule.abortIncompleteMultipartUpload !== undefined;
  if (!acts && transitions.length === 0)
    throw refuse('invalid_request', 'At least one action needs to be specified in a rule');
  if (transitions.length > 0)
    throw refuse(
      'not_implemented',
      'transitions are not supported: Lightwell keeps every object in one storage class',
    );
}

/** 20 characters of base32, as an id S3 would make up. */
function randomId(): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  return [...randomBytes(20)].map((byte) => alphabet[byte & 31]).join('');
}

/** Checks a configuration with S3's rules and answers the records the engine stores. */
export function validateLifecycle(rules: readonly LifecycleRuleInput[]): LifecycleRuleRecord[] {
  if (rules.length === 0) throw refuse('malformed', 'a lifecycle configuration needs a Rule');
  if (rules.length > LIFECYCLE_RULES_MAX)
    throw refuse('malformed', `a lifecycle configuration has at most ${LIFECYCLE_RULES_MAX} rules`);
  const records = rules.map(ruleOf);
  const ids = new Set<string>();
  for (const record of records) {
    if (ids.has(record.id)) throw refuse('invalid_argument', 'Rule ID must be unique');
    ids.add(record.id);
  }
  return records;
}

/** The engine command's arguments that store `rules` on a bucket (after `validateLifecycle`). */
export function putLifecycleArgs(
  bucket: Pick<BucketRecord, 'tenantId' | 'name'>,
  rules: LifecycleRuleRecord[],
): { tenantId: string; bucket: string; rules: LifecycleRuleRecord[] } {
  return { tenantId: bucket.tenantId, bucket: bucket.name, rules };
}

/** The length of a lifecycle day on this service (`lifecycle.day`). */
export function lifecycleDayOf(settings: Settings): number {
  const day = settings.duration('lifecycle.day');
  return day > 0 ? day : DAY_MS;
}

/** `x-amz-expiration` for a version of `bucket`, or undefined when no rule expires it. */
export function expirationOf(
  bucket: Pick<BucketRecord, 'lifecycle'>,
  version: ObjectVersionRecord,
  settings: Settings,
): string | undefined {
  if (!bucket.lifecycle) return undefined;
  return expirationHeader(bucket.lifecycle, version, lifecycleDayOf(settings));
}

/**
 * `x-amz-expiration` for a version of the bucket named `bucket`, read from the index: the rules
 * are the bucket's owner's (a read granted across tenants sees the owner's rules).
 */
export function expirationFor(
  store: IndexStore,
  args: { bucket: string; version: ObjectVersionRecord; settings: Settings },
): string | undefined {
  const holder = store.getShared<BucketNameRecord>(DB.bucketNames, bucketNameKey(args.bucket));
  if (!holder) return undefined;
  const record = store.getShared<BucketRecord>(
    DB.buckets,
    tenantChildKey(holder.tenantId, args.bucket),
  );
  return record ? expirationOf(record, args.version, args.settings) : undefined;
}
