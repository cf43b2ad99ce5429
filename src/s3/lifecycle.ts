// S3's bucket lifecycle operations: Put, Get and DeleteBucketLifecycleConfiguration (the
// `?lifecycle` sub-resource), and the `x-amz-expiration` header of objects a rule will expire.
//
// This adapter reads and writes S3's XML only: the rule model, its validation and the header's
// value are the service's (src/service/lifecycle.ts); the rules are stored and executed by the
// engine (src/engine/ops/lifecycle.ts).
//
// Invariants:
// - A refusal of the service maps to S3's code by its reason: `MalformedXML`, `InvalidArgument`,
//   `InvalidRequest`, `NotImplemented`.
// - GET renders each rule's filter in the form it was put (legacy Prefix, Filter, Filter/And),
//   so a client that compares what it put with what it reads finds them equal.
//
// Persists: nothing itself; the bucket's rules through the engine.

import { createHash } from 'node:crypto';
import { mutate, type S3Api, type S3Request } from './api.js';
import { bucketFor, readBody } from './buckets.js';
import { s3Error } from './errors.js';
import { parseXml, xmlList, xmlText, XmlWriter, type XmlNode, type XmlValue } from './xml.js';
import { checkContentMd5, contentMd5Of } from './object-headers.js';
import type { ObjectVersionRecord } from '../engine/index/schema.js';
import type { LifecycleRuleRecord } from '../engine/index/lifecycle-schema.js';
import {
  expirationFor,
  putLifecycleArgs,
  validateLifecycle,
  type LifecycleFilterInput,
  type LifecycleRuleInput,
} from '../service/lifecycle.js';
import { isLightwellError } from '../util/errors.js';

/** A lifecycle document of 1,000 rules fits in well under this. */
export const LIFECYCLE_BODY_BYTES_MAX = 1024 * 1024;

export function registerLifecycle(api: S3Api): void {
  api.register('PutBucketLifecycleConfiguration', putLifecycle);
  api.register('GetBucketLifecycleConfiguration', getLifecycle);
  api.register('DeleteBucketLifecycleConfiguration', deleteLifecycle);
}

const S3_CODES = {
  malformed: 'MalformedXML',
  invalid_argument: 'InvalidArgument',
  invalid_request: 'InvalidRequest',
  not_implemented: 'NotImplemented',
} as const;

/** The service's refusal as S3's error (others pass through). */
function asS3(error: unknown): unknown {
  if (!isLightwellError(error) || error.code !== 'bad_request') return error;
  const reason = error.details['reason'];
  const code =
    typeof reason === 'string' && Object.hasOwn(S3_CODES, reason)
      ? S3_CODES[reason as keyof typeof S3_CODES]
      : 'InvalidRequest';
  return s3Error(code, error.message);
}

async function putLifecycle(request: S3Request): Promise<void> {
  const body = readBody(request, LIFECYCLE_BODY_BYTES_MAX);
  const bucket = bucketFor(request, { verb: 'write' });
  const bytes = await body;
  checkContentMd5(contentMd5Of(request.exchange.headers), createHash('md5').update(bytes).digest());
  let rules: LifecycleRuleRecord[];
  try {
    rules = validateLifecycle(parseLifecycle(bytes));
  } catch (error) {
    throw asS3(error);
  }
  await mutate(request, 'putBucketLifecycle', putLifecycleArgs(bucket, rules), 200);
  request.send(200, {});
}

function getLifecycle(request: S3Request): void {
  const bucket = bucketFor(request, { verb: 'read' });
  if (!bucket.lifecycle || bucket.lifecycle.length === 0)
    throw s3Error('NoSuchLifecycleConfiguration', undefined, { bucketName: bucket.name });
  const xml = new XmlWriter().start('LifecycleConfiguration');
  for (const rule of bucket.lifecycle) writeRule(xml, rule);
  xml.end('LifecycleConfiguration');
  request.sendXml(200, xml);
}

async function deleteLifecycle(request: S3Request): Promise<void> {
  const bucket = bucketFor(request, { verb: 'write' });
  await mutate(
    request,
    'deleteBucketLifecycle',
    { tenantId: bucket.tenantId, bucket: bucket.name },
    204,
  );
  request.send(204, {});
}

// ---- request document ---------------------------------------------------------------------

function element(node: XmlValue | undefined, name: string): XmlNode | undefined {
  if (node === undefined || typeof node === 'string' || Array.isArray(node)) return undefined;
  const value = (node as XmlNode)[name];
  if (value === undefined) return undefined;
  if (value === '') return {};
  if (typeof value === 'string' || Array.isArray(value))
    throw s3Error('MalformedXML', `<${name}> must appear once and hold elements`);
  return value as XmlNode;
}

function tagsOf(node: XmlNode): { key: string; value: string }[] {
  return xmlList(node, 'Tag').map((tag) => {
    const key = xmlText(tag, 'Key');
    if (key === undefined || typeof tag === 'string')
      throw s3Error('MalformedXML', 'every Tag needs a Key');
    return { key, value: xmlText(tag, 'Value') ?? '' };
  });
}

function predicatesOf(node: XmlNode): Omit<LifecycleFilterInput, 'and'> {
  const tags = tagsOf(node);
  const prefix = xmlText(node, 'Prefix');
  const sizeGreaterThan = xmlText(node, 'ObjectSizeGreaterThan');
  const sizeLessThan = xmlText(node, 'ObjectSizeLessThan');
  const present = [prefix, sizeGreaterThan, sizeLessThan].filter((value) => value !== undefined);
  return {
    predicates: present.length + tags.length,
    prefix,
    tags,
    sizeGreaterThan,
    sizeLessThan,
  };
}

