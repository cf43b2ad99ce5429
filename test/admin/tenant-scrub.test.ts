// Goal: the engine's scrub walks every chunk reference of a tenant (or one bucket) exactly once
// across calls, however the per-call budget cuts the walk (inside a version with more references
// than one call allows, between pages, between buckets), and reports each unreadable chunk once
// per call with where it was.
// Method: the scrub command run directly on a fresh index whose chunk records point into segment
// files that do not exist: a dry walk (verify false) counts; a verifying walk finds every chunk
// missing. Calls are chained through the returned cursor until it is gone.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { IndexStore } from '../../src/engine/index/store.js';
import type { EngineContext } from '../../src/engine/ops/context.js';
import * as control from '../../src/engine/ops/control.js';
import * as objects from '../../src/engine/ops/objects.js';
import * as segments from '../../src/engine/ops/segments.js';
import {
  scrubTenantChunks,
  SCRUB_REFS_PER_CALL,
  type ScrubResult,
  type ScrubCursor,
} from '../../src/engine/ops/tenant-scrub.js';
import { loadSettings } from '../../src/util/config.js';

async function walk(
  context: EngineContext,
  args: { tenantId: string; bucket?: string; verify: boolean },
): Promise<{ total: ScrubResult; calls: number }> {
  const total: ScrubResult = {
    buckets: 0,
    versions: 0,
    chunkRefs: 0,
    logicalBytes: 0,
    chunksVerified: 0,
    bytesVerified: 0,
    corruptChunks: 0,
    corrupt: [],
  };
  let cursor: ScrubCursor | undefined;
  let calls = 0;
  do {
    const step = await scrubTenantChunks(
      context,
      cursor === undefined ? args : { ...args, cursor },
    );
    calls += 1;
    for (const field of [
      'buckets',
      'versions',
      'chunkRefs',
      'logicalBytes',
      'chunksVerified',
      'bytesVerified',
      'corruptChunks',
    ] as const)
      total[field] += step[field];
    total.corrupt.push(...step.corrupt);
    cursor = step.cursor;
  } while (cursor !== undefined);
  return { total, calls };
}

t.test('scrub walks every reference once across calls', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'lw-scrub-'));
  const store = IndexStore.open({ path: join(dir, 'index'), readOnly: false });
  t.teardown(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const context: EngineContext = {
    store,
    masterKey: randomBytes(32),
    settings: loadSettings({ flags: { data_dir: dir } }),
    now: () => Date.now(),
  };
  const { segmentId } = await store.transact(() =>
    segments.allocSegment(context, { ownerPid: process.pid }),
  );
  let offset = 64;
  const chunk = (): objects.ManifestChunk => {
    offset += 100;
    return {
      id: randomBytes(32),
      plainLength: 10,
      location: { segmentId, offset, length: 90, payloadChecksum: 0 },
    };
  };
  const hugeRefs = SCRUB_REFS_PER_CALL * 2 + 7;
  await store.transact(() => {
    control.createTenant(context, { id: 'acme' });
    objects.createBucket(context, { tenantId: 'acme', name: 'first', versioning: 'Enabled' });
    objects.createBucket(context, { tenantId: 'acme', name: 'second' });
    const put = (bucket: string, key: string, chunks: objects.ManifestChunk[]): void => {
      objects.putObject(context, {
        tenantId: 'acme',
        bucket,
        key,
        size: chunks.length * 10,
        etag: 'e',
        contentType: 'x',
        metadata: {},
        checksums: {},
        compressed: false,
        chunks,
      });
    };
    for (let index = 0; index < 600; index += 1) put('first', `k${index}`, [chunk()]);
    put('first', 'huge', Array.from({ length: hugeRefs }, chunk));
    objects.deleteObject(context, { tenantId: 'acme', bucket: 'first', key: 'k1' });
    for (let index = 0; index < 300; index += 1) put('second', `k${index}`, [chunk(), chunk()]);
  });
  const refs = 600 + hugeRefs + 600;

  const dry = await walk(context, { tenantId: 'acme', verify: false });
  t.ok(dry.calls >= 3, `the budget split the walk (${dry.calls} calls)`);
  t.match(dry.total, {
    buckets: 2,
    versions: 600 + 1 + 1 + 300,
    chunkRefs: refs,
    logicalBytes: refs * 10,
    chunksVerified: 0,
    corruptChunks: 0,
  });

  const verified = await walk(context, { tenantId: 'acme', bucket: 'second', verify: true });
  t.match(verified.total, {
    buckets: 1,
    versions: 300,
    chunkRefs: 600,
    corruptChunks: 600,
    chunksVerified: 0,
  });
  t.equal(
    verified.total.corrupt.length,
    100,
    'the list is bounded; every corrupt chunk is counted',
  );
  t.ok(
    verified.total.corrupt.every(
      (entry) =>
        entry.problem === 'segment_missing' &&
        entry.segmentId === segmentId &&
        entry.bucket === 'second',
    ),
  );

  const one = await walk(context, { tenantId: 'acme', bucket: 'second', verify: false });
  t.match(one.total, { buckets: 1, versions: 300, chunkRefs: 600 });
  await t.rejects(scrubTenantChunks(context, { tenantId: 'acme', bucket: 'none', verify: false }), {
    code: 'not_found',
  });
  await t.rejects(scrubTenantChunks(context, { tenantId: 'ghost', verify: false }), {
    code: 'not_found',
  });
});
