// Goal: an engine that restarts under a live writer (a gateway outliving its engine) never
// commits into a segment whose fdatasync failed before the restart, though its new handle of
// the segment hears of no failed write-back from before it was opened (Linux's errseq):
// - it refuses commits into the open segments of live writers it found at its start until
//   each writer has registered its segment again (`engine_unavailable`, 503: it just started);
// - the writer keeps a failure whose report was lost with the old engine and sends it again on
//   reconnecting, before it registers the segment again;
// - a failed write-back that only the writer's handle can still report (the old engine's
//   fdatasync failed, and its mark was not committed) is found by the writer's fdatasync at
//   the re-registration;
// - a healthy segment, registered again, takes commits as before.
// Method: the real SegmentWriter and SegmentSyncer on the fault-injecting file system of
// test/fault/fault-io.ts (a failed fdatasync drops the unsynced bytes and is reported once to
// every file open at the time), a real index with the engine's `watchedSegments`, and a
// "connection" whose engine can be taken down (a report sent meanwhile is lost).
import t, { type Test } from 'tap';
import { SegmentWriter } from '../../src/engine/segments/segment-writer.js';
import { SegmentSyncer } from '../../src/engine/segments/segment-syncer.js';
import { IndexStore } from '../../src/engine/index/store.js';
import {
  allocSegment,
  markSegmentFailed,
  sealSegment,
  watchedSegments,
} from '../../src/engine/ops/segments.js';
import type { EngineContext } from '../../src/engine/ops/context.js';
import { loadSettings } from '../../src/util/config.js';
import { ManualClock } from '../../src/util/clock.js';
import { EngineUnavailable, errorCode } from '../../src/util/errors.js';
import { chunkRecord, tempDir } from '../engine/segment-testing.js';
import { FaultDisk, NO_FAULTS } from './fault-io.js';

const SEGMENTS = '/lightwell-sim/segments';

interface Setup {
  readonly disk: FaultDisk;
  readonly context: EngineContext;
  readonly store: IndexStore;
  /** The engine the writer's connection reaches; undefined while it is down. */
  engine: SegmentSyncer | undefined;
  readonly writer: SegmentWriter;
}

function setUp(t: Test, seed: number): Setup {
  const store = IndexStore.open({ path: tempDir(t, 'lw-restart-'), readOnly: false });
  t.teardown(() => store.close());
  const clock = new ManualClock();
  const context: EngineContext = {
    store,
    masterKey: Buffer.alloc(32),
    settings: loadSettings({ flags: {} }),
    now: () => clock.now(),
  };
  const disk = new FaultDisk(seed, NO_FAULTS);
  const reach = (): SegmentSyncer => {
    if (!setup.engine) throw EngineUnavailable('lost the connection to the engine');
    return setup.engine;
  };
  const writer = new SegmentWriter({
    io: disk.io,
    segmentsDir: SEGMENTS,
    segmentBytesMax: 1024 * 1024,
    registry: {
      // A live writer: its owner (pid 1) outlives every engine.
      allocate: async () =>
        (await store.transact(() => allocSegment(context, { ownerPid: 1 }))).segmentId,
      seal: async (segmentId, size) => {
        await store.transact(() => sealSegment(context, { segmentId, size }));
      },
      failed: (segmentId) => reach().poison(segmentId),
      opened: (segmentId) => reach().hold(segmentId),
    },
  });
  const setup: Setup = { disk, context, store, engine: undefined, writer };
  setup.engine = startEngine(setup);
  return setup;
}

/** An engine's syncer as engine.ts builds it at its start (`watchSegments`). */
function startEngine(setup: Setup): SegmentSyncer {
  const { store, context } = setup;
  const syncer = new SegmentSyncer(SEGMENTS, setup.disk.io);
  store.refresh();
  const { failed, writing } = watchedSegments(context);
  syncer.load(failed);
  syncer.persist = async (segmentId) => {
    await store.transact(() => markSegmentFailed(context, { segmentId }));
  };
  syncer.expect(writing);
  return syncer;
}

/** The engine stops and a new one starts; the writer has not reconnected yet. */
function restartEngine(t: Test, setup: Setup): SegmentSyncer {
  setup.engine?.close();
  setup.engine = undefined;
  const restarted = startEngine(setup);
  t.teardown(() => restarted.close());
  return restarted;
}

async function commit(syncer: SegmentSyncer, segmentId: number): Promise<string> {
  return syncer.sync([segmentId]).then(
    () => 'synced',
    (error: unknown) => String(errorCode(error)),
  );
}

