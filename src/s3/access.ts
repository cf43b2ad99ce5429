// S3's side of access control: which IAM action and ACL permission each operation needs, the
// condition values a request carries (aws:SourceIp, s3:prefix, ...), and the principal an
// operation acts as in another tenant's bucket. The decision itself is the service's
// (src/service/bucket-access.ts), the same evaluator the native API uses.
//
// Acting principal: the service stores a bucket's data under its own tenant, so an operation on
// another tenant's bucket (a grant or policy allowing it) or an anonymous one runs as the
// bucket's tenant: `actingPrincipal` answers the requester's key and scopes with the owner
// tenant. Only operations in ACTIONS that an ACL or policy may grant get one, and each of them
// resolves its bucket through `grantedBucket` (buckets.ts `bucketFor`) before it touches data,
// which decides with the real requester.
//
// Invariants:
// - An anonymous request never gets a principal for an operation outside DELEGABLE.
// - Every anonymous request's audit row names the bucket owner's tenant.
//
// Persists: nothing.

import type { S3Principal, S3Request } from './api.js';
import { s3Error } from './errors.js';
import { markAclRequired } from './logging.js';
import type { BucketRecord, TenantRecord } from '../engine/index/schema.js';
import type { Permission } from '../security/acl.js';
import type { Verb } from '../security/scopes.js';
import { authorizeBucketAccess, bucketByName } from '../service/bucket-access.js';
import { isLightwellError } from '../util/errors.js';

interface ActionSpec {
  readonly action: string;
  /** The action when the request names a versionId. */
  readonly versioned?: string;
  readonly permission?: { readonly level: 'bucket' | 'object'; readonly is: Permission };
}

const objectRead = { level: 'object', is: 'READ' } as const;
const bucketRead = { level: 'bucket', is: 'READ' } as const;
const bucketWrite = { level: 'bucket', is: 'WRITE' } as const;

/** Operations another tenant or anyone may be granted, with their action and ACL permission. */
const ACTIONS: Readonly<Record<string, ActionSpec>> = {
  GetObject: { action: 's3:GetObject', versioned: 's3:GetObjectVersion', permission: objectRead },
  HeadObject: { action: 's3:GetObject', versioned: 's3:GetObjectVersion', permission: objectRead },
  PutObject: { action: 's3:PutObject', permission: bucketWrite },
  PostObject: { action: 's3:PutObject', permission: bucketWrite },
  CopyObject: { action: 's3:PutObject', permission: bucketWrite },
  DeleteObject: {
    action: 's3:DeleteObject',
    versioned: 's3:DeleteObjectVersion',
    permission: bucketWrite,
  },
  DeleteObjects: { action: 's3:DeleteObject', permission: bucketWrite },
  CreateMultipartUpload: { action: 's3:PutObject', permission: bucketWrite },
  UploadPart: { action: 's3:PutObject', permission: bucketWrite },
  UploadPartCopy: { action: 's3:PutObject', permission: bucketWrite },
  CompleteMultipartUpload: { action: 's3:PutObject', permission: bucketWrite },
  AbortMultipartUpload: { action: 's3:AbortMultipartUpload', permission: bucketWrite },
  ListParts: { action: 's3:ListMultipartUploadParts', permission: bucketRead },
  ListMultipartUploads: { action: 's3:ListBucketMultipartUploads', permission: bucketRead },
  ListObjects: { action: 's3:ListBucket', permission: bucketRead },
  ListObjectsV2: { action: 's3:ListBucket', permission: bucketRead },
  ListObjectVersions: { action: 's3:ListBucketVersions', permission: bucketRead },
  HeadBucket: { action: 's3:ListBucket', permission: bucketRead },
  GetBucketLocation: { action: 's3:GetBucketLocation' },
  GetBucketAcl: { action: 's3:GetBucketAcl', permission: { level: 'bucket', is: 'READ_ACP' } },
  PutBucketAcl: { action: 's3:PutBucketAcl', permission: { level: 'bucket', is: 'WRITE_ACP' } },
  GetObjectAcl: {
    action: 's3:GetObjectAcl',
    versioned: 's3:GetObjectVersionAcl',
    permission: { level: 'object', is: 'READ_ACP' },
  },
  PutObjectAcl: {
    action: 's3:PutObjectAcl',
    versioned: 's3:PutObjectVersionAcl',
    permission: { level: 'object', is: 'WRITE_ACP' },
  },
  GetObjectTagging: { action: 's3:GetObjectTagging', versioned: 's3:GetObjectVersionTagging' },
  PutObjectTagging: { action: 's3:PutObjectTagging', versioned: 's3:PutObjectVersionTagging' },
  DeleteObjectTagging: {
    action: 's3:DeleteObjectTagging',
    versioned: 's3:DeleteObjectVersionTagging',
  },
};

