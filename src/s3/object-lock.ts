// S3's object lock operations: Put/GetObjectLockConfiguration, Put/GetObjectRetention and
// Put/GetObjectLegalHold, the x-amz-object-lock-* headers of a write (PutObject, CopyObject,
// CreateMultipartUpload) and of a read (GetObject, HeadObject), and the bypass header of a
// delete. The rules are the service's (service/object-lock.ts) and the engine's; this module
// speaks S3's wire form: its XML, its headers and its error codes.
//
// Invariants:
// - A configuration or a retention the XML schema does not allow (a mode other than
//   GOVERNANCE/COMPLIANCE, Days and Years together, a status other than Enabled) is
//   `MalformedXML`; a period that is not a positive whole number is `InvalidRetentionPeriod`.
// - Retention and legal hold in a bucket without object lock are `InvalidRequest` (400).
// - GOVERNANCE retention is bypassed only for an admin-scoped key (service/object-lock.ts).
//
// Persists: nothing itself; buckets and versions through the service.

import type { S3Api, S3Request } from './api.js';
import { bucketFor, readBody } from './buckets.js';
import { s3Error } from './errors.js';
import { checkContentMd5, contentMd5Of } from './object-headers.js';
import { XmlWriter, parseXml, xmlText, type XmlValue } from './xml.js';
import { createHash } from 'node:crypto';
import type { BucketRecord, ObjectVersionRecord } from '../engine/index/schema.js';
import { contextOf } from '../service/context.js';
import { ObjectService } from '../service/objects.js';
import { resolveForAttributes } from '../service/read.js';
import {
  DEFAULT_RETENTION_DAYS_MAX,
  YEAR_DAYS,
  governanceBypass,
  newVersionLockOf,
  parseLockDate,
  putLegalHold,
  putObjectLockConfig,
  putRetention,
  type LockDefault,
  type NewVersionLock,
} from '../service/object-lock.js';
import { isLightwellError } from '../util/errors.js';

export function registerObjectLock(api: S3Api): void {
  api.register('PutObjectLockConfiguration', putObjectLockConfiguration);
  api.register('GetObjectLockConfiguration', getObjectLockConfiguration);
  api.register('PutObjectRetention', putObjectRetention);
  api.register('GetObjectRetention', getObjectRetention);
  api.register('PutObjectLegalHold', putObjectLegalHold);
  api.register('GetObjectLegalHold', getObjectLegalHold);
}

/** Bytes of a lock configuration, retention or legal hold document at most. */
const LOCK_XML_BYTES_MAX = 16 * 1024;

const objectServices = new WeakMap<object, ObjectService>();

/** The service's object commands for this listener (one per S3Services). */
export function objectServiceOf(request: S3Request): ObjectService {
  const services = request.services;
  let objects = objectServices.get(services);
  if (!objects) {
    objects = new ObjectService(services);
    objectServices.set(services, objects);
  }
  return objects;
}

/** A small XML body, whole, checked against its Content-MD5 when one was sent, then parsed. */
export async function readXmlBody(
  request: S3Request,
  limit: number,
): Promise<ReturnType<typeof parseXml>> {
  const md5 = contentMd5Of(request.exchange.headers);
  const body = await readBody(request, limit);
  checkContentMd5(md5, createHash('md5').update(body).digest());
  return parseXml(body, limit);
}

/** The root element `name` of a parsed document, or `MalformedXML`. */
export function rootOf(doc: ReturnType<typeof parseXml>, name: string): XmlValue {
  const root = doc[name];
  if (root === undefined || Array.isArray(root))
    throw s3Error('MalformedXML', `expected <${name}>`);
  return root;
}

function target(request: S3Request): { bucket: string; key: string } {
  const { bucket, key } = request.address;
  if (bucket === undefined || key === undefined) throw s3Error('InvalidRequest', 'no object named');
  return { bucket, key };
}

function requireLock(bucket: BucketRecord): void {
  if (!bucket.objectLock)
    throw s3Error('InvalidRequest', 'Bucket is missing Object Lock Configuration');
}

/** `x-amz-bypass-governance-retention: true`, as S3 reads it (case-insensitive). */
export function bypassRequested(request: S3Request): boolean {
  return request.exchange.header('x-amz-bypass-governance-retention')?.toLowerCase() === 'true';
}

