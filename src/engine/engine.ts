// The engine process: the single writer of the index.
//
// It owns the data directory (engine.lock), opens LMDB read-write, recovers segments left open
// by dead writers, and serves commands on `engine.sock`. Commands that arrive while the previous
// commit is being written share one durable commit (group commit, `CommandBatch`), while each
// stays atomic on its own. The answer to a command is sent only after its commit is on disk.

import { checkChunkSetting } from './chunker.js';
import { createServer, type Server, type Socket } from 'node:net';
import { stat, unlink } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { IndexStore, CommandBatch, type Settled } from './index/store.js';
import type { MultipartUploadRecord, ObjectVersionRecord } from './index/schema.js';
import {
  dataDirPaths,
  prepareDataDir,
  newStoreNotice,
  acquireEngineLock,
  loadMasterKey,
  type DataDirPaths,
} from './data-dir.js';
import {
  FrameDecoder,
  FrameWriter,
  encodeFrame,
  PUT_GROUP_COMMAND,
  PUT_GROUP_ITEMS_MAX,
  type Request,
} from './protocol.js';
import {
  toWire,
  isLightwellError,
  MethodNotAllowed,
  BadRequest,
  EngineUnavailable,
  DiskFull,
  type WireError,
} from '../util/errors.js';
import { componentLogger, type Logger } from '../util/log.js';
import { crashOnInvariantFailure } from '../util/invariant.js';
import type { Settings } from '../util/config.js';
import type { EngineContext } from './ops/context.js';
import * as accessLog from './ops/access-log.js';
import * as ownership from './ops/ownership.js';
import * as control from './ops/control.js';
import * as objects from './ops/objects.js';
import * as segments from './ops/segments.js';
import * as audit from './ops/audit.js';
import * as objectMeta from './ops/object-meta.js';
import * as access from './ops/access.js';
import * as objectLock from './ops/object-lock.js';
import * as encryption from './ops/encryption.js';
import * as idempotency from './ops/idempotency.js';
import * as tenantDelete from './ops/tenant-delete.js';
import * as tenantScrub from './ops/tenant-scrub.js';
import * as corruptChunks from './ops/corrupt-chunks.js';
import * as replicaDrop from './ops/replica-drop.js';
import * as replicaVersion from './ops/replica-version.js';
import { recoverSegments } from './segments/recovery.js';
import { Compactor } from './segments/compaction.js';
import { SegmentSyncer } from './segments/segment-syncer.js';
import { indexHoldsKeyedData, settleMasterKeyCheck } from './master-key-check.js';
import { SegmentPins, PINNED_SEGMENTS_MAX } from './segments/segment-pins.js';
import { RateLimiter, KEY_CHARS_MAX } from '../security/rate-limit.js';
import { AuditBarriers, flushedBarrierOf } from './audit-barrier.js';
import * as multipart from './ops/multipart.js';
import * as notifications from './ops/notifications.js';
import * as cors from './ops/cors.js';
import * as keyRotation from './ops/key-rotation.js';
import { rotateMasterKey, settleMasterKeyRotation } from './master-key-rotation.js';
import { ScrubScheduler, setScrubSchedule } from './scrub-schedule.js';
import { Reencryptor } from './reencryption.js';
import { BackupRunner } from './backup.js';
import { planRestore } from './tenant-restore.js';
import { startBackup, startRestore } from './ops/backup.js';
import { deleteBackupTarget, setBackupTarget } from './ops/backup-targets.js';
import { setReencryption } from './ops/reencryption.js';
import * as lifecycle from './ops/lifecycle.js';
import * as kmsKeys from './ops/kms-keys.js';
import { LifecycleExecutor } from './lifecycle.js';
import { Deliverer } from './delivery.js';
import { nodeIo, type Io } from '../util/io.js';
import { realClock, type Clock } from '../util/clock.js';
import { EngineMetrics } from './metrics.js';
import { RouterSlot, type LocalEngine, type RouterFactory } from './command-router.js';
import { SpaceReserve, withRoom } from './space-reserve.js';
import { decodePutGroup } from './put-group-codec.js';

type Op = (context: EngineContext, args: never) => unknown;

/** A page of versions merged from a bucket's replicas (src/cluster/versions-listing.ts). */
interface ClusterVersionsPage {
  readonly entries: Array<ObjectVersionRecord & { readonly isLatest: boolean }>;
  readonly commonPrefixes: string[];
  readonly isTruncated: boolean;
  readonly nextKeyMarker?: string;
  readonly nextVersionIdMarker?: string;
}

/** What a cluster member's repair answers (src/cluster/repair.ts); a single node answers null. */
interface ClusterRepairReport {
  readonly counts: { readonly replicasUnreachable: number } & Record<string, number>;
  readonly nodes: Record<string, unknown>;
  readonly [field: string]: unknown;
}

