// Goal: a full disk refuses new writes with `disk_full` (503, which reaches clients as
// `unavailable` with Retry-After), not a 500 fault, acknowledges none of them, and writes
// resume on the same writer, without a restart, once space returns; records written before
// stay readable throughout.
// Method: the segment writer and reader on the fault-injecting file system of
// test/fault/fault-io.ts, with ENOSPC on every write while the disk is "full".
import t from 'tap';
import { SegmentWriter } from '../../src/engine/segments/segment-writer.js';
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
