// Dropping this node's copy of keys it no longer holds as a replica (docs/cluster.md §8a,
// "Reclaiming space"): a cluster member that left a bucket's replica set (a drained member, an
// old replica after a layout change) removes its copy of each key once the cluster side has
// checked that a majority of the bucket's current replica set holds the key at least as new as
// the sequence it names (a version written here after that check is kept).
//
// This is not a delete of the object: no delete marker, no tombstone, no event, no lock check
// (the copies the object is kept by are elsewhere, under their own retention), no audit row. Each
// version is removed as a versioned delete removes it (`removeVersion`): its chunk references are
// released and the node's usage counters fall, so compaction reclaims the bytes once no other
// version references them. At most DROP_KEYS_MAX keys per command, so one commit stays bounded.

import {
  DB,
  tenantKey,
  versionRange,
  type ObjectVersionRecord,
  type TenantRecord,
} from '../index/schema.js';
import type { EngineContext } from './context.js';
import { loadUsage, refreshCurrent, removeVersion, requireBucket, saveUsage } from './objects.js';
import { BadRequest, NotFound } from '../../util/errors.js';

export const DROP_KEYS_MAX = 256;

export interface DropReplicaArgs {
  readonly tenantId: string;
  readonly bucket: string;
  /** Each key with the newest sequence the replicas were found to hold of it. */
  readonly keys: ReadonlyArray<{ readonly key: string; readonly seq: number }>;
}

export interface DropReplicaResult {
  /** Versions removed (delete markers included). */
  versions: number;
  /** Their logical bytes. */
  logicalBytes: number;
  /** The tenant's physical bytes on this node that no version references any more. */
  physicalBytes: number;
}

export function dropReplicaKeys(context: EngineContext, args: DropReplicaArgs): DropReplicaResult {
  const keys: ReadonlyArray<{ key: unknown; seq: unknown }> = args.keys;
  if (
    keys.length > DROP_KEYS_MAX ||
    !keys.every((entry) => typeof entry.key === 'string' && typeof entry.seq === 'number')
  )
    throw BadRequest(`dropReplicaKeys takes at most ${DROP_KEYS_MAX} {key, seq}`);
  // Any state: a disabled tenant's copies are reclaimed as well.
  const tenant = context.store.get<TenantRecord>(DB.tenants, tenantKey(args.tenantId));
  if (tenant === undefined) throw NotFound(`tenant ${args.tenantId} not found`);
  const bucket = requireBucket(context, tenant.id, args.bucket);
  const usage = loadUsage(context, tenant.id);
  const physicalBefore = usage.physicalBytes;
  const result: DropReplicaResult = { versions: 0, logicalBytes: 0, physicalBytes: 0 };
  for (const { key, seq } of args.keys) {
    // A version newer than what the replicas were found to hold (written here meanwhile) stays.
    const versions = [
      ...context.store.range<ObjectVersionRecord>(DB.versions, versionRange(bucket.id, key)),
    ]
      .map((entry) => entry.value)
      .filter((version) => version.seq <= seq);
    for (const version of versions) {
      removeVersion(context, { tenant, bucket, version, usage });
      result.versions += 1;
      if (version.deleteMarker !== true) result.logicalBytes += version.size;
    }
    refreshCurrent(context, bucket, key, usage);
  }
  saveUsage(context, usage);
  result.physicalBytes = physicalBefore - usage.physicalBytes;
  return result;
}
