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
import {
  DB,
  tenantKey,
  type MultipartPartRecord,
  type UsageRecord,
} from '../../src/engine/index/schema.js';
import type { EngineContext } from '../../src/engine/ops/context.js';
import * as control from '../../src/engine/ops/control.js';
import * as objects from '../../src/engine/ops/objects.js';
import * as segments from '../../src/engine/ops/segments.js';
import * as multipart from '../../src/engine/ops/multipart.js';
import { copyObject, putLegalHold, setVersioning } from '../../src/engine/ops/object-meta.js';
import { deleteTenant, purgeTenantBatch } from '../../src/engine/ops/tenant-delete.js';
import { loadSettings } from '../../src/util/config.js';
import { tempDir } from './segment-testing.js';

const settings = loadSettings({});
const TENANT = 'acme';
const quotaExceeded = { code: 'quota_exceeded' };
/** The smallest part but the last (only a number here: chunks hold no bytes). */
const U = multipart.MULTIPART_PART_BYTES_MIN;

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

t.test('parts count against maxBytes from upload to complete or abort', async (t) => {
  const fixture = await freshIndex(t);
  const { store, context, segmentId } = fixture;
  await store.transact(() => objects.createBucket(context, { tenantId: TENANT, name: 'mpu' }));
  await put(fixture, { bucket: 'mpu', key: 'base', size: 1000 });
  const create = (key: string): Promise<string> =>
    store.transact(
      () =>
        multipart.createMultipartUpload(context, {
          tenantId: TENANT,
          bucket: 'mpu',
          key,
          contentType: 'x',
          metadata: {},
        }).uploadId,
    );
  const target = (key: string, uploadId: string) => ({
    tenantId: TENANT,
    bucket: 'mpu',
    key,
    uploadId,
  });
  const part = (key: string, uploadId: string, partNumber: number, size: number) =>
    store.transact(() =>
      multipart.uploadPart(context, {
        ...target(key, uploadId),
        partNumber,
        size,
        etag: `"p${partNumber}-${size}"`,
        checksums: { CRC32C: 'AAAAAA==' },
        compressed: false,
        chunks: [chunkOf(segmentId, size)],
      }),
    );
  /** The gateway's check on the committed index. */
  const gateway = (key: string, uploadId: string, partNumber: number, size: number) => () => {
    const bucketId = objects.requireBucket(context, TENANT, 'mpu').id;
    multipart.checkPartQuotaIn(store, {
      tenantId: TENANT,
      bucketId,
      key,
      uploadId,
      partNumber,
      size,
    });
  };
  const used = (): { logicalBytes: number; partBytes: number; objects: number } => {
    const usage = usageOf(store);
    return {
      logicalBytes: usage.logicalBytes,
      partBytes: usage.partBytes ?? 0,
      objects: usage.objects,
    };
  };
  await store.transact(() =>
    control.setTenantQuota(context, { tenantId: TENANT, maxBytes: U + 4000, maxObjects: 2 }),
  );

  const upload = await create('obj');
  await part('obj', upload, 1, U);
  await part('obj', upload, 2, 1000);
  t.same(used(), { logicalBytes: 1000, partBytes: U + 1000, objects: 1 }, 'parts are counted');
  t.throws(gateway('obj', upload, 3, 2001), quotaExceeded, 'gateway: a part past maxBytes');
  await t.rejects(part('obj', upload, 3, 2001), quotaExceeded, 'engine: a part past maxBytes');
  t.throws(
    () => {
      objects.checkPutQuotaIn(store, {
        tenantId: TENANT,
        bucket: objects.requireBucket(context, TENANT, 'mpu'),
        key: 'other',
        size: 2001,
      });
    },
    quotaExceeded,
    'parts in progress count against a later PUT',
  );
  t.doesNotThrow(gateway('obj', upload, 2, 3000), 'a part uploaded again frees the old one');
  t.throws(gateway('obj', upload, 2, 3001), quotaExceeded);
  await part('obj', upload, 2, 3000);
  t.same(used(), { logicalBytes: 1000, partBytes: U + 3000, objects: 1 }, 'replaced, not added');
  await part('obj', upload, 3, 0);
  t.same(used().objects, 1, 'parts are not objects');

  // Complete adds nothing to the measure: the listed parts' bytes move into the version, the
  // bytes of the part left out are released. It passes under a lowered maxBytes too.
  await store.transact(() =>
    control.setTenantQuota(context, { tenantId: TENANT, maxBytes: U + 2000, maxObjects: 2 }),
  );
  const version = await store.transact(() =>
    multipart.completeMultipartUpload(context, {
      ...target('obj', upload),
      parts: [
        { partNumber: 1, etag: `"p1-${U}"` },
        { partNumber: 3, etag: '"p3-0"' },
      ],
    }),
  );
  t.equal(version.size, U);
  t.same(used(), { logicalBytes: U + 1000, partBytes: 0, objects: 2 }, 'no double counting');

  // Abort releases everything; a new key's complete past maxObjects is refused.
  const second = await create('third');
  await part('third', second, 1, 500);
  t.same(used().partBytes, 500);
  await t.rejects(
    store.transact(() =>
      multipart.completeMultipartUpload(context, {
        ...target('third', second),
        parts: [{ partNumber: 1, etag: '"p1-500"' }],
      }),
    ),
    quotaExceeded,
    'complete adds the object: maxObjects',
  );
  await store.transact(() => multipart.abortMultipartUpload(context, target('third', second)));
  t.same(used(), { logicalBytes: U + 1000, partBytes: 0, objects: 2 }, 'abort leaves nothing');

  // The background pass's expiry releases the same way.
  const third = await create('obj');
  await part('obj', third, 1, 700);
  t.same(used().partBytes, 700);
  const expired = await store.transact(() =>
    multipart.expireMultipartUploads(context, { now: Date.now() + 1, expiryMs: 0, partsMax: 10 }),
  );
  t.equal(expired, 2, 'the part and the upload');
  t.same(used(), { logicalBytes: U + 1000, partBytes: 0, objects: 2 }, 'expiry leaves nothing');
});