/** A service refusal of what the client sent, as S3's `code` (a Lightwell 400 only). */
async function asS3<T>(
  code: 'InvalidArgument' | 'InvalidRetentionPeriod',
  run: () => T | Promise<T>,
): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (isLightwellError(error) && error.code === 'bad_request' && !error.details['s3Code'])
      throw s3Error(code, error.message);
    throw error;
  }
}

/** The lock a write asks for with its x-amz-object-lock-* headers (`InvalidArgument` if bad). */
export function writeLockOf(request: S3Request): NewVersionLock | undefined {
  const header = (name: string): string | undefined =>
    request.exchange.header(`x-amz-object-lock-${name}`);
  try {
    return newVersionLockOf(
      {
        mode: header('mode'),
        retainUntil: header('retain-until-date'),
        legalHold: header('legal-hold'),
      },
      Date.now(),
    );
  } catch (error) {
    if (isLightwellError(error)) throw s3Error('InvalidArgument', error.message);
    throw error;
  }
}

/** The x-amz-object-lock-* headers of a GET or HEAD answer. */
export function addLockHeaders(
  version: ObjectVersionRecord,
  headers: Record<string, string>,
): void {
  if (version.retention) {
    headers['x-amz-object-lock-mode'] = version.retention.mode;
    headers['x-amz-object-lock-retain-until-date'] = new Date(
      version.retention.retainUntil,
    ).toISOString();
  }
  if (version.legalHold) headers['x-amz-object-lock-legal-hold'] = version.legalHold;
}

/** The default retention of a configuration's <Rule>, or undefined without one. */
function defaultRetentionOf(config: XmlValue): LockDefault | undefined {
  const rule = (config as Record<string, XmlValue>)['Rule'];
  if (rule === undefined || rule === '') return undefined;
  const retention = (rule as Record<string, XmlValue>)['DefaultRetention'];
  if (retention === undefined || typeof retention === 'string' || Array.isArray(retention))
    throw s3Error('MalformedXML', '<Rule> must hold one <DefaultRetention>');
  const mode = xmlText(retention, 'Mode');
  if (mode !== 'GOVERNANCE' && mode !== 'COMPLIANCE')
    throw s3Error('MalformedXML', 'the Mode is GOVERNANCE or COMPLIANCE');
  const days = xmlText(retention, 'Days');
  const years = xmlText(retention, 'Years');
  if ((days === undefined) === (years === undefined))
    throw s3Error('MalformedXML', '<DefaultRetention> has either <Days> or <Years>');
  const text = (days ?? years) as string;
  const limit =
    days !== undefined ? DEFAULT_RETENTION_DAYS_MAX : DEFAULT_RETENTION_DAYS_MAX / YEAR_DAYS;
  const period = /^\d{1,9}$/.test(text.trim()) ? Number(text.trim()) : Number.NaN;
  if (!(period >= 1 && period <= limit))
    throw s3Error(
      'InvalidRetentionPeriod',
      `the default retention period is a whole number of ${days !== undefined ? 'days' : 'years'} from 1 to ${limit}`,
    );
  return days !== undefined ? { mode, days: period } : { mode, years: period };
}

async function putObjectLockConfiguration(request: S3Request): Promise<void> {
  const principal = request.requirePrincipal();
  const body = readXmlBody(request, LOCK_XML_BYTES_MAX);
  const bucket = bucketFor(request, { verb: 'write' });
  const config = rootOf(await body, 'ObjectLockConfiguration');
  if (xmlText(config, 'ObjectLockEnabled') !== 'Enabled')
    throw s3Error('MalformedXML', 'ObjectLockEnabled must be Enabled');
  const rule = defaultRetentionOf(config);
  try {
    await putObjectLockConfig(
      objectServiceOf(request),
      contextOf(request.exchange, principal),
      bucket,
      rule,
    );
  } catch (error) {
    if (isLightwellError(error) && error.code === 'conflict')
      throw s3Error('InvalidBucketState', error.message);
    throw error;
  }
  request.send(200, {});
}

