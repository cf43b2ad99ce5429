// S3's object operations: PutObject, GetObject, HeadObject, DeleteObject, ListObjects (V1) and
// ListObjectsV2, over the service's object store (object-port.ts).
//
// Each handler reads S3's request into plain values (object-headers.ts), asks the service, and
// writes S3's answer (headers, object-xml.ts). It holds no rule of its own beyond S3's wire form:
// what may be read or written, and how, is the service's to decide.
//
// Invariants:
// - An S3 PUT hashes MD5 beside the checksums: its ETag is the hex MD5 (DECISIONS.md). A body
//   whose MD5 is not its Content-MD5, or whose digest is not a declared x-amz-checksum-*, is
//   refused before the commit (`BadDigest`): nothing is stored.
// - A continuation token is the last key or prefix of the page, base64url; the listing applies
//   the request's prefix and authorization whatever the token says.
// - Checksums are answered on GET and HEAD only when asked (`x-amz-checksum-mode: ENABLED`) and
//   only for the whole object, as S3 does.
//
// Persists: nothing itself; objects through the service.

import { addExpirationHeader } from './lifecycle.js';
import type { S3Api, S3Request } from './api.js';
import { s3Error } from './errors.js';
import {
  checkContentMd5,
  checkDeclaredChecksums,
  checksumTypeOf,
  contentMd5Of,
  declaredChecksums,
  encodingUrlOf,
  etagConditionOf,
  maxCountOf,
  representationHeaders,
  representationOf,
  type ObjectRepresentation,
} from './object-headers.js';
import type { ResolvedRead, S3ObjectStore, StoredVersion } from './object-port.js';
import { listObjectsV1Xml, listObjectsV2Xml, type XmlListEntry } from './object-xml.js';
import type { DigestAlg } from '../engine/checksums.js';
import { withRequestedAcl } from './access-ops.js';
import { addLockHeaders, bypassRequested } from './object-lock.js';
import { addTaggingCount } from './tagging.js';
import { addSseHeaders, checkReadSseOf } from './encryption.js';
import { newVersionAttributesOf } from './version-attributes.js';

export function registerObjects(api: S3Api): void {
  api.register('PutObject', putObject);
  api.register('GetObject', readObject);
  api.register('HeadObject', readObject);
  api.register('DeleteObject', deleteObject);
  api.register('ListObjectsV2', listObjectsV2);
  api.register('ListObjects', listObjectsV1);
}

/** The service's object store; `NotImplemented` on a listener without one. */
export function objectStoreOf(request: S3Request): S3ObjectStore {
  const store = request.services.objects;
  if (!store) throw s3Error('NotImplemented', 'objects are not served on this listener');
  return store;
}

function target(request: S3Request): { bucket: string; key: string } {
  const { bucket, key } = request.address;
  if (bucket === undefined || key === undefined) throw s3Error('InvalidRequest', 'no object named');
  return { bucket, key };
}

function header(request: S3Request, name: string): string | undefined {
  return request.exchange.header(name);
}

/**
 * The length of the object's bytes: Content-Length, or for an aws-chunked body the decoded
 * length S3 requires beside it (`x-amz-decoded-content-length`).
 */
export function objectLengthOf(request: S3Request): number {
  const chunked = header(request, 'x-amz-decoded-content-length');
  const value = chunked ?? header(request, 'content-length');
  if (value === undefined) throw s3Error('MissingContentLength');
  if (!/^\d{1,16}$/.test(value)) throw s3Error('InvalidArgument', 'malformed Content-Length');
  return Number(value);
}

/** The representation of a write, without the transfer coding `aws-chunked` (not the object's). */
function writeRepresentation(request: S3Request): ObjectRepresentation {
  const representation = withRequestedAcl(request, representationOf(request.exchange.headers));
  const encoding = representation.headers['content-encoding'];
  if (encoding === undefined) return representation;
  const kept = encoding
    .split(',')
    .map((coding) => coding.trim())
    .filter((coding) => coding !== '' && coding.toLowerCase() !== 'aws-chunked');
  const headers = { ...representation.headers };
  if (kept.length === 0) delete headers['content-encoding'];
  else headers['content-encoding'] = kept.join(', ');
  return { ...representation, headers };
}

