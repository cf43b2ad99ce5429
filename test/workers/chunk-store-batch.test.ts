// Goal: a batch of small bodies (`storeChunks`, an ingest stream's turn) whose segment breaks
// part way fails only the bodies from the break on: the bodies whose records were written whole
// before it stand, with their locations, as each would have alone.
// Method: the real storeChunks and SegmentWriter on the fault-injecting file system of
// test/fault/fault-io.ts, with its second write of the segment's records failed (EIO); the
// batch is large enough (more records than one writev takes) to be written in three groups, the
// second of which fails while the third is written whole.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { storeChunks, Failed, type ChunkStoreDeps } from '../../src/workers/chunk-store.js';
import { SegmentWriter } from '../../src/engine/segments/segment-writer.js';
import { SegmentReader } from '../../src/engine/segments/segment-reader.js';
import { IndexStore } from '../../src/engine/index/store.js';
import { errorCode } from '../../src/util/errors.js';
import type { Io } from '../../src/util/io.js';
import { RecordingRegistry, tempDir } from '../engine/segment-testing.js';
import { FaultDisk, NO_FAULTS } from '../fault/fault-io.js';

const SEGMENTS = '/lightwell-batch/segments';
const BODIES = 700;

/** The disk's Io, with the `failing`-th writev of any file failed with EIO. */
function failingWritev(io: Io, failing: number): Io {
  let writevs = 0;
  return {
    ...io,
    async open(path, flags, mode) {
      const file = await io.open(path, flags, mode);
      return {
        ...file,
        read: file.read.bind(file),
        write: file.write.bind(file),
        datasync: file.datasync.bind(file),
        sync: file.sync.bind(file),
        truncate: file.truncate.bind(file),
        stat: file.stat.bind(file),
        close: file.close.bind(file),
        async writev(buffers, position) {
          writevs += 1;
          if (writevs === failing) {
            const error: NodeJS.ErrnoException = new Error('EIO: write failed (injected)');
            error.code = 'EIO';
            throw error;
          }
          return file.writev(buffers, position);
        },
      };
    },
  };
}

t.test('a break part way through a batch fails only the bodies from it on', async (t) => {
  const disk = new FaultDisk(5, NO_FAULTS);
  const writer = new SegmentWriter({
    io: failingWritev(disk.io, 2),
    segmentsDir: SEGMENTS,
    segmentBytesMax: 64 * 1024 * 1024,
    registry: new RecordingRegistry(),
  });
  const store = IndexStore.open({ path: tempDir(t, 'lw-batch-'), readOnly: false });
  t.teardown(() => store.close());
  const deps: ChunkStoreDeps = {
    index: () => store,
    writer: () => writer,
    reader: () => new SegmentReader(SEGMENTS, { io: disk.io }),
    deadChunkGraceMs: 0,
  };
  const keys = { tenantNum: 1, dataKey: randomBytes(32), dedupKey: randomBytes(32) };
  const inputs = Array.from({ length: BODIES }, () => ({
    keys,
    bytes: randomBytes(100),
    objectChecksums: [],
  }));
  const results = await storeChunks(deps, inputs);
  const failedAt = results.findIndex((result) => result instanceof Failed);
  t.ok(failedAt > 0 && failedAt < BODIES, `the segment broke part way (at body ${failedAt})`);
  const before = results.slice(0, failedAt);
  t.ok(
    before.every((result) => !(result instanceof Failed) && result.location !== undefined),
    'every body before the break stands, with its location',
  );
  const after = results.slice(failedAt);
  t.ok(
    after.every((result) => result instanceof Failed && errorCode(result.error) === 'segment_io'),
    'every body from the break on failed with segment_io',
  );
  await writer.close();
});
