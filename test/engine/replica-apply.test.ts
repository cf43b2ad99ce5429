// Goal: a replica's apply of a version (putObject under the leader's sequence) that a repair
// has meanwhile copied in (writeReplicaVersion, cluster/repair.ts) changes nothing: the version
// stays as copied, and its chunk references and the tenant's usage count it once.
// Method: the engine's commands run directly on a fresh index: the copy first, then the apply
// of the same version, as the race between repair and live replication orders them.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { IndexStore } from '../../src/engine/index/store.js';
import { DB, type ObjectVersionRecord, type UsageRecord } from '../../src/engine/index/schema.js';
import type { EngineContext } from '../../src/engine/ops/context.js';
import * as control from '../../src/engine/ops/control.js';
import * as objects from '../../src/engine/ops/objects.js';
import * as segments from '../../src/engine/ops/segments.js';
import { writeReplicaVersion } from '../../src/engine/ops/replica-version.js';
import { loadSettings } from '../../src/util/config.js';
import { tempDir } from './segment-testing.js';

t.test('an apply of a version a repair copied in first counts it once', async (t) => {
  const store = IndexStore.open({ path: tempDir(t, 'lw-replica-apply-'), readOnly: false });
  t.teardown(() => store.close().catch(() => undefined));
  const context: EngineContext = {
    store,
    masterKey: randomBytes(32),
    settings: loadSettings({}),
    now: () => Date.UTC(2026, 0, 1),
  };
  const { segmentId } = await store.transact(() => {
    control.createTenant(context, { id: 'acme' });
    objects.createBucket(context, { tenantId: 'acme', name: 'box', versioning: 'Enabled' });
    return segments.allocSegment(context, { ownerPid: process.pid });
  });
  const chunk = {
    id: randomBytes(32),
    plainLength: 10,
    location: { segmentId, offset: 64, length: 90, payloadChecksum: 1 },
  };
  const seq = 4242;
  const version: ObjectVersionRecord = {
    key: 'k',
    versionId: objects.versionIdOf(seq),
    seq,
    lastModified: Date.UTC(2026, 0, 1),
    size: 10,
    etag: '"e"',
    contentType: 'application/octet-stream',
    metadata: {},
    checksums: {},
    chunks: Buffer.alloc(0),
    storedBytes: 0,
    compressed: false,
  };
  await store.transact(() =>
    writeReplicaVersion(context, { tenantId: 'acme', bucket: 'box', version, chunks: [chunk] }),
  );
  const usage = (): UsageRecord => objects.loadUsage(context, 'acme');
  const before = structuredClone(usage());
  const applied = await store.transact(() =>
    objects.putObject(
      { ...context, reserved: { nextSeq: seq } },
      {
        tenantId: 'acme',
        bucket: 'box',
        key: 'k',
        size: 10,
        etag: '"e"',
        contentType: 'application/octet-stream',
        metadata: {},
        checksums: {},
        compressed: false,
        chunks: [chunk],
      },
    ),
  );
  t.equal(applied.versionId, version.versionId, 'the apply answers the version held');
  t.same(usage(), before, 'usage counts the version once');
  t.equal([...store.range(DB.versions, {})].length, 1, 'one version row for the key, as copied');
});
