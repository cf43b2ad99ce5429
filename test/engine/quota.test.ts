// Goal: the quota checks judge a write by what it changes. A write that replaces a null version
// (Unversioned and Suspended buckets) frees that version's bytes and adds no object, in the
// engine's putObject and copyObject and in `checkPutQuotaIn`, the gateway's check before it
// reads a body, which must agree with the engine on a read-only view.
// Method: the engine's commands run directly on a fresh index (no processes); the quota is set
// to the tenant's usage, then writes are tried in the engine and the gateway's check is run on
// the committed index.
import t, { type Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { IndexStore } from '../../src/engine/index/store.js';
import { DB, tenantKey, type UsageRecord } from '../../src/engine/index/schema.js';
import type { EngineContext } from '../../src/engine/ops/context.js';
import * as control from '../../src/engine/ops/control.js';
import * as objects from '../../src/engine/ops/objects.js';
import * as segments from '../../src/engine/ops/segments.js';
import { copyObject, setVersioning } from '../../src/engine/ops/object-meta.js';
import { loadSettings } from '../../src/util/config.js';
import { tempDir } from './segment-testing.js';

const settings = loadSettings({});
const TENANT = 'acme';
const quotaExceeded = { code: 'quota_exceeded' };

interface Fixture {
  store: IndexStore;
  context: EngineContext;
  segmentId: number;
}

/** A new index in a temporary directory (removed after the test) with one open segment. */
async function freshIndex(t: Test): Promise<Fixture> {
  const store = IndexStore.open({ path: tempDir(t, 'lw-quota-'), readOnly: false });
  t.teardown(() => store.close());
  const context: EngineContext = {
    store,
    masterKey: randomBytes(32),
    settings,
    now: () => Date.now(),
  };
  const { segmentId } = await store.transact(() => {
    control.createTenant(context, { id: TENANT });
    return segments.allocSegment(context, { ownerPid: process.pid });
  });
  return { store, context, segmentId };
}

let nextOffset = 64;
/** `size` bytes as one new chunk of the segment. */
function chunkOf(segmentId: number, size: number): objects.ManifestChunk {
  const location = { segmentId, offset: nextOffset, length: size + 80, payloadChecksum: 1 };
  nextOffset += size + 80;
  return { id: randomBytes(32), plainLength: size, location };
}

function put(
  fixture: Fixture,
  args: { bucket: string; key: string; size: number },
): Promise<unknown> {
  const { store, context, segmentId } = fixture;
  return store.transact(() =>
    objects.putObject(context, {
      tenantId: TENANT,
      bucket: args.bucket,
      key: args.key,
      size: args.size,
      etag: '"e"',
      contentType: 'application/octet-stream',
      metadata: {},
      checksums: {},
      compressed: false,
      chunks: [chunkOf(segmentId, args.size)],
    }),
  );
}

function usageOf(store: IndexStore): UsageRecord {
  return store.get<UsageRecord>(DB.usage, tenantKey(TENANT)) as UsageRecord;
}

/** Sets maxBytes (and maxObjects) to what the tenant uses now: any growth is refused. */
async function full(fixture: Fixture): Promise<void> {
  const usage = usageOf(fixture.store);
  await fixture.store.transact(() =>
    control.setTenantQuota(fixture.context, {
      tenantId: TENANT,
      maxBytes: usage.logicalBytes,
      maxObjects: usage.objects,
    }),
  );
}

t.test('a write that replaces the null version at the limit', async (t) => {
  const fixture = await freshIndex(t);
  const { store, context } = fixture;
  await store.transact(() => {
    objects.createBucket(context, { tenantId: TENANT, name: 'plain' });
    objects.createBucket(context, { tenantId: TENANT, name: 'paused', versioning: 'Enabled' });
    objects.createBucket(context, { tenantId: TENANT, name: 'history', versioning: 'Enabled' });
  });
  await put(fixture, { bucket: 'plain', key: 'big', size: 10_000 });
  await put(fixture, { bucket: 'paused', key: 'kept', size: 500 });
  await store.transact(() =>
    setVersioning(context, { tenantId: TENANT, bucket: 'paused', status: 'Suspended' }),
  );
  await put(fixture, { bucket: 'paused', key: 'null', size: 500 });
  await put(fixture, { bucket: 'history', key: 'doc', size: 500 });
  await full(fixture);

  /** The gateway's check on the committed index. */
  const gateway = (bucket: string, key: string, size: number): (() => void) => {
    const record = objects.requireBucket(context, TENANT, bucket);
    return () => {
      objects.checkPutQuotaIn(store, { tenantId: TENANT, bucket: record, key, size });
    };
  };
  t.doesNotThrow(gateway('plain', 'big', 1000), 'unversioned: the replaced bytes are freed');
  t.doesNotThrow(gateway('plain', 'big', 10_000), 'the same size');
  t.throws(gateway('plain', 'big', 10_001), quotaExceeded, 'growth is refused');
  t.throws(gateway('plain', 'new', 1), quotaExceeded, 'a new key adds bytes and an object');
  t.throws(gateway('plain', 'new', 0), quotaExceeded, 'an empty new key still adds an object');
  t.doesNotThrow(gateway('paused', 'null', 100), 'suspended: the null version is replaced');
  t.throws(gateway('paused', 'kept', 100), quotaExceeded, 'suspended: no null version to free');
  t.throws(gateway('history', 'doc', 100), quotaExceeded, 'enabled: nothing is replaced');

  const copy = (
    key: string,
    source: string,
    bucket = 'plain',
  ): Promise<{ size: number; metadata: Record<string, string> }> =>
    store.transact(() =>
      copyObject(context, {
        tenantId: TENANT,
        bucket,
        key,
        sourceBucket: bucket,
        sourceKey: source,
        metadataDirective: 'REPLACE',
        metadata: { note: 'relabelled' },
      }),
    );
  await t.rejects(copy('copied', 'big'), quotaExceeded, 'a copy to a new key');
  await t.rejects(copy('doc', 'doc', 'history'), quotaExceeded, 'an enabled self-copy');
  t.match(await copy('big', 'big'), { size: 10_000, metadata: { note: 'relabelled' } });
  t.equal(usageOf(store).logicalBytes, 11_500, 'a self-copy replaces itself: no growth');
  await put(fixture, { bucket: 'plain', key: 'big', size: 1000 });
  t.equal(usageOf(store).logicalBytes, 2500, 'a smaller PUT freed 9000 bytes');
  t.equal(usageOf(store).objects, 4);
});
