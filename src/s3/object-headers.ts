// The S3 request headers and query parameters of the object operations, read into plain
// values, and the S3 headers of an object's answer.
//
// This is S3's spelling only: which header carries what. What the values mean (conditions,
// ranges, quotas, retention) is the service's, shared with every transport.
//
// Invariants:
// - An object's stored representation headers are exactly STORED_HEADERS plus Content-Type;
//   user metadata is `x-amz-meta-*` with the prefix cut off, checked as the native API's.
// - A checksum header holds the canonical padded base64 of its algorithm's digest, Content-MD5
//   that of 16 bytes; anything else is refused (`InvalidDigest`, `InvalidRequest`).
// - Every refusal is a catalogue error whose `details.s3Code` names S3's code for it.
//
// Nothing here is persisted.

import { CHECKSUM_DIGEST_BYTES, parseChecksumAlg, type ChecksumAlg } from '../engine/checksums.js';
import { validateUserMetadata } from '../security/names.js';
import { s3Error } from './errors.js';

/** S3's Content-Type of an object stored without one. */
export const S3_DEFAULT_CONTENT_TYPE = 'binary/octet-stream';
const META_PREFIX = 'x-amz-meta-';
const CHECKSUM_PREFIX = 'x-amz-checksum-';

/**
 * The representation headers an S3 PUT stores and every GET and HEAD answers, by their
 * lower-case request name and the spelling they are answered with.
 */
export const STORED_HEADERS: readonly (readonly [string, string])[] = [
  ['cache-control', 'Cache-Control'],
  ['content-disposition', 'Content-Disposition'],
  ['content-encoding', 'Content-Encoding'],
  ['content-language', 'Content-Language'],
  ['expires', 'Expires'],
];

/** The `response-*` query parameters of GetObject and the headers they override. */
const RESPONSE_OVERRIDES: readonly (readonly [string, string])[] = [
  ['response-cache-control', 'Cache-Control'],
  ['response-content-disposition', 'Content-Disposition'],
  ['response-content-encoding', 'Content-Encoding'],
  ['response-content-language', 'Content-Language'],
  ['response-content-type', 'Content-Type'],
  ['response-expires', 'Expires'],
];

/** Headers by lower-case name, as the request carries them. */
export type RequestHeaders = Readonly<Record<string, string | undefined>>;

/** What an S3 write stores beside the bytes: Content-Type, representation headers, metadata. */
export interface ObjectRepresentation {
  readonly contentType: string;
  /** STORED_HEADERS present on the request, by lower-case name. */
  readonly headers: Readonly<Record<string, string>>;
  readonly metadata: Readonly<Record<string, string>>;
}

/** The representation of an S3 PutObject, CreateMultipartUpload or CopyObject (REPLACE). */
export function representationOf(headers: RequestHeaders): ObjectRepresentation {
  refuseUnkeptPromises(headers);
  const metadata: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && name.startsWith(META_PREFIX))
      metadata[name.slice(META_PREFIX.length)] = value;
  }
  validateUserMetadata(metadata);
  const stored: Record<string, string> = {};
  for (const [name] of STORED_HEADERS) {
    const value = headers[name];
    if (value !== undefined) stored[name] = value;
  }
  const contentType = headers['content-type'];
  return {
    contentType:
      contentType === undefined || contentType === '' ? S3_DEFAULT_CONTENT_TYPE : contentType,
    headers: stored,
    metadata,
  };
}

/**
 * Headers asking for what Lightwell does not do are refused rather than dropped (a silent
 * success would tell the client it got them): one storage class, STANDARD, is all there is, and
 * there is no website hosting to redirect.
 */
function refuseUnkeptPromises(headers: RequestHeaders): void {
  const storageClass = headers['x-amz-storage-class'];
  if (storageClass !== undefined && storageClass !== 'STANDARD')
    throw s3Error(
      'InvalidStorageClass',
      `the storage class ${storageClass.slice(0, 64)} is not offered: Lightwell stores STANDARD`,
    );
  if (headers['x-amz-website-redirect-location'] !== undefined)
    throw s3Error('NotImplemented', 'x-amz-website-redirect-location is not supported');
}

/** The answer headers of an object's representation, with `response-*` overrides applied. */
export function representationHeaders(
  object: ObjectRepresentation,
  query?: Readonly<Record<string, string | undefined>>,
): Record<string, string> {
  const out: Record<string, string> = { 'Content-Type': object.contentType };
  for (const [name, spelling] of STORED_HEADERS) {
    const value = object.headers[name];
    if (value !== undefined) out[spelling] = value;
  }
  for (const [name, value] of Object.entries(object.metadata)) out[META_PREFIX + name] = value;
  if (query) {
    for (const [parameter, header] of RESPONSE_OVERRIDES) {
      const value = query[parameter];
      if (value !== undefined) out[header] = value;
    }
  }
  return out;
}

