// OpenAPI descriptions of the data-plane operations (field names follow spec/DECISIONS.md).

import type { RouteDoc, JsonSchema } from '../http/router.js';

const str = { type: 'string' } as const;
const int = { type: 'integer' } as const;
const bool = { type: 'boolean' } as const;
const time = { type: 'string', format: 'date-time' } as const;

/**
 * A new bucket's name as `validateBucketName` takes it (its other rules, no `..`, not an IP
 * address, no reserved prefix, are in the description).
 */
export const bucketNameSchema: JsonSchema = {
  type: 'string',
  minLength: 3,
  maxLength: 63,
  pattern: '^[a-z0-9][a-z0-9.-]*[a-z0-9]$',
  description: 'S3 bucket-name rules: no two adjacent dots, not an IPv4 address',
};

export const bucketSchema: JsonSchema = {
  type: 'object',
  required: ['name', 'createdAt', 'versioning', 'objectLock'],
  properties: {
    name: str,
    createdAt: time,
    versioning: { type: 'string', enum: ['Unversioned', 'Enabled', 'Suspended'] },
    objectLock: bool,
  },
};

export const objectSchema: JsonSchema = {
  type: 'object',
  required: [
    'key',
    'size',
    'etag',
    'lastModified',
    'contentType',
    'checksums',
    'storageClass',
    'metadata',
  ],
  properties: {
    key: str,
    versionId: str,
    size: int,
    etag: str,
    lastModified: time,
    contentType: str,
    checksums: {
      type: 'object',
      additionalProperties: str,
      description: 'base64 big-endian digests by algorithm (CRC32C always)',
    },
    storageClass: str,
    metadata: { type: 'object', additionalProperties: str },
  },
};

const objectHeaders = {
  'X-Service-Checksum-CRC32': 'base64 digest to verify',
  'X-Service-Checksum-CRC32C': 'base64 digest to verify',
  'X-Service-Checksum-CRC64NVME': 'base64 digest to verify',
  'X-Service-Checksum-SHA1': 'base64 digest to verify',
  'X-Service-Checksum-SHA256': 'base64 digest to verify',
  'If-Match': 'write only if the current ETag matches',
  'If-None-Match': 'write only if absent (*) or not matching',
  'If-Unmodified-Since': 'write only if the current object is not newer (HTTP-date)',
  'X-Service-Meta-*': 'user metadata',
};

/** Object bodies travel with the object's own Content-Type, whatever it is. */
export const ANY_CONTENT_TYPE = '*/*';

/** What a read that meets a delete marker answers, as on S3. */
const deleteMarkerProblems: RouteDoc['responses'] = {
  404: {
    description: 'no such object; when its latest version is a delete marker, the headers say so',
    schema: { $ref: '#/components/schemas/Problem' },
    contentType: 'application/problem+json',
    headers: {
      'X-Service-Delete-Marker': 'true when the latest version is a delete marker',
      'X-Service-Version-Id': "the delete marker's version id",
    },
  },
  405: {
    description: 'the versionId names a delete marker (Allow: DELETE)',
    schema: { $ref: '#/components/schemas/Problem' },
    contentType: 'application/problem+json',
    headers: {
      Allow: 'DELETE',
      'X-Service-Delete-Marker': 'true',
      'X-Service-Version-Id': "the delete marker's version id",
    },
  },
};

/** Response headers of a GET or HEAD of an object (a signed GET too). */
export const objectReadHeaders: Readonly<Record<string, string>> = {
  'Content-Type': 'the Content-Type the object was stored with',
  ETag: 'the entity tag',
  'Last-Modified': 'when the version was written',
  'Accept-Ranges': 'bytes',
  'X-Service-Version-Id': 'the version id (buckets that have had versioning enabled)',
  'X-Service-Checksum-CRC32C':
    'the full-object CRC32C, base64; every checksum the client supplied comes as X-Service-Checksum-<alg> too',
  'X-Service-Encryption': 'AES256-GCM',
  'X-Service-Compression': 'LZ4 or NONE: how the bytes are stored',
  'X-Service-Storage-Class': 'STANDARD',
  'X-Service-Content-Length': 'the size of the whole object',
  'X-Service-Object-Lock-Mode': 'the retention mode, when the version has one',
  'X-Service-Object-Lock-Retain-Until-Date': 'the end of retention (RFC 3339), with the mode',
  'X-Service-Object-Lock-Legal-Hold': 'ON or OFF (object-lock buckets)',
  'X-Service-Tagging-Count': 'the number of tags, when the version has any',
};

/** The responses of a GET of an object, plain or signed. */
export const objectReadResponses: RouteDoc['responses'] = {
  200: { description: 'the object', contentType: ANY_CONTENT_TYPE, headers: objectReadHeaders },
  206: {
    description: 'the range',
    contentType: ANY_CONTENT_TYPE,
    headers: { ...objectReadHeaders, 'Content-Range': 'bytes first-last/size' },
  },
  304: {
    description: 'not modified',
    headers: { ETag: 'the entity tag', 'Last-Modified': 'when the version was written' },
  },
};

