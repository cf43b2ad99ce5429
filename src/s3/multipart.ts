// S3's multipart uploads: CreateMultipartUpload, UploadPart, UploadPartCopy,
// CompleteMultipartUpload, AbortMultipartUpload, ListParts and ListMultipartUploads, over the
// service's multipart store (object-port.ts).
//
// Invariants:
// - A part is hashed with MD5 beside its checksums: its ETag is the part's hex MD5, and the
//   completed object's ETag is S3's `md5(part md5s)-N`, computed from the listed part ETags
//   (the service refuses a list whose ETags are not the uploaded parts').
// - A part whose body does not match its Content-MD5 or declared checksum is refused before it
//   is stored (`BadDigest`); a complete list out of order is `InvalidPartOrder` before the
//   service is asked (object-xml-parse.ts).
//
// Persists: nothing itself; uploads and parts through the service.

import type { S3Api, S3Request } from './api.js';
import { s3Error } from './errors.js';
import {
  checkContentMd5,
  checkDeclaredChecksums,
  contentMd5Of,
  copySourceConditionsOf,
  copySourceOf,
  copySourceRangeOf,
  declaredChecksums,
  encodingUrlOf,
  maxCountOf,
  checksumTypeOf,
  multipartChecksumOf,
  representationOf,
} from './object-headers.js';
import type { S3MultipartStore } from './object-port.js';
import { COMPLETE_BODY_BYTES_MAX, parseCompleteRequest } from './object-xml-parse.js';
import {
  completeMultipartUploadXml,
  copyResultXml,
  initiateMultipartUploadXml,
  listMultipartUploadsXml,
  listPartsXml,
} from './object-xml.js';
import { objectLengthOf, objectStoreOf } from './objects.js';
import { withRequestedAcl } from './access-ops.js';
import { CHECKSUM_ALGS, multipartMd5Etag, type DigestAlg } from '../engine/checksums.js';
import { newVersionAttributesOf } from './version-attributes.js';
import { addSseHeaders } from './encryption.js';

export function registerMultipart(api: S3Api): void {
  api.register('CreateMultipartUpload', createUpload);
  api.register('UploadPart', uploadPart);
  api.register('UploadPartCopy', uploadPartCopy);
  api.register('CompleteMultipartUpload', completeUpload);
  api.register('AbortMultipartUpload', abortUpload);
  api.register('ListParts', listParts);
  api.register('ListMultipartUploads', listUploads);
}

function multipartOf(request: S3Request): S3MultipartStore {
  const multipart = objectStoreOf(request).multipart;
  if (!multipart) throw s3Error('NotImplemented', 'multipart uploads are not served here');
  return multipart;
}

function objectTarget(request: S3Request): { bucket: string; key: string } {
  const { bucket, key } = request.address;
  if (bucket === undefined || key === undefined) throw s3Error('InvalidRequest', 'no object named');
  return { bucket, key };
}

function uploadTarget(request: S3Request): { bucket: string; key: string; uploadId: string } {
  const uploadId = request.exchange.queryParam('uploadId') ?? '';
  if (uploadId === '') throw s3Error('NoSuchUpload');
  return { ...objectTarget(request), uploadId };
}

function partNumberOf(request: S3Request): number {
  const text = request.exchange.queryParam('partNumber') ?? '';
  const number = /^\d{1,5}$/.test(text) ? Number(text) : NaN;
  if (!(number >= 1 && number <= 10_000))
    throw s3Error('InvalidArgument', 'Part number must be an integer between 1 and 10000');
  return number;
}

/** A small request body, read whole within `limit` bytes. */
export function readSmallBody(request: S3Request, limit: number): Promise<Buffer> {
  const declared = Number(request.exchange.header('content-length') ?? '0');
  if (declared > limit) return Promise.reject(s3Error('MaxMessageLengthExceeded'));
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let length = 0;
    request.exchange.onBody((chunk, isLast) => {
      length += chunk.byteLength;
      if (length > limit) {
        reject(s3Error('MaxMessageLengthExceeded'));
        return;
      }
      parts.push(Buffer.from(chunk.slice(0)));
      if (isLast) resolve(Buffer.concat(parts));
    });
    request.exchange.onAbort(() => reject(s3Error('IncompleteBody', 'the client went away')));
  });
}