/**
 * Every command the engine accepts. Each runs inside one durable transaction. The table's own
 * type (not a string record) is the command map's source (commands.ts).
 */
export const operations = {
  ping: () => ({ ok: true }),
  // A read is about to be served: a cluster member first makes its copy of the object current
  // (its router serves this); a single node has nothing to do.
  clusterFreshen: (
    _context: EngineContext,
    _args: { tenantId: string; bucket: string; key: string },
  ) => null,
  // A part, completion or abort of an upload this node does not hold is about to be checked: a
  // cluster member first takes the upload's record from a replica; a single node has none to ask.
  clusterEnsureUpload: (
    _context: EngineContext,
    _args: { tenantId: string; bucket: string; key: string; uploadId: string },
  ) => null,
  // A page of a listing is about to be served: likewise for the page's range of keys.
  clusterFreshenList: (
    _context: EngineContext,
    _args: { tenantId: string; bucket: string; prefix: string; after?: string; limit: number },
  ) => null,
  // A rebalance of a tenant's replicas: a cluster member's router runs it; none on one node.
  clusterRepair: (
    _context: EngineContext,
    _args: {
      tenantId: string;
      dryRun: boolean;
      bucket?: string;
      corrupt?: string[];
      reclaim?: boolean;
    },
  ): ClusterRepairReport | null => null,
  reportCorruptChunk: corruptChunks.reportCorruptChunk,
  // A drained member's copies reclaimed: a cluster member's router runs it; none on one node.
  clusterReclaim: (
    _context: EngineContext,
    _args: { nodeId: string },
  ): Record<string, unknown> | null => null,
  dropReplicaKeys: replicaDrop.dropReplicaKeys,
  writeReplicaVersion: replicaVersion.writeReplicaVersion,
  // A chunk read here failed its checksum: a cluster member replaces its copy with a good one
  // from another member (its router serves this); a single node has no other copy.
  clusterRepairChunk: (
    _context: EngineContext,
    _args: { tenantNum: number; chunkId: string },
  ): { repaired: boolean } => ({ repaired: false }),
  // A page of a bucket's versions: a cluster member merges it from a majority of the bucket's
  // replicas (its router serves this); a single node answers null and lists its own.
  clusterListVersions: (
    _context: EngineContext,
    _args: {
      tenantId: string;
      bucket: string;
      prefix: string;
      delimiter?: string;
      keyMarker?: string;
      versionIdMarker?: string;
      maxKeys: number;
    },
  ): ClusterVersionsPage | null => null,
  // Pages of a bucket's uploads and of an upload's parts: likewise merged on a cluster member.
  clusterListUploads: (
    _context: EngineContext,
    _args: {
      tenantId: string;
      bucket: string;
      prefix: string;
      keyMarker?: string;
      uploadIdMarker?: string;
      max: number;
    },
  ): { uploads: MultipartUploadRecord[]; isTruncated: boolean } | null => null,
  clusterListParts: (
    _context: EngineContext,
    _args: {
      tenantId: string;
      bucket: string;
      key: string;
      uploadId: string;
      marker: number;
      max: number;
    },
  ): {
    upload: MultipartUploadRecord | null;
    parts: multipart.PartView[];
    isTruncated: boolean;
  } | null => null,
  createTenant: control.createTenant,
  createAccount: control.createAccount,
  createAccessKey: control.createAccessKey,
  putAdminToken: control.putAdminToken,
  revokeAdminToken: control.revokeAdminToken,
  createBucket: objects.createBucket,
  deleteBucket: objects.deleteBucket,
  putObject: objects.putObject,
  deleteObject: objects.deleteObject,
  allocSegment: segments.allocSegment,
  sealSegment: segments.sealSegment,
  appendAudit: audit.appendAudit,
  setVersioning: objectMeta.setVersioning,
  putObjectTags: objectMeta.putObjectTags,
  putRetention: objectMeta.putRetention,
  putLegalHold: objectMeta.putLegalHold,
  copyObject: objectMeta.copyObject,
  setBucketPolicy: objectMeta.setBucketPolicy,
  putBucketAcl: access.putBucketAcl,
  putObjectAcl: access.putObjectAcl,
  putBucketS3Policy: access.putBucketS3Policy,
  putPublicAccessBlock: access.putPublicAccessBlock,
  putTenantPublicAccessBlock: access.putTenantPublicAccessBlock,
  setObjectLockConfig: objectLock.setObjectLockConfig,
  setBucketTags: objectMeta.setBucketTags,
  setBucketEncryption: encryption.setBucketEncryption,
  beginIdempotent: idempotency.beginIdempotent,
  abandonIdempotent: idempotency.abandonIdempotent,
  disableTenant: control.disableTenant,
  deleteTenant: tenantDelete.deleteTenant,
  rotateAccessKey: control.rotateAccessKey,
  revokeAccessKey: control.revokeAccessKey,
  setTenantQuota: control.setTenantQuota,
  createKmsKey: kmsKeys.createKmsKey,
  deleteKmsKey: kmsKeys.deleteKmsKey,
  clearTenantQuota: control.clearTenantQuota,
  nodeIdentity: control.nodeIdentity,
  createMultipartUpload: multipart.createMultipartUpload,
  uploadPart: multipart.uploadPart,
  completeMultipartUpload: multipart.completeMultipartUpload,
  abortMultipartUpload: multipart.abortMultipartUpload,
  putBucketCors: cors.putBucketCors,
  deleteBucketCors: cors.deleteBucketCors,
  putBucketNotifications: notifications.putBucketNotifications,
  deleteBucketNotifications: notifications.deleteBucketNotifications,
  rotateTenantDataKey: keyRotation.rotateTenantDataKey,
  setScrubSchedule,
  setReencryption,
  startBackup,
  startRestore,
  setBackupTarget,
  deleteBackupTarget,
  putBucketLifecycle: lifecycle.putBucketLifecycle,
  deleteBucketLifecycle: lifecycle.deleteBucketLifecycle,
  setBucketLogging: accessLog.setBucketLogging,
  deliverAccessLog: accessLog.deliverAccessLog,
  setBucketOwnership: ownership.setBucketOwnership,
} satisfies Readonly<Record<string, Op>>;
/** The table as the dispatcher looks a name off the wire up in it. */
const transactionTable: Readonly<Record<string, Op>> = operations;

