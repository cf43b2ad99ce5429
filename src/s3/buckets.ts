// S3's bucket operations: ListBuckets, CreateBucket, HeadBucket, DeleteBucket,
// GetBucketLocation and Get/PutBucketVersioning, over the same engine commands as the native
// API's bucket routes, and `bucketFor`, the bucket look-up every S3 handler uses.
//
// A tenant is the S3 account: `<Owner>` is the tenant's id and name. Bucket names are global
// (the engine's `bucket-names` index): another tenant's bucket answers 403 `AccessDenied` here,
// as AWS answers without a grant, while the native API keeps it invisible (404).
//
// Persists: nothing itself; bucket records through the engine.

import { mutate, type S3Api, type S3Principal, type S3Request } from './api.js';
import { XmlWriter, parseXml, xmlText } from './xml.js';
import type { BucketRecord } from '../engine/index/schema.js';
import { Access } from '../service/access.js';
import { allows, readsIn, type Verb } from '../security/scopes.js';
import { validateBucketName } from '../security/names.js';
import { s3Error } from './errors.js';
import { maxCountOf } from './object-headers.js';
import { isLightwellError } from '../util/errors.js';
import { payloadCheckOf } from './auth.js';
import { grantedBucket } from './access.js';
import { applyCreateBucketAcl, checkCreateBucketAcl } from './access-ops.js';
import { applyCreateBucketOwnership, requestedOwnership } from './ownership.js';

export function registerBuckets(api: S3Api): void {
  api.register('ListBuckets', listBuckets);
  api.register('CreateBucket', createBucket);
  api.register('HeadBucket', headBucket);
  api.register('DeleteBucket', deleteBucket);
  api.register('GetBucketLocation', getBucketLocation);
  api.register('GetBucketVersioning', getBucketVersioning);
  api.register('PutBucketVersioning', putBucketVersioning);
}

/** What a handler asks of the bucket it addresses. */
export interface BucketAccess {
  readonly verb: Verb;
  /** The object key, for scopes and policies that name prefixes. */
  readonly key?: string;
  readonly listPrefix?: string;
  /** Set for a copy's source: it is read (s3:GetObject) whatever the operation. */
  readonly source?: { readonly versionId?: string | undefined };
}

/**
 * The request's bucket (or bucket `name`, a copy's source), for a requester allowed `access` in
 * it (its own tenant, another tenant or anyone, by the key's scopes, the bucket policy, ACLs
 * and the public access block: access.ts): `NoSuchBucket` when no tenant holds the name,
 * `AccessDenied` when the request is not allowed.
 */
export function bucketFor(
  request: S3Request,
  access: BucketAccess,
  name: string = request.address.bucket ?? '',
): BucketRecord {
  // A copy reads its source and writes its target: the read is the source's.
  const copy =
    request.operation.name === 'CopyObject' || request.operation.name === 'UploadPartCopy';
  const source = access.source ?? (copy && access.verb === 'read' ? {} : undefined);
  return grantedBucket(request, source ? { ...access, source } : access, name);
}

/** The key's scopes must allow `access` in bucket `name`. */
export function authorizeIn(principal: S3Principal, name: string, access: BucketAccess): void {
  const request = {
    verb: access.verb,
    bucket: name,
    key: access.key,
    listPrefix: access.listPrefix,
  };
  if (!allows(principal.scope, request))
    throw s3Error('AccessDenied', `the access key may not ${access.verb} in bucket ${name}`);
}

/**
 * ListBuckets: the tenant's buckets its key may read, by name. With `max-buckets` (1–10000) the
 * list is paged: the answer's `ContinuationToken` (the last name, base64url) continues it, as
 * AWS's paginated ListBuckets does; `prefix` narrows it. Without `max-buckets`, all of them.
 */