/** Headers of a write's answer (`writtenHeaders` in routes.ts). */
export const writeHeaders = {
  ETag: 'the entity tag of what was stored',
  'Last-Modified': 'when the version was written',
  'X-Service-Checksum-*': 'every checksum stored with the object (CRC32C always), base64',
  'X-Service-Version-Id': 'the new version (in a bucket that is or was versioned)',
};

export const healthz: RouteDoc = {
  summary: 'Liveness',
  auth: 'none',
  responses: {
    200: { description: 'alive', schema: { type: 'object', properties: { status: str } } },
  },
};

export const createToken: RouteDoc = {
  summary: 'Mint a native bearer token from an access key id and secret',
  auth: 'basic-or-body',
  requestBody: {
    contentType: 'application/json',
    required: false,
    schema: { type: 'object', properties: { accessKeyId: str, secretKey: str } },
  },
  responses: {
    200: {
      description: 'token',
      schema: {
        type: 'object',
        required: ['token', 'expiresAt'],
        properties: { token: str, expiresAt: time },
      },
    },
  },
};

export const listBuckets: RouteDoc = {
  summary: "List the tenant's buckets that the key may read in (all, for a tenant-wide read key)",
  auth: 'bearer',
  responses: {
    200: {
      description: 'buckets',
      schema: { type: 'object', properties: { buckets: { type: 'array', items: bucketSchema } } },
    },
  },
};

export const createBucket: RouteDoc = {
  summary: 'Create a private bucket',
  auth: 'bearer',
  requestBody: {
    contentType: 'application/json',
    schema: {
      type: 'object',
      required: ['name'],
      properties: {
        name: bucketNameSchema,
        versioning: { type: 'string', enum: ['Enabled'] },
        objectLock: bool,
      },
    },
  },
  responses: { 201: { description: 'created', schema: bucketSchema } },
};

export const getBucket: RouteDoc = {
  summary: 'Get a bucket',
  auth: 'bearer',
  responses: { 200: { description: 'bucket', schema: bucketSchema } },
};
export const deleteBucket: RouteDoc = {
  summary: 'Delete an empty bucket',
  auth: 'bearer',
  responses: { 204: { description: 'deleted' } },
};

export const listObjects: RouteDoc = {
  summary: 'List objects by prefix',
  auth: 'bearer',
  query: {
    prefix: str,
    delimiter: str,
    maxKeys: { type: 'integer', minimum: 1, maximum: 1000, default: 1000 },
    continuationToken: {
      type: 'string',
      description:
        "the previous page's nextContinuationToken, unchanged, with the same prefix and " +
        'delimiter (anything else: 400)',
    },
  },
  responses: {
    200: {
      description: 'a page of objects',
      schema: {
        type: 'object',
        required: ['objects', 'commonPrefixes', 'isTruncated'],
        properties: {
          objects: { type: 'array', items: objectSchema },
          commonPrefixes: { type: 'array', items: str },
          isTruncated: bool,
          nextContinuationToken: str,
        },
      },
    },
  },
};

export const putObject: RouteDoc = {
  summary: 'Streaming upload',
  auth: 'bearer',
  headers: {
    ...objectHeaders,
    'Idempotency-Key':
      'makes the PUT replay-safe (needs an X-Service-Checksum-* header); bound to the object key, checksums, length and metadata',
  },
  requestBody: {
    contentType: ANY_CONTENT_TYPE,
    schema: { type: 'string', format: 'binary' },
  },
  responses: {
    200: { description: 'stored durably', schema: objectSchema, headers: writeHeaders },
  },
};

/** The headers a GET or HEAD of an object honours (a signed GET too). */
export const readHeaders = {
  Range: 'bytes=a-b, a- or -n (several ranges, or a reversed one, read the whole object)',
  'If-Range': 'serve the Range only if this strong ETag or exact Last-Modified still holds',
  'If-Match': 'read only if the ETag matches (else 412)',
  'If-Unmodified-Since': 'read only if not modified since (else 412)',
  'If-None-Match': 'conditional read (304 when it matches)',
  'If-Modified-Since': 'conditional read (304 when not modified)',
};

export const getObject: RouteDoc = {
  summary: 'Streaming download; single Range supported',
  auth: 'bearer',
  query: { versionId: str },
  headers: readHeaders,
  responses: { ...objectReadResponses, ...deleteMarkerProblems },
};