type ReadOp = (context: EngineContext, args: never) => Promise<unknown>;

/**
 * Commands that only read (the index and segment files). They run outside every write
 * transaction, may await I/O, must never write, and do a bounded amount of work per call.
 */
export const readOperations = {
  scrubTenantChunks: tenantScrub.scrubTenantChunks,
  listCorruptChunks: (
    context: EngineContext,
    args: { tenantNum?: number; limit?: number } | undefined,
  ) => Promise.resolve(corruptChunks.listCorruptChunks(context, args)),
  planRestore,
} satisfies Readonly<Record<string, ReadOp>>;
const readTable: Readonly<Record<string, ReadOp>> = readOperations;

export interface RunningEngine {
  readonly paths: DataDirPaths;
  readonly store: IndexStore;
  stop(): Promise<void>;
}

export async function startEngine(options: {
  dataDir: string;
  settings: Settings;
  /** The segments' file system (node:fs by default; the fault simulation injects its own). */
  io?: Io;
  /** Grace periods, expiry and timestamps (the wall clock by default). */
  clock?: Clock;
  /** A cluster member's router of cluster-wide commands (command-router.ts). */
  router?: RouterFactory;
}): Promise<RunningEngine> {
  const io = options.io ?? nodeIo;
  const clock = options.clock ?? realClock;
  const log = componentLogger('engine');
  checkChunkSetting(options.settings.bytes('storage.chunk_bytes_avg'));
  const paths = dataDirPaths(options.dataDir);
  if ((await prepareDataDir(paths)).created)
    log.warn({ dataDir: paths.root }, newStoreNotice(paths));
  const releaseLock = await acquireEngineLock(paths);
  const store = IndexStore.open({ path: paths.index, readOnly: false });
  let masterKey: Buffer;
  try {
    await settleMasterKeyRotation(paths, store, log);
    masterKey = await loadCheckedMasterKey(paths, store, log);
  } catch (error) {
    await store.close();
    await releaseLock();
    throw error;
  }
  const syncer = new SegmentSyncer(paths.segments, io, WRITER_REGISTRATION_WAIT_MS);
  const context: EngineContext = {
    store,
    masterKey,
    settings: options.settings,
    now: () => clock.now(),
    syncer,
  };
  const reserve = new SpaceReserve({
    root: paths.root,
    configuredBytes: options.settings.bytes('storage.space_reserve'),
    log: componentLogger('engine.space'),
    io,
  });
  await reserve.open();
  // Recovery commits too: on a full disk it gets the reserve, as any commit would.
  await withRoom(reserve, 'recovery found the disk full', () =>
    recoverAtStart(context, paths, log, io),
  );
  const pins = new SegmentPins();
  const mintLimiter = new RateLimiter(options.settings.rate('security.token_mint_rate'));
  const compactor = new Compactor({
    paths,
    store,
    settings: options.settings,
    log: componentLogger('engine.compaction'),
    pins,
    io,
    clock,
    segmentFailed: (segmentId) => syncer.poison(segmentId),
    segmentSealed: (segmentId) => syncer.forget(segmentId),
    space: reserve,
  });
  const deliverer = new Deliverer({ context, log: componentLogger('engine.delivery') });
  const purger = new tenantDelete.TenantPurger({
    context,
    log: componentLogger('engine.tenant-purge'),
    endDeliveries: (tenantId) => deliverer.endTenantDeliveries(tenantId),
  });
  const scrubScheduler = new ScrubScheduler({
    context,
    log: componentLogger('engine.scrub-schedule'),
  });
  const reencryptor = new Reencryptor({
    context,
    log: componentLogger('engine.reencryption'),
    segments: paths.segments,
    pins,
    io,
  });
  const backups = new BackupRunner({
    context,
    paths,
    pins,
    io,
    log: componentLogger('engine.backup'),
  });
  const sockets = new Set<Socket>();
  const metrics = new EngineMetrics({ store, compaction: () => compactor.totals });
  syncer.onSync = (seconds) => metrics.fdatasync(seconds);
  const batch = new CommandBatch(
    store,
    (size, seconds) => metrics.commit(size, seconds),
    async () => (await reserve.release('an index commit found the disk full')) > 0,
  );
  watchSegments(context, batch, syncer);
  const executor: Executor = {
    paths,
    context,
    batch,
    metrics,
    pins,
    mintLimiter,
    reserve,
    router: undefined as unknown as RouterSlot,
    auditBarriers: new AuditBarriers({
      unanswered: (sources) =>
        log.warn(
          { sources },
          'audit query read without the rows of sources that did not answer within 1 s',
        ),
    }),
  };
  const router = new RouterSlot(options.router, localEngine(executor, paths.segments));
  (executor as { router: RouterSlot }).router = router;
  await router.refresh();
  const lifecycleExecutor = new LifecycleExecutor({
    context,
    submit: (apply) => batch.submit(apply),
    log: componentLogger('engine.lifecycle'),
    intervalMs: options.settings.duration('lifecycle.interval'),
  });
  const server = await listenForCommands(paths.socket, executor, sockets);
  compactor.start();
  lifecycleExecutor.start();
  purger.start();
  deliverer.start();
  scrubScheduler.start();
  reencryptor.start();
  await backups.start();
  log.info({ dataDir: paths.root }, 'engine ready');
  return {
    paths,
    store,
    stop: async () => {
      syncer.close();
      await router.close();
      await scrubScheduler.stop();
      await reencryptor.stop();
      await backups.stop();
      await lifecycleExecutor.stop();
      await deliverer.stop();
      await purger.stop();
      await compactor.stop();
      await closeServer(server, sockets);
      await store.close();
      await unlink(paths.socket).catch(() => undefined);
      await releaseLock();
      log.info('engine stopped');
    },
  };
}