async function createUpload(request: S3Request): Promise<void> {
  const multipart = multipartOf(request);
  request.requirePrincipal();
  const target = objectTarget(request);
  const checksum = multipartChecksumOf(request.exchange.headers);
  const { uploadId, encryption } = await multipart.create(request, {
    ...target,
    representation: withRequestedAcl(request, representationOf(request.exchange.headers)),
    checksum:
      checksum.alg === undefined
        ? undefined
        : { alg: checksum.alg, type: checksum.type ?? 'COMPOSITE' },
    attributes: newVersionAttributesOf(request),
  });
  const headers: Record<string, string> = { 'Content-Type': 'application/xml' };
  addSseHeaders(encryption, headers, encryption.customerKey);
  if (checksum.alg !== undefined) {
    headers['x-amz-checksum-algorithm'] = checksum.alg;
    headers['x-amz-checksum-type'] = checksum.type ?? 'COMPOSITE';
  }
  request.send(200, headers, initiateMultipartUploadXml({ ...target, uploadId }));
}

async function uploadPart(request: S3Request): Promise<void> {
  const multipart = multipartOf(request);
  request.requirePrincipal();
  const target = uploadTarget(request);
  const partNumber = partNumberOf(request);
  const contentLength = objectLengthOf(request);
  const md5 = contentMd5Of(request.exchange.headers);
  const declared = declaredChecksums(request.exchange.headers);
  const algs: DigestAlg[] = [...new Set<DigestAlg>(['CRC32C', ...declared.algs, 'MD5'])];
  const part = await multipart.uploadPart(request, {
    ...target,
    partNumber,
    contentLength,
    algs,
    declared: declaredAlgsOf(request, declared.algs),
    check: (received) => {
      checkContentMd5(md5, received.md5);
      checkDeclaredChecksums(declared.expected, received.checksums);
    },
  });
  const headers: Record<string, string> = { ETag: part.etag };
  addSseHeaders(part.encryption, headers, part.encryption.customerKey);
  for (const alg of declared.algs) {
    const digest = part.checksums[alg];
    if (digest !== undefined) headers[`x-amz-checksum-${alg.toLowerCase()}`] = digest;
  }
  request.send(200, headers);
}

/** The checksum algorithms a part's request names: its headers, trailer and SDK algorithm. */
function declaredAlgsOf(request: S3Request, headerAlgs: readonly string[]): string[] {
  const names = [...headerAlgs];
  const trailer = request.exchange.header('x-amz-trailer')?.toLowerCase();
  if (trailer?.startsWith('x-amz-checksum-') === true)
    names.push(trailer.slice('x-amz-checksum-'.length).toUpperCase());
  const sdk = request.exchange.header('x-amz-sdk-checksum-algorithm');
  if (sdk !== undefined) names.push(sdk.toUpperCase());
  return [...new Set(names)];
}

/** The x-amz-checksum-* a CompleteMultipartUpload gives for the whole object, if any. */
function completeChecksumOf(request: S3Request): { alg: string; value: string } | undefined {
  for (const alg of CHECKSUM_ALGS) {
    const value = request.exchange.header(`x-amz-checksum-${alg.toLowerCase()}`);
    if (value !== undefined) return { alg, value };
  }
  return undefined;
}

async function uploadPartCopy(request: S3Request): Promise<void> {
  const multipart = multipartOf(request);
  request.requirePrincipal();
  const target = uploadTarget(request);
  const partNumber = partNumberOf(request);
  const source = {
    ...copySourceOf(request.exchange.headers),
    ...copySourceConditionsOf(request.exchange.headers),
  };
  const part = await multipart.uploadPartCopy(request, {
    ...target,
    partNumber,
    source,
    range: copySourceRangeOf(request.exchange.headers),
  });
  const headers: Record<string, string> = { 'Content-Type': 'application/xml' };
  addSseHeaders(part.encryption, headers, part.encryption.customerKey);
  if (part.sourceVersionId !== undefined)
    headers['x-amz-copy-source-version-id'] = part.sourceVersionId;
  request.send(200, headers, copyResultXml('CopyPartResult', part));
}

