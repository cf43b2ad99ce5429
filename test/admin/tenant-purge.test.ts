// Goal: a tenant delete removes every bucket, version, delete marker, account, key, idempotency
// record, notification config, outbox row and delivery status (also of a bucket deleted
// earlier), quota and usage record of the tenant (and no idempotency key is begun afterwards),
// releases every chunk reference (segment live bytes drop by exactly the tenant's bytes, shared
// chunks included, and usage stays exact when the multipart expiry pass runs during the purge),
// never touches another tenant, survives a crash between batches by resuming on the next
// start, and never removes a version under legal hold or retention (fail-closed on unreadable
// lock fields).
// Method: the engine's commands run directly on a fresh index (no processes): build tenants with
// versioned and unversioned buckets, shared chunks, a version with more references than one
// batch may release, delete markers, and more outbox rows than one batch removes; run one purge
// batch, close the index as a crash would leave it, reopen it and let a TenantPurger resume;
// then check every invariant in the index.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { IndexStore } from '../../src/engine/index/store.js';
import {
  DB, tenantKey, segmentKey, tenantChildRange, type DbName, type TenantRecord, type ChunkRecord, type SegmentRecord, type UsageRecord, type ObjectVersionRecord,
} from '../../src/engine/index/schema.js';
import type { EngineContext } from '../../src/engine/ops/context.js';
import * as control from '../../src/engine/ops/control.js';
import * as objects from '../../src/engine/ops/objects.js';
import * as segments from '../../src/engine/ops/segments.js';
import * as multipart from '../../src/engine/ops/multipart.js';
import * as idempotency from '../../src/engine/ops/idempotency.js';
import * as notifications from '../../src/engine/ops/notifications.js';
import {
  deleteTenant, purgeTenantBatch, versionProtection, pendingPurges, TenantPurger, PURGE_CHUNK_REFS_PER_BATCH, PURGE_RECORDS_PER_BATCH,
} from '../../src/engine/ops/tenant-delete.js';
import { loadSettings } from '../../src/util/config.js';
import { componentLogger } from '../../src/util/log.js';

const masterKey = randomBytes(32);
const settings = loadSettings({});

function contextOf(store: IndexStore): EngineContext {
  return { store, masterKey, settings, now: () => Date.now() };
}

interface Chunk {
  id: Buffer;
  plainLength: number;
  location: { segmentId: number; offset: number; length: number; payloadChecksum: number };
}

/** Five webhook configs on every event: each write queues five outbox rows. */
const HOOKS = Array.from({ length: 5 }, (_, index) => ({ id: `hook-${index}`, url: `http://93.184.216.34/${index}`, events: ['object-created', 'object-removed'] }));

let nextOffset = 64;
function newChunk(segmentId: number, length = 100): Chunk {
  const chunk = { id: randomBytes(32), plainLength: length, location: { segmentId, offset: nextOffset, length: length + 80, payloadChecksum: 1 } };
  nextOffset += length + 80;
  return chunk;
}

function put(context: EngineContext, args: { tenantId: string; bucket: string; key: string; chunks: Chunk[] }): ObjectVersionRecord {
  const size = args.chunks.reduce((sum, chunk) => sum + chunk.plainLength, 0);
  return objects.putObject(context, {
    tenantId: args.tenantId, bucket: args.bucket, key: args.key, size, etag: 'e', contentType: 'application/octet-stream',
    metadata: {}, checksums: {}, compressed: false, chunks: args.chunks,
  });
}

/** Builds a tenant with two buckets, shared chunks, a huge version and delete markers. */
async function buildTenant(store: IndexStore, tenantId: string, segmentId: number): Promise<void> {
  const context = contextOf(store);
  const shared = newChunk(segmentId);
  await store.transact(() => {
    control.createTenant(context, { id: tenantId });
    objects.createBucket(context, { tenantId, name: 'versioned', versioning: 'Enabled' });
    objects.createBucket(context, { tenantId, name: 'plain' });
    // Every write below queues one outbox row per config (nothing delivers them here): more
    // rows than one purge batch removes.
    for (const bucket of ['versioned', 'plain', 'earlier']) {
      if (bucket === 'earlier') objects.createBucket(context, { tenantId, name: bucket });
      notifications.putBucketNotifications(context, { tenantId, bucket, configs: HOOKS });
    }
    // A bucket deleted before the tenant: its config stays until its outbox drains.
    put(context, { tenantId, bucket: 'earlier', key: 'last', chunks: [newChunk(segmentId)] });
    objects.deleteObject(context, { tenantId, bucket: 'earlier', key: 'last' });
    objects.deleteBucket(context, { tenantId, name: 'earlier' });
    idempotency.beginIdempotent(context, { tenantId, bucket: 'plain', key: 'op-1', fingerprint: 'f' });
    for (let index = 0; index < 300; index += 1) {
      const chunks = index % 10 === 0 ? [shared, newChunk(segmentId)] : [newChunk(segmentId)];
      put(context, { tenantId, bucket: index % 2 === 0 ? 'versioned' : 'plain', key: `k/${index % 150}`, chunks });
    }
    const huge = Array.from({ length: PURGE_CHUNK_REFS_PER_BATCH + 500 }, () => newChunk(segmentId, 10));
    put(context, { tenantId, bucket: 'versioned', key: 'huge', chunks: huge });
    for (let index = 0; index < 20; index += 1) objects.deleteObject(context, { tenantId, bucket: 'versioned', key: `k/${index * 2}` });
    // Unfinished multipart uploads hold chunk references through their parts.
    for (const bucket of ['versioned', 'plain']) {
      const upload = multipart.createMultipartUpload(context, { tenantId, bucket, key: 'partial', contentType: 'x', metadata: {} });
      for (const partNumber of [1, 2, 3]) {
        multipart.uploadPart(context, { tenantId, bucket, key: 'partial', uploadId: upload.uploadId, partNumber, size: 100, etag: 'p', checksums: {}, compressed: false, chunks: [newChunk(segmentId), shared] });
      }
    }
  });
}