function filterOf(rule: XmlNode): LifecycleFilterInput | undefined {
  const filter = element(rule, 'Filter');
  if (filter === undefined) return undefined;
  const own = predicatesOf(filter);
  const and = element(filter, 'And');
  if (and === undefined) return own;
  return { ...own, predicates: own.predicates + 1, and: predicatesOf(and) };
}

function ruleOf(node: XmlValue): LifecycleRuleInput {
  if (typeof node === 'string' || Array.isArray(node))
    throw s3Error('MalformedXML', 'a Rule must hold elements');
  const rule = node as XmlNode;
  const expiration = element(rule, 'Expiration');
  const noncurrent = element(rule, 'NoncurrentVersionExpiration');
  const abort = element(rule, 'AbortIncompleteMultipartUpload');
  const transitions = [
    ...xmlList(rule, 'Transition').map((entry) => ({
      days: xmlText(entry, 'Days'),
      date: xmlText(entry, 'Date'),
    })),
    ...xmlList(rule, 'NoncurrentVersionTransition').map((entry) => ({
      days: xmlText(entry, 'NoncurrentDays'),
    })),
  ].map((entry) => Object.fromEntries(Object.entries(entry).filter(([, v]) => v !== undefined)));
  return {
    id: xmlText(rule, 'ID'),
    status: xmlText(rule, 'Status'),
    prefix: xmlText(rule, 'Prefix'),
    filter: filterOf(rule),
    expiration: expiration && {
      days: xmlText(expiration, 'Days'),
      date: xmlText(expiration, 'Date'),
      expiredObjectDeleteMarker: xmlText(expiration, 'ExpiredObjectDeleteMarker'),
    },
    noncurrentExpiration: noncurrent && {
      noncurrentDays: xmlText(noncurrent, 'NoncurrentDays'),
      newerNoncurrentVersions: xmlText(noncurrent, 'NewerNoncurrentVersions'),
    },
    abortIncompleteMultipartUpload: abort && {
      daysAfterInitiation: xmlText(abort, 'DaysAfterInitiation'),
    },
    transitions,
  };
}

/** The rules of a `LifecycleConfiguration` document, as the service's input. */
export function parseLifecycle(body: Buffer): LifecycleRuleInput[] {
  const doc = parseXml(body, LIFECYCLE_BODY_BYTES_MAX);
  const config = doc['LifecycleConfiguration'];
  if (config === undefined || typeof config === 'string' || Array.isArray(config))
    throw s3Error('MalformedXML', 'the body must be a LifecycleConfiguration');
  return xmlList(config, 'Rule').map(ruleOf);
}

// ---- response document --------------------------------------------------------------------

function writePredicates(xml: XmlWriter, filter: LifecycleRuleRecord['filter']): void {
  xml.leaf('Prefix', filter.prefix);
  for (const tag of filter.tags ?? [])
    xml.start('Tag').leaf('Key', tag.key).leaf('Value', tag.value).end('Tag');
  xml.leaf('ObjectSizeGreaterThan', filter.sizeGreaterThan);
  xml.leaf('ObjectSizeLessThan', filter.sizeLessThan);
}

function writeRule(xml: XmlWriter, rule: LifecycleRuleRecord): void {
  xml.start('Rule').leaf('ID', rule.id);
  const { filter } = rule;
  if (filter.form === 'prefix') xml.leaf('Prefix', filter.prefix ?? '');
  else if (filter.form === 'filter') {
    xml.start('Filter');
    writePredicates(xml, filter);
    xml.end('Filter');
  } else {
    xml.start('Filter').start('And');
    writePredicates(xml, filter);
    xml.end('And').end('Filter');
  }
  xml.leaf('Status', rule.status);
  const expiration = rule.expiration;
  if (expiration) {
    xml.start('Expiration');
    xml.leaf('Days', expiration.days);
    if (expiration.date !== undefined) xml.leaf('Date', new Date(expiration.date).toISOString());
    xml.leaf('ExpiredObjectDeleteMarker', expiration.expiredObjectDeleteMarker);
    xml.end('Expiration');
  }
  const noncurrent = rule.noncurrentExpiration;
  if (noncurrent)
    xml
      .start('NoncurrentVersionExpiration')
      .leaf('NoncurrentDays', noncurrent.noncurrentDays)
      .leaf('NewerNoncurrentVersions', noncurrent.newerNoncurrentVersions)
      .end('NoncurrentVersionExpiration');
  const abort = rule.abortIncompleteMultipartUpload;
  if (abort)
    xml
      .start('AbortIncompleteMultipartUpload')
      .leaf('DaysAfterInitiation', abort.daysAfterInitiation)
      .end('AbortIncompleteMultipartUpload');
  xml.end('Rule');
}

// ---- x-amz-expiration ---------------------------------------------------------------------

/**
 * Adds `x-amz-expiration` to the headers of a PUT, GET or HEAD answer for `version` of bucket
 * `name` when a rule of the bucket will expire it.
 */
export function addExpirationHeader(
  request: S3Request,
  name: string,
  version: ObjectVersionRecord,
  headers: Record<string, string>,
): void {
  const { store, settings } = request.services;
  // An adapter mounted over an object store without the index (the handlers' unit tests) has
  // no rules to read.
  if ((store as typeof store | undefined) === undefined) return;
  const value = expirationFor(store, { bucket: name, version, settings });
  if (value !== undefined) headers['x-amz-expiration'] = value;
}