/** Operations whose IAM action differs from `s3:<Name>` (bucket configurations). */
const RENAMED: Readonly<Record<string, string>> = {
  GetBucketCors: 's3:GetBucketCORS',
  PutBucketCors: 's3:PutBucketCORS',
  DeleteBucketCors: 's3:PutBucketCORS',
  GetPublicAccessBlock: 's3:GetBucketPublicAccessBlock',
  PutPublicAccessBlock: 's3:PutBucketPublicAccessBlock',
  DeletePublicAccessBlock: 's3:PutBucketPublicAccessBlock',
  GetBucketLifecycleConfiguration: 's3:GetLifecycleConfiguration',
  PutBucketLifecycleConfiguration: 's3:PutLifecycleConfiguration',
  DeleteBucketLifecycleConfiguration: 's3:PutLifecycleConfiguration',
  GetBucketEncryption: 's3:GetEncryptionConfiguration',
  PutBucketEncryption: 's3:PutEncryptionConfiguration',
  DeleteBucketEncryption: 's3:PutEncryptionConfiguration',
  GetObjectLockConfiguration: 's3:GetBucketObjectLockConfiguration',
  PutObjectLockConfiguration: 's3:PutBucketObjectLockConfiguration',
  GetBucketNotificationConfiguration: 's3:GetBucketNotification',
  PutBucketNotificationConfiguration: 's3:PutBucketNotification',
  DeleteBucketTagging: 's3:PutBucketTagging',
};

/** The operations that may act in another tenant's bucket (see the header). */
export const DELEGABLE: ReadonlySet<string> = new Set(Object.keys(ACTIONS));

/** What a handler asks of a bucket (buckets.ts BucketAccess). */
export interface AccessAsk {
  readonly verb: Verb;
  readonly key?: string | undefined;
  readonly listPrefix?: string | undefined;
  /** A copy's source: read as s3:GetObject whatever the operation. */
  readonly source?: { readonly versionId?: string | undefined } | undefined;
}

/**
 * The bucket `name` for the request's requester (another tenant and anyone included), when
 * `ask` is allowed; S3's `NoSuchBucket` or `AccessDenied` otherwise.
 */
export function grantedBucket(request: S3Request, ask: AccessAsk, name: string): BucketRecord {
  const operation = request.operation.name;
  const spec: ActionSpec = ask.source
    ? { action: 's3:GetObject', versioned: 's3:GetObjectVersion', permission: objectRead }
    : (ACTIONS[operation] ?? { action: RENAMED[operation] ?? `s3:${operation}` });
  const versionId = ask.source ? ask.source.versionId : request.exchange.queryParam('versionId');
  let conditions: Record<string, string | undefined> | undefined;
  try {
    const granted = authorizeBucketAccess(request.services.store, {
      requester: request.principal,
      bucket: name,
      action:
        versionId !== null && versionId !== undefined
          ? (spec.versioned ?? spec.action)
          : spec.action,
      verb: ask.verb,
      key: ask.key,
      versionId: versionId ?? null,
      listPrefix: ask.listPrefix,
      permission: spec.permission,
      conditions: () => (conditions ??= conditionsOf(request)),
    });
    if (!granted.own && !DELEGABLE.has(operation) && !ask.source)
      throw s3Error('AccessDenied', `only the bucket's owner may ${operation}`);
    if (granted.viaAcl === true) markAclRequired(request.exchange);
    // The caller's guard against a bucket name now held by someone else: the owner's id (the
    // tenant id, as `<Owner><ID>`) must be the one it expects, for the source of a copy too.
    const expected = request.exchange.header(
      ask.source ? 'x-amz-source-expected-bucket-owner' : 'x-amz-expected-bucket-owner',
    );
    if (expected !== undefined && expected !== granted.bucket.tenantId)
      throw s3Error('AccessDenied', 'the bucket is not owned by the expected owner');
    return granted.bucket;
  } catch (error) {
    if (isLightwellError(error) && error.code === 'not_found')
      throw s3Error('NoSuchBucket', undefined, { bucketName: name });
    if (
      isLightwellError(error) &&
      error.code === 'forbidden' &&
      error.details['s3Code'] === undefined
    )
      throw s3Error('AccessDenied', error.message);
    throw error;
  }
}