/** Rows of a record family whose value names the tenant. */
function rowsOf(store: IndexStore, db: DbName, tenantId: string): number {
  return [...store.range<{ tenantId: string }>(db, {})].filter((entry) => entry.value.tenantId === tenantId).length;
}

const NOTIFICATION_DBS = [DB.notifications, DB.outbox, DB.outboxStatus] as const;

function liveBytes(store: IndexStore, segmentId: number): number {
  return (store.get<SegmentRecord>(DB.segments, segmentKey(segmentId)) as SegmentRecord).liveBytes;
}

function chunksOf(store: IndexStore, tenantNum: number): ChunkRecord[] {
  const start = Buffer.alloc(4);
  start.writeUInt32BE(tenantNum, 0);
  const end = Buffer.alloc(4);
  end.writeUInt32BE(tenantNum + 1, 0);
  return [...store.range<ChunkRecord>(DB.chunks, { start, end })].map((entry) => entry.value);
}

t.test('versionProtection: legal hold, retention, and fail-closed on unreadable lock fields', async (t) => {
  const base = { key: 'k', versionId: 'v', seq: 1, lastModified: 0, size: 0, etag: '', contentType: '', metadata: {}, checksums: {}, chunks: Buffer.alloc(0), storedBytes: 0, compressed: false } as ObjectVersionRecord;
  const now = 1_000_000;
  t.same(versionProtection(base, now), { legalHeld: false, retained: false });
  t.same(versionProtection({ ...base, legalHold: 'ON' }, now), { legalHeld: true, retained: false });
  t.same(versionProtection({ ...base, legalHold: 'OFF' }, now), { legalHeld: false, retained: false });
  t.same(versionProtection({ ...base, retention: { mode: 'GOVERNANCE', retainUntil: now + 1 } }, now), { legalHeld: false, retained: true });
  t.same(versionProtection({ ...base, retention: { mode: 'COMPLIANCE', retainUntil: now } }, now), { legalHeld: false, retained: false }, 'a window that has ended protects nothing');
  const odd = (fields: Record<string, unknown>): ObjectVersionRecord => ({ ...base, ...fields }) as unknown as ObjectVersionRecord;
  t.same(versionProtection(odd({ retention: { mode: 'GOVERNANCE' } }), now).retained, true, 'retention without a readable time: protected');
  t.same(versionProtection(odd({ retention: { retainUntil: 'garbage' } }), now).retained, true);
  t.same(versionProtection(odd({ legalHold: 'on?' }), now).legalHeld, true, 'an unknown legal-hold value: protected');
});

