// S3's other object operations: CopyObject, DeleteObjects, ListObjectVersions and
// GetObjectAttributes, over the service's object store (object-port.ts).
//
// Invariants:
// - DeleteObjects needs Content-MD5 or an x-amz-checksum-* of its body, checked before any key
//   is deleted; each key is deleted (and authorized) on its own, and one refused key is an
//   <Error> entry, not a failure of the request.
// - A copy onto itself must change something (REPLACE metadata), as S3 requires.
//
// Persists: nothing itself; objects through the service.

import { createHash } from 'node:crypto';
import type { S3Api, S3Request } from './api.js';
import { s3Error, s3ErrorOf } from './errors.js';
import {
  checkContentMd5,
  checkDeclaredChecksums,
  checksumTypeOf,
  contentMd5Of,
  copySourceConditionsOf,
  copySourceOf,
  declaredChecksums,
  directiveOf,
  encodingUrlOf,
  etagConditionOf,
  maxCountOf,
  objectAttributesOf,
  representationOf,
} from './object-headers.js';
import type { S3ObjectStoreMore } from './object-port.js';
import { DELETE_BODY_BYTES_MAX, parseDeleteRequest } from './object-xml-parse.js';
import {
  copyResultXml,
  deleteResultXml,
  listVersionsXml,
  objectAttributesXml,
  type XmlDeleteOutcome,
} from './object-xml.js';
import { objectStoreOf } from './objects.js';
import { settleCopyAcl, withRequestedAcl } from './access-ops.js';
import { readSmallBody } from './multipart.js';
import { createMultiHasher } from '../engine/checksums.js';
import { versionPartsPage } from '../service/read.js';
import { bypassRequested } from './object-lock.js';
import { newVersionAttributesOf } from './version-attributes.js';
import { addSseHeaders, customerKeyOf } from './encryption.js';

export function registerObjectExtras(api: S3Api): void {
  api.register('CopyObject', copyObject);
  api.register('DeleteObjects', deleteObjects);
  api.register('ListObjectVersions', listObjectVersions);
  api.register('GetObjectAttributes', getObjectAttributes);
}

function more<K extends keyof S3ObjectStoreMore>(
  request: S3Request,
  name: K,
): NonNullable<S3ObjectStoreMore[K]> {
  const store = objectStoreOf(request);
  const value = store[name];
  if (value === undefined) throw s3Error('NotImplemented', `${name} is not served here`);
  return value as NonNullable<S3ObjectStoreMore[K]>;
}

async function copyObject(request: S3Request): Promise<void> {
  const copy = more(request, 'copy').bind(objectStoreOf(request));
  request.requirePrincipal();
  const { bucket, key } = request.address;
  if (bucket === undefined || key === undefined) throw s3Error('InvalidRequest', 'no object named');
  const headers = request.exchange.headers;
  const source = { ...copySourceOf(headers), ...copySourceConditionsOf(headers) };
  const directive = directiveOf(headers, 'x-amz-metadata-directive');
  if (
    source.bucket === bucket &&
    source.key === key &&
    source.versionId === undefined &&
    directive === 'COPY' &&
    // A copy onto itself that changes its SSE-C key (or takes it out of SSE-C) is a change.
    customerKeyOf(request, 'copy source') === undefined
  ) {
    throw s3Error(
      'InvalidRequest',
      "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.",
    );
  }
  const representation = withRequestedAcl(request, representationOf(headers));
  const copied = await copy(request, {
    source,
    bucket,
    key,
    directive,
    representation,
    ifMatch: etagConditionOf(headers['if-match']),
    ifNoneMatch: etagConditionOf(headers['if-none-match']),
    attributes: newVersionAttributesOf(request, { copy: true }),
  });
  await settleCopyAcl(request, copied.version, representation);
  const answer: Record<string, string> = { 'Content-Type': 'application/xml' };
  // A write to a Suspended bucket makes the null version, which S3 does not name.
  if (copied.version.versionId !== 'null') answer['x-amz-version-id'] = copied.version.versionId;
  if (copied.sourceVersioned) answer['x-amz-copy-source-version-id'] = copied.sourceVersionId;
  addSseHeaders(copied.version, answer, copied.customerKey);
  request.send(
    200,
    answer,
    copyResultXml('CopyObjectResult', {
      etag: copied.version.etag,
      lastModified: copied.version.lastModified,
    }),
  );
}

/** DeleteObjects' integrity: Content-MD5, or a declared checksum, of the XML body. */
async function checkDeleteBody(request: S3Request, body: Buffer): Promise<void> {
  const headers = request.exchange.headers;
  const md5 = contentMd5Of(headers);
  const declared = declaredChecksums(headers);
  if (md5 === undefined && declared.expected.size === 0) {
    throw s3Error(
      'InvalidRequest',
      'Missing required header for this request: Content-MD5 or x-amz-checksum-*',
    );
  }
  checkContentMd5(md5, createHash('md5').update(body).digest());
  if (declared.expected.size > 0) {
    const hasher = await createMultiHasher([...declared.expected.keys()]);
    hasher.update(body);
    checkDeclaredChecksums(declared.expected, hasher.digest());
  }
}