/** The request's condition values by lower-case key. */
function conditionsOf(request: S3Request): Record<string, string | undefined> {
  const { exchange } = request;
  const now = Date.now();
  const values: Record<string, string | undefined> = {
    'aws:sourceip': exchange.remoteAddress.replace(/^::ffff:/i, ''),
    // The public listener serves plain HTTP; TLS ends in front of it when there is any.
    'aws:securetransport': exchange.header('x-forwarded-proto') === 'https' ? 'true' : 'false',
    'aws:currenttime': new Date(now).toISOString(),
    'aws:epochtime': String(Math.floor(now / 1000)),
    'aws:useragent': exchange.header('user-agent'),
    'aws:referer': exchange.header('referer'),
    'aws:principaltype': request.principal === undefined ? 'Anonymous' : 'Account',
    'aws:principalaccount': request.principal?.tenant.id,
    'aws:userid': request.principal?.accessKeyId,
    'aws:username': request.principal?.accessKeyId,
    'aws:principalarn':
      request.principal === undefined
        ? undefined
        : `arn:aws:iam::${request.principal.tenant.id}:user/${request.principal.accessKeyId}`,
    'aws:requestedregion': request.services.settings.string('s3.region'),
    's3:authtype': authTypeOf(request),
    's3:signatureversion': signatureVersionOf(request),
    's3:prefix': exchange.queryParam('prefix') ?? undefined,
    's3:delimiter': exchange.queryParam('delimiter') ?? undefined,
    's3:max-keys': exchange.queryParam('max-keys') ?? undefined,
    's3:versionid': exchange.queryParam('versionId') ?? undefined,
  };
  for (const name of [
    'x-amz-acl',
    'x-amz-grant-read',
    'x-amz-grant-write',
    'x-amz-grant-read-acp',
    'x-amz-grant-write-acp',
    'x-amz-grant-full-control',
    'x-amz-copy-source',
    'x-amz-metadata-directive',
    'x-amz-server-side-encryption',
    'x-amz-server-side-encryption-aws-kms-key-id',
    'x-amz-server-side-encryption-customer-algorithm',
    'x-amz-storage-class',
    'x-amz-content-sha256',
  ])
    values[`s3:${name}`] = exchange.header(name);
  // Object lock's keys drop the header's `x-amz-`.
  for (const name of [
    'object-lock-mode',
    'object-lock-retain-until-date',
    'object-lock-legal-hold',
  ])
    values[`s3:${name}`] = exchange.header(`x-amz-${name}`);
  // s3:RequestObjectTag/<key>: the tags a write sets (x-amz-tagging, URL-encoded pairs).
  const tagging = exchange.header('x-amz-tagging');
  if (tagging !== undefined)
    for (const [key, value] of new URLSearchParams(tagging))
      values[`s3:requestobjecttag/${key.toLowerCase()}`] = value;
  return values;
}

/** `s3:authType`: REST-HEADER, REST-QUERY-STRING or POST (a browser form); absent: anonymous. */
function authTypeOf(request: S3Request): string | undefined {
  if (request.principal === undefined) return undefined;
  if (request.operation.name === 'PostObject') return 'POST';
  return request.exchange.header('authorization') === undefined
    ? 'REST-QUERY-STRING'
    : 'REST-HEADER';
}

/** `s3:signatureversion`: AWS4-HMAC-SHA256 (the only one Lightwell accepts); absent: anonymous. */
function signatureVersionOf(request: S3Request): string | undefined {
  return request.principal === undefined ? undefined : 'AWS4-HMAC-SHA256';
}

/**
 * The principal an operation acts as: the requester, or for a delegable operation on another
 * tenant's bucket (or an anonymous one), the requester's key with the bucket's tenant. Refuses
 * an anonymous request for anything else.
 */
export function actingPrincipal(request: S3Request): S3Principal {
  const real = request.principal;
  const name = request.address.bucket;
  if (name === undefined || !DELEGABLE.has(request.operation.name)) {
    if (!real) throw s3Error('AccessDenied', 'anonymous access is not allowed');
    return real;
  }
  let owner: TenantRecord;
  try {
    owner = bucketByName(request.services.store, name).owner;
  } catch {
    // AWS answers a bucket that does not exist with NoSuchBucket, to anyone (names are global
    // and public, as DNS names are); only an existing bucket's answers depend on grants.
    if (!real) throw s3Error('NoSuchBucket', `bucket ${name} does not exist`);
    return real;
  }
  if (real && real.tenant.id === owner.id) return real;
  if (!real) request.exchange.audit.tenantId ??= owner.id;
  return {
    accessKeyId: real?.accessKeyId ?? '',
    tenant: owner,
    scope: real?.scope ?? { kind: 'verbs', verbs: [] },
  };
}