/**
 * How long a commit into a segment that a live writer has not registered again since this
 * engine started waits for that writer (it reconnects at once, segment-syncer.ts), before it is
 * refused with `engine_unavailable`.
 */
const WRITER_REGISTRATION_WAIT_MS = 2000;

/**
 * The syncer's state from the index (segment-syncer.ts): segments whose fdatasync failed in an
 * earlier life stay refused, marks of new failures are committed through the group commit, and
 * commits into the segments that live writers (gateways that outlived the engine) still append
 * to wait until each writer has registered its segment again.
 */
function watchSegments(context: EngineContext, batch: CommandBatch, syncer: SegmentSyncer): void {
  const { failed, writing } = segments.watchedSegments(context);
  syncer.load(failed);
  syncer.persist = async (segmentId) => {
    await batch.submit(() => segments.markSegmentFailed(context, { segmentId }));
  };
  syncer.expect(writing);
}

/** What a crash or an older release can have left: open segments, and stale usage counts. */
async function recoverAtStart(
  context: EngineContext,
  paths: DataDirPaths,
  log: Logger,
  io: Io,
): Promise<void> {
  const { store } = context;
  await recoverSegments({
    paths,
    store,
    log: componentLogger('engine.recovery'),
    io,
    clock: { now: () => context.now() },
  });
  const named = await store.transact(() => objects.checkBucketNames(context));
  if (named > 0) log.info({ buckets: named }, 'global bucket names indexed');
  const corrected = await store.transact(() => multipart.reconcilePartBytes(context));
  if (corrected > 0)
    log.warn(
      { tenants: corrected },
      "usage partBytes recomputed from the tenants' multipart parts",
    );
}

