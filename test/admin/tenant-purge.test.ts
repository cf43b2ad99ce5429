// Goal: a tenant delete removes every record of the tenant and of its buckets: buckets (with
// their CORS rules and policy), versions (with tags and retention), delete markers, multipart
// uploads and parts, accounts, keys, idempotency records, notification configs, outbox rows and
// delivery status (also of a bucket deleted earlier), quota and usage; it releases every chunk
// reference (segment live bytes drop by exactly the tenant's bytes, shared chunks included, and
// usage stays exact when the multipart expiry pass runs during the purge), never touches
// another tenant, survives a crash between batches by resuming on the next start, never removes
// a version under legal hold or retention (fail-closed on unreadable lock fields), and no
// webhook for the tenant is sent or still on its way once the purge has completed.
// Method: the engine's commands run directly on a fresh index (no processes): build tenants with
// versioned and unversioned buckets, shared chunks, a version with more references than one
// batch may release, delete markers, unfinished uploads and more outbox rows than one batch
// removes; run one purge batch, close the index as a crash would leave it, reopen it and let a
// TenantPurger resume; then check every invariant in the index. Last, the real service with a
// local webhook receiver: data and configs through the public API, a delivery left hanging and
// others failing when the tenant is deleted through the admin API; then the receiver, and the
// index opened read-only once the service has stopped.
import t, { type Test } from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes, createHash } from 'node:crypto';
import { IndexStore } from '../../src/engine/index/store.js';
import {
  DB,
  tenantKey,
  segmentKey,
  tenantChildRange,
  bucketKeyPrefix,
  type DbName,
  type BucketRecord,
  type TenantRecord,
  type ChunkRecord,
  type SegmentRecord,
  type UsageRecord,
  type ObjectVersionRecord,
} from '../../src/engine/index/schema.js';
import type { EngineContext } from '../../src/engine/ops/context.js';
import * as control from '../../src/engine/ops/control.js';
import * as objects from '../../src/engine/ops/objects.js';
import * as segments from '../../src/engine/ops/segments.js';
import * as multipart from '../../src/engine/ops/multipart.js';
import * as idempotency from '../../src/engine/ops/idempotency.js';
import * as notifications from '../../src/engine/ops/notifications.js';
import {
  deleteTenant,
  purgeTenantBatch,
  versionProtection,
  pendingPurges,
  TenantPurger,
  PURGE_CHUNK_REFS_PER_BATCH,
  PURGE_RECORDS_PER_BATCH,
} from '../../src/engine/ops/tenant-delete.js';
import { loadSettings } from '../../src/util/config.js';
import { componentLogger } from '../../src/util/log.js';
import { Service, type DataClient } from '../helpers/service.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';
import { call, mintToken, waitFor, type TenantAnswer, type UsageAnswer } from './admin-testing.js';

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
const HOOKS = Array.from({ length: 5 }, (_, index) => ({
  id: `hook-${index}`,
  url: `http://93.184.216.34/${index}`,
  events: ['object-created', 'object-removed'],
}));

let nextOffset = 64;
function newChunk(segmentId: number, length = 100): Chunk {
  const chunk = {
    id: randomBytes(32),
    plainLength: length,
    location: { segmentId, offset: nextOffset, length: length + 80, payloadChecksum: 1 },
  };
  nextOffset += length + 80;
  return chunk;
}

function put(
  context: EngineContext,
  args: { tenantId: string; bucket: string; key: string; chunks: Chunk[] },
): ObjectVersionRecord {
  const size = args.chunks.reduce((sum, chunk) => sum + chunk.plainLength, 0);
  return objects.putObject(context, {
    tenantId: args.tenantId,
    bucket: args.bucket,
    key: args.key,
    size,
    etag: 'e',
    contentType: 'application/octet-stream',
    metadata: {},
    checksums: {},
    compressed: false,
    chunks: args.chunks,
  });
}

