// Which S3 operation a request is: its bucket and key (path-style, or virtual-hosted for the
// domains of `s3.domains`), then the operation from the method, the addressed level (service,
// bucket, object), the sub-resource of the query (`?uploads`, `?versioning`, ...) and, for a
// few, a header (`x-amz-copy-source`).
//
// Invariants:
// - The path is split on its raw form; the bucket and key are percent-decoded once. A path that
//   is not valid UTF-8 (uWS hands it over with U+FFFD) or malformed percent-encoding is refused.
// - An operation is identified or the request is refused with `NotImplemented` (a sub-resource
//   Lightwell does not know) or `MethodNotAllowed`: never guessed.
//
// Persists: nothing.

import { s3Error } from './errors.js';

export type Level = 'service' | 'bucket' | 'object';

/** One S3 operation: where it applies and what in the request selects it. */
export interface OperationSpec {
  /** The AWS operation name (`PutObject`); audit rows name it as `s3:PutObject`. */
  readonly name: string;
  readonly method: 'GET' | 'HEAD' | 'PUT' | 'POST' | 'DELETE' | 'OPTIONS';
  readonly level: Level;
  /** Query parameters that must all be present (sub-resources such as `uploadId`). */
  readonly query?: readonly string[];
  /** A query parameter value that must match (`list-type=2`). */
  readonly queryValue?: readonly [string, string];
  /** A header that must be present (`x-amz-copy-source` for copies). */
  readonly header?: string;
}

/** Bucket sub-resources with Get/Put/Delete operations: query name → operation suffix. */
const BUCKET_CONFIGS: Readonly<Record<string, { suffix: string; verbs: string }>> = {
  acl: { suffix: 'BucketAcl', verbs: 'GP' },
  versioning: { suffix: 'BucketVersioning', verbs: 'GP' },
  location: { suffix: 'BucketLocation', verbs: 'G' },
  policy: { suffix: 'BucketPolicy', verbs: 'GPD' },
  policyStatus: { suffix: 'BucketPolicyStatus', verbs: 'G' },
  cors: { suffix: 'BucketCors', verbs: 'GPD' },
  lifecycle: { suffix: 'BucketLifecycleConfiguration', verbs: 'GPD' },
  tagging: { suffix: 'BucketTagging', verbs: 'GPD' },
  encryption: { suffix: 'BucketEncryption', verbs: 'GPD' },
  'object-lock': { suffix: 'ObjectLockConfiguration', verbs: 'GP' },
  notification: { suffix: 'BucketNotificationConfiguration', verbs: 'GP' },
  logging: { suffix: 'BucketLogging', verbs: 'GP' },
  website: { suffix: 'BucketWebsite', verbs: 'GPD' },
  replication: { suffix: 'BucketReplication', verbs: 'GPD' },
  accelerate: { suffix: 'BucketAccelerateConfiguration', verbs: 'GP' },
  requestPayment: { suffix: 'BucketRequestPayment', verbs: 'GP' },
  ownershipControls: { suffix: 'BucketOwnershipControls', verbs: 'GPD' },
  publicAccessBlock: { suffix: 'PublicAccessBlock', verbs: 'GPD' },
  analytics: { suffix: 'BucketAnalyticsConfiguration', verbs: 'GPD' },
  metrics: { suffix: 'BucketMetricsConfiguration', verbs: 'GPD' },
  inventory: { suffix: 'BucketInventoryConfiguration', verbs: 'GPD' },
  'intelligent-tiering': { suffix: 'BucketIntelligentTieringConfiguration', verbs: 'GPD' },
};

/** Object sub-resources: query name → operation suffix and verbs. */
const OBJECT_CONFIGS: Readonly<Record<string, { suffix: string; verbs: string }>> = {
  acl: { suffix: 'ObjectAcl', verbs: 'GP' },
  tagging: { suffix: 'ObjectTagging', verbs: 'GPD' },
  retention: { suffix: 'ObjectRetention', verbs: 'GP' },
  'legal-hold': { suffix: 'ObjectLegalHold', verbs: 'GP' },
  attributes: { suffix: 'ObjectAttributes', verbs: 'G' },
  torrent: { suffix: 'ObjectTorrent', verbs: 'G' },
};