function getObjectLockConfiguration(request: S3Request): void {
  const bucket = bucketFor(request, { verb: 'read' });
  if (!bucket.objectLock)
    throw s3Error('ObjectLockConfigurationNotFoundError', undefined, { bucketName: bucket.name });
  const xml = new XmlWriter().start('ObjectLockConfiguration').leaf('ObjectLockEnabled', 'Enabled');
  const rule = bucket.lockDefault;
  if (rule) {
    xml.start('Rule').start('DefaultRetention').leaf('Mode', rule.mode);
    if (rule.days !== undefined) xml.leaf('Days', String(rule.days));
    else xml.leaf('Years', String(rule.years ?? 0));
    xml.end('DefaultRetention').end('Rule');
  }
  xml.end('ObjectLockConfiguration');
  request.sendXml(200, xml);
}

/** The version a retention or legal-hold request names, in a bucket with object lock. */
function lockedTarget(
  request: S3Request,
  verb: 'read' | 'write',
): { bucket: BucketRecord; key: string; versionId: string | undefined } {
  const { key } = target(request);
  const bucket = bucketFor(request, { verb, key });
  requireLock(bucket);
  return { bucket, key, versionId: request.exchange.queryParam('versionId') ?? undefined };
}

async function putObjectRetention(request: S3Request): Promise<void> {
  const principal = request.requirePrincipal();
  const body = readXmlBody(request, LOCK_XML_BYTES_MAX);
  const address = lockedTarget(request, 'write');
  const retention = rootOf(await body, 'Retention');
  const mode = xmlText(retention, 'Mode');
  const date = xmlText(retention, 'RetainUntilDate');
  let next: { mode: 'GOVERNANCE' | 'COMPLIANCE'; retainUntil: number } | undefined;
  if (mode !== undefined || date !== undefined) {
    if (mode !== 'GOVERNANCE' && mode !== 'COMPLIANCE')
      throw s3Error('MalformedXML', 'the Mode is GOVERNANCE or COMPLIANCE');
    if (date === undefined) throw s3Error('MalformedXML', 'a Mode needs a RetainUntilDate');
    const retainUntil = await asS3('InvalidArgument', () => parseLockDate(date));
    if (retainUntil <= Date.now())
      throw s3Error('InvalidArgument', 'The retain until date must be in the future!');
    next = { mode, retainUntil };
  }
  const ctx = contextOf(request.exchange, principal);
  const bypass = governanceBypass(
    ctx,
    { bucket: address.bucket.name, key: address.key },
    bypassRequested(request),
  );
  await putRetention(objectServiceOf(request), ctx, address, next, bypass);
  request.send(200, {});
}

function getObjectRetention(request: S3Request): void {
  const address = lockedTarget(request, 'read');
  const version = resolveForAttributes(
    request.services.store,
    address.bucket,
    address.key,
    address.versionId ?? null,
  );
  if (!version.retention) throw s3Error('NoSuchObjectLockConfiguration');
  const xml = new XmlWriter()
    .start('Retention')
    .leaf('Mode', version.retention.mode)
    .leaf('RetainUntilDate', new Date(version.retention.retainUntil).toISOString())
    .end('Retention');
  request.sendXml(200, xml);
}

async function putObjectLegalHold(request: S3Request): Promise<void> {
  const principal = request.requirePrincipal();
  const body = readXmlBody(request, LOCK_XML_BYTES_MAX);
  const address = lockedTarget(request, 'write');
  const status = xmlText(rootOf(await body, 'LegalHold'), 'Status');
  if (status !== 'ON' && status !== 'OFF')
    throw s3Error('MalformedXML', 'the legal hold Status is ON or OFF');
  await putLegalHold(
    objectServiceOf(request),
    contextOf(request.exchange, principal),
    address,
    status,
  );
  request.send(200, {});
}

function getObjectLegalHold(request: S3Request): void {
  const address = lockedTarget(request, 'read');
  const version = resolveForAttributes(
    request.services.store,
    address.bucket,
    address.key,
    address.versionId ?? null,
  );
  if (!version.legalHold) throw s3Error('NoSuchObjectLockConfiguration');
  const xml = new XmlWriter().start('LegalHold').leaf('Status', version.legalHold).end('LegalHold');
  request.sendXml(200, xml);
}