/** True when a GetObject asks for a `response-*` override (S3 refuses them anonymously). */
export function hasResponseOverrides(query: Readonly<Record<string, string | undefined>>): boolean {
  return RESPONSE_OVERRIDES.some(([parameter]) => query[parameter] !== undefined);
}

// ---------------------------------------------------------------------------------------------
// Integrity headers.

/** The Content-MD5 digest, or undefined; a malformed one is `InvalidDigest`. */
export function contentMd5Of(headers: RequestHeaders): Buffer | undefined {
  const value = headers['content-md5'];
  if (value === undefined) return undefined;
  const digest = Buffer.from(value, 'base64');
  if (digest.length !== 16 || digest.toString('base64') !== value)
    throw s3Error('InvalidDigest', 'the Content-MD5 you specified was not valid');
  return digest;
}

/** Refuses a body whose MD5 is not the Content-MD5 sent (`BadDigest`). */
export function checkContentMd5(expected: Buffer | undefined, actual: Buffer | undefined): void {
  if (expected === undefined) return;
  if (actual === undefined || !expected.equals(actual)) {
    throw s3Error('BadDigest', 'the Content-MD5 you specified did not match what was received');
  }
}

/** The checksums a request declares: `x-amz-checksum-<alg>` headers, and the SDK's algorithm. */
export interface DeclaredChecksums {
  /** Digests sent in headers, by algorithm. */
  readonly expected: ReadonlyMap<ChecksumAlg, Buffer>;
  /**
   * The algorithms whose digests arrive in the trailer (`x-amz-trailer`): hashed while the body
   * streams; the aws-chunked decoder compares them with the trailer.
   */
  readonly trailing: readonly ChecksumAlg[];
  /** Every algorithm the stored object will carry a checksum of. */
  readonly algs: readonly ChecksumAlg[];
}

/**
 * Reads `x-amz-checksum-*`, `x-amz-trailer` and `x-amz-sdk-checksum-algorithm`. S3 takes one
 * checksum per request; an algorithm named by the SDK header must come with its value, in a
 * header or the trailer.
 */
export function declaredChecksums(headers: RequestHeaders): DeclaredChecksums {
  const expected = new Map<ChecksumAlg, Buffer>();
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || !name.startsWith(CHECKSUM_PREFIX)) continue;
    const suffix = name.slice(CHECKSUM_PREFIX.length);
    if (suffix === 'type' || suffix === 'algorithm' || suffix === 'mode') continue;
    const alg = parseChecksumAlg(suffix);
    if (alg === undefined) throw s3Error('InvalidRequest', `${name} is not a checksum S3 knows`);
    expected.set(alg, checksumValue(alg, value));
  }
  const trailing: ChecksumAlg[] = [];
  for (const name of (headers['x-amz-trailer'] ?? '').split(',')) {
    const trimmed = name.trim().toLowerCase();
    if (trimmed === '') continue;
    const alg = trimmed.startsWith(CHECKSUM_PREFIX)
      ? parseChecksumAlg(trimmed.slice(CHECKSUM_PREFIX.length))
      : undefined;
    if (alg === undefined) throw s3Error('InvalidRequest', `the trailer ${trimmed} is not taken`);
    trailing.push(alg);
  }
  if (expected.size + trailing.length > 1)
    throw s3Error('InvalidRequest', 'Expecting a single x-amz-checksum- header');
  const sdk = headers['x-amz-sdk-checksum-algorithm'];
  if (sdk !== undefined) {
    const alg = parseChecksumAlg(sdk);
    if (alg === undefined)
      throw s3Error('InvalidRequest', `x-amz-sdk-checksum-algorithm ${sdk} is not supported`);
    if (!expected.has(alg) && !trailing.includes(alg)) {
      throw s3Error(
        'InvalidRequest',
        `x-amz-sdk-checksum-algorithm specified, but no corresponding x-amz-checksum-* or x-amz-trailer headers were found`,
      );
    }
  }
  return { expected, trailing, algs: [...expected.keys(), ...trailing] };
}

/** A checksum header's value as digest bytes (`InvalidRequest` when it is not one). */
export function checksumValue(alg: ChecksumAlg, value: string): Buffer {
  const digest = Buffer.from(value, 'base64');
  if (digest.length !== CHECKSUM_DIGEST_BYTES[alg] || digest.toString('base64') !== value) {
    throw s3Error(
      'InvalidRequest',
      `Value for x-amz-checksum-${alg.toLowerCase()} header is invalid.`,
    );
  }
  return digest;
}

