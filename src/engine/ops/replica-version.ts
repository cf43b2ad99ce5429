// Writing a version this cluster member lacks, as another replica holds it (docs/cluster.md §8a,
// "Repair of every version"): a repair or rebalance copies the non-current versions and delete
// markers of a versioned bucket with their own version id, sequence and time, so that a read by
// version id finds the same version on every replica, and a new replica holds the whole history.
//
// This is not a write of the object: no rule, condition, quota, lock check, event or audit row
// applies (the version was written under them elsewhere). The version is inserted where its
// sequence places it; the key's current version is then the newest the node holds. A version the
// node holds already, or a null version older than the one it holds, changes nothing. The chunk
// records of a version with data were stored ahead (their locations come with the chunks).

import { DB, tenantKey, versionKey, type TenantRecord } from '../index/schema.js';
import type { ObjectVersionRecord } from '../index/schema.js';
import type { EngineContext } from './context.js';
import {
  addChunkRefs,
  findNullVersion,
  loadUsage,
  packChunkRefs,
  refreshCurrent,
  requireBucket,
  saveUsage,
  versionIdOf,
  writeVersion,
  type ManifestChunk,
} from './objects.js';
import { lifecycleAfterInsert } from './lifecycle-index.js';
import { BadRequest, NotFound } from '../../util/errors.js';

export interface ReplicaVersionArgs {
  readonly tenantId: string;
  readonly bucket: string;
  /** The version as the sending replica holds it (its `chunks` and `storedBytes` are redone). */
  readonly version: ObjectVersionRecord;
  /** Its chunks, each with where this node stored its record when it was sent ahead. */
  readonly chunks: readonly ManifestChunk[];
}

export function writeReplicaVersion(
  context: EngineContext,
  args: ReplicaVersionArgs,
): { written: boolean } {
  const { version } = args;
  const known = version as unknown as Record<string, unknown>;
  if (
    typeof known['key'] !== 'string' ||
    !Number.isSafeInteger(known['seq']) ||
    (version.versionId !== 'null' && version.versionId !== versionIdOf(version.seq)) ||
    typeof known['lastModified'] !== 'number' ||
    !Array.isArray(args.chunks)
  )
    throw BadRequest('writeReplicaVersion takes {tenantId, bucket, version, chunks}');
  // Any state: a disabled tenant's replicas are kept whole as well.
  const tenant = context.store.get<TenantRecord>(DB.tenants, tenantKey(args.tenantId));
  if (tenant === undefined) throw NotFound(`tenant ${args.tenantId} not found`);
  const bucket = requireBucket(context, tenant.id, args.bucket);
  if (context.store.has(DB.versions, versionKey(bucket.id, version.key, version.seq)))
    return { written: false };
  if (version.versionId === 'null') {
    const held = findNullVersion(context, bucket.id, version.key);
    if (held !== undefined && held.seq > version.seq) return { written: false };
  }
  const usage = loadUsage(context, tenant.id);
  const copy: ObjectVersionRecord = { ...version, chunks: Buffer.alloc(0), storedBytes: 0 };
  if (version.deleteMarker !== true) {
    copy.storedBytes = addChunkRefs(context, tenant.num, args.chunks, usage);
    copy.chunks = packChunkRefs(args.chunks);
  }
  // Written as the newest, then the key's current version set again from what the node holds.
  writeVersion(context, { tenant, bucket, version: copy, usage });
  refreshCurrent(context, bucket, version.key, usage);
  // writeVersion indexed the chain's head for lifecycle as if the copy were the newest; it may
  // sit below it, and then its own entry and its older neighbours' are set here.
  lifecycleAfterInsert(context, bucket, copy);
  saveUsage(context, usage);
  return { written: true };
}
