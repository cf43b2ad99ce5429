// The console's JSON form of a lifecycle rule, to and from the service's model
// (src/service/lifecycle.ts), and its schemas for the console's OpenAPI document.
//
// The form (docs/console.md): `{id?, status, filter?: {prefix?, tags?, sizeGreaterThan?,
// sizeLessThan?}, expiration?: {days? | date? | expiredObjectDeleteMarker?},
// noncurrentExpiration?: {noncurrentDays, newerNoncurrentVersions?},
// abortIncompleteMultipartUpload?: {daysAfterInitiation}}`; a date is `YYYY-MM-DD` (midnight
// UTC). This module checks only the shape (types, unknown fields); every rule of S3's (ranges,
// combinations, unique ids, no transitions) is the service's `validateLifecycle`, the same the S3
// API calls. A filter of two or more predicates is S3's `<And>`; no filter covers the bucket.

import type { JsonSchema } from '../http/router.js';
import type { LifecycleRuleRecord } from '../engine/index/lifecycle-schema.js';
import type { LifecycleFilterInput, LifecycleRuleInput } from '../service/lifecycle.js';
import { refuseUnknownFields } from '../security/names.js';
import { BadRequest } from '../util/errors.js';

type Json = Record<string, unknown>;

function objectAt(value: unknown, where: string, fields: readonly string[]): Json {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw BadRequest(`${where} must be an object`);
  refuseUnknownFields(value, new Set(fields), where);
  return value as Json;
}

function optional(object: Json, name: string, type: 'string'): string | undefined;
function optional(object: Json, name: string, type: 'number'): number | undefined;
function optional(object: Json, name: string, type: 'boolean'): boolean | undefined;
function optional(object: Json, name: string, type: 'string' | 'number' | 'boolean'): unknown {
  const value = object[name];
  if (value !== undefined && typeof value !== type) throw BadRequest(`${name} must be a ${type}`);
  return value;
}

function tagsOf(value: unknown, where: string): { key: string; value: string }[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value)) throw BadRequest(`${where}.tags must be a list`);
  return value.map((tag: unknown, index) => {
    const entry = objectAt(tag, `${where}.tags[${index}]`, ['key', 'value']);
    if (typeof entry['key'] !== 'string' || typeof entry['value'] !== 'string')
      throw BadRequest(`${where}.tags[${index}] needs a string key and value`);
    return { key: entry['key'], value: entry['value'] };
  });
}

function filterInputOf(value: unknown, where: string): LifecycleFilterInput {
  const filter = objectAt(value, where, ['prefix', 'tags', 'sizeGreaterThan', 'sizeLessThan']);
  const predicates = {
    prefix: optional(filter, 'prefix', 'string'),
    tags: tagsOf(filter['tags'], where),
    sizeGreaterThan: optional(filter, 'sizeGreaterThan', 'number'),
    sizeLessThan: optional(filter, 'sizeLessThan', 'number'),
  };
  const count =
    (predicates.prefix === undefined ? 0 : 1) +
    (predicates.tags?.length ?? 0) +
    (predicates.sizeGreaterThan === undefined ? 0 : 1) +
    (predicates.sizeLessThan === undefined ? 0 : 1);
  // Two or more predicates are S3's <And>; the service checks each one.
  if (count > 1) return { predicates: 1, and: { predicates: count, ...predicates } };
  return { predicates: count, ...predicates };
}

/** One rule of the body, as the service's input (shape only; `validateLifecycle` checks it). */
export function ruleInputOf(value: unknown, index: number): LifecycleRuleInput {
  const where = `rules[${index}]`;
  const rule = objectAt(value, where, [
    'id',
    'status',
    'filter',
    'expiration',
    'noncurrentExpiration',
    'abortIncompleteMultipartUpload',
  ]);
  const input: {
    -readonly [K in keyof LifecycleRuleInput]: LifecycleRuleInput[K];
  } = {
    id: optional(rule, 'id', 'string'),
    status: optional(rule, 'status', 'string'),
    filter:
      rule['filter'] === undefined
        ? { predicates: 0 }
        : filterInputOf(rule['filter'], `${where}.filter`),
  };
  if (rule['expiration'] !== undefined) {
    const expiration = objectAt(rule['expiration'], `${where}.expiration`, [
      'days',
      'date',
      'expiredObjectDeleteMarker',
    ]);
    input.expiration = {
      days: optional(expiration, 'days', 'number'),
      date: optional(expiration, 'date', 'string'),
      expiredObjectDeleteMarker: optional(expiration, 'expiredObjectDeleteMarker', 'boolean'),
    };
  }
  if (rule['noncurrentExpiration'] !== undefined) {
    const noncurrent = objectAt(rule['noncurrentExpiration'], `${where}.noncurrentExpiration`, [
      'noncurrentDays',
      'newerNoncurrentVersions',
    ]);
    input.noncurrentExpiration = {
      noncurrentDays: optional(noncurrent, 'noncurrentDays', 'number'),
      newerNoncurrentVersions: optional(noncurrent, 'newerNoncurrentVersions', 'number'),
    };
  }
  if (rule['abortIncompleteMultipartUpload'] !== undefined) {
    const abort = objectAt(
      rule['abortIncompleteMultipartUpload'],
      `${where}.abortIncompleteMultipartUpload`,
      ['daysAfterInitiation'],
    );
    input.abortIncompleteMultipartUpload = {
      daysAfterInitiation: optional(abort, 'daysAfterInitiation', 'number'),
    };
  }
  return input;
}

