// S3 bucket logging on the S3 surface: Put/GetBucketLogging (the XML of BucketLoggingStatus)
// and the server-access-log record of each request to a logged bucket, in AWS's format, which
// the audit row carries to the engine (service/bucket-logging.ts delivers the records).
//
// The record (one line, fields separated by spaces, `-` for none; AWS's 26 fields):
//   owner bucket [time] ip requester request-id operation key "request-uri" status error
//   bytes-sent object-size total-ms turnaround-ms "referer" "user-agent" version-id host-id
//   sig-version cipher-suite auth-type host-header tls-version access-point-arn acl-required
// Lightwell's choices: owner and requester are tenant ids (`-` for anonymous); the key is
// URL-encoded; the request URI has signatures in its query replaced by `REDACTED`; bytes sent
// and turnaround are not measured (`-`); quoted fields escape `"` and `\` and drop control
// characters, so one record is always one line. Requests refused before their operation is
// known (a bad signature, a malformed path) make no record.
//
// Persists: nothing itself; the configuration through the service, records with audit rows.

import type { S3Api, S3Principal, S3Request, S3Services } from './api.js';
import { bucketFor } from './buckets.js';
import { s3Error } from './errors.js';
import { objectServiceOf, readXmlBody, rootOf } from './object-lock.js';
import { XmlWriter, xmlText, type XmlValue } from './xml.js';
import type { Exchange } from '../http/exchange.js';
import type { BucketRecord } from '../engine/index/schema.js';
import { contextOf } from '../service/context.js';
import { bucketByName } from '../service/bucket-access.js';
import { putBucketLogging, streamOf, type LoggingConfig } from '../service/bucket-logging.js';
import { isLightwellError } from '../util/errors.js';

export function registerLogging(api: S3Api): void {
  api.register('PutBucketLogging', putBucketLoggingHandler);
  api.register('GetBucketLogging', getBucketLogging);
}

const LOGGING_XML_BYTES_MAX = 16 * 1024;

function configOf(status: XmlValue): LoggingConfig | undefined {
  if (typeof status === 'string') return undefined;
  const enabled = (status as Record<string, XmlValue>)['LoggingEnabled'];
  if (enabled === undefined) return undefined;
  if (typeof enabled === 'string' || Array.isArray(enabled))
    throw s3Error('MalformedXML', 'expected one <LoggingEnabled>');
  const targetBucket = xmlText(enabled, 'TargetBucket');
  const targetPrefix = xmlText(enabled, 'TargetPrefix');
  if (targetBucket === undefined || targetBucket === '' || targetPrefix === undefined)
    throw s3Error('MalformedXML', '<LoggingEnabled> needs <TargetBucket> and <TargetPrefix>');
  const format = (enabled as Record<string, XmlValue>)['TargetObjectKeyFormat'];
  if (format === undefined || typeof format === 'string' || Array.isArray(format))
    return { targetBucket, targetPrefix, keyFormat: 'simple' };
  const partitioned = (format as Record<string, XmlValue>)['PartitionedPrefix'];
  if (partitioned === undefined) return { targetBucket, targetPrefix, keyFormat: 'simple' };
  const dateSource = xmlText(partitioned, 'PartitionDateSource') ?? 'EventTime';
  if (dateSource !== 'EventTime' && dateSource !== 'DeliveryTime')
    throw s3Error('MalformedXML', 'PartitionDateSource is EventTime or DeliveryTime');
  return { targetBucket, targetPrefix, keyFormat: 'partitioned', dateSource };
}

async function putBucketLoggingHandler(request: S3Request): Promise<void> {
  const principal = request.requirePrincipal();
  const body = readXmlBody(request, LOGGING_XML_BYTES_MAX);
  const bucket = bucketFor(request, { verb: 'admin' });
  const config = configOf(rootOf(await body, 'BucketLoggingStatus'));
  if (config && Buffer.byteLength(config.targetPrefix) > 512)
    throw s3Error('InvalidArgument', 'the target prefix is at most 512 bytes');
  try {
    await putBucketLogging(
      objectServiceOf(request),
      request.services.store,
      contextOf(request.exchange, principal),
      bucket,
      config,
    );
  } catch (error) {
    if (!isLightwellError(error) || error.details['s3Code'] !== undefined) throw error;
    if (error.code === 'not_found' && error.details['loggingTarget'] !== undefined)
      throw s3Error('InvalidTargetBucketForLogging', error.message, {
        targetBucket: error.details['loggingTarget'],
      });
    if (error.code === 'bad_request') throw s3Error('InvalidArgument', error.message);
    if (error.code === 'forbidden') throw s3Error('AccessDenied', error.message);
    throw error;
  }
  request.send(200, {});
}