async function putObject(request: S3Request): Promise<void> {
  const store = objectStoreOf(request);
  request.requirePrincipal();
  const { bucket, key } = target(request);
  const contentLength = objectLengthOf(request);
  const md5 = contentMd5Of(request.exchange.headers);
  const declared = declaredChecksums(request.exchange.headers);
  const algs: DigestAlg[] = [...new Set<DigestAlg>(['CRC32C', ...declared.algs, 'MD5'])];
  const stored = await store.put(request, {
    bucket,
    key,
    contentLength,
    algs,
    representation: writeRepresentation(request),
    ifMatch: etagConditionOf(header(request, 'if-match')),
    ifNoneMatch: etagConditionOf(header(request, 'if-none-match')),
    attributes: newVersionAttributesOf(request),
    check: (received) => {
      checkContentMd5(md5, received.md5);
      checkDeclaredChecksums(declared.expected, received.checksums);
    },
  });
  const headers: Record<string, string> = { ETag: stored.version.etag };
  // A write to a Suspended bucket makes the null version, which S3 does not name.
  if (stored.version.versionId !== 'null') headers['x-amz-version-id'] = stored.version.versionId;
  addSseHeaders(stored.version, headers, stored.customerKey);
  addExpirationHeader(request, bucket, stored.version, headers);
  for (const alg of declared.algs) {
    const digest = stored.version.checksums[alg];
    if (digest !== undefined) headers[`x-amz-checksum-${alg.toLowerCase()}`] = digest;
  }
  request.send(200, headers);
}

/** The headers of a GET or HEAD answer (Content-Length and Content-Range come with the body). */
export function readHeaders(
  request: S3Request,
  read: StoredVersion & { range?: unknown; partsCount?: number | undefined },
): Record<string, string> {
  const query = Object.fromEntries(request.exchange.query);
  const headers = representationHeaders(read.representation, query);
  const { version } = read;
  headers['ETag'] = version.etag;
  headers['Last-Modified'] = new Date(version.lastModified).toUTCString();
  headers['Accept-Ranges'] = 'bytes';
  if (read.versioned) headers['x-amz-version-id'] = version.versionId;
  if (request.address.bucket !== undefined)
    addExpirationHeader(request, request.address.bucket, version, headers);
  if (read.partsCount !== undefined) headers['x-amz-mp-parts-count'] = String(read.partsCount);
  // From a presigned URL the mode comes as a query parameter (request.ts, operationOf).
  const mode =
    header(request, 'x-amz-checksum-mode') ??
    request.exchange.query.get('x-amz-checksum-mode') ??
    undefined;
  if (mode?.toUpperCase() === 'ENABLED' && read.range === undefined) {
    for (const [alg, digest] of Object.entries(version.checksums))
      headers[`x-amz-checksum-${alg.toLowerCase()}`] = digest;
    // A multipart object's CRCs are combined over the whole object, its SHA-1 or SHA-256 a
    // composite of its parts' (engine/ops/multipart.ts).
    headers['x-amz-checksum-type'] = checksumTypeOf(version.checksums);
  }
  addLockHeaders(version, headers);
  addTaggingCount(version, headers);
  addSseHeaders(version, headers, read.customerKey);
  return headers;
}

/** GetObject's and HeadObject's `partNumber`: absent, or a part number 1..10000. */
function partNumberOf(text: string | null): number | undefined {
  if (text === null) return undefined;
  const number = /^\d{1,5}$/.test(text) ? Number(text) : NaN;
  if (!(number >= 1 && number <= 10_000))
    throw s3Error('InvalidArgument', 'Part number must be an integer between 1 and 10000');
  return number;
}

function readObject(request: S3Request): Promise<void> | undefined {
  const { bucket, key } = target(request);
  const versionId = request.exchange.query.get('versionId');
  const fresh = objectStoreOf(request).freshen?.(request, { bucket, key, versionId });
  return fresh === undefined ? readFresh(request) : fresh.then(() => readFresh(request));
}

function readFresh(request: S3Request): Promise<void> | undefined {
  const store = objectStoreOf(request);
  const { bucket, key } = target(request);
  checkReadSseOf(request);
  const query = request.exchange.query;
  const partNumber = partNumberOf(query.get('partNumber'));
  const range = header(request, 'range');
  if (partNumber !== undefined && range !== undefined)
    throw s3Error('InvalidRequest', 'Cannot specify both Range header and partNumber query');
  const read: ResolvedRead = store.resolveRead(request, {
    bucket,
    key,
    versionId: query.get('versionId'),
    ifMatch: etagConditionOf(header(request, 'if-match')),
    ifNoneMatch: etagConditionOf(header(request, 'if-none-match')),
    ifModifiedSince: header(request, 'if-modified-since'),
    ifUnmodifiedSince: header(request, 'if-unmodified-since'),
    range,
    partNumber,
  });
  const headers = readHeaders(request, read);
  if (read.notModified) {
    // A 304 has no body to check a checksum against (the SDK would fail it), as S3 sends none.
    const kept = Object.entries(headers).filter(([name]) => !name.startsWith('x-amz-checksum-'));
    request.send(304, Object.fromEntries(kept));
    return undefined;
  }
  return store.sendBody(request, read, headers);
}