t.test('parts stored before parts counted stay readable and count at complete', async (t) => {
  const fixture = await freshIndex(t);
  const { store, context, segmentId } = fixture;
  await store.transact(() => objects.createBucket(context, { tenantId: TENANT, name: 'mpu' }));
  const target = { tenantId: TENANT, bucket: 'mpu', key: 'old' };
  const { uploadId } = await store.transact(() =>
    multipart.createMultipartUpload(context, { ...target, contentType: 'x', metadata: {} }),
  );
  const part = (partNumber: number, size: number): Promise<unknown> =>
    store.transact(() =>
      multipart.uploadPart(context, {
        ...target,
        uploadId,
        partNumber,
        size,
        etag: `"p${partNumber}"`,
        checksums: {},
        compressed: false,
        chunks: [chunkOf(segmentId, size)],
      }),
    );
  await part(1, U);
  await part(2, 300);
  // Make them what an older release wrote: no quotaCounted, nothing in partBytes.
  await store.transact(() => {
    for (const { key, value } of store.range<MultipartPartRecord>(DB.multipartParts, {})) {
      delete value.quotaCounted;
      store.put(DB.multipartParts, Buffer.from(key), value);
    }
    const usage = usageOf(store);
    delete usage.partBytes;
    store.put(DB.usage, tenantKey(TENANT), usage);
  });
  const quota = (maxBytes: number): Promise<unknown> =>
    store.transact(() => control.setTenantQuota(context, { tenantId: TENANT, maxBytes }));
  await quota(700);
  await part(2, 100);
  t.equal(usageOf(store).partBytes, 100, 'a new part counts; the old one it replaced did not');
  const complete = (): Promise<{ size: number }> =>
    store.transact(() =>
      multipart.completeMultipartUpload(context, {
        ...target,
        uploadId,
        parts: [
          { partNumber: 1, etag: '"p1"' },
          { partNumber: 2, etag: '"p2"' },
        ],
      }),
    );
  await t.rejects(complete(), quotaExceeded, 'complete adds the old part: 100 + U > 700');
  await quota(U + 100);
  t.equal((await complete()).size, U + 100);
  t.match(usageOf(store), { logicalBytes: U + 100, partBytes: 0 }, 'only the counted part moved');
});

t.test("a tenant delete's purge takes its parts out of partBytes", async (t) => {
  // A version under legal hold stops the purge after the bucket's uploads were aborted, so the
  // usage record is still there to read; a completed purge removes it with the quota.
  const fixture = await freshIndex(t);
  const { store, context, segmentId } = fixture;
  await store.transact(() =>
    objects.createBucket(context, { tenantId: TENANT, name: 'locked', objectLock: true }),
  );
  await put(fixture, { bucket: 'locked', key: 'held', size: 100 });
  await store.transact(() => {
    putLegalHold(context, { tenantId: TENANT, bucket: 'locked', key: 'held', status: 'ON' });
    const target = { tenantId: TENANT, bucket: 'locked', key: 'partial' };
    const { uploadId } = multipart.createMultipartUpload(context, {
      ...target,
      contentType: 'x',
      metadata: {},
    });
    for (const partNumber of [1, 2])
      multipart.uploadPart(context, {
        ...target,
        uploadId,
        partNumber,
        size: 1000,
        etag: `"p${partNumber}"`,
        checksums: {},
        compressed: false,
        chunks: [chunkOf(segmentId, 1000)],
      });
    control.setTenantQuota(context, { tenantId: TENANT, maxBytes: 10_000 });
  });
  t.equal(usageOf(store).partBytes, 2000);
  await store.transact(() => {
    control.disableTenant(context, { tenantId: TENANT, reason: 'test' });
    deleteTenant(context, { tenantId: TENANT, reason: 'test' });
  });
  const result = await store.transact(() => purgeTenantBatch(context, { tenantId: TENANT }));
  t.equal(result.blocked, true, 'the held version stops the purge');
  t.match(usageOf(store), { logicalBytes: 100, partBytes: 0 }, 'the parts left partBytes');
});