async function deleteObjects(request: S3Request): Promise<void> {
  const store = objectStoreOf(request);
  request.requirePrincipal();
  const bucket = request.address.bucket;
  if (bucket === undefined) throw s3Error('InvalidRequest', 'no bucket named');
  const body = await readSmallBody(request, DELETE_BODY_BYTES_MAX);
  await checkDeleteBody(request, body);
  const parsed = parseDeleteRequest(body);
  const outcomes: XmlDeleteOutcome[] = [];
  for (const entry of parsed.objects) {
    try {
      const outcome = await store.delete(request, {
        bucket,
        key: entry.key,
        versionId: entry.versionId ?? null,
        bypassGovernance: bypassRequested(request),
      });
      outcomes.push(
        outcome.deleteMarker
          ? {
              key: entry.key,
              versionId: entry.versionId,
              deleteMarker: true,
              deleteMarkerVersionId: outcome.versionId,
            }
          : { key: entry.key, versionId: entry.versionId },
      );
    } catch (error) {
      const problem = s3ErrorOf(error, { bucket, key: entry.key });
      // S3 reports a key that was not there as deleted.
      if (problem.code === 'NoSuchKey') {
        outcomes.push({ key: entry.key, versionId: entry.versionId });
        continue;
      }
      if (problem.status >= 500) throw error;
      outcomes.push({
        key: entry.key,
        versionId: entry.versionId,
        error: { code: problem.code, message: problem.message },
      });
    }
  }
  request.send(200, { 'Content-Type': 'application/xml' }, deleteResultXml(outcomes, parsed.quiet));
}

async function listObjectVersions(request: S3Request): Promise<void> {
  const listVersions = more(request, 'listVersions').bind(objectStoreOf(request));
  const bucket = request.address.bucket;
  if (bucket === undefined) throw s3Error('InvalidRequest', 'no bucket named');
  const query = request.exchange.query;
  const delimiter = query.get('delimiter');
  const keyMarker = query.get('key-marker') ?? '';
  const versionIdMarker = query.get('version-id-marker') ?? '';
  const input = {
    bucket,
    prefix: query.get('prefix') ?? '',
    delimiter: delimiter === null || delimiter === '' ? undefined : delimiter,
    keyMarker: keyMarker === '' ? undefined : keyMarker,
    versionIdMarker: versionIdMarker === '' ? undefined : versionIdMarker,
    maxKeys: maxCountOf(query.get('max-keys') ?? undefined, 'max-keys'),
  };
  const page = await listVersions(request, input);
  request.send(
    200,
    { 'Content-Type': 'application/xml' },
    listVersionsXml({
      ...input,
      keyMarker,
      versionIdMarker,
      nextKeyMarker: page.nextKeyMarker,
      nextVersionIdMarker: page.nextVersionIdMarker,
      isTruncated: page.isTruncated,
      encodingUrl: encodingUrlOf(query.get('encoding-type') ?? undefined),
      entries: page.entries.map((version) => ({
        key: version.key,
        versionId: version.versionId,
        isLatest: version.isLatest,
        deleteMarker: version.deleteMarker === true,
        lastModified: version.lastModified,
        etag: version.etag,
        size: version.size,
      })),
      commonPrefixes: page.commonPrefixes,
      owner: objectStoreOf(request).owner(request),
    }),
  );
}

function getObjectAttributes(request: S3Request): void {
  const store = objectStoreOf(request);
  const { bucket, key } = request.address;
  if (bucket === undefined || key === undefined) throw s3Error('InvalidRequest', 'no object named');
  const wanted = objectAttributesOf(request.exchange.headers);
  const read = store.resolveRead(request, {
    bucket,
    key,
    versionId: request.exchange.queryParam('versionId'),
  });
  const { version } = read;
  const headers: Record<string, string> = {
    'Content-Type': 'application/xml',
    'Last-Modified': new Date(version.lastModified).toUTCString(),
  };
  if (read.versioned) headers['x-amz-version-id'] = version.versionId;
  const markerText = request.exchange.header('x-amz-part-number-marker') ?? '0';
  if (!/^\d{1,5}$/.test(markerText))
    throw s3Error('InvalidArgument', 'x-amz-part-number-marker must be an integer');
  const marker = Number(markerText);
  const maxParts = maxCountOf(request.exchange.header('x-amz-max-parts'), 'x-amz-max-parts');
  const page = versionPartsPage(version, { marker, max: maxParts });
  const last = page?.parts[page.parts.length - 1];
  request.send(
    200,
    headers,
    objectAttributesXml(wanted, {
      etag: version.etag,
      size: version.size,
      checksums: version.checksums,
      checksumType: checksumTypeOf(version.checksums),
      parts:
        page === undefined
          ? undefined
          : {
              totalPartsCount: page.total,
              partNumberMarker: marker,
              nextPartNumberMarker: page.isTruncated ? last?.partNumber : undefined,
              maxParts,
              isTruncated: page.isTruncated,
              parts: page.parts,
            },
    }),
  );
}
