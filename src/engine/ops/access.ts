// Commands on S3 access control: bucket and object ACLs, the AWS form of a bucket policy, and
// the public access block of a bucket and of a tenant. Each validates what it stores with the
// one validator of its kind (src/security/acl.ts, policy.ts, public-access.ts).
//
// An object's ACL lives in its version's representation headers under OBJECT_ACL_HEADER (a
// name no request can store: S3 writes keep only their representation headers), so it travels
// with the version through every write path (PUT, multipart completion) in the same commit.
//
// Persists: BucketRecord.acl, .policy, .publicAccessBlock; TenantRecord.publicAccessBlock;
// ObjectVersionRecord.headers[OBJECT_ACL_HEADER].

import { DB, tenantChildKey, tenantKey, type BucketRecord } from '../index/schema.js';
import type { EngineContext } from './context.js';
import { requireActiveTenant } from './control.js';
import { requireBucket } from './objects.js';
import { saveVersion, targetVersion, type VersionTarget } from './object-meta.js';
import { aclOf, aclRecordOf, GRANTS_MAX, type AclRecord } from '../../security/acl.js';
import { parseAwsPolicy } from '../../security/policy.js';
import { parsePublicAccessBlock } from '../../security/public-access.js';
import { BadRequest } from '../../util/errors.js';

/** The representation-header name an object's ACL is stored under (JSON of an AclRecord). */
export const OBJECT_ACL_HEADER = 'x-lw-acl';

/** A stored ACL, checked again (it crosses a process boundary as plain data). */
function checkedAcl(value: unknown): AclRecord {
  const record = value as AclRecord | null;
  if (
    typeof record !== 'object' ||
    record === null ||
    typeof record.o !== 'string' ||
    !Array.isArray(record.g) ||
    record.g.length > GRANTS_MAX
  )
    throw BadRequest('an ACL is {o, g: [[kind, who, permission]]}');
  return aclRecordOf(aclOf(record));
}

function saveBucket(context: EngineContext, tenantId: string, bucket: BucketRecord): void {
  context.store.put(DB.buckets, tenantChildKey(tenantId, bucket.name), bucket);
}

export function putBucketAcl(
  context: EngineContext,
  args: { tenantId: string; bucket: string; acl: unknown },
): BucketRecord {
  requireActiveTenant(context, args.tenantId);
  const bucket = requireBucket(context, args.tenantId, args.bucket);
  bucket.acl = checkedAcl(args.acl);
  saveBucket(context, args.tenantId, bucket);
  return bucket;
}

export function putObjectAcl(
  context: EngineContext,
  args: VersionTarget & { acl: unknown },
): { versionId: string } {
  const { bucket, version } = targetVersion(context, args);
  version.headers = {
    ...version.headers,
    [OBJECT_ACL_HEADER]: JSON.stringify(checkedAcl(args.acl)),
  };
  saveVersion(context, bucket, version);
  return { versionId: version.versionId };
}

/** Stores an AWS policy document (null removes the policy, whichever form it had). */
export function putBucketS3Policy(
  context: EngineContext,
  args: { tenantId: string; bucket: string; document: string | null },
): BucketRecord {
  requireActiveTenant(context, args.tenantId);
  const bucket = requireBucket(context, args.tenantId, args.bucket);
  if (args.document === null) delete bucket.policy;
  else {
    if (typeof args.document !== 'string') throw BadRequest('document must be a string');
    parseAwsPolicy(args.document, bucket.name);
    bucket.policy = { document: args.document };
  }
  saveBucket(context, args.tenantId, bucket);
  return bucket;
}

export function putPublicAccessBlock(
  context: EngineContext,
  args: { tenantId: string; bucket: string; block: unknown },
): BucketRecord {
  requireActiveTenant(context, args.tenantId);
  const bucket = requireBucket(context, args.tenantId, args.bucket);
  if (args.block === null) delete bucket.publicAccessBlock;
  else bucket.publicAccessBlock = parsePublicAccessBlock(args.block);
  saveBucket(context, args.tenantId, bucket);
  return bucket;
}

/** The tenant-wide block (null removes it). */
export function putTenantPublicAccessBlock(
  context: EngineContext,
  args: { tenantId: string; block: unknown },
): { tenantId: string } {
  const tenant = requireActiveTenant(context, args.tenantId);
  if (args.block === null) delete tenant.publicAccessBlock;
  else tenant.publicAccessBlock = parsePublicAccessBlock(args.block);
  context.store.put(DB.tenants, tenantKey(args.tenantId), tenant);
  return { tenantId: tenant.id };
}
