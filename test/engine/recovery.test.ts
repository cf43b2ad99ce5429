// Goal: recovery of segments left open by dead writers. A torn tail of any shape is cut at the
// end of the last intact record and the segment is sealed there with a seal footer (the shape a
// writer's seal has, which the scan then checks); nothing an index entry
// points at is ever cut; the open segments of live writers (and, in the periodic pass, of this
// process) are left alone; segment files the index does not know are quarantined as `.orphan`,
// never deleted.
// Method: a real data directory and LMDB index in a temporary directory. Segments are
// registered with the engine's own allocSegment command under the pid of a process that has
// exited, their files written with valid records and then damaged byte by byte; then
// recoverSegments runs and the files and index entries are checked.
import t from 'tap';
import {
  writeFileSync,
  readFileSync,
  statSync,
  existsSync,
  readdirSync,
  appendFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { IndexStore } from '../../src/engine/index/store.js';
import {
  DB,
  segmentKey,
  chunkKey,
  type SegmentRecord,
  type ChunkRecord,
} from '../../src/engine/index/schema.js';
import { dataDirPaths, prepareDataDir, type DataDirPaths } from '../../src/engine/data-dir.js';
import { allocSegment } from '../../src/engine/ops/segments.js';
import { recoverSegments } from '../../src/engine/segments/recovery.js';
import { scanSegment } from '../../src/engine/segments/segment-scan.js';
import {
  encodeSegmentHeader,
  segmentFileName,
  SEGMENT_HEADER_SIZE,
} from '../../src/format/segment-header.js';
import { encodeSealFooter, SEAL_RECORD_SIZE } from '../../src/format/seal-footer.js';
import { RECORD_HEADER_SIZE } from '../../src/format/record-frame.js';
import { loadSettings } from '../../src/util/config.js';
import { componentLogger } from '../../src/util/log.js';
import type { EngineContext } from '../../src/engine/ops/context.js';
import { tempDir, chunkRecord, deadPid, type TapLike } from './segment-testing.js';

const log = componentLogger('test.recovery');

interface Fixture {
  paths: DataDirPaths;
  store: IndexStore;
  context: EngineContext;
}

async function fixture(t: TapLike): Promise<Fixture> {
  const paths = dataDirPaths(tempDir(t, 'lw-recovery-'));
  await prepareDataDir(paths);
  const store = IndexStore.open({ path: paths.index, readOnly: false });
  t.teardown(() => store.close());
  const context: EngineContext = {
    store,
    masterKey: Buffer.alloc(32),
    settings: loadSettings({}),
    now: () => Date.now(),
  };
  return { paths, store, context };
}

async function register(fx: Fixture, ownerPid: number): Promise<number> {
  return (await fx.store.transact(() => allocSegment(fx.context, { ownerPid }))).segmentId;
}

function segmentPath(fx: Fixture, segmentId: number): string {
  return join(fx.paths.segments, segmentFileName(segmentId));
}

/** Writes header + records; returns the end offset of each record. */
function writeSegment(path: string, segmentId: number, records: readonly Buffer[]): number[] {
  const ends: number[] = [];
  let offset = SEGMENT_HEADER_SIZE;
  for (const record of records) {
    offset += record.length;
    ends.push(offset);
  }
  writeFileSync(
    path,
    Buffer.concat([encodeSegmentHeader({ segmentId, createdAtMs: Date.now() }), ...records]),
  );
  return ends;
}

function segmentRecord(fx: Fixture, segmentId: number): SegmentRecord | undefined {
  fx.store.refresh();
  return fx.store.get<SegmentRecord>(DB.segments, segmentKey(segmentId));
}

t.test('torn tails of every shape are cut at the last intact record', async (t) => {
  const fx = await fixture(t);
  const dead = deadPid();
  const shapes: Array<{ name: string; build: (path: string, id: number) => number }> = [
    {
      name: 'clean end: nothing to cut',
      build: (path, id) =>
        writeSegment(path, id, [chunkRecord(500), chunkRecord(700)]).at(-1) as number,
    },
    {
      name: 'header only',
      build: (path, id) => {
        writeSegment(path, id, []);
        return SEGMENT_HEADER_SIZE;
      },
    },
    {
      name: 'a partial record header',
      build: (path, id) => {
        const keep = writeSegment(path, id, [chunkRecord(500), chunkRecord(700)]).at(-1) as number;
        appendFileSync(path, chunkRecord(900).subarray(0, 30));
        return keep;
      },
    },
    {
      name: 'a whole header and part of the payload',
      build: (path, id) => {
        const keep = writeSegment(path, id, [chunkRecord(500)]).at(-1) as number;
        appendFileSync(path, chunkRecord(9000).subarray(0, RECORD_HEADER_SIZE + 4000));
        return keep;
      },
    },
    {
      name: 'a whole record with a flipped payload bit',
      build: (path, id) => {
        const bad = chunkRecord(3000);
        bad[RECORD_HEADER_SIZE + 1234] = (bad[RECORD_HEADER_SIZE + 1234] as number) ^ 0x10;
        return writeSegment(path, id, [chunkRecord(500), chunkRecord(600), bad]).at(-2) as number;
      },
    },
    {
      name: 'a hole of zeros (a later write landed, an earlier one never did)',
      build: (path, id) => {
        const keep = writeSegment(path, id, [chunkRecord(500)]).at(-1) as number;
        appendFileSync(path, Buffer.concat([Buffer.alloc(5000), chunkRecord(200)]));
        return keep;
      },
    },
    {
      name: 'intact records behind a damaged one are cut with it',
      build: (path, id) => {
        const bad = chunkRecord(1000);
        bad[10] = (bad[10] as number) ^ 0xff; // header checksum fails
        return writeSegment(path, id, [
          chunkRecord(400),
          bad,
          chunkRecord(300),
          chunkRecord(300),
        ])[0] as number;
      },
    },
    {
      name: 'random garbage',
      build: (path, id) => {
        const keep = writeSegment(path, id, [chunkRecord(400), chunkRecord(400)]).at(-1) as number;
        appendFileSync(path, randomBytes(777));
        return keep;
      },
    },
    {
      name: 'a torn seal footer',
      build: (path, id) => {
        const keep = writeSegment(path, id, [chunkRecord(400)]).at(-1) as number;
        appendFileSync(
          path,
          encodeSealFooter({ recordCount: 1, dataEnd: keep, sealedAtMs: Date.now() }).subarray(
            0,
            100,
          ),
        );
        return keep;
      },
    },
    {
      name: 'a partial segment header',
      build: (path, id) => {
        writeFileSync(
          path,
          encodeSegmentHeader({ segmentId: id, createdAtMs: Date.now() }).subarray(0, 20),
        );
        return 0;
      },
    },
    {
      name: 'registered, but the file was never created',
      build: () => 0,
    },
  ];
  const cases: Array<{ name: string; id: number; keep: number; before: number }> = [];
  for (const shape of shapes) {
    const id = await register(fx, dead);
    const path = segmentPath(fx, id);
    const keep = shape.build(path, id);
    cases.push({ name: shape.name, id, keep, before: existsSync(path) ? statSync(path).size : 0 });
  }
  const report = await recoverSegments({ paths: fx.paths, store: fx.store, log });
  t.equal(report.recovered, shapes.length, 'every open segment of the dead writer was recovered');
  t.equal(report.quarantined, 0);
  t.equal(report.damaged, 0);
  t.equal(
    report.truncatedBytes,
    cases.reduce((sum, entry) => sum + entry.before - entry.keep, 0),
    'the report counts the bytes cut',
  );
  for (const entry of cases) {
    const path = segmentPath(fx, entry.id);
    const record = segmentRecord(fx, entry.id);
    t.equal(record?.state, 'sealed', `${entry.name}: sealed`);
    t.equal(record?.ownerPid, undefined, `${entry.name}: no owner any more`);
    // One sealed shape: cut after the last intact record, then a seal footer (a file with a
    // header; one without is sealed empty).
    const sealedSize = entry.keep >= SEGMENT_HEADER_SIZE ? entry.keep + SEAL_RECORD_SIZE : 0;
    t.equal(record?.size, sealedSize, `${entry.name}: sealed after the last intact record`);
    if (!existsSync(path)) {
      t.equal(entry.keep, 0, `${entry.name}: no file, size 0`);
      continue;
    }
    t.equal(statSync(path).size, sealedSize || entry.keep, `${entry.name}: cut there, footer on`);
    if (entry.keep >= SEGMENT_HEADER_SIZE) {
      const scan = await scanSegment(path, () => undefined, { withBytes: false });
      t.notOk(scan.torn, `${entry.name}: scans clean now`);
      t.ok(scan.sealed, `${entry.name}: ends in a footer that agrees with it`);
      t.equal(scan.validEnd, sealedSize, `${entry.name}: the footer names the cut`);
    }
  }
  const again = await recoverSegments({ paths: fx.paths, store: fx.store, log });
  t.same(
    again,
    { recovered: 0, truncatedBytes: 0, damaged: 0, quarantined: 0 },
    'recovery is idempotent',
  );
});

t.test('live writers are left alone; this process only at start', async (t) => {
  const fx = await fixture(t);
  const live = await register(fx, process.ppid);
  writeSegment(segmentPath(fx, live), live, [chunkRecord(100)]);
  appendFileSync(segmentPath(fx, live), Buffer.alloc(100)); // a write in progress, say
  const own = await register(fx, process.pid);
  writeSegment(segmentPath(fx, own), own, [chunkRecord(100)]);
  appendFileSync(segmentPath(fx, own), Buffer.alloc(100));

  let report = await recoverSegments({ paths: fx.paths, store: fx.store, log, includeOwn: false });
  t.equal(report.recovered, 0, 'the periodic pass touches no open segment of a live process');
  t.equal(segmentRecord(fx, live)?.state, 'open');
  t.equal(segmentRecord(fx, own)?.state, 'open', "the compactor's own open segment stays open");
  t.equal(statSync(segmentPath(fx, own)).size, SEGMENT_HEADER_SIZE + 180 + 100, 'and uncut');

  report = await recoverSegments({ paths: fx.paths, store: fx.store, log });
  t.equal(
    report.recovered,
    1,
    'at start, an open segment with this pid belongs to an earlier process',
  );
  t.equal(segmentRecord(fx, own)?.state, 'sealed');
  t.equal(segmentRecord(fx, live)?.state, 'open', 'a live writer is never recovered');
  t.equal(statSync(segmentPath(fx, live)).size, SEGMENT_HEADER_SIZE + 180 + 100);
});

t.test('a tail that an index entry points into is not cut', async (t) => {
  const fx = await fixture(t);
  const id = await register(fx, deadPid());
  const records = [chunkRecord(400), chunkRecord(400), chunkRecord(400)];
  const ends = writeSegment(segmentPath(fx, id), id, records);
  // Damage the middle record; the last one is intact and referenced.
  const bytes = readFileSync(segmentPath(fx, id));
  bytes[(ends[0] as number) + RECORD_HEADER_SIZE + 5] =
    (bytes[(ends[0] as number) + RECORD_HEADER_SIZE + 5] as number) ^ 1;
  writeFileSync(segmentPath(fx, id), bytes);
  const chunkId = randomBytes(32);
  await fx.store.transact(() =>
    fx.store.put(DB.chunks, chunkKey(1, chunkId), {
      segmentId: id,
      offset: ends[1] as number,
      length: (records[2] as Buffer).length,
      plainLength: 400,
      payloadChecksum: 0,
      refs: 1,
    } satisfies ChunkRecord),
  );
  const report = await recoverSegments({ paths: fx.paths, store: fx.store, log });
  t.equal(report.damaged, 1, 'counted as damaged');
  t.equal(report.truncatedBytes, 0, 'nothing cut');
  t.equal(statSync(segmentPath(fx, id)).size, bytes.length, 'the file is whole');
  t.same(readFileSync(segmentPath(fx, id)), bytes, 'byte for byte');
  t.match(
    segmentRecord(fx, id),
    { state: 'sealed', size: bytes.length },
    'sealed at its full size, for an operator to look at',
  );
});

t.test('unknown segment files are quarantined as .orphan, never deleted', async (t) => {
  const fx = await fixture(t);
  const known = await register(fx, deadPid());
  writeSegment(segmentPath(fx, known), known, [chunkRecord(100)]);
  const strangerPath = segmentPath(fx, 4242);
  writeSegment(strangerPath, 4242, [chunkRecord(1000)]);
  const stranger = readFileSync(strangerPath);
  writeFileSync(join(fx.paths.segments, 'notes.txt'), 'not a segment');
  const report = await recoverSegments({ paths: fx.paths, store: fx.store, log });
  t.equal(report.quarantined, 1);
  t.notOk(existsSync(strangerPath), 'the unknown file no longer has a segment name');
  t.same(readFileSync(`${strangerPath}.orphan`), stranger, 'its bytes are kept as .orphan');
  t.ok(existsSync(join(fx.paths.segments, 'notes.txt')), 'other files are not touched');
  t.ok(existsSync(segmentPath(fx, known)), 'known segments stay');
  const again = await recoverSegments({ paths: fx.paths, store: fx.store, log });
  t.equal(again.quarantined, 0, 'an .orphan is not quarantined twice');
  t.same(
    readdirSync(fx.paths.segments).sort(),
    [segmentFileName(known), `${segmentFileName(4242)}.orphan`, 'notes.txt'].sort(),
  );
});

t.test("a file holding another segment's header is not cut, and counts as damaged", async (t) => {
  const fx = await fixture(t);
  const id = await register(fx, deadPid());
  const path = segmentPath(fx, id);
  // Segment id + 100's bytes, with a torn tail, under this segment's name.
  writeSegment(path, id + 100, [chunkRecord(500)]);
  appendFileSync(path, chunkRecord(900).subarray(0, 30));
  const size = statSync(path).size;
  const report = await recoverSegments({ paths: fx.paths, store: fx.store, log });
  t.equal(report.damaged, 1, 'counted as damaged');
  t.equal(report.truncatedBytes, 0, 'nothing cut');
  t.equal(statSync(path).size, size, 'the file is as it was');
  t.equal(segmentRecord(fx, id)?.state, 'sealed');
  t.equal(segmentRecord(fx, id)?.size, size, 'sealed at its size, where compaction leaves it');
});