t.test('a failure whose report was lost with the old engine is sent again', async (t) => {
  const setup = setUp(t, 21);
  const { disk, writer } = setup;
  const first = await writer.append([chunkRecord(1000)]);
  await first.written();
  t.equal(await commit(setup.engine as SegmentSyncer, first.segmentId), 'synced');

  // The engine goes down; the writer's fdatasync of a new record fails meanwhile, and its
  // report is lost with the connection.
  setup.engine?.close();
  setup.engine = undefined;
  const lost = await writer.append([chunkRecord(1000)]);
  await lost.written();
  disk.faults = { ...NO_FAULTS, syncEio: 1 };
  const failed = await lost.durable().catch((error: unknown) => error);
  disk.faults = NO_FAULTS;
  t.equal(errorCode(failed), 'segment_io', "the writer's fdatasync failed");
  t.ok(writer.needsEngine, 'the writer keeps the failure it could not report');

  const restarted = restartEngine(t, setup);
  t.notOk(restarted.isPoisoned(lost.segmentId), 'the restarted engine does not know of it');
  t.equal(
    await commit(restarted, lost.segmentId),
    'engine_unavailable',
    'a commit into the segment before its writer registered it again is refused',
  );

  setup.engine = restarted;
  await writer.reregister();
  t.ok(restarted.isPoisoned(lost.segmentId), 'the writer sent the failure again');
  t.equal(await commit(restarted, lost.segmentId), 'segment_io', 'the segment stays refused');
  await writer.close();
});

t.test("a failed write-back only the writer's handle still reports is found", async (t) => {
  const setup = setUp(t, 22);
  const { disk, writer } = setup;
  const old = setup.engine as SegmentSyncer;
  const lost = await writer.append([chunkRecord(1000)]);
  await lost.written();
  // The old engine's own fdatasync fails, and it dies before its mark is committed.
  old.persist = () => Promise.reject(new Error('the engine died'));
  disk.faults = { ...NO_FAULTS, syncEio: 1 };
  t.equal(await commit(old, lost.segmentId), 'segment_io', "the old engine's fdatasync failed");
  disk.faults = NO_FAULTS;

  const restarted = restartEngine(t, setup);
  t.notOk(restarted.isPoisoned(lost.segmentId), 'no mark reached the index');
  t.equal(await commit(restarted, lost.segmentId), 'engine_unavailable', 'refused meanwhile');
  setup.engine = restarted;
  await writer.reregister();
  t.ok(restarted.isPoisoned(lost.segmentId), "the writer's own fdatasync reported the failure");
  t.equal(await commit(restarted, lost.segmentId), 'segment_io', 'and the segment is refused');
  const after = await lost.durable().catch((error: unknown) => error);
  t.equal(errorCode(after), 'segment_io', 'the record is not durable for the writer either');
  await writer.close();
});

t.test('a healthy segment registered again takes commits', async (t) => {
  const setup = setUp(t, 23);
  const { writer } = setup;
  const before = await writer.append([chunkRecord(1000)]);
  await before.written();
  const restarted = restartEngine(t, setup);
  t.equal(await commit(restarted, before.segmentId), 'engine_unavailable', 'refused at first');
  setup.engine = restarted;
  await writer.reregister();
  t.notOk(restarted.isPoisoned(before.segmentId), 'nothing failed');
  t.equal(await commit(restarted, before.segmentId), 'synced', 'a commit goes on after it');
  const after = await writer.append([chunkRecord(1000)]);
  await after.written();
  t.equal(after.segmentId, before.segmentId, 'the writer goes on in the same segment');
  t.equal(await commit(restarted, after.segmentId), 'synced', 'and its new records commit');
  t.ok(await writer.close(), 'the segment seals');
});

t.test('a commit waits for the re-registration when the engine is told to', async (t) => {
  const setup = setUp(t, 24);
  const { writer } = setup;
  const appended = await writer.append([chunkRecord(1000)]);
  await appended.written();
  setup.engine?.close();
  const restarted = new SegmentSyncer(SEGMENTS, setup.disk.io, 60_000);
  t.teardown(() => restarted.close());
  restarted.expect([appended.segmentId]);
  setup.engine = restarted;
  const waiting = commit(restarted, appended.segmentId);
  await writer.reregister();
  t.equal(await waiting, 'synced', 'the commit went on once the writer registered again');
  await writer.close();
});