t.test('delete: purge resumes after a crash and removes exactly the tenant', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'lw-purge-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  let store = IndexStore.open({ path: dir, readOnly: false });
  let context = contextOf(store);
  const { segmentId } = await store.transact(() => segments.allocSegment(context, { ownerPid: process.pid }));
  await buildTenant(store, 'doomed', segmentId);
  const liveBefore = liveBytes(store, segmentId);
  await buildTenant(store, 'keeper', segmentId);
  const keeperUsage = store.get<UsageRecord>(DB.usage, tenantKey('keeper'));
  const keeperNum = (store.get<TenantRecord>(DB.tenants, tenantKey('keeper')) as TenantRecord).num;
  const keeperChunks = chunksOf(store, keeperNum);
  const liveWithKeeper = liveBytes(store, segmentId);
  const doomed = store.get<TenantRecord>(DB.tenants, tenantKey('doomed')) as TenantRecord;
  const keeperNotifications = NOTIFICATION_DBS.map((db) => rowsOf(store, db, 'keeper'));
  t.same(NOTIFICATION_DBS.map((db) => rowsOf(store, db, 'doomed')), keeperNotifications, 'both tenants have the same notification state');
  t.ok(rowsOf(store, DB.outbox, 'doomed') > PURGE_RECORDS_PER_BATCH, 'more outbox rows than one batch removes');
  t.equal(keeperNotifications[0], 3, 'configs of two buckets and of the bucket deleted earlier');
  const doomedUsage = store.get<UsageRecord>(DB.usage, tenantKey('doomed')) as UsageRecord;
  t.equal(doomedUsage.physicalBytes, liveBefore, 'physical usage equals the live bytes the tenant added');
  t.ok(doomedUsage.deleteMarkers > 0 && doomedUsage.versions > 200, 'the tenant has markers and many versions');

  await store.transact(() => {
    control.createAccount(context, { tenantId: 'doomed', id: 'app' });
    control.createAccessKey(context, { tenantId: 'doomed', accountId: 'app', scopes: 'read' });
    control.setTenantQuota(context, { tenantId: 'doomed', maxBytes: 10 ** 9 });
  });
  await t.rejects(store.transact(() => deleteTenant(context, { tenantId: 'doomed', reason: 'x' })), { code: 'conflict' }, 'an active tenant cannot be deleted');
  await store.transact(() => control.disableTenant(context, { tenantId: 'doomed', reason: 'offboarding' }));
  await t.rejects(store.transact(() => deleteTenant(context, { tenantId: 'doomed', reason: ' ' })), { code: 'bad_request' }, 'reason required');
  // No purger runs yet: the first batch runs by hand, then the "crash".
  await store.transact(() => deleteTenant(context, { tenantId: 'doomed', reason: 'offboarding' }));
  const late = { tenantId: 'doomed', bucket: 'plain', key: 'op-2', fingerprint: 'f' };
  await t.rejects(store.transact(() => idempotency.beginIdempotent(context, late)), { code: 'not_found' }, 'no idempotency key for a deleted tenant');
  const first = await store.transact(() => purgeTenantBatch(context, { tenantId: 'doomed' }));
  t.equal(first.done, false, 'one batch is not the whole purge');
  const deleted = store.get<TenantRecord>(DB.tenants, tenantKey('doomed')) as TenantRecord;
  t.equal(deleted.state, 'deleted', 'deleted (not active) from the first transaction on');
  await store.close();

  store = IndexStore.open({ path: dir, readOnly: false });
  context = contextOf(store);
  t.same(pendingPurges(store), ['doomed'], 'the unfinished delete is found after the restart');
  const resumed = new TenantPurger({ context, log: componentLogger('test'), pollMs: 20 });
  resumed.start();
  t.teardown(() => resumed.stop().then(() => store.close()));
  for (let wait = 0; wait < 500 && pendingPurges(store).length > 0; wait += 1) await new Promise((r) => setTimeout(r, 20));
  t.same(pendingPurges(store), [], 'the purge completed');

  const after = store.get<TenantRecord>(DB.tenants, tenantKey('doomed')) as TenantRecord;
  t.equal(after.state, 'deleted');
  t.ok(after.deletion?.completedAt !== undefined, 'deletion.completedAt is set');
  t.equal(after.num, doomed.num, 'the tombstone keeps the tenant number');
  t.equal(store.get(DB.usage, tenantKey('doomed')), undefined, 'usage record gone');
  t.equal(store.get(DB.quotas, tenantKey('doomed')), undefined, 'quota gone');
  t.same([...store.range(DB.buckets, { start: Buffer.from('doomed\0'), end: Buffer.from('doomed\u0001') })], [], 'buckets gone');
  t.same([...store.range(DB.accounts, { start: Buffer.from('doomed\0'), end: Buffer.from('doomed\u0001') })], [], 'accounts gone');
  t.equal([...store.range<{ tenantId: string }>(DB.accessKeys, {})].filter((e) => e.value.tenantId === 'doomed').length, 0, 'keys gone');
  t.same([...store.range(DB.idempotency, tenantChildRange('doomed'))], [], 'idempotency records gone');
  t.equal([...store.range(DB.idempotency, tenantChildRange('keeper'))].length, 1, 'the other tenant keeps its own');
  t.same(NOTIFICATION_DBS.map((db) => rowsOf(store, db, 'doomed')), [0, 0, 0], 'notification configs, outbox rows and delivery status gone, the deleted bucket\'s too');
  t.same(NOTIFICATION_DBS.map((db) => rowsOf(store, db, 'keeper')), keeperNotifications, 'the other tenant keeps its own');
  const uploads = [...store.range<{ tenantId: string }>(DB.multipart, {})].map((entry) => entry.value.tenantId);
  t.same(uploads, ['keeper', 'keeper'], 'multipart uploads gone (the other tenant keeps its own)');
  t.equal([...store.range(DB.multipartParts, {})].length, 6, "only the other tenant's parts remain");
  const dead = chunksOf(store, doomed.num);
  t.ok(dead.length > PURGE_CHUNK_REFS_PER_BATCH, 'chunk records wait for compaction');
  t.ok(dead.every((chunk) => chunk.refs === 0 && chunk.deadSince !== undefined), 'every chunk reference of the tenant was released');
  t.equal(liveBytes(store, segmentId), liveWithKeeper - liveBefore, 'segment live bytes dropped by exactly the tenant\'s bytes');
  t.same(store.get(DB.usage, tenantKey('keeper')), keeperUsage, 'the other tenant is untouched');
  t.same(chunksOf(store, keeperNum), keeperChunks, "the other tenant's chunk records are untouched");
});

