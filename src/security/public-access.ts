// S3's public access block: four switches a bucket owner (per bucket) or a tenant's
// administrator (for every bucket of the tenant, from the console) sets to keep buckets from
// being opened to anyone by ACLs or policies. The effective block of a bucket is the OR of its
// own and its tenant's, switch by switch.
//
// - BlockPublicAcls: a request that would set a public ACL (a public canned ACL, a grant to
//   AllUsers or AuthenticatedUsers) is refused.
// - IgnorePublicAcls: grants to the public groups are ignored when authorizing.
// - BlockPublicPolicy: a bucket policy that allows anyone is refused.
// - RestrictPublicBuckets: while the bucket's policy is public, it grants nothing to anyone but
//   the bucket's own tenant.
//
// Persists: nothing itself; records on buckets and tenants.

import { BadRequest } from '../util/errors.js';

export interface PublicAccessBlock {
  blockPublicAcls: boolean;
  ignorePublicAcls: boolean;
  blockPublicPolicy: boolean;
  restrictPublicBuckets: boolean;
}

export const NO_BLOCK: Readonly<PublicAccessBlock> = Object.freeze({
  blockPublicAcls: false,
  ignorePublicAcls: false,
  blockPublicPolicy: false,
  restrictPublicBuckets: false,
});

const FIELDS = [
  'blockPublicAcls',
  'ignorePublicAcls',
  'blockPublicPolicy',
  'restrictPublicBuckets',
] as const;

/** A block from JSON (`{blockPublicAcls?: boolean, ...}`); absent switches are off. */
export function parsePublicAccessBlock(value: unknown): PublicAccessBlock {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw BadRequest('a public access block is an object of four booleans');
  const fields = value as Record<string, unknown>;
  const block = { ...NO_BLOCK };
  for (const [name, setting] of Object.entries(fields)) {
    if (!(FIELDS as readonly string[]).includes(name))
      throw BadRequest(`unknown field ${name.slice(0, 32)}; expected ${FIELDS.join(', ')}`);
    if (typeof setting !== 'boolean') throw BadRequest(`${name} must be a boolean`);
    block[name as (typeof FIELDS)[number]] = setting;
  }
  return block;
}

/** The block in force: each switch on when the bucket's or the tenant's is. */
export function effectiveBlock(
  bucket: PublicAccessBlock | undefined,
  tenant: PublicAccessBlock | undefined,
): PublicAccessBlock {
  const a = bucket ?? NO_BLOCK;
  const b = tenant ?? NO_BLOCK;
  return {
    blockPublicAcls: a.blockPublicAcls || b.blockPublicAcls,
    ignorePublicAcls: a.ignorePublicAcls || b.ignorePublicAcls,
    blockPublicPolicy: a.blockPublicPolicy || b.blockPublicPolicy,
    restrictPublicBuckets: a.restrictPublicBuckets || b.restrictPublicBuckets,
  };
}
