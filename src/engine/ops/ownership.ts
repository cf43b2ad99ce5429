// S3 Object Ownership as the engine stores it: a bucket's OwnershipControls rule. What it means
// for writes and ACLs is the service's (service/ownership.ts); the engine keeps the one rule
// that needs the stored ACL: BucketOwnerEnforced is refused while the bucket's ACL grants
// anyone but its owner (S3's InvalidBucketAclWithObjectOwnership).
//
// Persists: BucketRecord.ownership.

import { DB, tenantChildKey, type BucketRecord, type ObjectOwnership } from '../index/schema.js';
import type { EngineContext } from './context.js';
import { requireActiveTenant } from './control.js';
import { requireBucket } from './objects.js';
import { BadRequest } from '../../util/errors.js';

export const OBJECT_OWNERSHIPS: readonly ObjectOwnership[] = [
  'BucketOwnerEnforced',
  'BucketOwnerPreferred',
  'ObjectWriter',
];

/** Sets (or, with `ownership` absent, removes) a bucket's Object Ownership rule. */
export function setBucketOwnership(
  context: EngineContext,
  args: { tenantId: string; bucket: string; ownership?: unknown },
): BucketRecord {
  requireActiveTenant(context, args.tenantId);
  const bucket = requireBucket(context, args.tenantId, args.bucket);
  const { ownership } = args;
  if (ownership === undefined || ownership === null) delete bucket.ownership;
  else {
    if (!OBJECT_OWNERSHIPS.includes(ownership as ObjectOwnership))
      throw BadRequest(
        'ObjectOwnership is BucketOwnerEnforced, BucketOwnerPreferred or ObjectWriter',
      );
    const grantsOthers = (bucket.acl?.g ?? []).some(
      ([kind, who]) => kind === 'g' || who !== bucket.tenantId,
    );
    if (ownership === 'BucketOwnerEnforced' && grantsOthers)
      throw BadRequest('the bucket ACL grants others: ACLs cannot be disabled', {
        reason: 'acl_with_ownership',
      });
    bucket.ownership = ownership as ObjectOwnership;
  }
  context.store.put(DB.buckets, tenantChildKey(args.tenantId, args.bucket), bucket);
  return bucket;
}
