// Goal: a segment whose fdatasync failed is never synced as good again, not after an engine
// restart, and not in the moment between a writer's failed fdatasync and the engine hearing of
// it:
// - the failure is kept in the segment's index record (`syncFailedAt`), committed before the
//   commit that met it is refused and before a writer's report of it is answered, and a
//   restarted engine's syncer loads it and refuses the segment, while a new handle's fdatasync
//   of it succeeds (the hazard: Linux reports a failed write-back once per open file);
// - an engine syncer that held its handle from the segment's creation (`hold`, the writer's
//   `opened`) sees a writer's failed write-back on its own fdatasync while the writer's report
//   is still on its way; one that opened its handle late does not.
// Method: the real SegmentWriter and SegmentSyncer on the fault-injecting file system of
// test/fault/fault-io.ts (a failed fdatasync drops the unsynced bytes and is reported once to
// every file open at the time), and a real index in a temporary directory with the engine's
// `markSegmentFailed` / `watchedSegments`.
import t, { type Test } from 'tap';
import { SegmentWriter } from '../../src/engine/segments/segment-writer.js';
import { SegmentSyncer } from '../../src/engine/segments/segment-syncer.js';
import { IndexStore } from '../../src/engine/index/store.js';
import { DB, segmentKey, type SegmentRecord } from '../../src/engine/index/schema.js';
import {
  allocSegment,
  markSegmentFailed,
  sealSegment,
  watchedSegments,
} from '../../src/engine/ops/segments.js';
import type { EngineContext } from '../../src/engine/ops/context.js';
import { loadSettings } from '../../src/util/config.js';
import { ManualClock } from '../../src/util/clock.js';
import { errorCode } from '../../src/util/errors.js';
import { chunkRecord, RecordingRegistry, tempDir } from '../engine/segment-testing.js';
import { FaultDisk, NO_FAULTS } from './fault-io.js';

const SEGMENTS = '/lightwell-sim/segments';

interface Engine {
  readonly context: EngineContext;
  readonly store: IndexStore;
}

function openEngine(t: Test): Engine {
  const store = IndexStore.open({ path: tempDir(t, 'lw-poison-'), readOnly: false });
  t.teardown(() => store.close());
  const clock = new ManualClock();
  const context: EngineContext = {
    store,
    masterKey: Buffer.alloc(32),
    settings: loadSettings({ flags: {} }),
    now: () => clock.now(),
  };
  return { context, store };
}

/** An engine's syncer as engine.ts builds it: marks loaded at start, new ones committed. */
function engineSyncer(engine: Engine, disk: FaultDisk): SegmentSyncer {
  const syncer = new SegmentSyncer(SEGMENTS, disk.io);
  syncer.load(watchedSegments(engine.context).failed);
  syncer.persist = async (segmentId) => {
    await engine.store.transact(() => markSegmentFailed(engine.context, { segmentId }));
  };
  return syncer;
}

/** A writer registered in the engine's index, as a gateway's, reporting to `syncer`. */
function gatewayWriter(
  engine: Engine,
  disk: FaultDisk,
  report: { failed: (segmentId: number) => Promise<void>; opened?: (id: number) => Promise<void> },
): SegmentWriter {
  return new SegmentWriter({
    io: disk.io,
    segmentsDir: SEGMENTS,
    segmentBytesMax: 1024 * 1024,
    registry: {
      allocate: async () =>
        (await engine.store.transact(() => allocSegment(engine.context, { ownerPid: 1 })))
          .segmentId,
      seal: async (segmentId, size) => {
        await engine.store.transact(() => sealSegment(engine.context, { segmentId, size }));
      },
      ...report,
    },
  });
}

function segmentRecord(engine: Engine, segmentId: number): SegmentRecord | undefined {
  engine.store.refresh();
  return engine.store.get<SegmentRecord>(DB.segments, segmentKey(segmentId));
}

t.test("the engine's own failed fdatasync is kept across a restart", async (t) => {
  const disk = new FaultDisk(7, NO_FAULTS);
  const engine = openEngine(t);
  const syncer = engineSyncer(engine, disk);
  const writer = gatewayWriter(engine, disk, {
    failed: (segmentId) => syncer.poison(segmentId),
    opened: (segmentId) => syncer.hold(segmentId),
  });
  const first = await writer.append([chunkRecord(1000)]);
  await first.written();
  await syncer.sync([first.segmentId]);
  const lost = await writer.append([chunkRecord(1000)]);
  await lost.written();

  disk.faults = { ...NO_FAULTS, syncEio: 1 };
  const failed = await syncer.sync([lost.segmentId]).catch((error: unknown) => error);
  disk.faults = NO_FAULTS;
  t.equal(errorCode(failed), 'segment_io', 'the commit that met the failure is refused');
  t.type(segmentRecord(engine, lost.segmentId)?.syncFailedAt, 'number', 'and the mark is kept');
  syncer.close();

  // The engine restarts; the gateway's writer lives on, and a commit of the lost record comes.
  const forgetful = new SegmentSyncer(SEGMENTS, disk.io);
  t.teardown(() => forgetful.close());
  await forgetful.sync([lost.segmentId]);
  t.pass('a new handle fdatasyncs the segment without an error (what the mark guards against)');
  const restarted = engineSyncer(engine, disk);
  t.teardown(() => restarted.close());
  t.ok(restarted.isPoisoned(lost.segmentId), 'the restarted engine loaded the mark');
  const again = await restarted.sync([lost.segmentId]).catch((error: unknown) => error);
  t.equal(errorCode(again), 'segment_io', 'and refuses a commit into the segment');
  await writer.close();
});

