// Bucket CORS rules: stored on the bucket record, validated by the one validator
// (src/security/cors.ts) that every route storing CORS rules shares.
//
// Persists: BucketRecord.cors (absent when the bucket has no rules).

import { DB, tenantChildKey, type BucketRecord, type CorsRuleRecord } from '../index/schema.js';
import type { EngineContext } from './context.js';
import { requireActiveTenant } from './control.js';
import { requireBucket } from './objects.js';
import { parseCorsConfiguration } from '../../security/cors.js';

export function putBucketCors(
  context: EngineContext,
  args: { tenantId: string; bucket: string; cors: unknown },
): BucketRecord {
  requireActiveTenant(context, args.tenantId);
  const bucket = requireBucket(context, args.tenantId, args.bucket);
  bucket.cors = parseCorsConfiguration(args.cors).rules.map((rule) => {
    const record: CorsRuleRecord = {
      allowedOrigins: [...rule.allowedOrigins],
      allowedMethods: [...rule.allowedMethods],
      allowedHeaders: [...rule.allowedHeaders],
      exposeHeaders: [...rule.exposeHeaders],
    };
    if (rule.id !== undefined) record.id = rule.id;
    if (rule.maxAgeSeconds !== undefined) record.maxAgeSeconds = rule.maxAgeSeconds;
    return record;
  });
  context.store.put(DB.buckets, tenantChildKey(args.tenantId, args.bucket), bucket);
  return bucket;
}

export function deleteBucketCors(
  context: EngineContext,
  args: { tenantId: string; bucket: string },
): void {
  requireActiveTenant(context, args.tenantId);
  const bucket = requireBucket(context, args.tenantId, args.bucket);
  if (bucket.cors === undefined) return;
  delete bucket.cors;
  context.store.put(DB.buckets, tenantChildKey(args.tenantId, args.bucket), bucket);
}