t.test('delete: the purge stops at a protected version and removes nothing protected', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'lw-purge-'));
  const store = IndexStore.open({ path: dir, readOnly: false });
  t.teardown(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const context = contextOf(store);
  const { segmentId } = await store.transact(() => segments.allocSegment(context, { ownerPid: process.pid }));
  await store.transact(() => {
    control.createTenant(context, { id: 'held' });
    objects.createBucket(context, { tenantId: 'held', name: 'bucket', versioning: 'Enabled' });
  });
  const version = await store.transact(() => put(context, { tenantId: 'held', bucket: 'bucket', key: 'evidence', chunks: [newChunk(segmentId)] }));
  // Protect it behind the admin process's back, as object lock (issue 3) will.
  await store.transact(() => {
    for (const { key, value } of store.range<ObjectVersionRecord>(DB.versions, {})) {
      if (value.seq === version.seq) store.put(DB.versions, Buffer.from(key), { ...value, legalHold: 'ON' });
    }
    control.disableTenant(context, { tenantId: 'held', reason: 'r' });
    deleteTenant(context, { tenantId: 'held', reason: 'r' });
  });
  const batch = await store.transact(() => purgeTenantBatch(context, { tenantId: 'held' }));
  t.equal(batch.blocked, true, 'the purge reports the block');
  const tenant = store.get<TenantRecord>(DB.tenants, tenantKey('held')) as TenantRecord;
  t.ok(tenant.deletion?.blockedAt !== undefined && tenant.deletion.completedAt === undefined);
  t.equal(tenant.state, 'deleted', 'still not active');
  t.equal([...store.range(DB.versions, {})].length, 1, 'the protected version is still there');
  t.same(pendingPurges(store), [], 'a blocked purge does not spin');
});

t.test('delete: uploads that the expiry pass aborts during a purge are counted in the usage record', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'lw-purge-'));
  const store = IndexStore.open({ path: dir, readOnly: false });
  t.teardown(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const context = contextOf(store);
  const { segmentId } = await store.transact(() => segments.allocSegment(context, { ownerPid: process.pid }));
  await store.transact(() => {
    control.createTenant(context, { id: 'drift' });
    objects.createBucket(context, { tenantId: 'drift', name: 'bucket' });
    put(context, { tenantId: 'drift', bucket: 'bucket', key: 'kept', chunks: [newChunk(segmentId)] });
    const upload = multipart.createMultipartUpload(context, { tenantId: 'drift', bucket: 'bucket', key: 'partial', contentType: 'x', metadata: {} });
    for (const partNumber of [1, 2]) {
      multipart.uploadPart(context, { tenantId: 'drift', bucket: 'bucket', key: 'partial', uploadId: upload.uploadId, partNumber, size: 100, etag: 'p', checksums: {}, compressed: false, chunks: [newChunk(segmentId)] });
    }
    control.disableTenant(context, { tenantId: 'drift', reason: 'r' });
    deleteTenant(context, { tenantId: 'drift', reason: 'r' });
  });
  // The compaction pass runs between purge batches and finds the upload of a deleted tenant.
  const expiry = { now: Date.now(), expiryMs: 86_400_000, partsMax: 1000 };
  t.equal(await store.transact(() => multipart.expireMultipartUploads(context, expiry)), 3, 'two parts and the upload');
  const usage = store.get<UsageRecord>(DB.usage, tenantKey('drift')) as UsageRecord;
  t.equal(usage.physicalBytes, liveBytes(store, segmentId), 'usage still equals the live bytes: the released parts were counted');
  while (!(await store.transact(() => purgeTenantBatch(context, { tenantId: 'drift' }))).done);
  t.equal(liveBytes(store, segmentId), 0, 'the purge released the rest');
  t.equal(store.get(DB.usage, tenantKey('drift')), undefined);
  t.equal(await store.transact(() => multipart.expireMultipartUploads(context, expiry)), 0, 'nothing left to expire, no usage record made again');
  t.equal(store.get(DB.usage, tenantKey('drift')), undefined);
});