export const headObject: RouteDoc = {
  summary: 'Object metadata as headers',
  auth: 'bearer',
  query: { versionId: str },
  headers: readHeaders,
  responses: {
    200: { description: 'metadata headers', headers: objectReadHeaders },
    206: {
      description: 'metadata headers of the range',
      headers: { ...objectReadHeaders, 'Content-Range': 'bytes first-last/size' },
    },
    304: objectReadResponses[304] as NonNullable<RouteDoc['responses'][number]>,
    ...deleteMarkerProblems,
  },
};
export const deleteObject: RouteDoc = {
  summary: 'Delete an object (a delete marker in a versioned bucket)',
  auth: 'bearer',
  query: { versionId: str },
  headers: {
    'If-Match': 'delete only if the ETag (of the version, with versionId) matches',
    'If-None-Match': 'delete only if the object (the version) is absent (*) or not matching',
    'If-Unmodified-Since': 'delete only if the object (the version) is not newer (HTTP-date)',
  },
  responses: {
    204: {
      description: 'deleted',
      headers: {
        'X-Service-Version-Id': 'the version removed, or the delete marker written',
        'X-Service-Delete-Marker': 'true when a delete marker was written or removed',
      },
    },
  },
};
export const openapi: RouteDoc = {
  summary: 'This OpenAPI document',
  auth: 'none',
  responses: { 200: { description: 'OpenAPI 3 document', schema: { type: 'object' } } },
};

const problem = (description: string): NonNullable<RouteDoc['responses'][number]> => ({
  description,
  schema: { $ref: '#/components/schemas/Problem' },
  contentType: 'application/problem+json',
});

/**
 * The problem answers a data-plane operation can give, read off what its description declares
 * (how it authenticates, its path, the headers and body it takes), added to those it lists
 * itself; the document then names them instead of leaving them to `default`.
 */
export function withProblems(doc: RouteDoc, method: string, path: string): RouteDoc {
  if (doc.auth === 'none') return doc;
  const found: Record<number, string> = {
    400: 'malformed request: parameters, headers, body or names',
  };
  if (doc.auth === 'basic-or-body') {
    found[401] =
      'no credentials, an unknown or revoked access key, a wrong secret, or a disabled tenant';
    found[403] = 'tls_required: minted over plain HTTP from a non-loopback peer';
    found[429] = 'too many mints for this access key (see Retry-After)';
  } else {
    found[401] =
      doc.auth === 'signed-url'
        ? 'missing, invalid or expired URL token, its key revoked or its tenant disabled; the challenge is \'Bearer realm="lightwell", error="invalid_token"\': a new URL is needed, an Authorization header does not help'
        : 'missing, invalid or expired token, a revoked key or a disabled tenant';
    found[403] = "the key's scope or the bucket policy does not allow it";
  }
  if (path.includes('{bucket}')) found[404] = 'no such bucket, object, version or upload';
  const headers = doc.headers ?? {};
  if ('If-Match' in headers || 'If-None-Match' in headers)
    found[412] = 'a precondition (If-Match, If-None-Match, If-Unmodified-Since) failed';
  if (/\/object-(tags|retention|legal-hold)\//.test(path))
    found[405] =
      'the versionId names a delete marker, which has no tags, retention or legal hold (empty Allow)';
  if ('Range' in headers) found[416] = 'the range cannot be satisfied (see Content-Range)';
  if (doc.requestBody) found[413] = 'the body is over its limit';
  if (doc.requestBody && doc.requestBody.contentType !== 'application/json') {
    found[411] = 'no Content-Length';
    found[507] = "the tenant's quota would be exceeded";
  }
  if ('Idempotency-Key' in headers) {
    found[409] = 'a request with this Idempotency-Key is still running';
    found[422] = 'the Idempotency-Key was used for another request';
  }
  if (method === 'POST' && /\/(object-copy|multipart\/\{uploadId\}\/complete)\//.test(path))
    found[507] = "the tenant's quota would be exceeded";
  if (method === 'PUT' && path.endsWith('/notifications'))
    found[501] = 'a target type other than webhook';
  if (method === 'POST' && path === '/sign-url')
    found[404] = "no such bucket (another tenant's bucket too)";
  if (method === 'POST' && path.endsWith('/buckets')) found[409] = 'the bucket exists';
  if (method === 'DELETE' && path.endsWith('/buckets/{bucket}'))
    found[409] = 'the bucket is not empty';
  if (method === 'PUT' && path.endsWith('/versioning'))
    found[409] = 'Suspended on a bucket with object lock (it stays Enabled)';
  const responses: Record<number, NonNullable<RouteDoc['responses'][number]>> = {};
  for (const [status, description] of Object.entries(found))
    responses[Number(status)] = problem(description);
  if (responses[416])
    responses[416] = { ...responses[416], headers: { 'Content-Range': 'bytes */size' } };
  return { ...doc, responses: { ...responses, ...doc.responses } };
}

/**
 * The describer of a group of bearer-token operations: each doc gets the group's OpenAPI tag
 * (none for `undefined`) and the note every summary of the group ends with.
 */
export function bearerDocs(
  tag: string | undefined,
  summaryNote = '',
): (summary: string, responses: RouteDoc['responses'], extra?: Partial<RouteDoc>) => RouteDoc {
  return (summary, responses, extra = {}) => ({
    summary: `${summary}${summaryNote}`,
    auth: 'bearer',
    ...(tag === undefined ? {} : { tags: [tag] }),
    responses,
    ...extra,
  });
}