const VERB_METHODS = { G: ['Get', 'GET'], P: ['Put', 'PUT'], D: ['Delete', 'DELETE'] } as const;

function configOperations(
  configs: Readonly<Record<string, { suffix: string; verbs: string }>>,
  level: Level,
): OperationSpec[] {
  return Object.entries(configs).flatMap(([query, { suffix, verbs }]) =>
    Array.from(verbs, (verb) => {
      const [prefix, method] = VERB_METHODS[verb as keyof typeof VERB_METHODS];
      return { name: `${prefix}${suffix}`, method, level, query: [query] };
    }),
  );
}

function bucketSubresources(): OperationSpec[] {
  return configOperations(BUCKET_CONFIGS, 'bucket');
}

function objectSubresources(): OperationSpec[] {
  return configOperations(OBJECT_CONFIGS, 'object');
}

/**
 * Every operation, most specific first: the first entry whose method, level, query and header
 * match is the request's operation. An unknown sub-resource is refused before this table is
 * read (see SUB_RESOURCES).
 */
export const OPERATIONS: readonly OperationSpec[] = [
  { name: 'ListBuckets', method: 'GET', level: 'service' },
  // Bucket level.
  ...bucketSubresources(),
  { name: 'ListObjectsV2', method: 'GET', level: 'bucket', queryValue: ['list-type', '2'] },
  { name: 'ListObjectVersions', method: 'GET', level: 'bucket', query: ['versions'] },
  { name: 'ListMultipartUploads', method: 'GET', level: 'bucket', query: ['uploads'] },
  { name: 'ListObjects', method: 'GET', level: 'bucket' },
  { name: 'HeadBucket', method: 'HEAD', level: 'bucket' },
  { name: 'CreateBucket', method: 'PUT', level: 'bucket' },
  { name: 'DeleteBucket', method: 'DELETE', level: 'bucket' },
  { name: 'DeleteObjects', method: 'POST', level: 'bucket', query: ['delete'] },
  { name: 'PostObject', method: 'POST', level: 'bucket' },
  // A browser's CORS preflight, on a bucket or an object (src/s3/cors.ts).
  { name: 'PreflightCors', method: 'OPTIONS', level: 'bucket' },
  { name: 'PreflightCors', method: 'OPTIONS', level: 'object' },
  // Object level.
  {
    name: 'UploadPartCopy',
    method: 'PUT',
    level: 'object',
    query: ['partNumber', 'uploadId'],
    header: 'x-amz-copy-source',
  },
  { name: 'UploadPart', method: 'PUT', level: 'object', query: ['partNumber', 'uploadId'] },
  ...objectSubresources(),
  { name: 'ListParts', method: 'GET', level: 'object', query: ['uploadId'] },
  { name: 'AbortMultipartUpload', method: 'DELETE', level: 'object', query: ['uploadId'] },
  { name: 'CreateMultipartUpload', method: 'POST', level: 'object', query: ['uploads'] },
  { name: 'CompleteMultipartUpload', method: 'POST', level: 'object', query: ['uploadId'] },
  { name: 'RestoreObject', method: 'POST', level: 'object', query: ['restore'] },
  { name: 'SelectObjectContent', method: 'POST', level: 'object', query: ['select'] },
  { name: 'CopyObject', method: 'PUT', level: 'object', header: 'x-amz-copy-source' },
  { name: 'PutObject', method: 'PUT', level: 'object' },
  { name: 'GetObject', method: 'GET', level: 'object' },
  { name: 'HeadObject', method: 'HEAD', level: 'object' },
  { name: 'DeleteObject', method: 'DELETE', level: 'object' },
];

/**
 * Query parameters that select an operation or belong to one (S3's sub-resources and the
 * operations' own parameters). A query parameter outside this set that is not a presigned-URL
 * or `response-*` parameter names a feature Lightwell does not know: `NotImplemented`.
 */
const KNOWN_QUERY = new Set<string>([
  ...Object.keys(BUCKET_CONFIGS),
  ...Object.keys(OBJECT_CONFIGS),
  'uploads',
  'uploadId',
  'partNumber',
  'versions',
  'versionId',
  'delete',
  'restore',
  'select',
  'select-type',
  'list-type',
  'prefix',
  'delimiter',
  'marker',
  'max-keys',
  'max-uploads',
  'max-parts',
  'part-number-marker',
  'key-marker',
  'upload-id-marker',
  'version-id-marker',
  'start-after',
  'continuation-token',
  'fetch-owner',
  'encoding-type',
  'x-id',
  'id',
  'bucket-region',
  'max-buckets',
  'allow-unordered',
]);