t.test("a writer's failed fdatasync is kept across a restart", async (t) => {
  const disk = new FaultDisk(8, NO_FAULTS);
  const engine = openEngine(t);
  const syncer = engineSyncer(engine, disk);
  const writer = gatewayWriter(engine, disk, {
    failed: (segmentId) => syncer.poison(segmentId),
    opened: (segmentId) => syncer.hold(segmentId),
  });
  const appended = await writer.append([chunkRecord(1000)]);
  disk.faults = { ...NO_FAULTS, syncEio: 1 };
  const failed = await appended.durable().catch((error: unknown) => error);
  disk.faults = NO_FAULTS;
  t.equal(errorCode(failed), 'segment_io', "the writer's own fdatasync failed");
  t.type(
    segmentRecord(engine, appended.segmentId)?.syncFailedAt,
    'number',
    'its report was answered once the mark was committed',
  );
  await writer.close();
  syncer.close();
  t.equal(segmentRecord(engine, appended.segmentId)?.state, 'sealed', 'the segment is sealed');
  t.type(segmentRecord(engine, appended.segmentId)?.syncFailedAt, 'number', 'marked still');
  const restarted = engineSyncer(engine, disk);
  t.teardown(() => restarted.close());
  const again = await restarted.sync([appended.segmentId]).catch((error: unknown) => error);
  t.equal(errorCode(again), 'segment_io', 'a restarted engine refuses it');
});

/**
 * A writer whose fdatasync fails while its report to the engine is held back: answers what the
 * engine's sync of the segment does meanwhile.
 */
async function syncDuringReport(t: Test, held: boolean): Promise<unknown> {
  const disk = new FaultDisk(9, NO_FAULTS);
  const engine = openEngine(t);
  const syncer = new SegmentSyncer(SEGMENTS, disk.io);
  t.teardown(() => syncer.close());
  let reported!: () => void;
  const reporting = new Promise<void>((resolve) => (reported = resolve));
  let deliver!: () => void;
  const delivered = new Promise<void>((resolve) => (deliver = resolve));
  const writer = gatewayWriter(engine, disk, {
    // The report is on its way: the engine has not heard of it yet.
    failed: async (segmentId) => {
      reported();
      await delivered;
      await syncer.poison(segmentId);
    },
    ...(held ? { opened: (segmentId: number) => syncer.hold(segmentId) } : {}),
  });
  const appended = await writer.append([chunkRecord(1000)]);
  await appended.written();
  disk.faults = { ...NO_FAULTS, syncEio: 1 };
  const writerSync = appended.durable().catch((error: unknown) => error);
  await reporting;
  disk.faults = NO_FAULTS;
  // A commit of the record reaches the engine before the writer's report does.
  const outcome = await syncer.sync([appended.segmentId]).then(
    () => 'synced',
    (error: unknown) => error,
  );
  deliver();
  t.equal(errorCode(await writerSync), 'segment_io', "the writer's fdatasync failed");
  await writer.close();
  return outcome;
}

t.test(
  "the engine's handle, held from the segment's creation, sees a writer's failure",
  async (t) => {
    const outcome = await syncDuringReport(t, true);
    t.equal(errorCode(outcome), 'segment_io', 'the commit is refused before the report arrives');
  },
);

t.test('a handle opened after the failure would not see it (why the handle is held)', async (t) => {
  const outcome = await syncDuringReport(t, false);
  t.equal(outcome, 'synced', "a late handle's fdatasync succeeds over the lost record");
});

t.test('a held handle is not evicted by the syncs of many other segments', async (t) => {
  const disk = new FaultDisk(10, NO_FAULTS);
  const engine = openEngine(t);
  const syncer = new SegmentSyncer(SEGMENTS, disk.io);
  t.teardown(() => syncer.close());
  const writer = gatewayWriter(engine, disk, {
    // The report never arrives: only the held handle can tell the engine.
    failed: () => Promise.resolve(),
    opened: (segmentId) => syncer.hold(segmentId),
  });
  const appended = await writer.append([chunkRecord(1000)]);
  await appended.written();
  // More segments than the syncer keeps handles of (256), one record each, each synced.
  const registry = new RecordingRegistry();
  registry.next = 1000;
  const others = new SegmentWriter({
    io: disk.io,
    segmentsDir: SEGMENTS,
    segmentBytesMax: 64 + 200,
    registry,
  });
  const ids = new Set<number>();
  for (let i = 0; i < 300; i += 1) {
    const other = await others.append([chunkRecord(100)]);
    await other.written();
    await syncer.sync([other.segmentId]);
    ids.add(other.segmentId);
  }
  t.ok(ids.size >= 300, `${ids.size} other segments synced`);
  await others.close();
  disk.faults = { ...NO_FAULTS, syncEio: 1 };
  const failed = await appended.durable().catch((error: unknown) => error);
  disk.faults = NO_FAULTS;
  t.equal(errorCode(failed), 'segment_io', "the writer's fdatasync failed");
  const outcome = await syncer.sync([appended.segmentId]).catch((error: unknown) => error);
  t.equal(errorCode(outcome), 'segment_io', 'the held handle reports it to the engine');
  await writer.close();
});
