// The writes of a member beyond PUT and DELETE (docs/cluster.md §8, "Other writes"): multipart
// uploads, copies, object tags, retention and legal holds. Each runs here first, as on a single
// node (its rules, conditions and audit row), then on a majority of the bucket's replicas before
// it is acknowledged; fewer is 503 `unavailable`, as for a PUT.
//
// - Commands whose effect is the same wherever their inputs are (create/abort an upload, a part,
//   tags, retention, legal hold) run again on each replica with what the coordinator chose: the
//   upload id, the time, and a part's chunk records (sent first, verified and fsync'ed by the
//   replica, as a PUT's are). A replica runs them without caller, conditions, idempotency or audit.
// - A metadata change names the version the coordinator changed (its id and sequence). A replica
//   that does not hold that version yet answers `behind`; it is then sent the changed version
//   whole, as a repair sends it, so it ends with the same record. Each change also takes a
//   sequence of its own (`mseq`), stamped on the version on every replica that applied it, so
//   that a repair finds a replica that missed it (replication.ts `stampMetadata`).
// - A completed upload runs `completeMultipartUpload` on each replica with the coordinator's
//   sequence, so the version agrees everywhere. A replica that cannot (it missed a part while it
//   was down) is sent the completed version whole, then the upload is aborted there.
// - A copy's source may live on other replicas than its destination, so a copy is never re-run:
//   the new version is sent whole (its chunk records, then its manifest), as a repair sends it.
// - Bucket notification configurations are bucket configuration, so they are cluster-wide records
//   in etcd (shared-state.ts), not replicated here.

import type { LocalEngine } from '../engine/command-router.js';
import {
  DB,
  multipartUploadKey,
  type BucketRecord,
  type MultipartUploadRecord,
  type ObjectVersionRecord,
  type TenantRecord,
} from '../engine/index/schema.js';
import { findVersionIn } from '../engine/ops/objects.js';
import type { ManifestChunk } from '../engine/ops/objects.js';
import { BadRequest, isLightwellError } from '../util/errors.js';
import type { DataHandler } from './data-transport.js';
import { HEAD_MS_MAX, type Replicator } from './replication.js';

/** Commands that run again, as they are, on every replica. */
const RERUN: ReadonlySet<string> = new Set([
  'createMultipartUpload',
  'uploadPart',
  'abortMultipartUpload',
  'putObjectTags',
  'putRetention',
  'putLegalHold',
]);
/** Changes of an existing version's metadata. */
const METADATA: ReadonlySet<string> = new Set(['putObjectTags', 'putRetention', 'putLegalHold']);

/** Commands that end an upload: each leaves a tombstone of its id (uploads-listing.ts). */
const ENDS: ReadonlySet<string> = new Set(['completeMultipartUpload', 'abortMultipartUpload']);

/** The engine commands this module replicates. */
export const REPLICATED_COMMANDS: ReadonlySet<string> = new Set([
  ...RERUN,
  'completeMultipartUpload',
  'copyObject',
]);

const COMMAND_PATH = '/cluster/v1/data/command';
const UPLOAD_OF_PATH = '/cluster/v1/data/upload-of';
/** Commands on an open upload: a node that missed its create first takes it from a replica. */
const NEEDS_UPLOAD: ReadonlySet<string> = new Set(['uploadPart', 'completeMultipartUpload']);
/** An upload id as the engine makes them (hex); anything else is not looked up. */
const UPLOAD_ID = /^(?:[0-9a-f]{2}){1,64}$/;

interface Rerun {
  name: string;
  args: Record<string, unknown>;
  now: number;
  seq?: number;
  uploadId?: string;
  /** A metadata change's version: `{versionId, seq}` as the coordinator changed it. */
  version?: { versionId: string; seq: number };
  /** A metadata change's own sequence. */
  mseq?: number;
}

export class CommandReplicator {
  constructor(
    private readonly replicator: Replicator,
    private readonly local: LocalEngine,
  ) {}

  handlers(): Map<string, DataHandler> {
    return new Map<string, DataHandler>([
      [COMMAND_PATH, this.replicator.admitted((body) => this.accept(body))],
      [UPLOAD_OF_PATH, (_from, body) => Promise.resolve(this.uploadOf(body))],
    ]);
  }

