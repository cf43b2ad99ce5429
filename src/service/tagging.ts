// Object and bucket tags as every transport asks for them: the tag rules (attributes.ts
// `checkTags`: S3's limits of 10 tags per object, 50 per bucket, keys of 128 and values of 256
// characters, no key twice), the URL-encoded tag sets of S3's `x-amz-tagging` header, and the
// audited commands that replace a version's or a bucket's tags.
//
// Persists: nothing itself; ObjectVersionRecord.tags and BucketRecord.tags through the engine
// (`putObjectTags`, `setBucketTags`, and the write commands' `tags`).

import type { CommandArgs } from '../engine/commands.js';
import type { BucketRecord, ObjectTag, ObjectVersionRecord } from '../engine/index/schema.js';
import { BadRequest } from '../util/errors.js';
import { BUCKET_TAGS_MAX, checkTags } from './attributes.js';
import type { RequestContext } from './context.js';
import type { VersionAddress } from './object-lock.js';
import type { ObjectService } from './objects.js';

/** Characters of an `x-amz-tagging` value at most (10 tags of 128 + 256 characters, encoded). */
export const TAGGING_HEADER_CHARS_MAX = 16 * 1024;

/**
 * A tag set written as a URL query (`k1=v1&k2`, S3's `x-amz-tagging` and POST form field), as
 * `checkTags` checks it. A key without `=` has the empty value.
 */
export function tagsOfQuery(text: string): ObjectTag[] {
  if (text.length > TAGGING_HEADER_CHARS_MAX)
    throw BadRequest(`a tag set is at most ${TAGGING_HEADER_CHARS_MAX} characters`);
  const tags: ObjectTag[] = [];
  for (const pair of text.split('&')) {
    if (pair === '') continue;
    const equals = pair.indexOf('=');
    const rawKey = equals < 0 ? pair : pair.slice(0, equals);
    const rawValue = equals < 0 ? '' : pair.slice(equals + 1);
    tags.push({ key: decoded(rawKey), value: decoded(rawValue) });
  }
  return checkTags(tags);
}

function decoded(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    throw BadRequest('a tag set has malformed percent-encoding');
  }
}

/** A tag set in the order S3 lists it: by key (code units, as AWS sorts). */
export function sortedTags(tags: readonly ObjectTag[] | undefined): ObjectTag[] {
  return [...(tags ?? [])].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

/** Replaces a version's tags (an empty list removes them); `tags` are checked here. */
export function putObjectTags(
  objects: ObjectService,
  ctx: RequestContext,
  target: VersionAddress,
  tags: unknown,
  status = 200,
): Promise<ObjectVersionRecord> {
  const args: CommandArgs<'putObjectTags'> = {
    tenantId: ctx.principal.tenant.id,
    bucket: target.bucket.name,
    key: target.key,
    tags: checkTags(tags),
  };
  if (target.versionId !== undefined) args.versionId = target.versionId;
  return objects.commit(ctx, 'putObjectTags', args, status);
}

/** Replaces a bucket's tags (an empty list removes them); at most BUCKET_TAGS_MAX. */
export function putBucketTags(
  objects: ObjectService,
  ctx: RequestContext,
  bucket: BucketRecord,
  tags: unknown,
  status = 200,
): Promise<BucketRecord> {
  const args = {
    tenantId: ctx.principal.tenant.id,
    bucket: bucket.name,
    tags: checkTags(tags, BUCKET_TAGS_MAX),
  };
  return objects.commit(ctx, 'setBucketTags', args, status);
}