/** Builds a tenant with two buckets, shared chunks, a huge version and delete markers. */
async function buildTenant(store: IndexStore, tenantId: string, segmentId: number): Promise<void> {
  // Bucket names are global: each tenant's carry its id.
  const context = contextOf(store);
  const shared = newChunk(segmentId);
  await store.transact(() => {
    control.createTenant(context, { id: tenantId });
    objects.createBucket(context, {
      tenantId,
      name: `versioned-${tenantId}`,
      versioning: 'Enabled',
    });
    objects.createBucket(context, { tenantId, name: `plain-${tenantId}` });
    // Every write below queues one outbox row per config (nothing delivers them here): more
    // rows than one purge batch removes.
    for (const bucket of [`versioned-${tenantId}`, `plain-${tenantId}`, `earlier-${tenantId}`]) {
      if (bucket === `earlier-${tenantId}`)
        objects.createBucket(context, { tenantId, name: bucket });
      notifications.putBucketNotifications(context, { tenantId, bucket, configs: HOOKS });
    }
    // A bucket deleted before the tenant: its config stays until its outbox drains.
    put(context, {
      tenantId,
      bucket: `earlier-${tenantId}`,
      key: 'last',
      chunks: [newChunk(segmentId)],
    });
    objects.deleteObject(context, { tenantId, bucket: `earlier-${tenantId}`, key: 'last' });
    objects.deleteBucket(context, { tenantId, name: `earlier-${tenantId}` });
    idempotency.beginIdempotent(context, {
      tenantId,
      bucket: `plain-${tenantId}`,
      key: 'op-1',
      fingerprint: 'f',
    });
    for (let index = 0; index < 300; index += 1) {
      const chunks = index % 10 === 0 ? [shared, newChunk(segmentId)] : [newChunk(segmentId)];
      put(context, {
        tenantId,
        bucket: index % 2 === 0 ? `versioned-${tenantId}` : `plain-${tenantId}`,
        key: `k/${index % 150}`,
        chunks,
      });
    }
    const huge = Array.from({ length: PURGE_CHUNK_REFS_PER_BATCH + 500 }, () =>
      newChunk(segmentId, 10),
    );
    put(context, { tenantId, bucket: `versioned-${tenantId}`, key: 'huge', chunks: huge });
    for (let index = 0; index < 20; index += 1)
      objects.deleteObject(context, {
        tenantId,
        bucket: `versioned-${tenantId}`,
        key: `k/${index * 2}`,
      });
    // Unfinished multipart uploads hold chunk references through their parts.
    for (const bucket of [`versioned-${tenantId}`, `plain-${tenantId}`]) {
      const upload = multipart.createMultipartUpload(context, {
        tenantId,
        bucket,
        key: 'partial',
        contentType: 'x',
        metadata: {},
      });
      for (const partNumber of [1, 2, 3]) {
        multipart.uploadPart(context, {
          tenantId,
          bucket,
          key: 'partial',
          uploadId: upload.uploadId,
          partNumber,
          size: 100,
          etag: 'p',
          checksums: {},
          compressed: false,
          chunks: [newChunk(segmentId), shared],
        });
      }
    }
  });
}

/** Rows of a record family whose value names the tenant. */
function rowsOf(store: IndexStore, db: DbName, tenantId: string): number {
  return [...store.range<{ tenantId: string }>(db, {})].filter(
    (entry) => entry.value.tenantId === tenantId,
  ).length;
}

const NOTIFICATION_DBS = [DB.notifications, DB.outbox, DB.outboxStatus] as const;

/** A new index in a temporary directory (removed after the test) with one open segment. */
async function freshIndex(
  t: Test,
): Promise<{ store: IndexStore; context: EngineContext; segmentId: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'lw-purge-'));
  const store = IndexStore.open({ path: dir, readOnly: false });
  t.teardown(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const context = contextOf(store);
  const { segmentId } = await store.transact(() =>
    segments.allocSegment(context, { ownerPid: process.pid }),
  );
  return { store, context, segmentId };
}

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

