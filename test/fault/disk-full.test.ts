// Goal: a full disk refuses new writes with `disk_full` (503, which reaches clients as
// `unavailable` with Retry-After), not a 500 fault, acknowledges none of them, and writes
// resume on the same writer, without a restart, once space returns; records written before
// stay readable throughout.
// And the uploads' writers leave the last bytes of the file system free (the room the engine's
// index commits and compaction need), even when many appends pass the check at once; the
// engine's own writers may go on into half of that room.
// A seal that finds the disk full (its footer's write) is done by the same writer once space
// returns, not left open until a restart's recovery.
// Method: the segment writer and reader on the fault-injecting file system of
// test/fault/fault-io.ts, with ENOSPC on every write while the disk is "full", and on a disk
// with a capacity.
import t from 'tap';
import { SegmentWriter, engineSpaceFloorFor } from '../../src/engine/segments/segment-writer.js';
import { SegmentReader } from '../../src/engine/segments/segment-reader.js';
import { errorCode } from '../../src/util/errors.js';
import { toProblem } from '../../src/http/error-answer.js';
import { chunkRecord, RecordingRegistry } from '../engine/segment-testing.js';
import { scanSegment } from '../../src/engine/segments/segment-scan.js';
import { SEAL_RECORD_SIZE } from '../../src/format/seal-footer.js';
import { segmentFileName } from '../../src/format/segment-header.js';
import { FaultDisk, NO_FAULTS } from './fault-io.js';

t.test('ENOSPC: disk_full while full, writes resume when space returns', async (t) => {
  const disk = new FaultDisk(1, NO_FAULTS);
  const dir = '/lightwell-sim/segments';
  const writer = new SegmentWriter({
    io: disk.io,
    segmentsDir: dir,
    registry: new RecordingRegistry(),
    segmentBytesMax: 1024 * 1024,
  });
  const reader = new SegmentReader(dir, { io: disk.io });
  t.teardown(() => reader.close());
  const before = chunkRecord(1000);
  const kept = await writer.append([before]);
  await kept.durable();

  disk.faults = { ...NO_FAULTS, enospc: 1 };
  for (let attempt = 0; attempt < 3; attempt += 1) {
    const failed = await writer
      .append([chunkRecord(1000)])
      .then((appended) => appended.durable())
      .catch((error: unknown) => error);
    t.equal(errorCode(failed), 'disk_full', `attempt ${attempt + 1}: disk_full`);
    const problem = toProblem(failed);
    t.same([problem.status, problem.code], [503, 'unavailable'], 'a client sees 503');
  }
  t.same(await reader.read(kept), before, 'what was written before still reads back');

  disk.faults = NO_FAULTS;
  const after = chunkRecord(1000);
  const appended = await writer.append([after]);
  await appended.durable();
  t.same(await reader.read(appended), after, 'the next write after space returned is durable');
  t.ok(await writer.close(), 'and the writer closes cleanly');
});

t.test('uploads leave the floor free, appends at once included', async (t) => {
  // A 1 MiB disk: the uploads' floor is a thirty-second of it, 32 KiB.
  const disk = new FaultDisk(2, NO_FAULTS, { capacity: 1024 * 1024 });
  const writer = new SegmentWriter({
    io: disk.io,
    segmentsDir: '/lightwell-sim/segments',
    registry: new RecordingRegistry(),
    segmentBytesMax: 4 * 1024 * 1024,
  });
  let refused: unknown;
  let accepted = 0;
  while (refused === undefined && accepted < 1000) {
    // Eight appends at once, so that they pass the check together.
    const round = await Promise.allSettled(
      Array.from({ length: 8 }, () =>
        writer.append([chunkRecord(3000)]).then((appended) => appended.durable()),
      ),
    );
    for (const outcome of round)
      if (outcome.status === 'fulfilled') accepted += 1;
      else refused ??= outcome.reason;
  }
  t.ok(accepted > 100, `${accepted} appends before the floor`);
  t.equal(errorCode(refused), 'disk_full', `the first refusal is disk_full: ${String(refused)}`);
  t.ok(disk.free() >= 32 * 1024 - 200, `${disk.free()} bytes left free (the floor, less a footer)`);
  const engineRegistry = new RecordingRegistry();
  engineRegistry.next = 100;
  const engineWriter = new SegmentWriter({
    io: disk.io,
    segmentsDir: '/lightwell-sim/segments',
    registry: engineRegistry,
    segmentBytesMax: 4 * 1024 * 1024,
    spaceFloor: engineSpaceFloorFor,
  });
  await (await engineWriter.append([chunkRecord(3000)])).durable();
  t.pass("the engine's own writers go on under the uploads' floor, down to half of it");
  await writer.close();
  await engineWriter.close();
});

t.test(
  'a seal that found the disk full is done once space returns, without a restart',
  async (t) => {
    const disk = new FaultDisk(3, NO_FAULTS);
    const dir = '/lightwell-sim/segments';
    const registry = new RecordingRegistry();
    // Two 1000-byte chunk records (1080 bytes each) fill a segment.
    const writer = new SegmentWriter({
      io: disk.io,
      segmentsDir: dir,
      registry,
      segmentBytesMax: 64 + 2 * 1080,
    });
    const reader = new SegmentReader(dir, { io: disk.io });
    t.teardown(() => reader.close());
    const records = [chunkRecord(1000), chunkRecord(1000)];
    const kept = [];
    for (const record of records) {
      const appended = await writer.append([record]);
      await appended.written();
      kept.push(appended);
    }
    const full = kept[0]?.segmentId as number;

    disk.faults = { ...NO_FAULTS, enospc: 1 };
    // The next append retires the full segment: its footer's write finds no room.
    const refused = await writer.append([chunkRecord(1000)]).catch((error: unknown) => error);
    t.equal(errorCode(refused), 'disk_full', 'the append that needed a new segment: disk_full');
    await writer.sealsSettled();
    t.notOk(
      registry.sealed.some((seal) => seal.segmentId === full),
      'the full segment could not be sealed',
    );

    disk.faults = NO_FAULTS;
    const after = await writer.append([chunkRecord(1000)]);
    await after.written();
    await writer.sealsSettled();
    const sealed = registry.sealed.find((seal) => seal.segmentId === full);
    t.equal(sealed?.size, 64 + 2 * 1080 + SEAL_RECORD_SIZE, 'once space returned it was sealed');
    const path = `${dir}/${segmentFileName(full)}`;
    const scan = await scanSegment(path, () => undefined, { withBytes: false, io: disk.io });
    t.ok(scan.sealed, 'its file ends in a seal footer');
    t.equal(scan.records, 2, 'after both of its records');
    for (const [index, appended] of kept.entries())
      t.same(await reader.read(appended), records[index], `record ${index + 1} reads back`);
    t.ok(await writer.close(), 'the writer closes cleanly');
  },
);