/** Refuses a body whose digest of `alg` is not the one declared (`BadDigest`). */
export function checkDeclaredChecksums(
  declared: ReadonlyMap<ChecksumAlg, Buffer>,
  received: Readonly<Record<string, string>>,
): void {
  for (const [alg, digest] of declared) {
    if (received[alg] !== digest.toString('base64')) {
      throw s3Error('BadDigest', `The ${alg} you specified did not match the calculated checksum.`);
    }
  }
}

/** The algorithm and type a CreateMultipartUpload asks its parts to carry. */
export function multipartChecksumOf(headers: RequestHeaders): {
  alg: ChecksumAlg | undefined;
  type: 'COMPOSITE' | 'FULL_OBJECT' | undefined;
} {
  const name = headers['x-amz-checksum-algorithm'];
  const alg = name === undefined ? undefined : parseChecksumAlg(name);
  if (name !== undefined && alg === undefined)
    throw s3Error('InvalidRequest', `x-amz-checksum-algorithm ${name} is not supported`);
  const typeName = headers['x-amz-checksum-type']?.toUpperCase();
  if (typeName !== undefined && typeName !== 'COMPOSITE' && typeName !== 'FULL_OBJECT')
    throw s3Error('InvalidRequest', 'x-amz-checksum-type must be COMPOSITE or FULL_OBJECT');
  if (typeName !== undefined && alg === undefined)
    throw s3Error('InvalidRequest', 'x-amz-checksum-type needs x-amz-checksum-algorithm');
  // CRC64NVME has only the full-object form; SHA-1 and SHA-256 only the composite one.
  if (alg === 'CRC64NVME' && typeName === 'COMPOSITE')
    throw s3Error('InvalidRequest', 'CRC64NVME checksums are FULL_OBJECT only');
  if ((alg === 'SHA1' || alg === 'SHA256') && typeName === 'FULL_OBJECT')
    throw s3Error('InvalidRequest', `${alg} checksums are COMPOSITE only`);
  const type =
    alg === undefined
      ? undefined
      : (typeName ?? (alg === 'CRC64NVME' ? 'FULL_OBJECT' : 'COMPOSITE'));
  return { alg, type };
}

/**
 * S3's x-amz-checksum-type of an object's checksums: COMPOSITE when one is a multipart upload's
 * composite (`<digest>-<parts>`), else FULL_OBJECT.
 */
export function checksumTypeOf(
  checksums: Readonly<Record<string, string>>,
): 'COMPOSITE' | 'FULL_OBJECT' {
  return Object.values(checksums).some((value) => /-\d+$/.test(value))
    ? 'COMPOSITE'
    : 'FULL_OBJECT';
}

// ---------------------------------------------------------------------------------------------
// Copy.

/** `x-amz-copy-source`: `[/]bucket/key[?versionId=id]`, the key percent-encoded. */
export function copySourceOf(headers: RequestHeaders): {
  bucket: string;
  key: string;
  versionId?: string;
} {
  const raw = headers['x-amz-copy-source'];
  if (raw === undefined) throw s3Error('InvalidArgument', 'x-amz-copy-source is required');
  const question = raw.indexOf('?');
  const path = question === -1 ? raw : raw.slice(0, question);
  const query = question === -1 ? '' : raw.slice(question + 1);
  let decoded: string;
  try {
    decoded = decodeURIComponent(path.startsWith('/') ? path.slice(1) : path);
  } catch {
    throw s3Error('InvalidArgument', 'x-amz-copy-source is not percent-encoded');
  }
  const slash = decoded.indexOf('/');
  if (slash <= 0 || slash === decoded.length - 1)
    throw s3Error(
      'InvalidArgument',
      'Copy Source must mention the source bucket and key: sourcebucket/sourcekey',
    );
  let versionId: string | undefined;
  if (query !== '') {
    const params = new URLSearchParams(query);
    const value = params.get('versionId');
    if (value === null || [...params.keys()].length !== 1)
      throw s3Error('InvalidArgument', 'x-amz-copy-source takes only ?versionId=');
    versionId = value;
  }
  return {
    bucket: decoded.slice(0, slash),
    key: decoded.slice(slash + 1),
    ...(versionId === undefined ? {} : { versionId }),
  };
}

/**
 * `x-amz-copy-source-range: bytes=first-last` of UploadPartCopy, both ends given; whether it
 * lies inside the source is the service's to check (`InvalidRange`).
 */
