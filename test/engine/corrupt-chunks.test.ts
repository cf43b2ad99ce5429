// Goal: a corrupt chunk leaves a record in the index: what was found, where, when, by what and
// what was done. A GET of an object whose chunk is damaged answers 500 and the engine records
// the chunk (found by a read, read refused); a scheduled scrub records what it finds (found by
// a scrub, reported) in the commit of its outcome; a second report of a chunk updates its row
// (seen twice, first seen kept); a report whose place is no longer the chunk's (compaction moved
// it) records nothing; a bad report is refused; the rows are listed per tenant.
// Method: a data directory written by the real service with one payload byte flipped on disk
// (test/console/plant.ts), read back through the running service; then the scheduler and the
// commands over that index in process, with a clock moved by hand.
import t from 'tap';
import { join } from 'node:path';
import { IndexStore } from '../../src/engine/index/store.js';
import { DB, chunkKey, tenantKey, type TenantRecord } from '../../src/engine/index/schema.js';
import {
  corruptChunkKey,
  listCorruptChunks,
  reportCorruptChunk,
  type CorruptChunkRecord,
} from '../../src/engine/ops/corrupt-chunks.js';
import { ScrubScheduler, setScrubSchedule } from '../../src/engine/scrub-schedule.js';
import type { EngineContext } from '../../src/engine/ops/context.js';
import { ManualClock } from '../../src/util/clock.js';
import { loadSettings } from '../../src/util/config.js';
import { componentLogger } from '../../src/util/log.js';
import { Service } from '../helpers/service.js';
import { plantBadChunk } from '../console/plant.js';

t.test('corrupt chunks are recorded by reads and scrubs', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const owner = service.adminToken('owner');
  const acme = await service.tenant('acme', 'read,write,delete,admin', owner);
  t.equal((await acme.request('POST', '/buckets', { json: { name: 'acme-b' } })).status, 201);
  t.equal((await acme.put('acme-b', 'damaged', 'a body that will be damaged')).status, 200);
  const chunkId = await plantBadChunk(service.dataDir, 'acme', 'acme-b', 'damaged');

  const read = await acme.request('GET', '/buckets/acme-b/objects/damaged');
  t.equal(read.status, 500, 'the read fails loudly');
  const watcher = IndexStore.open({ path: join(service.dataDir, 'index'), readOnly: true });
  const tenant = watcher.get<TenantRecord>(DB.tenants, tenantKey('acme')) as TenantRecord;
  const key = corruptChunkKey(tenant.num, Buffer.from(chunkId, 'hex'));
  // The gateway reports after it answered; the engine commits the row a moment later.
  const recorded = async (seen: number): Promise<CorruptChunkRecord | undefined> => {
    let row: CorruptChunkRecord | undefined;
    for (let turn = 0; turn < 200 && (row?.seen ?? 0) < seen; turn += 1) {
      watcher.refresh();
      row = watcher.get<CorruptChunkRecord>(DB.meta, key);
      if ((row?.seen ?? 0) < seen) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return row;
  };
  let found = await recorded(1);
  t.ok(found, 'the engine recorded the chunk within 10 s of the failed read');
  // Later reads find the segment open and read small records without waiting: they report too.
  for (let again = 0; again < 2; again += 1)
    t.equal((await acme.request('GET', '/buckets/acme-b/objects/damaged')).status, 500);
  found = await recorded(3);
  t.equal(found?.seen, 3, 'every failed read counted within 10 s of the last');
  await watcher.close();
  t.match(found, {
    tenantNum: tenant.num,
    chunkId,
    reason: 'checksum',
    foundBy: 'read',
    action: 'read-refused',
    seen: 3,
  });
  await service.stop();

  const clock = new ManualClock(Date.UTC(2026, 11, 8));
  const store = IndexStore.open({ path: join(service.dataDir, 'index'), readOnly: false });
  t.teardown(() => store.close());
  const context: EngineContext = {
    store,
    masterKey: Buffer.alloc(0),
    settings: loadSettings({ flags: { data_dir: service.dataDir } }),
    now: () => clock.now(),
  };
  const first = store.get<CorruptChunkRecord>(DB.meta, key) as CorruptChunkRecord;
  await store.transact(() => setScrubSchedule(context, { target: 'acme', intervalHours: 1 }));
  clock.advance(3_600_000);
  const scheduler = new ScrubScheduler({ context, log: componentLogger('test') });
  t.equal(await scheduler.runDue(), 1, 'the scheduled scrub ran');
  const after = store.get<CorruptChunkRecord>(DB.meta, key) as CorruptChunkRecord;
  t.match(after, { seen: 4, firstSeenAt: first.firstSeenAt, lastSeenAt: clock.now() });
  t.match(after.reason, /payload/i, "the scrub's finding is the reason now");

  const entry = store.get<{ segmentId: number; offset: number; length: number }>(
    DB.chunks,
    chunkKey(tenant.num, Buffer.from(chunkId, 'hex')),
  );
  if (!entry) throw new Error('the chunk has no entry');
  const report = {
    tenantNum: tenant.num,
    chunkId,
    segmentId: entry.segmentId,
    offset: entry.offset,
    reason: 'checksum',
    foundBy: 'read' as const,
  };
  t.same(
    await store.transact(() => reportCorruptChunk(context, { ...report, offset: 1 })),
    { recorded: false },
    'a report of another place (the chunk moved since) records nothing',
  );
  t.same(
    await store.transact(() =>
      reportCorruptChunk(context, { ...report, chunkId: 'ab'.repeat(32) }),
    ),
    { recorded: false },
    'nor one of a chunk without an entry',
  );
  await t.rejects(
    store.transact(() => reportCorruptChunk(context, { ...report, chunkId: 'not hex' })),
    { code: 'bad_request' },
  );
  const listed = listCorruptChunks(context, { tenantNum: tenant.num });
  t.same(
    listed.chunks.map((chunk) => chunk.chunkId),
    [chunkId],
    "the tenant's corrupt chunks",
  );
  t.equal(listed.truncated, false);
  t.same(listCorruptChunks(context, { tenantNum: tenant.num + 1 }).chunks, [], 'not another');
});