t.test(
  'versionProtection: legal hold, retention, and fail-closed on unreadable lock fields',
  async (t) => {
    const base = {
      key: 'k',
      versionId: 'v',
      seq: 1,
      lastModified: 0,
      size: 0,
      etag: '',
      contentType: '',
      metadata: {},
      checksums: {},
      chunks: Buffer.alloc(0),
      storedBytes: 0,
      compressed: false,
    } as ObjectVersionRecord;
    const now = 1_000_000;
    t.same(versionProtection(base, now), { legalHeld: false, retained: false });
    t.same(versionProtection({ ...base, legalHold: 'ON' }, now), {
      legalHeld: true,
      retained: false,
    });
    t.same(versionProtection({ ...base, legalHold: 'OFF' }, now), {
      legalHeld: false,
      retained: false,
    });
    t.same(
      versionProtection({ ...base, retention: { mode: 'GOVERNANCE', retainUntil: now + 1 } }, now),
      { legalHeld: false, retained: true },
    );
    t.same(
      versionProtection({ ...base, retention: { mode: 'COMPLIANCE', retainUntil: now } }, now),
      { legalHeld: false, retained: false },
      'a window that has ended protects nothing',
    );
    const odd = (fields: Record<string, unknown>): ObjectVersionRecord => ({ ...base, ...fields });
    t.same(
      versionProtection(odd({ retention: { mode: 'GOVERNANCE' } }), now).retained,
      true,
      'retention without a readable time: protected',
    );
    t.same(versionProtection(odd({ retention: { retainUntil: 'garbage' } }), now).retained, true);
    t.same(
      versionProtection(odd({ legalHold: 'on?' }), now).legalHeld,
      true,
      'an unknown legal-hold value: protected',
    );
  },
);

t.test('delete: purge resumes after a crash and removes exactly the tenant', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'lw-purge-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  let store = IndexStore.open({ path: dir, readOnly: false });
  let context = contextOf(store);
  const { segmentId } = await store.transact(() =>
    segments.allocSegment(context, { ownerPid: process.pid }),
  );
  await buildTenant(store, 'doomed', segmentId);
  const liveBefore = liveBytes(store, segmentId);
  await buildTenant(store, 'keeper', segmentId);
  const keeperUsage = store.get<UsageRecord>(DB.usage, tenantKey('keeper'));
  const keeperNum = (store.get<TenantRecord>(DB.tenants, tenantKey('keeper')) as TenantRecord).num;
  const keeperChunks = chunksOf(store, keeperNum);
  const liveWithKeeper = liveBytes(store, segmentId);
  const doomed = store.get<TenantRecord>(DB.tenants, tenantKey('doomed')) as TenantRecord;
  const keeperNotifications = NOTIFICATION_DBS.map((db) => rowsOf(store, db, 'keeper'));
  t.same(
    NOTIFICATION_DBS.map((db) => rowsOf(store, db, 'doomed')),
    keeperNotifications,
    'both tenants have the same notification state',
  );
  t.ok(
    rowsOf(store, DB.outbox, 'doomed') > PURGE_RECORDS_PER_BATCH,
    'more outbox rows than one batch removes',
  );
  t.equal(keeperNotifications[0], 3, 'configs of two buckets and of the bucket deleted earlier');
  const doomedUsage = store.get<UsageRecord>(DB.usage, tenantKey('doomed')) as UsageRecord;
  t.equal(
    doomedUsage.physicalBytes,
    liveBefore,
    'physical usage equals the live bytes the tenant added',
  );
  t.ok(
    doomedUsage.deleteMarkers > 0 && doomedUsage.versions > 200,
    'the tenant has markers and many versions',
  );

  await store.transact(() => {
    control.createAccount(context, { tenantId: 'doomed', id: 'app' });
    control.createAccessKey(context, { tenantId: 'doomed', accountId: 'app', scopes: 'read' });
    control.setTenantQuota(context, { tenantId: 'doomed', maxBytes: 10 ** 9 });
  });
  await t.rejects(
    store.transact(() => deleteTenant(context, { tenantId: 'doomed', reason: 'x' })),
    { code: 'conflict' },
    'an active tenant cannot be deleted',
  );
  await store.transact(() =>
    control.disableTenant(context, { tenantId: 'doomed', reason: 'offboarding' }),
  );
  await t.rejects(
    store.transact(() => deleteTenant(context, { tenantId: 'doomed', reason: ' ' })),
    { code: 'bad_request' },
    'reason required',
  );
  // No purger runs yet: the first batch runs by hand, then the "crash".
  await store.transact(() => deleteTenant(context, { tenantId: 'doomed', reason: 'offboarding' }));
  const late = { tenantId: 'doomed', bucket: 'plain-doomed', key: 'op-2', fingerprint: 'f' };
  await t.rejects(
    store.transact(() => idempotency.beginIdempotent(context, late)),
    { code: 'not_found' },
    'no idempotency key for a deleted tenant',
  );
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
  for (let wait = 0; wait < 500 && pendingPurges(store).length > 0; wait += 1)
    await new Promise((r) => setTimeout(r, 20));
  t.same(pendingPurges(store), [], 'the purge completed');

  const after = store.get<TenantRecord>(DB.tenants, tenantKey('doomed')) as TenantRecord;
  t.equal(after.state, 'deleted');
  t.ok(after.deletion?.completedAt !== undefined, 'deletion.completedAt is set');
  t.equal(after.num, doomed.num, 'the tombstone keeps the tenant number');
  t.equal(store.get(DB.usage, tenantKey('doomed')), undefined, 'usage record gone');
  t.equal(store.get(DB.quotas, tenantKey('doomed')), undefined, 'quota gone');
  t.same(
    [
      ...store.range(DB.buckets, {
        start: Buffer.from('doomed\0'),
        end: Buffer.from('doomed\u0001'),
      }),
    ],
    [],
    'buckets gone',
  );
  t.same(
    [
      ...store.range(DB.accounts, {
        start: Buffer.from('doomed\0'),
        end: Buffer.from('doomed\u0001'),
      }),
    ],
    [],
    'accounts gone',
  );
  t.equal(
    [...store.range<{ tenantId: string }>(DB.accessKeys, {})].filter(
      (e) => e.value.tenantId === 'doomed',
    ).length,
    0,
    'keys gone',
  );
  t.same(
    [...store.range(DB.idempotency, tenantChildRange('doomed'))],
    [],
    'idempotency records gone',
  );
  t.equal(
    [...store.range(DB.idempotency, tenantChildRange('keeper'))].length,
    1,
    'the other tenant keeps its own',
  );
  t.same(
    NOTIFICATION_DBS.map((db) => rowsOf(store, db, 'doomed')),
    [0, 0, 0],
    "notification configs, outbox rows and delivery status gone, the deleted bucket's too",
  );
  t.same(
    NOTIFICATION_DBS.map((db) => rowsOf(store, db, 'keeper')),
    keeperNotifications,
    'the other tenant keeps its own',
  );
  const uploads = [...store.range<{ tenantId: string }>(DB.multipart, {})].map(
    (entry) => entry.value.tenantId,
  );
  t.same(uploads, ['keeper', 'keeper'], 'multipart uploads gone (the other tenant keeps its own)');
  t.equal(
    [...store.range(DB.multipartParts, {})].length,
    6,
    "only the other tenant's parts remain",
  );
  const dead = chunksOf(store, doomed.num);
  t.ok(dead.length > PURGE_CHUNK_REFS_PER_BATCH, 'chunk records wait for compaction');
  t.ok(
    dead.every((chunk) => chunk.refs === 0 && chunk.deadSince !== undefined),
    'every chunk reference of the tenant was released',
  );
  t.equal(
    liveBytes(store, segmentId),
    liveWithKeeper - liveBefore,
    "segment live bytes dropped by exactly the tenant's bytes",
  );
  t.same(store.get(DB.usage, tenantKey('keeper')), keeperUsage, 'the other tenant is untouched');
  t.same(
    chunksOf(store, keeperNum),
    keeperChunks,
    "the other tenant's chunk records are untouched",
  );
});