export function copySourceRangeOf(
  headers: RequestHeaders,
): { start: number; end: number } | undefined {
  const value = headers['x-amz-copy-source-range'];
  if (value === undefined) return undefined;
  const match = /^bytes=(\d{1,16})-(\d{1,16})$/.exec(value);
  const start = Number(match?.[1]);
  const end = Number(match?.[2]);
  if (!match) {
    throw s3Error(
      'InvalidArgument',
      'The x-amz-copy-source-range value must be of the form bytes=first-last',
    );
  }
  if (start > end) throw s3Error('InvalidRange', 'the copy range ends before it starts');
  return { start, end };
}

/** `x-amz-metadata-directive` (and `x-amz-tagging-directive`): COPY unless REPLACE. */
export function directiveOf(headers: RequestHeaders, name: string): 'COPY' | 'REPLACE' {
  const value = headers[name];
  if (value === undefined || value === 'COPY') return 'COPY';
  if (value === 'REPLACE') return 'REPLACE';
  throw s3Error('InvalidArgument', `Unknown ${name} value: ${value}`);
}

/** The `x-amz-copy-source-if-*` conditions, in the service's names for a copy's source. */
export function copySourceConditionsOf(headers: RequestHeaders): {
  ifMatch?: string;
  ifNoneMatch?: string;
  ifModifiedSince?: number;
  ifUnmodifiedSince?: number;
} {
  const conditions: {
    ifMatch?: string;
    ifNoneMatch?: string;
    ifModifiedSince?: number;
    ifUnmodifiedSince?: number;
  } = {};
  const ifMatch = headers['x-amz-copy-source-if-match'];
  const ifNoneMatch = headers['x-amz-copy-source-if-none-match'];
  const ifModifiedSince = httpDateOf(headers['x-amz-copy-source-if-modified-since']);
  const ifUnmodifiedSince = httpDateOf(headers['x-amz-copy-source-if-unmodified-since']);
  if (ifMatch !== undefined) conditions.ifMatch = ifMatch;
  if (ifNoneMatch !== undefined) conditions.ifNoneMatch = ifNoneMatch;
  if (ifModifiedSince !== undefined) conditions.ifModifiedSince = ifModifiedSince;
  if (ifUnmodifiedSince !== undefined) conditions.ifUnmodifiedSince = ifUnmodifiedSince;
  return conditions;
}

/**
 * An If-Match or If-None-Match list as the service compares it: S3 clients often send an ETag
 * without its quotes (`abc` for `"abc"`), which S3 matches, so a bare tag is read as quoted.
 */
export function etagConditionOf(value: string | undefined): string | undefined {
  if (value === undefined || value.trim() === '*') return value;
  return value
    .split(',')
    .map((part) => {
      const tag = part.trim();
      return tag === '' || tag.startsWith('"') || tag.startsWith('W/"') ? tag : `"${tag}"`;
    })
    .join(', ');
}

/** An HTTP date as epoch milliseconds; S3 ignores a date it cannot read, and so does this. */
export function httpDateOf(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const ms = Date.parse(value);
  return Number.isFinite(ms) ? ms : undefined;
}

// ---------------------------------------------------------------------------------------------
// Listing parameters.

/** `max-keys` (and `max-uploads`, `max-parts`): 0..limit, more is the limit, junk refused. */
export function maxCountOf(value: string | undefined, name: string, limit = 1000): number {
  if (value === undefined) return limit;
  if (!/^\d{1,10}$/.test(value))
    throw s3Error('InvalidArgument', `Provided ${name} not an integer or within integer range`);
  return Math.min(Number(value), limit);
}

/** `encoding-type`: only `url` exists. */
export function encodingUrlOf(value: string | undefined): boolean {
  if (value === undefined) return false;
  if (value.toLowerCase() === 'url') return true;
  throw s3Error('InvalidArgument', 'Invalid Encoding Method specified in Request');
}

/** `x-amz-object-attributes` of GetObjectAttributes: a comma list, at least one known name. */
export function objectAttributesOf(
  headers: RequestHeaders,
): Set<'ETag' | 'Checksum' | 'ObjectParts' | 'StorageClass' | 'ObjectSize'> {
  const known = ['ETag', 'Checksum', 'ObjectParts', 'StorageClass', 'ObjectSize'] as const;
  const wanted = new Set<(typeof known)[number]>();
  for (const name of (headers['x-amz-object-attributes'] ?? '').split(',')) {
    const trimmed = name.trim();
    if (trimmed === '') continue;
    const found = known.find((attribute) => attribute === trimmed);
    if (found === undefined)
      throw s3Error('InvalidArgument', `Invalid attribute name specified: ${trimmed}`);
    wanted.add(found);
  }
  if (wanted.size === 0)
    throw s3Error('InvalidArgument', 'x-amz-object-attributes must name at least one attribute');
  return wanted;
}