/** The command socket; a stale file left by an engine that is gone is replaced. */
async function listenForCommands(
  path: string,
  executor: Executor,
  sockets: Set<Socket>,
): Promise<Server> {
  const server = createServer((socket) => serveConnection(socket, executor, sockets));
  if (existsSync(path)) await unlink(path);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => resolve());
  });
  return server;
}

/** The master key, made for a new directory, and proved against the index's check value. */
async function loadCheckedMasterKey(
  paths: DataDirPaths,
  store: IndexStore,
  log: Logger,
): Promise<Buffer> {
  const masterKey = await loadMasterKey(paths, { dataUnderKey: indexHoldsKeyedData(store) });
  await settleMasterKeyCheck(store, masterKey, paths.masterKey);
  // Anyone who can read the key can read every object: say so, as ssh does of a private key
  // (a key on a secrets mount may be meant that way, so this does not refuse).
  if (((await stat(paths.masterKey)).mode & 0o077) !== 0)
    log.warn(
      { file: paths.masterKey },
      'the master key file is readable by other users: chmod 600 it, or restrict its mount',
    );
  return masterKey;
}

interface Executor {
  readonly paths: DataDirPaths;
  readonly context: EngineContext;
  readonly batch: CommandBatch;
  /** The segments each connection's uploads in flight wrote to (segment-pins.ts). */
  readonly pins: SegmentPins;
  /** `security.token_mint_rate`, for all the gateways at once. */
  readonly mintLimiter: RateLimiter;
  /** The connections that batch audit rows, flushed before an audit query reads. */
  readonly auditBarriers: AuditBarriers;
  /** The engine's figures and the other processes' snapshots (metrics.ts). */
  readonly metrics: EngineMetrics;
  /** A cluster member's router of cluster-wide commands; empty on a single node. */
  readonly router: RouterSlot;
  /** Room kept for reclaiming space on a full disk (space-reserve.ts). */
  readonly reserve: SpaceReserve;
}

/** What a router may do with this engine (command-router.ts). */
function localEngine(executor: Executor, segmentsDir: string): LocalEngine {
  const { context } = executor;
  const commandOf = (name: string): Op => {
    const op = Object.hasOwn(transactionTable, name) ? transactionTable[name] : undefined;
    if (!op) throw MethodNotAllowed(`unknown engine command ${name}`);
    return op;
  };
  return {
    store: context.store,
    masterKey: context.masterKey,
    settings: context.settings,
    segmentsDir,
    metrics: executor.metrics.registry,
    capture: (name, args, reserved) => {
      const op = commandOf(name);
      const caller = (args as { caller?: unknown } | undefined)?.caller;
      return context.store.capture(() => {
        if (typeof caller === 'string') control.requireLiveCaller(context, caller);
        return op({ ...context, reserved: { ...reserved } }, args as never);
      });
    },
    runLocal: (name, args, options) => {
      const run =
        options === undefined
          ? context
          : {
              ...context,
              ...(options.reserved === undefined ? {} : { reserved: { ...options.reserved } }),
              ...(options.now === undefined ? {} : { now: () => options.now as number }),
              ...(options.uploadId === undefined ? {} : { uploadId: options.uploadId }),
            };
      return runCommand({ ...executor, context: run }, name, commandOf(name), args);
    },
    segmentFailed: async (segmentId) => {
      await context.syncer?.poison(segmentId);
    },
    segmentOpened: async (segmentId) => {
      await context.syncer?.hold(segmentId);
    },
    commit: (writes, row) =>
      executor.batch.submit(() => {
        for (const write of typeof writes === 'function' ? writes() : writes) {
          if (write.value === undefined) context.store.remove(write.db, write.key);
          else context.store.put(write.db, write.key, write.value);
        }
        if (row) audit.writeAudit(context, row);
      }),
  };
}

function serveConnection(socket: Socket, executor: Executor, sockets: Set<Socket>): void {
  const log = componentLogger('engine.commands');
  const decoder = new FrameDecoder();
  const writer = new FrameWriter(socket);
  sockets.add(socket);
  socket.setNoDelay(true);
  socket.on('close', () => {
    sockets.delete(socket);
    executor.pins.drop(socket);
    executor.auditBarriers.drop(socket);
    executor.metrics.drop(socket);
  });
  socket.on('error', () => socket.destroy());
  socket.on('data', (data: Buffer) => {
    let requests: unknown[];
    try {
      requests = decoder.push(data);
    } catch (error) {
      log.warn({ err: error }, 'malformed command stream; closing the connection');
      socket.destroy();
      return;
    }
    for (const request of requests) void execute(request, executor, socket, writer, log);
  });
}

