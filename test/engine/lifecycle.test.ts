// Goal: the lifecycle executor acts on exactly what the rules make due, when it is due, through
// the due-date index: current expiry (delete, or a delete marker in versioned buckets),
// noncurrent expiry with NewerNoncurrentVersions, expired delete markers, incomplete multipart
// uploads, tag, size and date filters, object lock winning, and configuration changes that
// reindex and clear. A pass with nothing due reads one empty range, however many objects wait.
// Method: the engine's commands run directly on a fresh index with a manual clock and the
// engine's command batch; the clock is moved past each due time, never slept on.
import t, { type Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { IndexStore, CommandBatch } from '../../src/engine/index/store.js';
import {
  DB,
  objectKey,
  versionRange,
  type AuditEvent,
  type ObjectVersionRecord,
  type OutboxRecord,
} from '../../src/engine/index/schema.js';
import { putBucketNotifications } from '../../src/engine/ops/notifications.js';
import type { LifecycleRuleRecord } from '../../src/engine/index/lifecycle-schema.js';
import type { EngineContext } from '../../src/engine/ops/context.js';
import * as control from '../../src/engine/ops/control.js';
import * as objects from '../../src/engine/ops/objects.js';
import * as segments from '../../src/engine/ops/segments.js';
import * as multipart from '../../src/engine/ops/multipart.js';
import * as lifecycle from '../../src/engine/ops/lifecycle.js';
import { writeReplicaVersion } from '../../src/engine/ops/replica-version.js';
import { putLegalHold, putObjectTags, putRetention } from '../../src/engine/ops/object-meta.js';
import { LifecycleExecutor, type PassStats } from '../../src/engine/lifecycle.js';
import { DAY_MS } from '../../src/engine/lifecycle-rules.js';
import { ManualClock } from '../../src/util/clock.js';
import { loadSettings } from '../../src/util/config.js';
import { componentLogger } from '../../src/util/log.js';
import { tempDir } from './segment-testing.js';

const settings = loadSettings({});
const TENANT = 'acme';
/** 2026-01-01 10:30 UTC: one day's rule acts at 2026-01-03 00:00 UTC. */
const START = Date.UTC(2026, 0, 1, 10, 30);
const HOUR = 3_600_000;

interface Fixture {
  store: IndexStore;
  context: EngineContext;
  clock: ManualClock;
  executor: LifecycleExecutor;
  segmentId: number;
}

async function fresh(t: Test, path = tempDir(t, 'lw-lifecycle-')): Promise<Fixture> {
  const store = IndexStore.open({ path, readOnly: false });
  t.teardown(() => store.close().catch(() => undefined));
  const clock = new ManualClock(START);
  const context: EngineContext = {
    store,
    masterKey: randomBytes(32),
    settings,
    now: () => clock.now(),
  };
  const batch = new CommandBatch(store);
  const executor = new LifecycleExecutor({
    context,
    submit: (apply) => batch.submit(apply),
    log: componentLogger('test.lifecycle'),
    intervalMs: 60_000,
  });
  const { segmentId } = await store.transact(() => {
    if (!store.has(DB.tenants, Buffer.from(TENANT))) control.createTenant(context, { id: TENANT });
    return segments.allocSegment(context, { ownerPid: process.pid });
  });
  return { store, context, clock, executor, segmentId };
}

let nextOffset = 64;
function put(
  fixture: Fixture,
  args: { bucket: string; key: string; size?: number },
): Promise<ObjectVersionRecord> {
  const { store, context, segmentId } = fixture;
  const size = args.size ?? 10;
  const location = { segmentId, offset: nextOffset, length: size + 80, payloadChecksum: 1 };
  nextOffset += size + 80;
  return store.transact(() =>
    objects.putObject(context, {
      tenantId: TENANT,
      bucket: args.bucket,
      key: args.key,
      size,
      etag: '"e"',
      contentType: 'application/octet-stream',
      metadata: {},
      checksums: {},
      compressed: false,
      chunks: [{ id: randomBytes(32), plainLength: size, location }],
    }),
  );
}

function bucketOf(fixture: Fixture, name: string, versioning?: 'Enabled'): Promise<unknown> {
  return fixture.store.transact(() =>
    objects.createBucket(fixture.context, {
      tenantId: TENANT,
      name,
      ...(versioning ? { versioning } : {}),
    }),
  );
}

async function configure(
  fixture: Fixture,
  bucket: string,
  rules: LifecycleRuleRecord[],
): Promise<void> {
  await fixture.store.transact(() =>
    lifecycle.putBucketLifecycle(fixture.context, { tenantId: TENANT, bucket, rules }),
  );
  // The reindex job runs in the pass; run one now so the tests start from a settled index.
  await fixture.executor.runPass();
}

function rule(
  id: string,
  parts: Omit<LifecycleRuleRecord, 'id' | 'status' | 'filter'> & {
    filter?: LifecycleRuleRecord['filter'];
  },
): LifecycleRuleRecord {
  return { id, status: 'Enabled', filter: parts.filter ?? { form: 'filter' }, ...parts };
}

function currentOf(fixture: Fixture, bucket: string, key: string): ObjectVersionRecord | undefined {
  const record = objects.requireBucket(fixture.context, TENANT, bucket);
  return fixture.store.get<ObjectVersionRecord>(DB.objects, objectKey(record.id, key));
}

function versionsOf(fixture: Fixture, bucket: string, key: string): ObjectVersionRecord[] {
  const record = objects.requireBucket(fixture.context, TENANT, bucket);
  return [
    ...fixture.store.range<ObjectVersionRecord>(DB.versions, versionRange(record.id, key)),
  ].map((entry) => entry.value);
}

function dueEntries(fixture: Fixture): number {
  return [...fixture.store.range(DB.lifecycleDue, {})].length;
}

async function passAt(fixture: Fixture, at: number): Promise<PassStats> {
  fixture.clock.advance(at - fixture.clock.now());
  return fixture.executor.runPass();
}

t.test('unversioned: Expiration Days removes the covered objects at midnight UTC', async (t) => {
  const fixture = await fresh(t);
  await bucketOf(fixture, 'logs');
  await put(fixture, { bucket: 'logs', key: 'tmp/a' });
  await put(fixture, { bucket: 'logs', key: 'keep/b' });
  await configure(fixture, 'logs', [
    rule('tmp', { filter: { form: 'prefix', prefix: 'tmp/' }, expiration: { days: 1 } }),
  ]);
  await fixture.store.transact(() =>
    putBucketNotifications(fixture.context, {
      tenantId: TENANT,
      bucket: 'logs',
      configs: [{ id: 'hook', url: 'https://hooks.example.com/in', events: ['object-removed'] }],
    }),
  );
  t.equal(dueEntries(fixture), 1, 'only the covered object has an entry');
  const midnight = Date.UTC(2026, 0, 3);
  const early = await passAt(fixture, midnight - 1);
  t.same(early.outcomes, {}, 'nothing acts a millisecond before midnight');
  t.ok(currentOf(fixture, 'logs', 'tmp/a'), 'the object is there before its time');
  const due = await passAt(fixture, midnight);
  t.same(due.outcomes, { 'expire-current': 1 });
  t.notOk(currentOf(fixture, 'logs', 'tmp/a'), 'expired');
  t.same(versionsOf(fixture, 'logs', 'tmp/a'), [], 'no version left: the bucket is unversioned');
  t.ok(currentOf(fixture, 'logs', 'keep/b'), 'an object outside the filter stays');
  t.equal(dueEntries(fixture), 0, 'the index holds nothing more');
  const events = [...fixture.store.range<OutboxRecord>(DB.outbox, {})].map(
    (entry) => entry.value.event,
  );
  t.match(events, [{ type: 'object-removed', bucket: 'logs', key: 'tmp/a' }], 'notified');
  const rows = [...fixture.store.range<AuditEvent>(DB.audit, {})].map((entry) => entry.value);
  const row = rows.find((event) => event.actor === 'lifecycle');
  t.match(row, {
    action: 'lifecycle:ExpireObject',
    resource: 'logs/tmp/a',
    reason: 'rule tmp',
    tenantId: TENANT,
  });
});

t.test('an empty pass reads one empty range, whatever waits', async (t) => {
  const fixture = await fresh(t);
  await bucketOf(fixture, 'many');
  await configure(fixture, 'many', [rule('all', { expiration: { days: 30 } })]);
  for (let index = 0; index < 2000; index += 1)
    void put(fixture, { bucket: 'many', key: `k${index}` });
  await put(fixture, { bucket: 'many', key: 'last' });
  t.equal(dueEntries(fixture), 2001, 'every object waits in the index');
  const stats = await passAt(fixture, START + 5 * DAY_MS);
  t.same(stats, { entriesRead: 0, rangeReads: 1, reindexSteps: 0, outcomes: {} });
});

t.test('versioned: current expiry, noncurrent expiry and the lone delete marker', async (t) => {
  const fixture = await fresh(t);
  await bucketOf(fixture, 'vers', 'Enabled');
  await put(fixture, { bucket: 'vers', key: 'doc' });
  await configure(fixture, 'vers', [
    rule('current', { expiration: { days: 1 } }),
    rule('old', { noncurrentExpiration: { noncurrentDays: 2 } }),
    rule('markers', { expiration: { expiredObjectDeleteMarker: true } }),
  ]);
  const day1 = Date.UTC(2026, 0, 3);
  t.same((await passAt(fixture, day1)).outcomes, { 'expire-current': 1 });
  const chain = versionsOf(fixture, 'vers', 'doc');
  t.equal(chain.length, 2, 'a delete marker over the version');
  t.ok(chain[0]?.deleteMarker, 'the current version is a delete marker');
  t.notOk(currentOf(fixture, 'vers', 'doc'), 'the object reads as deleted');
  // The version became noncurrent at day1: two days later, at midnight, it goes.
  t.same((await passAt(fixture, day1 + 2 * DAY_MS - 1)).outcomes, {}, 'not before its time');
  const gone = await passAt(fixture, day1 + 2 * DAY_MS);
  t.same(gone.outcomes, { 'expire-noncurrent': 1, 'remove-marker': 1 }, 'the marker follows');
  t.same(versionsOf(fixture, 'vers', 'doc'), [], 'nothing left of the key');
  t.equal(dueEntries(fixture), 0);
});

t.test('NewerNoncurrentVersions keeps the newest noncurrent versions', async (t) => {
  const fixture = await fresh(t);
  await bucketOf(fixture, 'hist', 'Enabled');
  await configure(fixture, 'hist', [
    rule('keep2', { noncurrentExpiration: { noncurrentDays: 1, newerNoncurrentVersions: 2 } }),
  ]);
  for (let index = 0; index < 5; index += 1) await put(fixture, { bucket: 'hist', key: 'k' });
  const stats = await passAt(fixture, START + 3 * DAY_MS);
  t.same(stats.outcomes['expire-noncurrent'], 2, 'the two oldest of four noncurrent go');
  t.equal(versionsOf(fixture, 'hist', 'k').length, 3, 'current and two noncurrent stay');
  // One more write pushes a third noncurrent version past the two kept.
  fixture.clock.advance(HOUR);
  await put(fixture, { bucket: 'hist', key: 'k' });
  const next = await passAt(fixture, fixture.clock.now() + 2 * DAY_MS);
  t.same(next.outcomes, { 'expire-noncurrent': 1 });
  t.equal(versionsOf(fixture, 'hist', 'k').length, 3);
});

t.test('tag and size filters, and a tag change that moves the due time', async (t) => {
  const fixture = await fresh(t);
  await bucketOf(fixture, 'mixed');
  await put(fixture, { bucket: 'mixed', key: 'small', size: 10 });
  await put(fixture, { bucket: 'mixed', key: 'large', size: 5000 });
  await put(fixture, { bucket: 'mixed', key: 'tagged', size: 10 });
  await configure(fixture, 'mixed', [
    rule('big', { filter: { form: 'filter', sizeGreaterThan: 1000 }, expiration: { days: 1 } }),
    rule('temp', {
      filter: { form: 'and', prefix: 't', tags: [{ key: 'class', value: 'temp' }] },
      expiration: { days: 1 },
    }),
  ]);
  t.equal(dueEntries(fixture), 1, 'only the large object is covered so far');
  await fixture.store.transact(() =>
    putObjectTags(fixture.context, {
      tenantId: TENANT,
      bucket: 'mixed',
      key: 'tagged',
      tags: [{ key: 'class', value: 'temp' }],
    }),
  );
  t.equal(dueEntries(fixture), 2, 'tagging it put it in the index, in the same transaction');
  const stats = await passAt(fixture, Date.UTC(2026, 0, 3));
  t.same(stats.outcomes, { 'expire-current': 2 });
  t.ok(currentOf(fixture, 'mixed', 'small'), 'the small untagged object stays');
  t.notOk(currentOf(fixture, 'mixed', 'large'));
  t.notOk(currentOf(fixture, 'mixed', 'tagged'));
});

t.test('a Date rule acts on its date, on older and newer objects alike', async (t) => {
  const fixture = await fresh(t);
  await bucketOf(fixture, 'dated');
  const date = Date.UTC(2026, 0, 10);
  await configure(fixture, 'dated', [rule('d', { expiration: { date } })]);
  await put(fixture, { bucket: 'dated', key: 'before' });
  t.same((await passAt(fixture, date - 1)).outcomes, {});
  t.same((await passAt(fixture, date)).outcomes, { 'expire-current': 1 });
  await put(fixture, { bucket: 'dated', key: 'after' });
  t.same((await passAt(fixture, date + HOUR)).outcomes, { 'expire-current': 1 }, 'at once');
});

t.test('object lock wins: legal hold and retention hold the version', async (t) => {
  const fixture = await fresh(t);
  await fixture.store.transact(() =>
    objects.createBucket(fixture.context, { tenantId: TENANT, name: 'vault', objectLock: true }),
  );
  await put(fixture, { bucket: 'vault', key: 'held' });
  await put(fixture, { bucket: 'vault', key: 'retained' });
  const target = { tenantId: TENANT, bucket: 'vault' };
  await fixture.store.transact(() => {
    putLegalHold(fixture.context, { ...target, key: 'held', status: 'ON' });
    putRetention(fixture.context, {
      ...target,
      key: 'retained',
      mode: 'COMPLIANCE',
      retainUntil: START + 10 * DAY_MS,
    });
  });
  await configure(fixture, 'vault', [rule('old', { noncurrentExpiration: { noncurrentDays: 1 } })]);
  // New versions make the locked ones noncurrent.
  await put(fixture, { bucket: 'vault', key: 'held' });
  await put(fixture, { bucket: 'vault', key: 'retained' });
  const blocked = await passAt(fixture, START + 3 * DAY_MS);
  t.same(blocked.outcomes, { held: 2 });
  t.equal(versionsOf(fixture, 'vault', 'held').length, 2, 'the legally held version stays');
  t.equal(versionsOf(fixture, 'vault', 'retained').length, 2, 'the retained version stays');
  const later = await passAt(fixture, START + 10 * DAY_MS);
  t.same(later.outcomes, { 'expire-noncurrent': 1, held: 1 }, 'retention ended; the hold not');
  t.equal(versionsOf(fixture, 'vault', 'retained').length, 1);
});

t.test('AbortIncompleteMultipartUpload aborts uploads after the days', async (t) => {
  const fixture = await fresh(t);
  await bucketOf(fixture, 'uploads');
  const begin = (key: string): Promise<{ uploadId: string }> =>
    fixture.store.transact(() =>
      multipart.createMultipartUpload(fixture.context, {
        tenantId: TENANT,
        bucket: 'uploads',
        key,
        contentType: 'application/octet-stream',
        metadata: {},
      }),
    );
  const old = await begin('a/old');
  await configure(fixture, 'uploads', [
    rule('abort', {
      filter: { form: 'filter', prefix: 'a/' },
      abortIncompleteMultipartUpload: { daysAfterInitiation: 2 },
    }),
  ]);
  await begin('b/other');
  t.equal(dueEntries(fixture), 1, 'the reindex found the upload made before the rule');
  const stats = await passAt(fixture, Date.UTC(2026, 0, 4));
  t.same(stats.outcomes, { abort: 1 });
  const left = [...fixture.store.range<{ key: string }>(DB.multipart, {})];
  t.same(
    left.map((entry) => entry.value.key),
    ['b/other'],
    `upload ${old.uploadId} was aborted`,
  );
});

t.test('a configuration change reindexes and a delete clears the index', async (t) => {
  const fixture = await fresh(t);
  await bucketOf(fixture, 'cfg');
  for (let index = 0; index < 50; index += 1)
    await put(fixture, { bucket: 'cfg', key: `x${index}` });
  await fixture.store.transact(() =>
    lifecycle.putBucketLifecycle(fixture.context, {
      tenantId: TENANT,
      bucket: 'cfg',
      rules: [rule('r', { expiration: { days: 5 } })],
    }),
  );
  t.equal(dueEntries(fixture), 0, 'the job, not the put, fills the index');
  const steps = await fixture.store.transact(() =>
    lifecycle.reindexStep(fixture.context, { bucketId: 1, limit: 20 }),
  );
  t.same(steps, { done: false, visited: 20 }, 'a step is bounded');
  await fixture.executor.runPass();
  t.equal(dueEntries(fixture), 50);
  await fixture.store.transact(() =>
    lifecycle.putBucketLifecycle(fixture.context, {
      tenantId: TENANT,
      bucket: 'cfg',
      rules: [rule('r', { filter: { form: 'filter', prefix: 'x1' }, expiration: { days: 5 } })],
    }),
  );
  await fixture.executor.runPass();
  t.equal(dueEntries(fixture), 11, 'x1 and x10..x19 are covered now');
  await fixture.store.transact(() =>
    lifecycle.deleteBucketLifecycle(fixture.context, { tenantId: TENANT, bucket: 'cfg' }),
  );
  await fixture.executor.runPass();
  t.equal(dueEntries(fixture), 0, 'cleared');
  t.equal([...fixture.store.range(DB.lifecycleSubjects, {})].length, 0);
  t.equal([...fixture.store.range(DB.lifecycleJobs, {})].length, 0, 'no job left');
});

t.test('the index is the state: a reopened store resumes', async (t) => {
  const path = tempDir(t, 'lw-lifecycle-reopen-');
  const first = await fresh(t, path);
  await bucketOf(first, 'res');
  await configure(first, 'res', [rule('r', { expiration: { days: 1 } })]);
  await put(first, { bucket: 'res', key: 'a' });
  await first.store.close();
  const second = await fresh(t, path);
  t.equal(dueEntries(second), 1);
  t.same((await passAt(second, Date.UTC(2026, 0, 3))).outcomes, { 'expire-current': 1 });
});

t.test('versions a replica copies in below the head come due like written ones', async (t) => {
  // Repair copies a key's versions newest first (cluster/repair.ts): every older one lands below
  // the head, where its own due entry and its neighbours' must still be set.
  const fixture = await fresh(t);
  const keep2 = [
    rule('keep2', { noncurrentExpiration: { noncurrentDays: 1, newerNoncurrentVersions: 2 } }),
  ];
  await bucketOf(fixture, 'written', 'Enabled');
  await configure(fixture, 'written', keep2);
  await bucketOf(fixture, 'copied', 'Enabled');
  await configure(fixture, 'copied', keep2);
  for (let index = 0; index < 5; index += 1) {
    await put(fixture, { bucket: 'written', key: 'k' });
    fixture.clock.advance(HOUR);
  }
  const history = versionsOf(fixture, 'written', 'k');
  for (const version of history) {
    const location = {
      segmentId: fixture.segmentId,
      offset: nextOffset,
      length: 90,
      payloadChecksum: 1,
    };
    nextOffset += 90;
    await fixture.store.transact(() =>
      writeReplicaVersion(fixture.context, {
        tenantId: TENANT,
        bucket: 'copied',
        version,
        chunks: [{ id: randomBytes(32), plainLength: 10, location }],
      }),
    );
  }
  t.same(
    versionsOf(fixture, 'copied', 'k').map((version) => version.versionId),
    history.map((version) => version.versionId),
    'the copy holds the same history',
  );
  t.equal(dueEntries(fixture), 4, 'the two oldest noncurrent versions of each bucket are due');
  const stats = await passAt(fixture, START + 3 * DAY_MS);
  t.same(stats.outcomes['expire-noncurrent'], 4, 'the two oldest of each bucket go');
  t.equal(versionsOf(fixture, 'written', 'k').length, 3);
  t.equal(versionsOf(fixture, 'copied', 'k').length, 3, 'and of the copied history too');
});
