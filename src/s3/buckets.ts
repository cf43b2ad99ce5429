// S3's bucket operations: ListBuckets, CreateBucket, HeadBucket, DeleteBucket,
// GetBucketLocation and Get/PutBucketVersioning, over the same engine commands as the native
// API's bucket routes.
//
// A tenant is the S3 account: `<Owner>` is the tenant's id and name.
//
// Persists: nothing itself; bucket records through the engine.

import type { S3Api, S3Request } from './api.js';
import { XmlWriter } from './xml.js';
import { DB, tenantChildRange, type BucketRecord } from '../engine/index/schema.js';
import { readsIn } from '../security/scopes.js';
import { s3Error } from './errors.js';

export function registerBuckets(api: S3Api): void {
  api.register('ListBuckets', listBuckets);
}

function listBuckets(request: S3Request): void {
  const principal = request.requirePrincipal();
  const { tenant, scope } = principal;
  if (!readsIn(scope)) throw s3Error('AccessDenied', 'the access key may not read');
  const xml = new XmlWriter()
    .start('ListAllMyBucketsResult')
    .start('Owner')
    .leaf('ID', tenant.id)
    .leaf('DisplayName', tenant.name ?? tenant.id)
    .end('Owner')
    .start('Buckets');
  for (const entry of request.services.store.range<BucketRecord>(
    DB.buckets,
    tenantChildRange(tenant.id),
  )) {
    const bucket = entry.value;
    if (!readsIn(scope, bucket.name)) continue;
    xml
      .start('Bucket')
      .leaf('Name', bucket.name)
      .leaf('CreationDate', new Date(bucket.createdAt).toISOString())
      .end('Bucket');
  }
  xml.end('Buckets').end('ListAllMyBucketsResult');
  request.sendXml(200, xml);
}