/** The `{segmentId}` argument of a segment command. */
function segmentIdOf(command: string, args: unknown): number {
  const segmentId = (args as { segmentId?: unknown } | undefined)?.segmentId;
  if (!Number.isSafeInteger(segmentId) || (segmentId as number) < 0)
    throw BadRequest(`${command} takes {segmentId}: an integer`);
  return segmentId as number;
}

/** Segments that a manifest's newly written chunks live in. */
function writtenSegments(chunks: unknown): number[] {
  if (!Array.isArray(chunks)) return [];
  const segmentIds: number[] = [];
  for (const chunk of chunks as Array<{ location?: { segmentId?: unknown } }>) {
    const segmentId = chunk.location?.segmentId;
    if (typeof segmentId === 'number') segmentIds.push(segmentId);
  }
  return segmentIds;
}

/**
 * Commands answered from the engine's memory, not the index, each with the connection it came
 * on: the segments a gateway's uploads in flight hold (segment-pins.ts); the token-mint rate
 * limit, kept here so that every gateway of the data directory draws on one bucket per access
 * key (`security.token_mint_rate` is per key, not per gateway process); and the audit barrier
 * (audit-barrier.ts), answered once the rows every audit sink held have arrived and committed.
 */
type ConnectionCommand = (
  executor: Executor,
  socket: Socket,
  writer: FrameWriter,
  args: unknown,
) => unknown;

export const connectionCommands = {
  pinSegments: (executor, socket, _writer, args) => {
    executor.pins.set(socket, pinnedSegmentsOf(args));
    return null;
  },
  // A writer's fdatasync of a segment failed: no commit may point into it again. Answered once
  // the segment's mark is committed, so that a restarted engine refuses it too.
  segmentFailed: async (executor, _socket, _writer, args) => {
    await executor.context.syncer?.poison(segmentIdOf('segmentFailed', args));
    return null;
  },
  // A writer created a segment and writes no record before this answer: the engine opens the
  // handle it syncs the segment with now, so that it hears of every failed write-back
  // (segment-syncer.ts).
  segmentOpened: async (executor, _socket, _writer, args) => {
    await executor.context.syncer?.hold(segmentIdOf('segmentOpened', args));
    return null;
  },
  // A process's metrics snapshot, and a scrape's collection of all of them (metrics.ts).
  reportMetrics: (executor, socket, _writer, args) => {
    executor.metrics.report(socket, args);
    return null;
  },
  collectMetrics: (executor) => executor.metrics.collect(),
  // This node's cluster state changed (it joined, or its etcd endpoints moved): re-open the
  // router of cluster-wide commands.
  clusterRefresh: async (executor) => {
    await executor.router.refresh();
    return null;
  },
  // Async between its steps (key files, then one commit): master-key-rotation.ts.
  rotateMasterKey: (executor, _socket, _writer, args) =>
    rotateMasterKey({ ...executor, log: componentLogger('engine.key-rotation') }, args),
  takeMintToken: (executor, _socket, _writer, args) => {
    const accessKeyId = (args as { accessKeyId?: unknown } | undefined)?.accessKeyId;
    if (typeof accessKeyId !== 'string' || accessKeyId.length > KEY_CHARS_MAX)
      throw BadRequest(`takeMintToken takes {accessKeyId} of at most ${KEY_CHARS_MAX} characters`);
    return executor.mintLimiter.take(accessKeyId, executor.context.now());
  },
  auditSource: (executor, socket, writer) => {
    executor.auditBarriers.add(socket, (message) => writer.write(encodeFrame(message)));
    return null;
  },
  auditFlushed: (executor, socket, _writer, args) => {
    const barrier = flushedBarrierOf(args);
    if (barrier === undefined) throw BadRequest('auditFlushed takes {barrier}: an integer');
    executor.auditBarriers.flushed(socket, barrier);
    return null;
  },
  // The commit after the sources' rows: they came in ahead of it, so they commit with it or
  // before.
  auditBarrier: async (executor) => {
    await executor.auditBarriers.pass();
    await executor.batch.submit(() => null);
    return null;
  },
} satisfies Readonly<Record<string, ConnectionCommand>>;
/** The table as the dispatcher looks a name off the wire up in it. */
const connectionTable: Readonly<Record<string, ConnectionCommand>> = connectionCommands;

/** The segment ids of a `pinSegments` command: `{segments: number[]}`. */
function pinnedSegmentsOf(args: unknown): number[] {
  const segments = (args as { segments?: unknown } | undefined)?.segments;
  if (
    !Array.isArray(segments) ||
    segments.length > PINNED_SEGMENTS_MAX ||
    !segments.every((id) => Number.isSafeInteger(id) && (id as number) >= 0)
  )
    throw BadRequest(`pinSegments takes {segments}: at most ${PINNED_SEGMENTS_MAX} segment ids`);
  return segments as number[];
}