async function completeUpload(request: S3Request): Promise<void> {
  const multipart = multipartOf(request);
  request.requirePrincipal();
  const target = uploadTarget(request);
  const parts = parseCompleteRequest(await readSmallBody(request, COMPLETE_BODY_BYTES_MAX));
  // A part ETag that is not an MD5 is no part Lightwell gave: InvalidPart, once the upload is
  // known to exist (a missing upload is NoSuchUpload whatever the list says).
  const hexes = parts.map((part) => part.etag.replace(/^"(.*)"$/, '$1'));
  const md5s = hexes.every((hex) => /^[0-9a-f]{32}$/i.test(hex))
    ? hexes.map((hex) => Buffer.from(hex, 'hex'))
    : undefined;
  const stored = await multipart.complete(request, {
    ...target,
    parts,
    etag: md5s === undefined ? undefined : multipartMd5Etag(md5s),
    checksum: completeChecksumOf(request),
  });
  const headers: Record<string, string> = { 'Content-Type': 'application/xml' };
  // A write to a Suspended bucket makes the null version, which S3 does not name.
  if (stored.version.versionId !== 'null') headers['x-amz-version-id'] = stored.version.versionId;
  addSseHeaders(stored.version, headers, stored.customerKey);
  const host = request.exchange.header('host') ?? 'localhost';
  request.send(
    200,
    headers,
    completeMultipartUploadXml({
      location: `http://${host}/${encodeURIComponent(target.bucket)}/${encodeURIComponent(target.key)}`,
      bucket: target.bucket,
      key: target.key,
      etag: stored.version.etag,
      checksums: stored.version.checksums,
      checksumType: checksumTypeOf(stored.version.checksums),
    }),
  );
}

async function abortUpload(request: S3Request): Promise<void> {
  const multipart = multipartOf(request);
  request.requirePrincipal();
  await multipart.abort(request, uploadTarget(request));
  request.send(204, {});
}

async function listParts(request: S3Request): Promise<void> {
  const multipart = multipartOf(request);
  const target = uploadTarget(request);
  const query = request.exchange.query;
  const markerText = query.get('part-number-marker') ?? '0';
  if (!/^\d{1,5}$/.test(markerText))
    throw s3Error('InvalidArgument', 'part-number-marker must be an integer');
  const partNumberMarker = Number(markerText);
  const maxParts = maxCountOf(query.get('max-parts') ?? undefined, 'max-parts');
  const page = await multipart.listParts(request, { ...target, partNumberMarker, maxParts });
  const last = page.parts[page.parts.length - 1];
  request.send(
    200,
    { 'Content-Type': 'application/xml' },
    listPartsXml({
      ...target,
      partNumberMarker,
      nextPartNumberMarker: page.isTruncated ? last?.partNumber : undefined,
      maxParts,
      isTruncated: page.isTruncated,
      parts: page.parts,
      initiator: page.initiator,
      owner: page.owner,
    }),
  );
}

async function listUploads(request: S3Request): Promise<void> {
  const multipart = multipartOf(request);
  const bucket = request.address.bucket;
  if (bucket === undefined) throw s3Error('InvalidRequest', 'no bucket named');
  const query = request.exchange.query;
  const prefix = query.get('prefix') ?? '';
  const keyMarker = query.get('key-marker') ?? '';
  const uploadIdMarker = query.get('upload-id-marker') ?? '';
  const maxUploads = maxCountOf(query.get('max-uploads') ?? undefined, 'max-uploads');
  const encodingUrl = encodingUrlOf(query.get('encoding-type') ?? undefined);
  const page = await multipart.listUploads(request, {
    bucket,
    prefix,
    keyMarker: keyMarker === '' ? undefined : keyMarker,
    uploadIdMarker: uploadIdMarker === '' ? undefined : uploadIdMarker,
    maxUploads,
  });
  const last = page.uploads[page.uploads.length - 1];
  request.send(
    200,
    { 'Content-Type': 'application/xml' },
    listMultipartUploadsXml({
      bucket,
      prefix,
      keyMarker,
      uploadIdMarker,
      nextKeyMarker: page.isTruncated ? last?.key : undefined,
      nextUploadIdMarker: page.isTruncated ? last?.uploadId : undefined,
      maxUploads,
      isTruncated: page.isTruncated,
      encodingUrl,
      uploads: page.uploads,
      commonPrefixes: [],
    }),
  );
}