function getBucketLogging(request: S3Request): void {
  const bucket = bucketFor(request, { verb: 'read' });
  const logging = bucket.logging;
  const xml = new XmlWriter().start('BucketLoggingStatus');
  if (logging) {
    xml
      .start('LoggingEnabled')
      .leaf('TargetBucket', logging.targetBucket)
      .leaf('TargetPrefix', logging.targetPrefix)
      .start('TargetObjectKeyFormat');
    if (logging.keyFormat === 'simple') xml.start('SimplePrefix').end('SimplePrefix');
    else
      xml
        .start('PartitionedPrefix')
        .leaf('PartitionDateSource', logging.dateSource ?? 'EventTime')
        .end('PartitionedPrefix');
    xml.end('TargetObjectKeyFormat').end('LoggingEnabled');
  }
  xml.end('BucketLoggingStatus');
  const headers: Record<string, string> = {};
  if (logging) headers['Last-Modified'] = new Date(logging.updatedAt).toUTCString();
  request.sendXml(200, xml, headers);
}

// ---------------------------------------------------------------------------------------------
// Records.

/** AWS's operation names (`REST.<verb>.<resource>`), by Lightwell's S3 operation. */
const OPERATIONS: Readonly<Record<string, string>> = {
  GetObject: 'REST.GET.OBJECT',
  HeadObject: 'REST.HEAD.OBJECT',
  PutObject: 'REST.PUT.OBJECT',
  PostObject: 'REST.POST.OBJECT',
  CopyObject: 'REST.COPY.OBJECT',
  DeleteObject: 'REST.DELETE.OBJECT',
  DeleteObjects: 'REST.POST.MULTI_OBJECT_DELETE',
  CreateMultipartUpload: 'REST.POST.UPLOADS',
  UploadPart: 'REST.PUT.PART',
  UploadPartCopy: 'REST.COPY.PART',
  CompleteMultipartUpload: 'REST.POST.UPLOAD',
  AbortMultipartUpload: 'REST.DELETE.UPLOAD',
  ListParts: 'REST.GET.UPLOAD',
  ListMultipartUploads: 'REST.GET.UPLOADS',
  ListObjects: 'REST.GET.BUCKET',
  ListObjectsV2: 'REST.GET.BUCKET',
  ListObjectVersions: 'REST.GET.BUCKETVERSIONS',
  HeadBucket: 'REST.HEAD.BUCKET',
  GetBucketAcl: 'REST.GET.ACL',
  PutBucketAcl: 'REST.PUT.ACL',
  GetObjectAcl: 'REST.GET.ACL',
  PutObjectAcl: 'REST.PUT.ACL',
  GetBucketLogging: 'REST.GET.LOGGING_STATUS',
  PutBucketLogging: 'REST.PUT.LOGGING_STATUS',
  GetBucketVersioning: 'REST.GET.VERSIONING',
  PutBucketVersioning: 'REST.PUT.VERSIONING',
  GetObjectTagging: 'REST.GET.OBJECT_TAGGING',
  PutObjectTagging: 'REST.PUT.OBJECT_TAGGING',
  DeleteObjectTagging: 'REST.DELETE.OBJECT_TAGGING',
  GetBucketPolicy: 'REST.GET.BUCKETPOLICY',
  PutBucketPolicy: 'REST.PUT.BUCKETPOLICY',
  DeleteBucketPolicy: 'REST.DELETE.BUCKETPOLICY',
  DeleteBucket: 'REST.DELETE.BUCKET',
  GetBucketLocation: 'REST.GET.LOCATION',
};

/** An operation's record name: AWS's, else `REST.<METHOD>.<Operation>`. */
function operationName(name: string, method: string): string {
  return OPERATIONS[name] ?? `REST.${method}.${name.toUpperCase()}`;
}

/** The requests whose access an ACL granted (bucket-access.ts), for the ACLRequired field. */
const aclGranted = new WeakSet<Exchange>();

export function markAclRequired(exchange: Exchange): void {
  aclGranted.add(exchange);
}

/** A quoted field: `"` and `\` escaped, control characters dropped, at most `max` characters. */
function quoted(text: string | undefined, max = 1024): string {
  if (text === undefined || text === '') return '"-"';
  const clean = text.slice(0, max).replace(/[\u0000-\u001f\u007f]/g, '');
  return `"${clean.replace(/["\\]/g, '\\$&')}"`;
}