t.test(
  'delete: the purge stops at a protected version and removes nothing protected',
  async (t) => {
    const { store, context, segmentId } = await freshIndex(t);
    await store.transact(() => {
      control.createTenant(context, { id: 'held' });
      objects.createBucket(context, { tenantId: 'held', name: 'bucket', versioning: 'Enabled' });
    });
    const version = await store.transact(() =>
      put(context, {
        tenantId: 'held',
        bucket: 'bucket',
        key: 'evidence',
        chunks: [newChunk(segmentId)],
      }),
    );
    // Protect it behind the admin process's back, as object lock (issue 3) will.
    await store.transact(() => {
      for (const { key, value } of store.range<ObjectVersionRecord>(DB.versions, {})) {
        if (value.seq === version.seq)
          store.put(DB.versions, Buffer.from(key), { ...value, legalHold: 'ON' });
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
  },
);

t.test(
  'delete: uploads that the expiry pass aborts during a purge are counted in the usage record',
  async (t) => {
    const { store, context, segmentId } = await freshIndex(t);
    await store.transact(() => {
      control.createTenant(context, { id: 'drift' });
      objects.createBucket(context, { tenantId: 'drift', name: 'bucket' });
      put(context, {
        tenantId: 'drift',
        bucket: 'bucket',
        key: 'kept',
        chunks: [newChunk(segmentId)],
      });
      const upload = multipart.createMultipartUpload(context, {
        tenantId: 'drift',
        bucket: 'bucket',
        key: 'partial',
        contentType: 'x',
        metadata: {},
      });
      for (const partNumber of [1, 2]) {
        multipart.uploadPart(context, {
          tenantId: 'drift',
          bucket: 'bucket',
          key: 'partial',
          uploadId: upload.uploadId,
          partNumber,
          size: 100,
          etag: 'p',
          checksums: {},
          compressed: false,
          chunks: [newChunk(segmentId)],
        });
      }
      control.disableTenant(context, { tenantId: 'drift', reason: 'r' });
      deleteTenant(context, { tenantId: 'drift', reason: 'r' });
    });
    // The compaction pass runs between purge batches and finds the upload of a deleted tenant.
    const expiry = { now: Date.now(), expiryMs: 86_400_000, partsMax: 1000 };
    t.equal(
      await store.transact(() => multipart.expireMultipartUploads(context, expiry)),
      3,
      'two parts and the upload',
    );
    const usage = store.get<UsageRecord>(DB.usage, tenantKey('drift')) as UsageRecord;
    t.equal(
      usage.physicalBytes,
      liveBytes(store, segmentId),
      'usage still equals the live bytes: the released parts were counted',
    );
    while (!(await store.transact(() => purgeTenantBatch(context, { tenantId: 'drift' }))).done);
    t.equal(liveBytes(store, segmentId), 0, 'the purge released the rest');
    t.equal(store.get(DB.usage, tenantKey('drift')), undefined);
    t.equal(
      await store.transact(() => multipart.expireMultipartUploads(context, expiry)),
      0,
      'nothing left to expire, no usage record made again',
    );
    t.equal(store.get(DB.usage, tenantKey('drift')), undefined);
  },
);

const hookOf = (receiver: WebhookReceiver, path: string): { json: unknown } => ({
  json: {
    configs: [
      { id: 'hook', url: receiver.url(path), events: ['object-created', 'object-removed'] },
    ],
  },
});

/**
 * Gives the tenant a bucket `events` with CORS rules, a tagged object, an idempotent PUT and an
 * unfinished upload; a bucket `uploads` with an unfinished upload of two parts; and webhook
 * configs on `events` and on a bucket `earlier` (created and deleted later). Returns the
 * statuses of every request.
 */
async function seedThroughApi(
  client: DataClient,
  receiver: WebhookReceiver,
  tenantId: string,
): Promise<number[]> {
  const statuses: number[] = [];
  const record = async (pending: Promise<{ status: number }>): Promise<unknown> => {
    const response = await pending;
    statuses.push(response.status);
    return (response as { json?: unknown }).json;
  };
  // Bucket names are global: each tenant's carry its id.
  const named = (name: string): string => `${name}-${tenantId}`;
  for (const name of ['events', 'uploads', 'earlier'].map(named))
    await record(client.request('POST', '/buckets', { json: { name } }));
  await record(
    client.request('PUT', `/buckets/${named('events')}/cors`, {
      json: { rules: [{ allowedOrigins: ['https://app.example.com'], allowedMethods: ['GET'] }] },
    }),
  );
  await record(client.put(named('events'), 'tagged', 'tagged body'));
  await record(
    client.request('PUT', `/buckets/${named('events')}/object-tags/tagged`, {
      json: { tags: [{ key: 'team', value: 'ingest' }] },
    }),
  );
  const body = 'idempotent body';
  await record(
    client.put(named('events'), 'once', body, {
      'Idempotency-Key': 'op-1',
      'X-Service-Checksum-SHA256': createHash('sha256').update(body).digest('base64'),
    }),
  );
  for (const [bucket, parts] of [
    [named('uploads'), 2],
    [named('events'), 1],
  ] as const) {
    const upload = (await record(
      client.request('POST', `/buckets/${bucket}/multipart/partial.bin`),
    )) as { uploadId: string };
    for (let part = 1; part <= parts; part += 1) {
      await record(
        client.request(
          'PUT',
          `/buckets/${bucket}/multipart/${upload.uploadId}/parts/${part}/partial.bin`,
          { body: randomBytes(64 * 1024) },
        ),
      );
    }
  }
  for (const bucket of ['events', 'earlier'])
    await record(
      client.request(
        'PUT',
        `/buckets/${named(bucket)}/notifications`,
        hookOf(receiver, `/${tenantId}/${bucket}`),
      ),
    );
  return statuses;
}

/** Every record of the index that belongs to the tenant or to one of `bucketIds`. */
function leftovers(
  store: IndexStore,
  tenantId: string,
  bucketIds: readonly number[],
): Record<string, number> {
  const found: Record<string, number> = {};
  const count = (name: string, rows: number): void => {
    if (rows > 0) found[name] = (found[name] ?? 0) + rows;
  };
  for (const db of [DB.buckets, DB.accounts, DB.idempotency])
    count(db, [...store.range(db, tenantChildRange(tenantId))].length);
  for (const db of [DB.usage, DB.quotas]) count(db, store.has(db, tenantKey(tenantId)) ? 1 : 0);
  // Families keyed otherwise whose records name their tenant.
  for (const db of [DB.accessKeys, DB.multipart, DB.notifications, DB.outbox, DB.outboxStatus])
    count(`${db}.tenantId`, rowsOf(store, db, tenantId));
  for (const bucketId of bucketIds) {
    const prefix = bucketKeyPrefix(bucketId);
    const range = { start: prefix, end: Buffer.concat([prefix, Buffer.from([0xff])]) };
    for (const db of [DB.objects, DB.versions, DB.multipart, DB.multipartParts, DB.outbox])
      count(db, [...store.range(db, range)].length);
    for (const db of [DB.notifications, DB.outboxStatus]) count(db, store.has(db, prefix) ? 1 : 0);
  }
  return found;
}

function bucketIdsOf(store: IndexStore, tenantId: string): number[] {
  return [...store.range<BucketRecord>(DB.buckets, tenantChildRange(tenantId))].map(
    (entry) => entry.value.id,
  );
}

t.test(
  'delete through the admin API: uploads and notifications go, no webhook afterwards',
  async (t) => {
    const receiver = await WebhookReceiver.start();
    t.teardown(() => receiver.close());
    const service = await Service.start({
      env: {
        LIGHTWELL_NOTIFICATIONS_ALLOW_PRIVATE_TARGETS: 'true',
        LIGHTWELL_NOTIFICATIONS_RETRY_BACKOFF_MIN: '100ms',
        LIGHTWELL_NOTIFICATIONS_RETRY_BACKOFF_MAX: '200ms',
        // A request in flight at the delete would hold the purge this long if it were not ended.
        LIGHTWELL_NOTIFICATIONS_DELIVERY_TIMEOUT: '60s',
      },
    });
    t.teardown(() => service.close());
    const owner = (await mintToken(service, 'owner')).token;
    const gone = await service.tenant('gone', 'read,write,delete,admin', owner);
    const keeper = await service.tenant('keeper', 'read,write,delete,admin', owner);
    for (const [client, tenantId] of [
      [gone, 'gone'],
      [keeper, 'keeper'],
    ] as const) {
      const statuses = await seedThroughApi(client, receiver, tenantId);
      t.ok(
        statuses.every((status) => status >= 200 && status < 300),
        `${tenantId}: data, uploads and configs through the public API`,
      );
    }
    t.equal(
      (
        await call(service, 'PUT', '/tenants/gone/quota', {
          token: owner,
          body: { maxBytes: 10 ** 9 },
        })
      ).status,
      200,
    );
    const watcher = IndexStore.open({ path: join(service.dataDir, 'index'), readOnly: true });
    const goneBuckets = bucketIdsOf(watcher, 'gone');
    await watcher.close();

    // Deliveries work; then one hangs (in flight when the tenant is deleted) and others fail.
    await gone.put('events-gone', 'first', 'x');
    await receiver.waitFor(() =>
      receiver.eventsAt('/gone/events').some((event) => event['key'] === 'first'),
    );
    receiver.fail({ kind: 'hang' }, '/gone/events');
    receiver.fail({ kind: 'status', status: 503 }, '/gone/earlier');
    await gone.put('events-gone', 'second', 'x');
    await gone.put('events-gone', 'third', 'x');
    await gone.put('earlier-gone', 'last', 'x');
    t.equal((await gone.request('DELETE', '/buckets/earlier-gone/objects/last')).status, 204);
    t.equal(
      (await gone.request('DELETE', '/buckets/earlier-gone')).status,
      204,
      'a bucket deleted with events still queued',
    );
    await receiver.waitFor(
      () =>
        receiver.hanging.length === 1 &&
        receiver.attempts.filter((d) => d.path === '/gone/earlier').length >= 2,
    );
    t.ok(
      ((await call(service, 'GET', '/tenants/gone/usage', { token: owner })).json as UsageAnswer)
        .physicalBytes >
        3 * 64 * 1024,
      'the parts count in usage',
    );

    t.equal(
      (
        await call(service, 'POST', '/tenants/gone/disable', {
          token: owner,
          body: { reason: 'offboarding' },
        })
      ).status,
      200,
    );
    const deleted = await call(service, 'POST', '/tenants/gone/delete', {
      token: owner,
      body: { reason: 'offboarding', confirm: 'gone' },
    });
    t.equal(deleted.status, 200);
    const tenant = await waitFor('the purge', async () => {
      const current = (await call(service, 'GET', '/tenants/gone', { token: owner }))
        .json as TenantAnswer;
      return current.deletion?.completedAt === undefined ? undefined : current;
    });
    const completedAt = Date.now();
    t.match(tenant, { state: 'deleted', deletion: { state: 'complete' } });
    const hanging = receiver.hanging[0];
    t.ok(
      hanging?.closedAt !== undefined && hanging.closedAt <= completedAt,
      'the request in flight was ended before the purge completed',
    );
    const attemptsAtCompletion = receiver.attempts.filter((d) =>
      d.path.startsWith('/gone/'),
    ).length;

    // The receiver recovers; the delivery loop goes on for the other tenant, and never for this one.
    receiver.recover();
    await keeper.put('events-keeper', 'after', 'x');
    await receiver.waitFor(() =>
      receiver.eventsAt('/keeper/events').some((event) => event['key'] === 'after'),
    );
    await new Promise((resolve) => setTimeout(resolve, 1500));
    t.equal(
      receiver.attempts.filter((d) => d.path.startsWith('/gone/')).length,
      attemptsAtCompletion,
      'no webhook for the deleted tenant after the purge',
    );
    t.same(
      receiver.hanging.map((entry) => entry.path),
      ['/gone/events'],
      'nothing else left hanging',
    );

    await service.stop();
    const store = IndexStore.open({ path: join(service.dataDir, 'index'), readOnly: true });
    t.teardown(() => store.close());
    t.equal(goneBuckets.length, 3);
    t.same(
      leftovers(store, 'gone', goneBuckets),
      {},
      'no record of the tenant or of its buckets is left',
    );
    t.same(
      leftovers(store, 'keeper', bucketIdsOf(store, 'keeper')),
      {
        buckets: 3,
        accounts: 1,
        idempotency: 1,
        usage: 1,
        'access-keys.tenantId': 1,
        'multipart.tenantId': 2,
        'notifications.tenantId': 2,
        'outbox-status.tenantId': 1,
        objects: 3,
        versions: 3,
        multipart: 2,
        'multipart-parts': 3,
        notifications: 2,
        'outbox-status': 1,
      },
      'the other tenant keeps all of its own',
    );
    const goneNum = (store.get<TenantRecord>(DB.tenants, tenantKey('gone')) as TenantRecord).num;
    const goneChunks = chunksOf(store, goneNum);
    t.ok(
      goneChunks.length >= 4 && goneChunks.every((chunk) => chunk.refs === 0),
      'every chunk reference of the tenant, parts included, was released',
    );
    const live = [...store.range<ChunkRecord>(DB.chunks, {})]
      .filter((entry) => entry.value.refs > 0)
      .reduce((sum, entry) => sum + entry.value.length, 0);
    const segmentsLive = [...store.range<SegmentRecord>(DB.segments, {})].reduce(
      (sum, entry) => sum + entry.value.liveBytes,
      0,
    );
    t.equal(
      segmentsLive,
      live,
      'segment live bytes are exactly the live chunks: compaction can reclaim the rest',
    );
    t.equal(
      (store.get<UsageRecord>(DB.usage, tenantKey('keeper')) as UsageRecord).physicalBytes,
      live,
      "the other tenant's usage is exact",
    );
    t.ok(
      [...store.range(DB.auditByTenant, tenantChildRange('gone'))].length > 0,
      'audit rows stay by design',
    );
  },
);
