// A bucket's CORS rules (data-api.md §4 "Buckets", "Signed URL rules"): reading and replacing
// them, and evaluating them for the browser requests the native API serves cross-origin (the
// signed URLs). The rules' syntax and matching are src/security/cors.ts; this is when they
// apply. CORS never grants access by itself: the request is authorized first, and a refused
// preflight carries no Access-Control-* header.

import type { BucketRecord } from '../engine/index/schema.js';
import {
  corsResponseHeaders,
  matchCorsRule,
  parseCorsConfiguration,
  preflightHeaders,
  type CorsRequest,
  type CorsRule,
} from '../security/cors.js';
import { Forbidden } from '../util/errors.js';
import type { RequestContext } from './context.js';
import { commitBucketChange, type ObjectService } from './objects.js';

/** The bucket's rules, empty when it has none. */
export function corsRulesOf(bucket: BucketRecord): CorsRule[] {
  return (bucket.cors as CorsRule[] | undefined) ?? [];
}

/** Replaces the bucket's rules with those of `body` (`{rules: [...]}`, at least one rule). */
export async function putBucketCors(
  objects: Pick<ObjectService, 'commit'>,
  ctx: RequestContext,
  bucket: BucketRecord,
  body: unknown,
): Promise<unknown[]> {
  const rules = parseCorsConfiguration(body).rules;
  const stored = await commitBucketChange(
    objects,
    ctx,
    bucket,
    'putBucketCors',
    { cors: { rules } },
    200,
  );
  return stored.cors ?? [];
}

/** Clears the bucket's rules. */
export async function deleteBucketCors(
  objects: Pick<ObjectService, 'commit'>,
  ctx: RequestContext,
  bucket: BucketRecord,
): Promise<void> {
  await commitBucketChange(objects, ctx, bucket, 'deleteBucketCors', {}, 204);
}

/**
 * The Access-Control-* headers of an actual cross-origin response (an authorized request with
 * `origin`, or none) that a rule allows. The answer depends on Origin wherever the bucket has
 * rules, matched or not: a cache must not give one origin's answer (with or without
 * Allow-Origin) to another (Fetch §3.2.5), so it is `Vary: Origin` then.
 */
export function corsHeadersFor(
  bucket: BucketRecord,
  origin: string | undefined,
  method: string,
): Record<string, string> {
  const rules = bucket.cors as CorsRule[] | undefined;
  const vary: Record<string, string> =
    rules !== undefined && rules.length > 0 ? { Vary: 'Origin' } : {};
  if (origin === undefined) return vary;
  const rule = matchCorsRule(rules, { origin, method, headers: [] });
  return rule ? corsResponseHeaders(rule, origin) : vary;
}

/**
 * The headers of a preflight for an authorized request: 403 when no rule of the bucket
 * allows this origin, method and headers.
 */
export function preflightCors(bucket: BucketRecord, request: CorsRequest): Record<string, string> {
  const rule = matchCorsRule(bucket.cors as CorsRule[] | undefined, request);
  if (!rule) throw Forbidden('no CORS rule of this bucket allows this origin, method and headers');
  return preflightHeaders(rule, request);
}