t.test('engine start recomputes partBytes from the counted parts', async (t) => {
  const fixture = await freshIndex(t);
  const { store, context, segmentId } = fixture;
  await store.transact(() => objects.createBucket(context, { tenantId: TENANT, name: 'mpu' }));
  const { uploadId } = await store.transact(() =>
    multipart.createMultipartUpload(context, {
      tenantId: TENANT,
      bucket: 'mpu',
      key: 'big',
      contentType: 'x',
      metadata: {},
    }),
  );
  for (const [partNumber, size] of [
    [1, U],
    [2, 1000],
  ] as const) {
    await store.transact(() =>
      multipart.uploadPart(context, {
        tenantId: TENANT,
        bucket: 'mpu',
        key: 'big',
        uploadId,
        partNumber,
        size,
        etag: `"p${partNumber}"`,
        checksums: { CRC32C: 'AAAAAA==' },
        compressed: false,
        chunks: [chunkOf(segmentId, size)],
      }),
    );
  }
  t.equal(usageOf(store).partBytes, U + 1000);
  t.equal(await store.transact(() => multipart.reconcilePartBytes(context)), 0, 'exact: kept');
  // What a release without partBytes would leave: parts gone or added, the sum not moved.
  await store.transact(() => {
    const usage = usageOf(store);
    usage.partBytes = 5 * U;
    store.put(DB.usage, tenantKey(TENANT), usage);
  });
  t.equal(await store.transact(() => multipart.reconcilePartBytes(context)), 1, 'one corrected');
  t.equal(usageOf(store).partBytes, U + 1000, 'back to the sum of the counted parts');
  await store.transact(() =>
    multipart.abortMultipartUpload(context, {
      tenantId: TENANT,
      bucket: 'mpu',
      key: 'big',
      uploadId,
    }),
  );
  t.equal(usageOf(store).partBytes, 0);
  t.equal(await store.transact(() => multipart.reconcilePartBytes(context)), 0);
});

t.test("a bucket delete's abort of its uploads is bounded per transaction", async (t) => {
  const fixture = await freshIndex(t);
  const { store, context, segmentId } = fixture;
  await store.transact(() => objects.createBucket(context, { tenantId: TENANT, name: 'gone' }));
  const uploads: string[] = [];
  for (const key of ['a', 'b']) {
    const { uploadId } = await store.transact(() =>
      multipart.createMultipartUpload(context, {
        tenantId: TENANT,
        bucket: 'gone',
        key,
        contentType: 'x',
        metadata: {},
      }),
    );
    uploads.push(uploadId);
    for (const partNumber of [1, 2, 3])
      await store.transact(() =>
        multipart.uploadPart(context, {
          tenantId: TENANT,
          bucket: 'gone',
          key,
          uploadId,
          partNumber,
          size: 100,
          etag: `"p${partNumber}"`,
          checksums: {},
          compressed: false,
          chunks: [chunkOf(segmentId, 100)],
        }),
      );
  }
  t.equal(usageOf(store).partBytes, 600);
  await t.rejects(
    store.transact(() => objects.deleteBucket(context, { tenantId: TENANT, name: 'gone' })),
    { code: 'bucket_not_empty' },
    'without abortUploads a bucket delete still refuses',
  );
  const bucket = objects.requireBucket(context, TENANT, 'gone');
  const tenant = control.requireActiveTenant(context, TENANT);
  // Four parts' room: upload a whole (3 parts and its record), then one part of b.
  const work = await store.transact(() =>
    multipart.abortBucketUploads(context, { tenant, bucket, partsMax: 5 }),
  );
  t.equal(work, 5, 'a: three parts and its record; b: one part, then the bound');
  t.equal(usageOf(store).partBytes, 200, 'the released parts are given back at once');
  await store.transact(() =>
    objects.deleteBucket(context, { tenantId: TENANT, name: 'gone', abortUploads: true }),
  );
  t.equal(usageOf(store).partBytes, 0, 'the delete released what was left');
  t.equal([...store.range(DB.multipart, {})].length, 0, 'no upload record is left');
  t.equal([...store.range(DB.multipartParts, {})].length, 0, 'no part record is left');
});
