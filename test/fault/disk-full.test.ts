// Goal: a full disk refuses new writes with `disk_full` (503, which reaches clients as
// `unavailable` with Retry-After), not a 500 fault, acknowledges none of them, and writes
// resume on the same writer, without a restart, once space returns; records written before
// stay readable throughout.
// And the uploads' writers leave the last bytes of the file system free (the room the engine's
// index commits and compaction need), even when many appends pass the check at once; the
// engine's own writers may go on into half of that room.
// Method: the segment writer and reader on the fault-injecting file system of
// test/fault/fault-io.ts, with ENOSPC on every write while the disk is "full", and on a disk
// with a capacity.
import t from 'tap';
import { SegmentWriter, engineSpaceFloorFor } from '../../src/engine/segments/segment-writer.js';
import { SegmentReader } from '../../src/engine/segments/segment-reader.js';
import { errorCode } from '../../src/util/errors.js';
import { toProblem } from '../../src/http/error-answer.js';
import { chunkRecord, RecordingRegistry } from '../engine/segment-testing.js';
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