/** A decoded frame with a request id; the command name and arguments are checked where used. */
type Incoming = Omit<Request, 'o'> & { readonly o: unknown };

function hasRequestId(frame: unknown): frame is Incoming {
  return (
    typeof frame === 'object' && frame !== null && typeof (frame as { i?: unknown }).i === 'number'
  );
}

async function execute(
  request: unknown,
  executor: Executor,
  socket: Socket,
  writer: FrameWriter,
  log: ReturnType<typeof componentLogger>,
): Promise<void> {
  const { context } = executor;
  if (!hasRequestId(request)) {
    socket.destroy();
    return;
  }
  let frame: Buffer;
  try {
    const op =
      typeof request.o === 'string' && Object.hasOwn(transactionTable, request.o)
        ? transactionTable[request.o]
        : undefined;
    const read =
      typeof request.o === 'string' && Object.hasOwn(readTable, request.o)
        ? readTable[request.o]
        : undefined;
    const answered =
      typeof request.o === 'string' && Object.hasOwn(connectionTable, request.o)
        ? connectionTable[request.o]
        : undefined;
    if (answered) {
      const result = await answered(executor, socket, writer, request.a);
      writer.write(encodeFrame({ i: request.i, r: result ?? null }));
      return;
    }
    if (read) {
      writer.write(
        encodeFrame({ i: request.i, r: (await read(context, request.a as never)) ?? null }),
      );
      return;
    }
    const deadline = (request as { d?: unknown }).d;
    if (request.o === PUT_GROUP_COMMAND) {
      const failures: unknown[] = [];
      const answers = await runPutGroup(executor, request.a, deadline, failures);
      writer.write(encodeFrame({ i: request.i, r: answers }));
      // The group is answered, then an item's invariant failure ends the engine, as below.
      for (const failure of failures) crashOnInvariantFailure(failure);
      return;
    }
    if (!op) throw MethodNotAllowed(`unknown engine command ${String(request.o)}`);
    const name = request.o as string;
    const router = executor.router.current;
    const result = router?.handles(name)
      ? await router.run(name, request.a)
      : await runCommand(executor, name, op, request.a, deadline);
    frame = encodeFrame({ i: request.i, r: result ?? null });
  } catch (error) {
    if (!isLightwellError(error)) log.error({ err: error, op: request.o }, 'engine command failed');
    writer.write(encodeFrame({ i: request.i, e: toWire(error) }));
    // Answered (`internal`), then the engine ends: its state may be wrong (util/invariant.ts).
    // Scheduled after the write, so that the writer's uncork (FrameWriter) runs first and the
    // answer is sent.
    crashOnInvariantFailure(error);
    return;
  }
  writer.write(frame);
}

/** One command in the next group commit, with the audit row and the caller check it carries. */
async function runCommand(
  executor: Executor,
  name: string,
  op: Op,
  commandArgs: unknown,
  deadline?: unknown,
): Promise<unknown> {
  const { context } = executor;
  // A command may carry the audit row of the request it serves; it commits with the change.
  // A data-plane write names its caller, whose key must still be live when it commits.
  // A command without chunks reaches `batch.submit` in the turn it was read in: the audit
  // barrier counts on the rows a source sent before its `auditFlushed` being in a batch by the
  // time that answer is read (audit-barrier.ts).
  const args = commandArgs as
    { audit?: audit.AuditInput; chunks?: unknown; caller?: unknown } | undefined;
  const caller = typeof args?.caller === 'string' ? args.caller : undefined;
  // The bytes a manifest points at become durable before the manifest does.
  const written = writtenSegments(args?.chunks);
  if (Array.isArray(args?.chunks))
    executor.metrics.manifest(written.length, args.chunks.length - written.length);
  if (written.length > 0) await context.syncer?.sync(written);
  // The reserve was given to reclaiming space: no new segment until it is taken back.
  if (name === 'allocSegment' && !executor.reserve.whole)
    throw DiskFull('the data filesystem is short of space; deleted data is being reclaimed');
  if (name === 'sealSegment')
    context.syncer?.forget((commandArgs as { segmentId: number }).segmentId);
  return submitCommand(executor, name, op, commandArgs, caller, deadline);
}

/** Adds one command, with its caller check and audit row, to the next group commit. */
function submitCommand(
  executor: Executor,
  name: string,
  op: Op,
  commandArgs: unknown,
  caller: string | undefined,
  deadline: unknown,
): Promise<unknown> {
  return executor.batch.submit(commandApply(executor, name, op, commandArgs, caller, deadline));
}