  /**
   * A node that missed an upload's create (it was down, or the create's send to it failed) takes
   * the upload's record from another replica before a part or completion of it runs here, so it
   * does not answer 404 for an upload the cluster holds. Nothing is fetched for an upload this
   * node or an answering replica saw end, nor when no replica holds it (the command's own 404).
   */
  private async ensureUpload(bucket: BucketRecord, args: Record<string, unknown>): Promise<void> {
    const { replicator } = this;
    const key = args['key'];
    const uploadId = args['uploadId'];
    if (typeof key !== 'string' || typeof uploadId !== 'string' || !UPLOAD_ID.test(uploadId))
      return;
    const at = multipartUploadKey(bucket.id, key, uploadId);
    this.local.store.refresh();
    if (this.local.store.has(DB.multipart, at) || replicator.uploadEnded(bucket, uploadId)) return;
    const query = { tenantId: bucket.tenantId, bucket: bucket.name, key, uploadId };
    for (const address of replicator.otherReplicas(bucket)) {
      const answer = await replicator
        .call(address, 'upload-of', query, HEAD_MS_MAX)
        .catch(() => undefined);
      if (answer?.['ended'] === true) return;
      const upload = answer?.['upload'] as MultipartUploadRecord | undefined | null;
      if (upload === undefined || upload === null) continue;
      if (upload.uploadId !== uploadId || upload.bucketId !== bucket.id || upload.key !== key)
        throw BadRequest(`node at ${address} answered another upload than ${uploadId}`);
      await this.local.commit(() =>
        this.local.store.has(DB.multipart, at)
          ? []
          : [{ db: DB.multipart, key: at, value: upload }],
      );
      replicator.log.info({ uploadId, address }, 'an upload this node missed taken from a replica');
      return;
    }
  }

  /**
   * Before the service checks an upload it does not hold (a part, completion or abort sent to a
   * node that missed the create, or is no replica of the bucket): its record taken from a replica.
   */
  async ensureUploadOf(args: Record<string, unknown>): Promise<void> {
    const { bucket } = this.replicator.bucketOf(args);
    await this.ensureUpload(bucket, args);
  }

  /** This node's record of an upload, and whether it saw it end (see `ensureUpload`). */
  private uploadOf(body: Record<string, unknown>): Record<string, unknown> {
    const { bucket } = this.replicator.bucketOf(body);
    const key = body['key'];
    const uploadId = body['uploadId'];
    if (typeof key !== 'string' || typeof uploadId !== 'string' || !UPLOAD_ID.test(uploadId))
      throw BadRequest('upload-of takes {tenantId, bucket, key, uploadId}');
    this.local.store.refresh();
    const upload = this.local.store.get<MultipartUploadRecord>(
      DB.multipart,
      multipartUploadKey(bucket.id, key, uploadId),
    );
    return { upload: upload ?? null, ended: this.replicator.uploadEnded(bucket, uploadId) };
  }

  /** Runs `name` here, then on a majority of the bucket's replicas (see the header). */
  async run(name: string, args: Record<string, unknown>): Promise<unknown> {
    const { replicator } = this;
    replicator.requireQuorum();
    const now = Date.now();
    const { tenant, bucket } = replicator.bucketOf(args);
    if (NEEDS_UPLOAD.has(name)) await this.ensureUpload(bucket, args);
    const producesVersion = name === 'completeMultipartUpload' || name === 'copyObject';
    const seq = producesVersion ? replicator.nextSeq() : undefined;
    const result = await this.local.runLocal(name, args, {
      now,
      ...(seq === undefined ? {} : { reserved: { nextSeq: seq } }),
    });
    if (ENDS.has(name))
      await replicator.endUpload(bucket.id, String(args['uploadId']), String(args['key']));
    if (name === 'copyObject') {
      await replicator.toReplicas(
        bucket,
        async (address) => {
          await replicator.copyVersion(address, tenant, bucket, result as ObjectVersionRecord);
        },
        result,
      );
      return result;
    }
    const rerun: Rerun = { name, args: replicaArgs(args), now };
    if (seq !== undefined) rerun.seq = seq;
    // A part's chunk records go first; its manifest names them by id.
    const records = name === 'uploadPart' ? (args['chunks'] as ManifestChunk[]) : [];
    if (name === 'uploadPart')
      rerun.args['chunks'] = records.map((chunk) => ({
        id: chunk.id,
        plainLength: chunk.plainLength,
      }));
    if (name === 'createMultipartUpload')
      rerun.uploadId = (result as MultipartUploadRecord).uploadId;
    if (METADATA.has(name)) {
      const version = result as ObjectVersionRecord;
      rerun.version = { versionId: version.versionId, seq: version.seq };
      rerun.args['versionId'] = version.versionId;
      rerun.mseq = replicator.nextSeq();
      await replicator.stampMetadata(bucket.id, version.key, version.seq, rerun.mseq);
    }
    await replicator.toReplicas(
      bucket,
      (address) => this.send(address, { tenant, bucket, rerun, records, result }),
      [rerun, records, result],
    );
    return result;
  }

  private async send(
    address: string,
    to: {
      tenant: TenantRecord;
      bucket: BucketRecord;
      rerun: Rerun;
      records: readonly ManifestChunk[];
      result: unknown;
    },
  ): Promise<void> {
    const { replicator } = this;
    const { tenant, bucket, rerun } = to;
    if (to.records.length > 0) await replicator.sendRecords(address, tenant, to.records);
    const answer = await replicator.call(address, 'command', { ...rerun });
    if (answer['applied'] === true) return;
    // The replica lacks what the command needs (see the header): it gets the version whole.
    const version = to.result as ObjectVersionRecord;
    await replicator.copyVersion(address, tenant, bucket, version);
    if (rerun.name === 'completeMultipartUpload')
      await replicator.call(address, 'command', {
        name: 'abortMultipartUpload',
        args: rerun.args,
        now: rerun.now,
      });
  }

