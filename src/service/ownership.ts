// S3 Object Ownership (OwnershipControls): who owns an object another tenant writes into a
// bucket, and whether ACLs apply.
//
// - BucketOwnerEnforced: ACLs are off. Every object is the bucket tenant's; a write may carry
//   no ACL but `bucket-owner-full-control` (else AccessControlListNotSupported), PutBucketAcl
//   and PutObjectAcl are refused, and no ACL grant allows access (bucket-access.ts): only the
//   owner, the key's scopes and the bucket policy decide.
// - BucketOwnerPreferred: a write with `bucket-owner-full-control` makes the bucket's tenant the
//   object's owner; any other write's owner is its writer.
// - ObjectWriter, or no rule (Lightwell's default, as before the rule existed): the writer owns
//   what it writes.
//
// Persists: through the engine (`setBucketOwnership`).

import type { CommandArgs } from '../engine/commands.js';
import type { BucketRecord, ObjectOwnership } from '../engine/index/schema.js';
import { BadRequest } from '../util/errors.js';
import type { RequestContext } from './context.js';
import type { ObjectService } from './objects.js';

export type { ObjectOwnership };

/** True when the bucket's ACL grants anyone but its tenant (a group or another tenant). */
export function aclGrantsOthers(bucket: BucketRecord): boolean {
  return (bucket.acl?.g ?? []).some(([kind, who]) => kind === 'g' || who !== bucket.tenantId);
}

/** True when the bucket's ACLs are off (BucketOwnerEnforced). */
export function aclsDisabled(bucket: BucketRecord): boolean {
  return bucket.ownership === 'BucketOwnerEnforced';
}

/**
 * The owner of an object `writer` writes with canned ACL `canned` (undefined: none, `grants`:
 * grant headers); `bad_request` (reason `acl_not_supported`) for an ACL the rule refuses.
 */
export function objectOwnerOf(
  bucket: BucketRecord,
  writer: string,
  canned: string | undefined,
  grants: boolean,
): string {
  const ownerFull = canned?.trim() === 'bucket-owner-full-control';
  if (aclsDisabled(bucket)) {
    if (grants || (canned !== undefined && !ownerFull))
      throw BadRequest('the bucket does not allow ACLs (BucketOwnerEnforced)', {
        reason: 'acl_not_supported',
      });
    return bucket.tenantId;
  }
  if (bucket.ownership === 'BucketOwnerPreferred' && ownerFull) return bucket.tenantId;
  return writer;
}

/** Sets (or removes) a bucket's Object Ownership rule. */
export function putBucketOwnership(
  objects: ObjectService,
  ctx: RequestContext,
  bucket: BucketRecord,
  ownership: ObjectOwnership | undefined,
): Promise<BucketRecord> {
  const args: CommandArgs<'setBucketOwnership'> = {
    tenantId: bucket.tenantId,
    bucket: bucket.name,
  };
  // Checked here for the answer's reason, and again by the engine in the transaction.
  if (ownership === 'BucketOwnerEnforced' && aclGrantsOthers(bucket))
    throw BadRequest('the bucket ACL grants others: ACLs cannot be disabled', {
      reason: 'acl_with_ownership',
    });
  if (ownership !== undefined) args.ownership = ownership;
  return objects.commit(ctx, 'setBucketOwnership', args, 200);
}
