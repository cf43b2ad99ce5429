// S3's tagging operations: Put/Get/DeleteObjectTagging (with versionId) and Put/Get/
// DeleteBucketTagging, the `x-amz-tagging` header of a write (PutObject, CreateMultipartUpload,
// CopyObject with `x-amz-tagging-directive: REPLACE`) and `x-amz-tagging-count` on GET and HEAD.
// The tag rules are the service's (service/tagging.ts, attributes.ts), the same the native API's
// object tags obey; this module speaks S3's XML, headers and codes.
//
// Invariants:
// - A tag set over S3's limits (10 per object, 50 per bucket, key 128 and value 256 characters,
//   a key twice) is `InvalidTag` (400) and changes nothing.
// - Tag sets are listed by key, as AWS lists them.
//
// Persists: nothing itself; tags through the service.

import type { S3Api, S3Request } from './api.js';
import { bucketFor } from './buckets.js';
import { s3Error } from './errors.js';
import { XmlWriter, xmlList, xmlText, type XmlValue } from './xml.js';
import { objectServiceOf, readXmlBody, rootOf } from './object-lock.js';
import type { BucketRecord, ObjectTag, ObjectVersionRecord } from '../engine/index/schema.js';
import { contextOf } from '../service/context.js';
import { resolveForAttributes } from '../service/read.js';
import { putBucketTags, putObjectTags, sortedTags, tagsOfQuery } from '../service/tagging.js';
import { isLightwellError } from '../util/errors.js';

export function registerTagging(api: S3Api): void {
  api.register('PutObjectTagging', putObjectTagging);
  api.register('GetObjectTagging', getObjectTagging);
  api.register('DeleteObjectTagging', deleteObjectTagging);
  api.register('PutBucketTagging', putBucketTagging);
  api.register('GetBucketTagging', getBucketTagging);
  api.register('DeleteBucketTagging', deleteBucketTagging);
}

/** Bytes of a Tagging document at most (50 tags of 128 + 256 characters, with their markup). */
const TAGGING_XML_BYTES_MAX = 64 * 1024;

/** A refusal of the tag rules as S3's `InvalidTag`; anything else as it is. */
async function asInvalidTag<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (isLightwellError(error) && error.code === 'bad_request' && !error.details['s3Code'])
      throw s3Error('InvalidTag', error.message);
    throw error;
  }
}

/** The tags a write's `x-amz-tagging` header gives (undefined: no header). */
export function taggingHeaderOf(request: S3Request): ObjectTag[] | undefined {
  const header = request.exchange.header('x-amz-tagging');
  if (header === undefined) return undefined;
  try {
    return tagsOfQuery(header);
  } catch (error) {
    if (isLightwellError(error)) throw s3Error('InvalidTag', error.message);
    throw error;
  }
}

/**
 * The tags a copy is written with: undefined for the source's (`x-amz-tagging-directive: COPY`,
 * the default), else those of `x-amz-tagging` (none without it).
 */
export function copyTagsOf(request: S3Request): ObjectTag[] | undefined {
  const directive = request.exchange.header('x-amz-tagging-directive') ?? 'COPY';
  if (directive === 'COPY') return undefined;
  if (directive !== 'REPLACE')
    throw s3Error('InvalidArgument', 'x-amz-tagging-directive is COPY or REPLACE');
  return taggingHeaderOf(request) ?? [];
}

/** `x-amz-tagging-count` of a GET or HEAD answer, for a version with tags. */
export function addTaggingCount(
  version: ObjectVersionRecord,
  headers: Record<string, string>,
): void {
  if (version.tags !== undefined && version.tags.length > 0)
    headers['x-amz-tagging-count'] = String(version.tags.length);
}