  // ---- the replica's side -------------------------------------------------------------------

  private async accept(body: Record<string, unknown>): Promise<Record<string, unknown>> {
    const name = body['name'];
    const args = body['args'];
    const now = body['now'];
    if (typeof name !== 'string' || !(RERUN.has(name) || name === 'completeMultipartUpload'))
      throw BadRequest('command names a replicated command');
    if (args === null || typeof args !== 'object' || Array.isArray(args) || typeof now !== 'number')
      throw BadRequest('command takes {name, args, now}');
    const run = args as Record<string, unknown>;
    const { tenant, bucket } = this.replicator.bucketOf(run);
    if (METADATA.has(name))
      return this.replicator.inMetadataTurn(bucket.id, String(run['key']), async () => {
        if (!this.holds(bucket, run, body['version'])) return { applied: false };
        // This replica already has this change or a newer one (a hint that arrived late).
        const mseq = body['mseq'];
        const version = body['version'] as { seq: number };
        if (
          typeof mseq === 'number' &&
          this.replicator.stampOf(bucket.id, String(run['key']), version.seq) >= mseq
        )
          return { applied: true };
        return this.apply(name, run, body, tenant, bucket);
      });
    // A create that arrives after its upload ended here (a late hint, after the abort) would
    // bring the upload back; the end marker says it is over.
    const uploadId = body['uploadId'];
    if (
      name === 'createMultipartUpload' &&
      typeof uploadId === 'string' &&
      this.replicator.uploadEnded(bucket, uploadId)
    )
      return { applied: true };
    return this.apply(name, run, body, tenant, bucket);
  }

  /** Runs a replicated command here (see `accept`). */
  private async apply(
    name: string,
    run: Record<string, unknown>,
    body: Record<string, unknown>,
    tenant: TenantRecord,
    bucket: BucketRecord,
  ): Promise<Record<string, unknown>> {
    const now = body['now'] as number;
    if (NEEDS_UPLOAD.has(name)) await this.ensureUpload(bucket, run);
    let chunks: ManifestChunk[] | undefined;
    if (name === 'uploadPart') {
      chunks = this.replicator.located(tenant.num, run['chunks']);
      run['chunks'] = chunks;
    }
    const seq = body['seq'];
    const uploadId = body['uploadId'];
    try {
      await this.local.runLocal(name, run, {
        now,
        ...(typeof seq === 'number' ? { reserved: { nextSeq: seq } } : {}),
        ...(typeof uploadId === 'string' ? { uploadId } : {}),
      });
    } catch (error) {
      if (!isLightwellError(error) || error.status >= 500) throw error;
      // An abort of an upload this replica never had, or already completed, is done.
      if (name === 'abortMultipartUpload' && error.code === 'not_found') {
        await this.replicator.endUpload(bucket.id, String(run['uploadId']), String(run['key']));
        return { applied: true };
      }
      // A part of an upload that already ended here (a late resend) changes nothing.
      if (
        name === 'uploadPart' &&
        error.code === 'not_found' &&
        this.replicator.uploadEnded(bucket, String(run['uploadId']))
      )
        return { applied: true };
      if (name === 'completeMultipartUpload') return { applied: false };
      throw error;
    }
    if (chunks !== undefined) this.replicator.forget(tenant.num, chunks);
    if (ENDS.has(name))
      await this.replicator.endUpload(bucket.id, String(run['uploadId']), String(run['key']));
    const mseq = body['mseq'];
    const version = body['version'] as { seq: number } | undefined;
    if (METADATA.has(name) && typeof mseq === 'number' && version !== undefined)
      await this.replicator.stampMetadata(bucket.id, String(run['key']), version.seq, mseq);
    return { applied: true };
  }

  /** Whether this replica holds the version a metadata change names, as new as it was. */
  private holds(bucket: BucketRecord, args: Record<string, unknown>, named: unknown): boolean {
    const version = named as { versionId?: unknown; seq?: unknown } | undefined;
    if (typeof version?.versionId !== 'string' || typeof version.seq !== 'number')
      throw BadRequest('a metadata change names its version');
    this.local.store.refresh();
    const held = findVersionIn(this.local.store, bucket.id, String(args['key']), version.versionId);
    return held !== undefined && held.seq >= version.seq;
  }
}

/** A command's arguments as a replica runs them: no caller, conditions, idempotency or audit. */
function replicaArgs(args: Record<string, unknown>): Record<string, unknown> {
  const {
    caller: _caller,
    idempotency: _idempotency,
    audit: _audit,
    ifMatch: _ifMatch,
    ifNoneMatch: _ifNoneMatch,
    ifUnmodifiedSince: _ifUnmodifiedSince,
    ...rest
  } = args;
  return rest;
}
