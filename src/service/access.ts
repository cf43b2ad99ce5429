// Authorization: the one resolver every data-plane operation goes through. A request is allowed
// when the access key's scope allows it and the bucket's policy does not deny it; the two are
// never checked apart, so no transport can forget the policy.
//
// Order of the answers, the same in every transport: a scope that does not allow the request is
// 403 before the bucket is looked up (a key learns nothing of buckets outside its scope), a
// missing bucket 404, a policy that denies 403.

import {
  DB,
  bucketKeyOfSharedId,
  bucketSharedId,
  tenantChildRange,
  type BucketRecord,
} from '../engine/index/schema.js';
import type { IndexStore } from '../engine/index/store.js';
import { actionOfVerb, evaluatePolicy, type StoredPolicy } from '../security/policy.js';
import { readsIn, type Verb } from '../security/scopes.js';
import { Forbidden, NotFound } from '../util/errors.js';
import { authorize, type Principal } from './auth.js';

/** What a request does in a bucket: its verb, and the key or the listed prefix it touches. */
export interface BucketAccess {
  readonly verb: Verb;
  readonly key?: string | undefined;
  /** For a listing: the prefix of the listed keys ('' lists everything). */
  readonly listPrefix?: string | undefined;
}

export class Access {
  constructor(private readonly store: IndexStore) {}

  /** The bucket `name` of the principal's tenant, when `access` to it is allowed. */
  bucket(principal: Principal, name: string, access: BucketAccess): BucketRecord {
    authorize(principal, { ...access, bucket: name });
    return this.allowed(principal, this.find(principal, name), access);
  }

  /**
   * `bucket` for the objects of one batch (an ingest stream's turn): each is authorized and
   * checked against the policy on its own, in the same order; the bucket is read once per name.
   */
  batch(): BatchAccess {
    return new BatchAccess(this);
  }

  /** `bucket` once the scope allowed `access` and `bucket` was found: the policy decides. */
  allowed(principal: Principal, bucket: BucketRecord, access: BucketAccess): BucketRecord {
    const { name } = bucket;
    const decision = evaluatePolicy(bucket.policy as StoredPolicy | undefined, {
      principal: { tenantId: principal.tenant.id, accessKeyId: principal.accessKeyId },
      action: actionOfVerb(access),
      verb: access.verb,
      bucket: name,
      key: access.key,
      listPrefix: access.listPrefix,
      conditionValue: () => undefined,
      conditionsUnknown: true,
    });
    if (decision === 'deny') throw Forbidden(`the policy of bucket ${name} denies ${access.verb}`);
    return bucket;
  }

  /**
   * The bucket, for an operation whose every entry is authorized on its own (a batch delete:
   * each key through `bucket`); 404 when it does not exist. Grants nothing.
   */
  existing(principal: Principal, name: string): BucketRecord {
    return this.find(principal, name);
  }

  /** A tenant-level operation (create a bucket, mint a URL): the scope alone decides. */
  tenant(principal: Principal, verb: Verb, bucket?: string): void {
    authorize(principal, bucket === undefined ? { verb } : { verb, bucket });
  }

  /**
   * The tenant's buckets the key may read in, by name; 403 for a key that reads nowhere. A
   * bucket's policy does not hide it from the list (as on S3).
   */
  *readableBuckets(principal: Principal): Generator<BucketRecord> {
    const { scope } = principal;
    if (!readsIn(scope)) authorize(principal, { verb: 'read' });
    for (const { value } of this.store.range<BucketRecord>(
      DB.buckets,
      tenantChildRange(principal.tenant.id),
    ))
      if (readsIn(scope, value.name)) yield value;
  }

  /** The bucket as it is now, without a check (the answer of a write that was authorized). */
  current(principal: Principal, name: string): BucketRecord | undefined {
    return this.store.getSharedById<BucketRecord>(
      DB.buckets,
      bucketSharedId(principal.tenant.id, name),
      bucketKeyOfSharedId,
    );
  }

  private find(principal: Principal, name: string): BucketRecord {
    const bucket = this.current(principal, name);
    if (!bucket) throw NotFound(`bucket ${name} not found`);
    return bucket;
  }
}

/** See `Access.batch`. */
export class BatchAccess {
  private readonly found = new Map<string, BucketRecord | undefined>();

  constructor(private readonly access: Access) {}

  bucket(principal: Principal, name: string, access: BucketAccess): BucketRecord {
    authorize(principal, { ...access, bucket: name });
    const key = `${principal.tenant.id}/${name}`;
    let bucket = this.found.get(key);
    if (bucket === undefined && !this.found.has(key)) {
      bucket = this.access.current(principal, name);
      this.found.set(key, bucket);
    }
    if (!bucket) throw NotFound(`bucket ${name} not found`);
    return this.access.allowed(principal, bucket, access);
  }
}