/** The tags of a `<Tagging><TagSet><Tag>…` document, unchecked (the service checks them). */
function tagsOfXml(doc: ReturnType<typeof rootOf>): ObjectTag[] {
  const tagSet = (doc as Record<string, XmlValue>)['TagSet'];
  if (tagSet === undefined || Array.isArray(tagSet))
    throw s3Error('MalformedXML', '<Tagging> must hold one <TagSet>');
  return xmlList(tagSet, 'Tag').map((tag) => {
    const key = xmlText(tag, 'Key');
    const value = xmlText(tag, 'Value');
    if (key === undefined || value === undefined)
      throw s3Error('MalformedXML', 'each <Tag> has a <Key> and a <Value>');
    return { key, value };
  });
}

function tagSetXml(tags: readonly ObjectTag[] | undefined): XmlWriter {
  const xml = new XmlWriter().start('Tagging').start('TagSet');
  for (const tag of sortedTags(tags))
    xml.start('Tag').leaf('Key', tag.key).leaf('Value', tag.value).end('Tag');
  return xml.end('TagSet').end('Tagging');
}

function objectTarget(
  request: S3Request,
  verb: 'read' | 'write',
): { bucket: BucketRecord; key: string; versionId: string | undefined } {
  const { key } = request.address;
  if (key === undefined) throw s3Error('InvalidRequest', 'no object named');
  const bucket = bucketFor(request, { verb, key });
  return { bucket, key, versionId: request.exchange.queryParam('versionId') ?? undefined };
}

/** The answer headers of a version's tags: its version id where the bucket is versioned. */
function versionHeaders(
  bucket: BucketRecord,
  version: ObjectVersionRecord,
): Record<string, string> {
  return bucket.versioning === 'Unversioned' ? {} : { 'x-amz-version-id': version.versionId };
}

async function putObjectTagging(request: S3Request): Promise<void> {
  const principal = request.requirePrincipal();
  const body = readXmlBody(request, TAGGING_XML_BYTES_MAX);
  const target = objectTarget(request, 'write');
  const tags = tagsOfXml(rootOf(await body, 'Tagging'));
  const version = await asInvalidTag(() =>
    putObjectTags(objectServiceOf(request), contextOf(request.exchange, principal), target, tags),
  );
  request.send(200, versionHeaders(target.bucket, version));
}

function getObjectTagging(request: S3Request): void {
  const target = objectTarget(request, 'read');
  const version = resolveForAttributes(
    request.services.store,
    target.bucket,
    target.key,
    target.versionId ?? null,
  );
  request.sendXml(200, tagSetXml(version.tags), versionHeaders(target.bucket, version));
}

async function deleteObjectTagging(request: S3Request): Promise<void> {
  const principal = request.requirePrincipal();
  const target = objectTarget(request, 'write');
  const version = await putObjectTags(
    objectServiceOf(request),
    contextOf(request.exchange, principal),
    target,
    [],
    204,
  );
  request.send(204, versionHeaders(target.bucket, version));
}

async function putBucketTagging(request: S3Request): Promise<void> {
  const principal = request.requirePrincipal();
  const body = readXmlBody(request, TAGGING_XML_BYTES_MAX);
  const bucket = bucketFor(request, { verb: 'write' });
  const tags = tagsOfXml(rootOf(await body, 'Tagging'));
  await asInvalidTag(() =>
    putBucketTags(
      objectServiceOf(request),
      contextOf(request.exchange, principal),
      bucket,
      tags,
      204,
    ),
  );
  request.send(204, {});
}

function getBucketTagging(request: S3Request): void {
  const bucket = bucketFor(request, { verb: 'read' });
  if (bucket.tags === undefined || bucket.tags.length === 0)
    throw s3Error('NoSuchTagSet', undefined, { bucketName: bucket.name });
  request.sendXml(200, tagSetXml(bucket.tags));
}

async function deleteBucketTagging(request: S3Request): Promise<void> {
  const principal = request.requirePrincipal();
  const bucket = bucketFor(request, { verb: 'write' });
  await putBucketTags(
    objectServiceOf(request),
    contextOf(request.exchange, principal),
    bucket,
    [],
    204,
  );
  request.send(204, {});
}
