// Access to a bucket by name for any requester: its own tenant, another tenant, or anyone
// (anonymous). The one decision S3 requests go through, built on the same policy evaluator the
// native API's `Access` uses (src/security/policy.ts), so a stored policy means one thing on
// every transport.
//
// Order (AWS's): the bucket must exist (404); the requester's key scopes must allow the verb
// on the bucket and key (its "IAM policy"); a Deny of the bucket policy refuses; the bucket's
// own tenant is then allowed (it owns everything in its buckets, as S3's BucketOwnerEnforced);
// anyone else needs an Allow of the policy or an ACL grant of the permission, where the public
// access block (bucket's OR tenant's) may discount public grants and public policies.
//
// Invariants:
// - Deny by default: only an owner, a policy Allow or an ACL grant says yes; a Deny always wins.
// - A refusal is `forbidden` (403) and names no more than the action; a missing bucket is
//   `not_found` whoever asks (as S3's NoSuchBucket).
// - The object ACL consulted is the addressed version's (the current one without a versionId);
//   a missing object falls back to the bucket's READ grant so that its 404 can show.
//
// Persists: nothing.

import {
  DB,
  bucketNameKey,
  objectKey,
  tenantChildKey,
  tenantKey,
  type BucketNameRecord,
  type BucketRecord,
  type ObjectVersionRecord,
  type TenantRecord,
} from '../engine/index/schema.js';
import type { IndexStore } from '../engine/index/store.js';
import type { EngineClient } from '../engine/protocol.js';
import type { AuditInput } from '../engine/ops/audit.js';
import { OBJECT_ACL_HEADER } from '../engine/ops/access.js';

export { OBJECT_ACL_HEADER };
import { aclGrants, aclOf, privateAcl, type Acl, type Permission } from '../security/acl.js';
import { compilePolicy, evaluatePolicy, type StoredPolicy } from '../security/policy.js';
import {
  effectiveBlock,
  parsePublicAccessBlock,
  type PublicAccessBlock,
} from '../security/public-access.js';
import { allows, type Verb } from '../security/scopes.js';
import { Forbidden, NotFound } from '../util/errors.js';
import type { Principal } from './auth.js';
import { findVersionIn } from '../engine/ops/objects.js';

/** One request for access to a bucket (or an object in it). */
export interface BucketAccessRequest {
  /** Undefined for an anonymous request. */
  readonly requester: Principal | undefined;
  readonly bucket: string;
  /** The IAM action (`s3:GetObject`). */
  readonly action: string;
  readonly verb: Verb;
  readonly key?: string | undefined;
  readonly versionId?: string | null | undefined;
  readonly listPrefix?: string | undefined;
  /** What an ACL may grant this with, and whose ACL: undefined when only the owner may. */
  readonly permission?:
    { readonly level: 'bucket' | 'object'; readonly is: Permission } | undefined;
  /**
   * The request's condition values by lower-case key (aws:SourceIp, s3:prefix, ...), built
   * only when a policy statement asks (an owner's request to a bucket without one never does).
   */
  readonly conditions: () => Readonly<Record<string, string | undefined>>;
}

/** What an allowed request gets: the bucket and its owner tenant. */
export interface GrantedBucket {
  readonly bucket: BucketRecord;
  readonly owner: TenantRecord;
  /** True when the requester is the bucket's own tenant. */
  readonly own: boolean;
  /** True when only an ACL grant allowed the request (the access log's ACLRequired). */
  readonly viaAcl?: boolean;
}

/** The bucket and tenant that hold `name`, whoever asks; `not_found` when none does. */
export function bucketByName(
  store: IndexStore,
  name: string,
): { bucket: BucketRecord; owner: TenantRecord } {
  const holder = store.getShared<BucketNameRecord>(DB.bucketNames, bucketNameKey(name));
  const bucket =
    holder && store.getShared<BucketRecord>(DB.buckets, tenantChildKey(holder.tenantId, name));
  const owner =
    bucket &&
    store.getShared<TenantRecord>(DB.tenants, tenantKey(bucket.tenantId), bucket.tenantId);
  if (!bucket || !owner || owner.state !== 'active') throw NotFound(`bucket ${name} not found`);
  return { bucket, owner };
}

/** The tenant `id`, whatever its state; undefined when there is none. */
export function tenantById(store: IndexStore, id: string): TenantRecord | undefined {
  return store.getShared<TenantRecord>(DB.tenants, tenantKey(id), id);
}

/** The public access block in force on `bucket`. */
export function blockOf(bucket: BucketRecord, owner: TenantRecord): PublicAccessBlock {
  return effectiveBlock(bucket.publicAccessBlock, owner.publicAccessBlock);
}