/** A bare field: no spaces or control characters, `-` when empty. */
function bare(text: string | undefined, max = 256): string {
  if (text === undefined || text === '') return '-';
  return text.slice(0, max).replace(/[\s\u0000-\u001f\u007f]/g, '');
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** `[06/Feb/2019:00:00:38 +0000]`. */
function logTime(ms: number): string {
  const d = new Date(ms);
  const p = (n: number): string => String(n).padStart(2, '0');
  return (
    `[${p(d.getUTCDate())}/${MONTHS[d.getUTCMonth()] ?? ''}/${d.getUTCFullYear()}:` +
    `${p(d.getUTCHours())}:${p(d.getUTCMinutes())}:${p(d.getUTCSeconds())} +0000]`
  );
}

/** How the request was signed: [sig-version, auth-type]. */
function signing(exchange: Exchange): [string, string] {
  const authorization = exchange.header('authorization');
  if (authorization?.startsWith('AWS4-')) return ['SigV4', 'AuthHeader'];
  if (authorization?.startsWith('AWS ')) return ['SigV2', 'AuthHeader'];
  if (exchange.queryParam('X-Amz-Algorithm') !== null) return ['SigV4', 'QueryString'];
  if (exchange.queryParam('Signature') !== null) return ['SigV2', 'QueryString'];
  return ['-', '-'];
}

/** The request line, with signatures in the query replaced. */
function requestUri(exchange: Exchange): string {
  const query = exchange.rawQuery.replace(
    /((?:^|&)(?:X-Amz-Signature|Signature)=)[^&]*/gi,
    '$1REDACTED',
  );
  return `${exchange.method} ${exchange.path}${query === '' ? '' : `?${query}`} HTTP/1.1`;
}

interface RecordSource {
  readonly exchange: Exchange;
  readonly bucket: BucketRecord;
  readonly operation: string;
  readonly key: string | undefined;
  readonly principal: S3Principal | undefined;
  readonly hostId: string;
  readonly startedAt: number;
}

function recordLine(source: RecordSource, status: number): string {
  const { exchange, bucket } = source;
  const [sigVersion, authType] = signing(exchange);
  const size = exchange.header('x-amz-decoded-content-length') ?? exchange.header('content-length');
  const reason = status >= 400 ? exchange.audit.reason : undefined;
  return [
    bare(bucket.tenantId),
    bare(bucket.name),
    logTime(source.startedAt),
    bare(exchange.remoteAddress.replace(/^::ffff:/i, '')),
    bare(source.principal?.tenant.id),
    bare(exchange.requestId),
    operationName(source.operation, exchange.method),
    source.key === undefined ? '-' : bare(encodeURIComponent(source.key), 3072),
    quoted(requestUri(exchange), 4096),
    String(status),
    bare(reason, 64),
    '-',
    exchange.method === 'PUT' || exchange.method === 'POST' ? bare(size, 24) : '-',
    String(Math.max(0, Math.round(Date.now() - source.startedAt))),
    '-',
    quoted(exchange.header('referer')),
    quoted(exchange.header('user-agent')),
    bare(exchange.queryParam('versionId') ?? undefined, 128),
    bare(source.hostId),
    sigVersion,
    '-',
    authType,
    bare(exchange.header('host')),
    '-',
    '-',
    aclGranted.has(exchange) ? 'Yes' : '-',
  ].join(' ');
}

/**
 * Arranges for the access-log record of a request to a logged bucket: the audit row, when it
 * is made, carries it (http/audit.ts). Costs one index read of the bucket's record.
 */
export function attachAccessLog(
  services: S3Services,
  exchange: Exchange,
  target: { bucket: string; key: string | undefined; operation: string; hostId: string },
  principal: S3Principal | undefined,
): void {
  let bucket: BucketRecord;
  try {
    bucket = bucketByName(services.store, target.bucket).bucket;
  } catch {
    return;
  }
  const logging = bucket.logging;
  if (logging === undefined) return;
  const stream = streamOf(bucket, logging, services.settings.string('s3.region'));
  const source: RecordSource = {
    exchange,
    bucket,
    operation: target.operation,
    key: target.key,
    principal,
    hostId: target.hostId,
    startedAt: Date.now(),
  };
  exchange.audit.accessLog = (status) => ({
    stream,
    line: recordLine(source, status),
    sourceBucket: bucket.name,
    sourceTenant: bucket.tenantId,
  });
}