function listBuckets(request: S3Request): void {
  const principal = request.requirePrincipal();
  const { tenant, scope } = principal;
  if (!readsIn(scope)) throw s3Error('AccessDenied', 'the access key may not read');
  const query = request.exchange.query;
  const maxText = query.get('max-buckets') ?? undefined;
  const max = maxText === undefined ? Infinity : maxCountOf(maxText, 'max-buckets', 10_000);
  if (max < 1) throw s3Error('InvalidArgument', 'max-buckets must be from 1 to 10000');
  const prefix = query.get('prefix') ?? '';
  const token = query.get('continuation-token') ?? undefined;
  const after = token === undefined ? '' : Buffer.from(token, 'base64url').toString();
  if (token !== undefined && (token === '' || Buffer.from(after).toString('base64url') !== token))
    throw s3Error('InvalidArgument', 'The continuation token provided is incorrect');
  const xml = new XmlWriter()
    .start('ListAllMyBucketsResult')
    .start('Owner')
    .leaf('ID', tenant.id)
    .leaf('DisplayName', tenant.name ?? tenant.id)
    .end('Owner')
    .start('Buckets');
  let listed = 0;
  let last: string | undefined;
  let more = false;
  // The scope's readable buckets, by name (the service's filter, as the native API's).
  for (const bucket of new Access(request.services.store).readableBuckets(principal)) {
    if (bucket.name <= after || !bucket.name.startsWith(prefix)) continue;
    if (listed === max) {
      more = true;
      break;
    }
    xml
      .start('Bucket')
      .leaf('Name', bucket.name)
      .leaf('CreationDate', new Date(bucket.createdAt).toISOString())
      .end('Bucket');
    listed += 1;
    last = bucket.name;
  }
  xml.end('Buckets');
  if (more && last !== undefined)
    xml.leaf('ContinuationToken', Buffer.from(last).toString('base64url'));
  if (prefix !== '') xml.leaf('Prefix', prefix);
  xml.end('ListAllMyBucketsResult');
  request.sendXml(200, xml);
}

/** Bytes of a bucket-level XML body at most (CreateBucketConfiguration, versioning). */
const SMALL_XML_BYTES_MAX = 64 * 1024;

/**
 * The request body, whole, at most `limit` bytes, checked against its signature (payload.ts)
 * before it is returned. Starts reading at once: call it before the handler's first await.
 */
export function readBody(request: S3Request, limit: number): Promise<Buffer> {
  const exchange = request.exchange;
  const declared = Number(exchange.header('content-length') ?? '0');
  if (declared > limit * 2 + 4096)
    return Promise.reject(
      s3Error('MaxMessageLengthExceeded', `bodies here are limited to ${limit} bytes`),
    );
  if (declared === 0 && exchange.header('transfer-encoding') === undefined)
    return Promise.resolve(Buffer.alloc(0));
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let length = 0;
    let failed = false;
    exchange.onBody((chunk, isLast) => {
      if (failed) return;
      length += chunk.byteLength;
      if (length > limit) {
        failed = true;
        reject(s3Error('MaxMessageLengthExceeded', `bodies here are limited to ${limit} bytes`));
        return;
      }
      parts.push(Buffer.from(chunk.slice(0)));
      if (!isLast) return;
      const failure = payloadCheckOf(exchange)?.error;
      if (failure) reject(failure);
      else resolve(Buffer.concat(parts));
    });
    exchange.onAbort(() => reject(s3Error('IncompleteBody', 'the client went away')));
  });
}