/** Decides `request`; throws `forbidden` or `not_found`, else answers the bucket. */
export function authorizeBucketAccess(
  store: IndexStore,
  request: BucketAccessRequest,
): GrantedBucket {
  const { bucket, owner } = bucketByName(store, request.bucket);
  const { requester } = request;
  if (
    requester !== undefined &&
    !allows(requester.scope, {
      verb: request.verb,
      bucket: request.bucket,
      key: request.key,
      listPrefix: request.listPrefix,
    })
  )
    throw Forbidden(`the access key may not ${request.verb} in bucket ${request.bucket}`);
  const policy = bucket.policy as StoredPolicy | undefined;
  const decision = evaluatePolicy(policy, {
    principal:
      requester === undefined
        ? undefined
        : { tenantId: requester.tenant.id, accessKeyId: requester.accessKeyId },
    action: request.action,
    verb: request.verb,
    bucket: bucket.name,
    key: request.key,
    listPrefix: request.listPrefix,
    conditionValue: (key) => conditionValue(store, bucket, request, key),
  });
  if (decision === 'deny')
    throw Forbidden(`the policy of bucket ${bucket.name} denies ${request.action}`);
  const own = requester !== undefined && requester.tenant.id === bucket.tenantId;
  if (own) return { bucket, owner, own };
  const block = blockOf(bucket, owner);
  if (
    decision === 'allow' &&
    !(block.restrictPublicBuckets && policy && compilePolicy(policy, bucket.name).isPublic)
  )
    return { bucket, owner, own };
  if (request.permission && aclAllows(store, bucket, request, block.ignorePublicAcls))
    return { bucket, owner, own, viaAcl: true };
  throw Forbidden(`${request.action} on bucket ${bucket.name} is not granted`);
}

function aclAllows(
  store: IndexStore,
  bucket: BucketRecord,
  request: BucketAccessRequest,
  ignorePublic: boolean,
): boolean {
  const permission = request.permission;
  // BucketOwnerEnforced: ACLs no longer grant anything (S3 Object Ownership).
  if (!permission || bucket.ownership === 'BucketOwnerEnforced') return false;
  const requester = request.requester?.tenant.id;
  if (permission.level === 'bucket' || request.key === undefined)
    return aclGrants(bucketAcl(bucket), requester, permission.is, ignorePublic);
  const version = addressedVersion(store, bucket, request.key, request.versionId ?? null);
  if (!version) return aclGrants(bucketAcl(bucket), requester, 'READ', ignorePublic);
  return aclGrants(objectAcl(version, bucket), requester, permission.is, ignorePublic);
}

export function bucketAcl(bucket: BucketRecord): Acl {
  return bucket.acl ? aclOf(bucket.acl) : privateAcl(bucket.tenantId);
}

/** A version's ACL: the stored one, else private to the bucket's tenant. */
export function objectAcl(
  version: Pick<ObjectVersionRecord, 'headers'>,
  bucket: BucketRecord,
): Acl {
  const text = version.headers?.[OBJECT_ACL_HEADER];
  if (text === undefined) return privateAcl(bucket.tenantId);
  return aclOf(JSON.parse(text) as Parameters<typeof aclOf>[0]);
}

function addressedVersion(
  store: IndexStore,
  bucket: BucketRecord,
  key: string,
  versionId: string | null,
): ObjectVersionRecord | undefined {
  const version =
    versionId === null
      ? store.getShared<ObjectVersionRecord>(DB.objects, objectKey(bucket.id, key))
      : findVersionIn(store, bucket.id, key, versionId);
  return version && !version.deleteMarker ? version : undefined;
}

/** A condition key's value: from the request, or the addressed object's tags. */
function conditionValue(
  store: IndexStore,
  bucket: BucketRecord,
  request: BucketAccessRequest,
  key: string,
): string | undefined {
  const values = request.conditions();
  if (key in values) return values[key];
  const tag = /^s3:existingobjecttag\/(.+)$/.exec(key);
  if (tag && request.key !== undefined) {
    const version = addressedVersion(store, bucket, request.key, request.versionId ?? null);
    // Tag keys are case-sensitive; the policy's key was lower-cased, so compare alike.
    return version?.tags?.find((t) => t.key.toLowerCase() === tag[1])?.value;
  }
  return undefined;
}

/**
 * Sets (or with null removes) the public access block of every bucket of tenant `tenantId`: the
 * tenant-wide setting the console sets. Validated here and again by the engine command.
 */
export async function putTenantPublicAccessBlock(
  engine: EngineClient,
  args: { tenantId: string; block: unknown; audit?: AuditInput },
): Promise<PublicAccessBlock | undefined> {
  const block = args.block === null ? null : parsePublicAccessBlock(args.block);
  await engine.call('putTenantPublicAccessBlock', {
    tenantId: args.tenantId,
    block,
    ...(args.audit ? { audit: args.audit } : {}),
  });
  return block ?? undefined;
}

/** The tenant-wide public access block of `tenantId`, when it has one. */
export function tenantPublicAccessBlock(
  store: IndexStore,
  tenantId: string,
): PublicAccessBlock | undefined {
  return tenantById(store, tenantId)?.publicAccessBlock;
}