export const SUB_RESOURCES: ReadonlySet<string> = KNOWN_QUERY;

/** The bucket and key a request addresses. */
export interface S3Address {
  readonly level: Level;
  readonly bucket?: string;
  readonly key?: string;
  /** True when the bucket came from the Host header (virtual-hosted style). */
  readonly virtualHost: boolean;
}

/**
 * The bucket and key of a request: from `{bucket}.{domain}` in the Host header when the host is
 * under one of `domains`, else from the path (`/{bucket}/{key}`).
 */
export function addressOf(options: {
  readonly path: string;
  readonly host: string | undefined;
  readonly domains: readonly string[];
}): S3Address {
  const { path } = options;
  if (path.includes('\uFFFD'))
    throw s3Error('InvalidURI', 'the path is not valid UTF-8; percent-encode the key');
  const host = (options.host ?? '').replace(/:\d+$/, '').toLowerCase();
  for (const domain of options.domains) {
    if (host.endsWith(`.${domain}`)) {
      const bucket = host.slice(0, -domain.length - 1);
      const key = path.length > 1 ? decoded(path.slice(1)) : undefined;
      return key === undefined
        ? { level: 'bucket', bucket, virtualHost: true }
        : { level: 'object', bucket, key, virtualHost: true };
    }
  }
  const slash = path.indexOf('/', 1);
  const bucketPart = slash < 0 ? path.slice(1) : path.slice(1, slash);
  if (bucketPart === '') return { level: 'service', virtualHost: false };
  const bucket = decoded(bucketPart);
  const keyPart = slash < 0 ? '' : path.slice(slash + 1);
  if (keyPart === '') return { level: 'bucket', bucket, virtualHost: false };
  return { level: 'object', bucket, key: decoded(keyPart), virtualHost: false };
}

function decoded(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw s3Error('InvalidArgument', 'malformed percent-encoding in the path');
  }
}

/**
 * The operation of a request at `level`: the first entry of OPERATIONS that matches. A query
 * parameter Lightwell does not know, or a method with no operation at this level, refuses.
 */
/** The signed x-amz-* headers a presigned URL may carry in its query, each read from there. */
const HOISTED_QUERY: ReadonlySet<string> = new Set(['x-amz-checksum-mode']);

export function operationOf(options: {
  readonly method: string;
  readonly level: Level;
  readonly query: URLSearchParams;
  readonly headers: Readonly<Record<string, string>>;
}): OperationSpec {
  const { method, level, query, headers } = options;
  for (const name of query.keys()) {
    if (KNOWN_QUERY.has(name) || name.startsWith('response-') || name.startsWith('X-Amz-'))
      continue;
    // A presigned URL carries the x-amz-* headers it signs as lower-case query parameters (the
    // AWS SDK's default GetObject URL has `x-amz-checksum-mode=ENABLED`). Only those read from
    // the query are let through: any other one (a copy source, a checksum, a lock mode) was
    // signed as a condition of the request, and ignoring it would change what the URL allows.
    if (HOISTED_QUERY.has(name)) continue;
    // SigV2 presigned URLs (AWSAccessKeyId, Expires, Signature) fail in authentication.
    if (name === 'AWSAccessKeyId' || name === 'Expires' || name === 'Signature') continue;
    throw s3Error('NotImplemented', `the sub-resource or parameter ${clip(name)} is not supported`);
  }
  const wanted = method === 'HEAD' && level === 'service' ? 'GET' : method;
  for (const spec of OPERATIONS) {
    if (spec.method !== wanted || spec.level !== level) continue;
    if (spec.query && !spec.query.every((name) => query.has(name))) continue;
    if (spec.queryValue && query.get(spec.queryValue[0]) !== spec.queryValue[1]) continue;
    if (spec.header && headers[spec.header] === undefined) continue;
    return spec;
  }
  throw s3Error('MethodNotAllowed', `${clip(method)} is not allowed on this resource`);
}

function clip(text: string): string {
  return text.length > 64 ? `${text.slice(0, 64)}…` : text;
}