async function createBucket(request: S3Request): Promise<void> {
  const principal = request.requirePrincipal();
  const body = readBody(request, SMALL_XML_BYTES_MAX);
  const name = request.address.bucket ?? '';
  try {
    validateBucketName(name);
  } catch (error) {
    throw s3Error('InvalidBucketName', isLightwellError(error) ? error.message : undefined, {
      bucketName: name,
    });
  }
  authorizeIn(principal, name, { verb: 'write' });
  checkCreateBucketAcl(request);
  const ownership = requestedOwnership(request);
  const lock = request.exchange.header('x-amz-bucket-object-lock-enabled');
  const objectLock = lock?.toLowerCase() === 'true';
  const bytes = await body;
  const region = request.services.settings.string('s3.region');
  if (bytes.length > 0) {
    const doc = parseXml(bytes, SMALL_XML_BYTES_MAX);
    const constraint = xmlText(doc['CreateBucketConfiguration'], 'LocationConstraint');
    if (constraint !== undefined && constraint !== '' && constraint !== region)
      throw s3Error(
        'IllegalLocationConstraintException',
        `the location constraint ${constraint.slice(0, 64)} is not this region (${region})`,
      );
  }
  let created: BucketRecord;
  try {
    created = await mutate(
      request,
      'createBucket',
      { tenantId: principal.tenant.id, name, objectLock },
      200,
    );
  } catch (error) {
    if (isLightwellError(error) && error.code === 'conflict') {
      // AWS's legacy rule for its original region: re-creating one's own bucket there answers
      // 200 and changes nothing (ACLs aside, which Lightwell does not keep); 409 elsewhere.
      if (error.details['bucketOwner'] === 'caller' && region === 'us-east-1') {
        request.send(200, { Location: `/${name}` });
        return;
      }
      throw error.details['bucketOwner'] === 'caller'
        ? s3Error('BucketAlreadyOwnedByYou')
        : s3Error('BucketAlreadyExists');
    }
    throw error;
  }
  await applyCreateBucketAcl(request, name);
  await applyCreateBucketOwnership(request, created, ownership);
  request.send(200, { Location: `/${name}` });
}

function headBucket(request: S3Request): void {
  bucketFor(request, { verb: 'read' });
  request.send(200, {
    'x-amz-bucket-region': request.services.settings.string('s3.region'),
  });
}

async function deleteBucket(request: S3Request): Promise<void> {
  const principal = request.requirePrincipal();
  const bucket = bucketFor(request, { verb: 'delete' });
  await mutate(
    request,
    'deleteBucket',
    // As AWS and RGW: uploads in progress do not keep a bucket (docs/s3.md).
    { tenantId: principal.tenant.id, name: bucket.name, abortUploads: true },
    204,
  );
  request.send(204, {});
}

function getBucketLocation(request: S3Request): void {
  bucketFor(request, { verb: 'read' });
  const region = request.services.settings.string('s3.region');
  // AWS answers an empty constraint for us-east-1, its original region.
  const xml = new XmlWriter()
    .start('LocationConstraint')
    .text(region === 'us-east-1' ? '' : region)
    .end('LocationConstraint');
  request.sendXml(200, xml);
}

function getBucketVersioning(request: S3Request): void {
  const bucket = bucketFor(request, { verb: 'read' });
  const xml = new XmlWriter().start('VersioningConfiguration');
  if (bucket.versioning !== 'Unversioned') xml.leaf('Status', bucket.versioning);
  xml.end('VersioningConfiguration');
  request.sendXml(200, xml);
}

async function putBucketVersioning(request: S3Request): Promise<void> {
  const principal = request.requirePrincipal();
  const body = readBody(request, SMALL_XML_BYTES_MAX);
  const bucket = bucketFor(request, { verb: 'write' });
  const doc = parseXml(await body, SMALL_XML_BYTES_MAX);
  const config = doc['VersioningConfiguration'];
  if (config === undefined || typeof config === 'string' || Array.isArray(config))
    throw s3Error('MalformedXML', 'the body must be a VersioningConfiguration');
  const status = xmlText(config, 'Status');
  const mfa = xmlText(config, 'MfaDelete');
  if (mfa === 'Enabled') throw s3Error('NotImplemented', 'MFA delete is not supported');
  if (status !== 'Enabled' && status !== 'Suspended')
    throw s3Error('MalformedXML', 'Status must be Enabled or Suspended');
  // Suspending an Unversioned bucket changes nothing S3 shows but the status.
  try {
    await mutate(
      request,
      'setVersioning',
      { tenantId: principal.tenant.id, bucket: bucket.name, status },
      200,
    );
  } catch (error) {
    if (isLightwellError(error) && error.code === 'conflict')
      throw s3Error('InvalidBucketState', error.message);
    throw error;
  }
  request.send(200, {});
}