/** What the batch runs of one command: the deadline and caller checks, the op, its audit row. */
function commandApply(
  executor: Executor,
  name: string,
  op: Op,
  commandArgs: unknown,
  caller: string | undefined,
  deadline: unknown,
): () => unknown {
  const { context } = executor;
  const args = commandArgs as { audit?: audit.AuditInput } | undefined;
  return () => {
    // Its caller has given up on it (protocol.ts): applied now, it would be a change nobody
    // is told of. Wall-clock time, as the caller's deadline is (an injected engine clock
    // may be anywhere).
    if (typeof deadline === 'number' && Date.now() > deadline)
      throw EngineUnavailable(`${name} reached the engine after its deadline`);
    if (caller !== undefined) control.requireLiveCaller(context, caller);
    const value = op(context, commandArgs as never);
    if (args?.audit) audit.writeAudit(context, args.audit);
    return value;
  };
}

/**
 * `putObjects` (`{items}`: `putObject` arguments, or `{packed}`: the same in the compact
 * encoding of put-group-codec.ts): the small objects a gateway stored in one turn
 * (the ingest stream's), sent as one command. The segments they point at are synced once, then
 * every item is its own command in the same group commit: each is checked, committed with its
 * audit row, or refused on its own, exactly as if sent alone. Answers one `{r}` or `{e}` per
 * item, in order. A cluster member routes each item as it routes `putObject`.
 */
async function runPutGroup(
  executor: Executor,
  commandArgs: unknown,
  deadline: unknown,
  /** Where the items' unexpected errors go, for the caller to crash on once it has answered. */
  failures: unknown[],
): Promise<Array<{ r: unknown } | { e: WireError }>> {
  const items = groupItemsOf(commandArgs);
  if (!Array.isArray(items) || items.length === 0 || items.length > PUT_GROUP_ITEMS_MAX)
    throw BadRequest(
      `${PUT_GROUP_COMMAND} takes {items} or {packed}: 1 to ${PUT_GROUP_ITEMS_MAX} commands`,
    );
  const answerOf = (outcome: Settled): { r: unknown } | { e: WireError } => {
    if (outcome.ok) return { r: outcome.value ?? null };
    const error = outcome.error;
    if (!isLightwellError(error)) {
      componentLogger('engine.commands').error({ err: error }, 'putObject failed');
      failures.push(error);
    }
    return { e: toWire(error) };
  };
  const router = executor.router.current;
  if (router?.handles('putObject'))
    return Promise.all(
      items.map((item) =>
        router.run('putObject', item).then(
          (value): Settled => ({ ok: true, value }),
          (error: unknown): Settled => ({ ok: false, error }),
        ),
      ),
    ).then((outcomes) => outcomes.map(answerOf));
  const op = operations['putObject'] as Op;
  const segmentsOf = (items as Array<{ chunks?: unknown } | undefined>).map((item) => {
    const segmentIds = writtenSegments(item?.chunks);
    if (Array.isArray(item?.chunks))
      executor.metrics.manifest(segmentIds.length, item.chunks.length - segmentIds.length);
    return segmentIds;
  });
  // The bytes the manifests point at become durable before the manifests do. Each segment on
  // its own: an item is refused for a segment that failed only if its chunks are in it.
  const unsynced =
    (await executor.context.syncer?.syncEach(segmentsOf.flat())) ?? new Map<number, unknown>();
  const outcomes: Settled[] = new Array<Settled>(items.length);
  const kept: number[] = [];
  segmentsOf.forEach((segmentIds, index) => {
    const failed = segmentIds.find((segmentId) => unsynced.has(segmentId));
    if (failed === undefined) kept.push(index);
    else outcomes[index] = { ok: false, error: unsynced.get(failed) };
  });
  // One submission for the group: each item is still its own command of the batch.
  const committed = await executor.batch.submitEach(
    kept.map((index) => {
      const item: unknown = items[index];
      const caller = (item as { caller?: unknown } | undefined)?.caller;
      const callerId = typeof caller === 'string' ? caller : undefined;
      return commandApply(executor, 'putObject', op, item, callerId, deadline);
    }),
  );
  kept.forEach((index, at) => (outcomes[index] = committed[at] as Settled));
  return outcomes.map(answerOf);
}

/** A group's items: `{items}` as they are, `{packed}` decoded (put-group-codec.ts). */
function groupItemsOf(commandArgs: unknown): unknown {
  const args = commandArgs as { items?: unknown; packed?: unknown } | undefined;
  if (args?.packed instanceof Uint8Array) return decodePutGroup(args.packed);
  return args?.items;
}

async function closeServer(server: Server, sockets: Set<Socket>): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  for (const socket of sockets) socket.end();
  const timer = setTimeout(() => {
    for (const socket of sockets) socket.destroy();
  }, 2000);
  await closed;
  clearTimeout(timer);
}