/** A stored rule in the console's JSON form (however it was written: S3 XML or console). */
export function ruleJson(rule: LifecycleRuleRecord): Json {
  const filter: Json = {};
  if (rule.filter.prefix !== undefined && rule.filter.prefix !== '')
    filter['prefix'] = rule.filter.prefix;
  if (rule.filter.tags !== undefined) filter['tags'] = rule.filter.tags;
  if (rule.filter.sizeGreaterThan !== undefined)
    filter['sizeGreaterThan'] = rule.filter.sizeGreaterThan;
  if (rule.filter.sizeLessThan !== undefined) filter['sizeLessThan'] = rule.filter.sizeLessThan;
  const json: Json = { id: rule.id, status: rule.status };
  if (Object.keys(filter).length > 0) json['filter'] = filter;
  if (rule.expiration !== undefined) {
    const { days, date, expiredObjectDeleteMarker } = rule.expiration;
    json['expiration'] = {
      ...(days === undefined ? {} : { days }),
      ...(date === undefined ? {} : { date: new Date(date).toISOString().slice(0, 10) }),
      ...(expiredObjectDeleteMarker === undefined ? {} : { expiredObjectDeleteMarker }),
    };
  }
  if (rule.noncurrentExpiration !== undefined)
    json['noncurrentExpiration'] = { ...rule.noncurrentExpiration };
  if (rule.abortIncompleteMultipartUpload !== undefined)
    json['abortIncompleteMultipartUpload'] = { ...rule.abortIncompleteMultipartUpload };
  return json;
}

const str = { type: 'string' } as const;
const int = { type: 'integer', minimum: 0 } as const;
const obj = (properties: Json, required: readonly string[] = []): JsonSchema =>
  required.length === 0 ? { type: 'object', properties } : { type: 'object', required, properties };

const rule = obj(
  {
    id: { type: 'string', maxLength: 255 },
    status: { type: 'string', enum: ['Enabled', 'Disabled'] },
    filter: obj({
      prefix: str,
      tags: { type: 'array', maxItems: 10, items: obj({ key: str, value: str }, ['key', 'value']) },
      sizeGreaterThan: int,
      sizeLessThan: int,
    }),
    expiration: obj({
      days: int,
      date: { type: 'string', format: 'date' },
      expiredObjectDeleteMarker: { type: 'boolean' },
    }),
    noncurrentExpiration: obj({ noncurrentDays: int, newerNoncurrentVersions: int }, [
      'noncurrentDays',
    ]),
    abortIncompleteMultipartUpload: obj({ daysAfterInitiation: int }, ['daysAfterInitiation']),
  },
  ['status'],
);

const lifecycle = obj(
  {
    tenantId: str,
    bucket: str,
    rules: { type: 'array', items: rule },
    reindexing: { type: 'boolean', description: 'the bucket is being reindexed after a change' },
  },
  ['tenantId', 'bucket', 'rules', 'reindexing'],
);

const dueEntry = obj({
  key: str,
  versionId: str,
  uploadId: str,
  action: {
    type: 'string',
    enum: ['expire-current', 'expire-noncurrent', 'remove-marker', 'abort'],
  },
  ruleId: str,
  dueAt: { type: 'string', format: 'date-time' },
  size: int,
  locked: { type: 'boolean', description: 'object lock keeps it: the executor will wait' },
});

export const lifecycleSchemas = {
  rule,
  lifecycle,
  body: obj(
    {
      rules: { type: 'array', nullable: true, maxItems: 1000, items: rule },
      reason: { type: 'string', maxLength: 1024 },
    },
    ['rules'],
  ),
  plan: obj({
    dryRun: { type: 'boolean' },
    applied: { type: 'boolean' },
    action: str,
    target: str,
    counts: obj({
      rules: int,
      versions: int,
      deleteMarkers: int,
      uploads: int,
      logicalBytes: int,
    }),
    blockers: { type: 'array', items: str },
    result: obj({
      tenantId: str,
      bucket: str,
      rules: { type: 'array', items: rule },
      preview: obj({
        scanned: int,
        truncated: { type: 'boolean' },
        due: { type: 'array', maxItems: 200, items: dueEntry },
      }),
    }),
  }),
} as const;
