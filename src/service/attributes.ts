// Object attributes and copies: the rules of tags, retention and a copy's target, the same for
// every transport (the native JSON bodies, S3's XML).

import type { ObjectTag } from '../engine/index/schema.js';
import { quoteForMessage, refuseControlChars } from '../security/names.js';
import { BadRequest } from '../util/errors.js';

export const TAGS_MAX = 10;
/** Tags on a bucket at most (S3's limit; the per-tag limits are the objects'). */
export const BUCKET_TAGS_MAX = 50;
export const TAG_KEY_CHARS_MAX = 128;
export const TAG_VALUE_CHARS_MAX = 256;

/**
 * A tag set as the client gave it (an array of `{key, value}`), checked: at most `max` tags,
 * keys of 1 to TAG_KEY_CHARS_MAX and values of at most TAG_VALUE_CHARS_MAX characters (Unicode
 * code points), no control characters, no key twice.
 */
export function checkTags(value: unknown, max = TAGS_MAX): ObjectTag[] {
  if (!Array.isArray(value)) throw BadRequest('tags must be an array of {key, value}');
  if (value.length > max) throw BadRequest(`at most ${max} tags`);
  const seen = new Set<string>();
  return value.map((tag: unknown) => {
    const { key, value: tagValue } = (tag ?? {}) as Record<string, unknown>;
    // Characters are Unicode code points, as S3 counts them (not UTF-16 units).
    if (typeof key !== 'string' || key.length === 0 || Array.from(key).length > TAG_KEY_CHARS_MAX)
      throw BadRequest(`tag keys are 1 to ${TAG_KEY_CHARS_MAX} characters`);
    if (typeof tagValue !== 'string')
      throw BadRequest(`the tag ${JSON.stringify(key)} needs a string value (it may be empty)`);
    if (Array.from(tagValue).length > TAG_VALUE_CHARS_MAX)
      throw BadRequest(`tag values are at most ${TAG_VALUE_CHARS_MAX} characters`);
    // Not S3's `aws:` prefix rule: DECISIONS.md takes S3's limits only (architecture.md).
    refuseControlChars(key, 'a tag key');
    refuseControlChars(tagValue, `the value of tag ${quoteForMessage(key)}`);
    if (seen.has(key)) throw BadRequest(`duplicate tag key ${key}`);
    seen.add(key);
    return { key, value: tagValue };
  });
}

/** A retention date must lie in the future (it may only be extended afterwards: the engine). */
export function checkRetainUntil(retainUntil: number, now: number): void {
  if (retainUntil <= now) throw BadRequest('retainUntil must be in the future');
}

/**
 * As S3: a copy onto itself must change something (its metadata) or name a version to restore;
 * otherwise it would only add an identical version.
 */
export function checkCopyChanges(
  source: {
    readonly bucket: string;
    readonly key: string;
    readonly versionId: string | undefined;
    readonly replacesMetadata: boolean;
  },
  target: { readonly bucket: string; readonly key: string },
): void {
  if (
    source.bucket === target.bucket &&
    source.key === target.key &&
    source.versionId === undefined &&
    !source.replacesMetadata
  )
    throw BadRequest(
      'copying an object onto itself needs metadataDirective REPLACE or a sourceVersionId',
    );
}