async function deleteObject(request: S3Request): Promise<void> {
  const store = objectStoreOf(request);
  request.requirePrincipal();
  const { bucket, key } = target(request);
  const outcome = await store.delete(request, {
    bucket,
    key,
    versionId: request.exchange.queryParam('versionId'),
    bypassGovernance: bypassRequested(request),
  });
  const headers: Record<string, string> = {};
  if (outcome.versionId !== undefined) headers['x-amz-version-id'] = outcome.versionId;
  if (outcome.deleteMarker) headers['x-amz-delete-marker'] = 'true';
  request.send(204, headers);
}

// ---------------------------------------------------------------------------------------------
// Listings.

function tokenOf(last: string): string {
  return Buffer.from(last, 'utf8').toString('base64url');
}

function afterToken(token: string): string {
  const after = Buffer.from(token, 'base64url').toString('utf8');
  if (token === '' || tokenOf(after) !== token)
    throw s3Error('InvalidArgument', 'The continuation token provided is incorrect');
  return after;
}

function listEntries(page: { entries: readonly StoredVersion['version'][] }): XmlListEntry[] {
  return page.entries.map((version) => ({
    key: version.key,
    lastModified: version.lastModified,
    etag: version.etag,
    size: version.size,
  }));
}

interface ListQuery {
  readonly bucket: string;
  readonly prefix: string;
  readonly delimiter: string | undefined;
  readonly maxKeys: number;
  readonly encodingUrl: boolean;
}

function listQuery(request: S3Request): ListQuery {
  const query = request.exchange.query;
  const bucket = request.address.bucket;
  if (bucket === undefined) throw s3Error('InvalidRequest', 'no bucket named');
  const delimiter = query.get('delimiter');
  // RGW's `allow-unordered` (boto clients send it): Lightwell's pages are always in key order,
  // which an unordered listing may be; with a delimiter RGW refuses it, and so does this.
  if (query.get('allow-unordered') === 'true' && delimiter !== null && delimiter !== '')
    throw s3Error('InvalidArgument', 'allow-unordered cannot be used with a delimiter');
  return {
    bucket,
    prefix: query.get('prefix') ?? '',
    delimiter: delimiter === null || delimiter === '' ? undefined : delimiter,
    maxKeys: maxCountOf(query.get('max-keys') ?? undefined, 'max-keys'),
    encodingUrl: encodingUrlOf(query.get('encoding-type') ?? undefined),
  };
}

async function listObjectsV2(request: S3Request): Promise<void> {
  const store = objectStoreOf(request);
  const list = listQuery(request);
  const query = request.exchange.query;
  const continuation = query.get('continuation-token') ?? undefined;
  const startAfter = query.get('start-after') ?? undefined;
  // An empty token is no token (the first page), echoed back as sent, as S3 and RGW do.
  const after =
    continuation !== undefined && continuation !== '' ? afterToken(continuation) : startAfter;
  await store.freshenList?.(request, { ...list, after });
  const page = store.list(request, { ...list, after });
  const body = listObjectsV2Xml({
    ...list,
    isTruncated: page.isTruncated,
    entries: listEntries(page),
    commonPrefixes: page.commonPrefixes,
    owner: query.get('fetch-owner') === 'true' ? store.owner(request) : undefined,
    startAfter,
    continuationToken: continuation,
    nextContinuationToken: page.last === undefined ? undefined : tokenOf(page.last),
  });
  request.send(200, { 'Content-Type': 'application/xml' }, body);
}

async function listObjectsV1(request: S3Request): Promise<void> {
  const store = objectStoreOf(request);
  const list = listQuery(request);
  const marker = request.exchange.queryParam('marker') ?? '';
  const input = { ...list, after: marker === '' ? undefined : marker };
  await store.freshenList?.(request, input);
  const page = store.list(request, input);
  const body = listObjectsV1Xml({
    ...list,
    isTruncated: page.isTruncated,
    entries: listEntries(page),
    commonPrefixes: page.commonPrefixes,
    owner: store.owner(request),
    marker,
    nextMarker: list.delimiter === undefined ? undefined : page.last,
  });
  request.send(200, { 'Content-Type': 'application/xml' }, body);
}
