// Goal: compaction moves live records verbatim and never loses a chunk. Live records are
// copied byte for byte to the compactor's segment and their chunk entries updated; dead chunks
// are dropped after their grace, and a segment whose dead bytes are all still inside it is not
// compacted yet (it would be copied again and again); the old segment is retired, then deleted
// after its grace. A
// dead chunk revived while its segment is being compacted, and a chunk committed into the
// segment after the scan passed its record (an upload whose records were written before the
// seal and whose commit came later), both survive. The compactor's own open segment is never
// "recovered" under it; the states a crash can leave (copies without the index move, an index
// entry removed but the file still there) are cleaned up by the next pass; a damaged segment is
// never retired.
// Method: the real Compactor, SegmentWriter and LMDB index in a temporary data directory.
// Segments are written by a SegmentWriter registered under a live pid (a "gateway worker");
// chunk entries and live-byte counts are written the way the engine's object commands write
// them. To act "in the middle" of a pass, the first fdatasync of the compactor's writer is held
// while a transaction revives or commits chunks (a hook on the FileHandle prototype).
import t from 'tap';
import { readFileSync, existsSync, writeFileSync, statSync } from 'node:fs';
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
import { allocSegment, sealSegment } from '../../src/engine/ops/segments.js';
import { SegmentPins, PIN_REPORT_INTERVAL_MS } from '../../src/engine/segments/segment-pins.js';
import { Compactor } from '../../src/engine/segments/compaction.js';
import { SegmentWriter } from '../../src/engine/segments/segment-writer.js';
import { scanSegment } from '../../src/engine/segments/segment-scan.js';
import {
  encodeSegmentHeader,
  segmentFileName,
  SEGMENT_HEADER_SIZE,
} from '../../src/format/segment-header.js';
import { RECORD_HEADER_SIZE } from '../../src/format/record-frame.js';
import { decodeSealFooter, SEAL_RECORD_SIZE } from '../../src/format/seal-footer.js';
import { loadSettings } from '../../src/util/config.js';
import { componentLogger } from '../../src/util/log.js';
import type { EngineContext } from '../../src/engine/ops/context.js';
import {
  tempDir,
  chunkRecord,
  deadPid,
  hookFileHandle,
  settle,
  type TapLike,
} from './segment-testing.js';

const log = componentLogger('test.compaction');
const TENANT = 7;

interface Fixture {
  paths: DataDirPaths;
  store: IndexStore;
  context: EngineContext;
  compactor: Compactor;
}

async function fixture(
  t: TapLike,
  flags: Record<string, string> = {},
  pins?: SegmentPins,
): Promise<Fixture> {
  const paths = dataDirPaths(tempDir(t, 'lw-compaction-'));
  await prepareDataDir(paths);
  const store = IndexStore.open({ path: paths.index, readOnly: false });
  const settings = loadSettings({
    flags: {
      'storage.compaction_live_ratio': '0.9',
      'storage.dead_chunk_grace': '0s',
      'storage.retired_segment_grace': '300ms',
      'storage.segment_bytes_max': '4MiB',
      ...flags,
    },
  });
  const context: EngineContext = {
    store,
    masterKey: Buffer.alloc(32),
    settings,
    now: () => Date.now(),
  };
  const compactor = new Compactor({ paths, store, settings, log, ...(pins ? { pins } : {}) });
  t.teardown(async () => {
    await compactor.stop();
    await store.close();
  });
  return { paths, store, context, compactor };
}

interface Written {
  id: Buffer;
  key: Buffer;
  record: Buffer;
  segmentId: number;
  offset: number;
}

/** Writes records into one sealed segment as a gateway worker (a live pid) would. */
async function writeSealed(
  fx: Fixture,
  records: readonly Buffer[],
  ownerPid = process.ppid,
): Promise<{ segmentId: number; written: Written[] }> {
  const writer = new SegmentWriter({
    segmentsDir: fx.paths.segments,
    segmentBytesMax: 64 * 1024 * 1024,
    registry: {
      allocate: async () =>
        (await fx.store.transact(() => allocSegment(fx.context, { ownerPid }))).segmentId,
      seal: async (segmentId, size) => {
        await fx.store.transact(() => sealSegment(fx.context, { segmentId, size }));
      },
    },
  });
  const written: Written[] = [];
  for (const record of records) {
    const appended = await writer.append([record]);
    await appended.durable();
    const id = Buffer.from(record.subarray(24, 56));
    written.push({
      id,
      key: chunkKey(TENANT, id),
      record,
      segmentId: appended.segmentId,
      offset: appended.offset,
    });
  }
  await writer.close();
  return { segmentId: written[0]?.segmentId as number, written };
}

function record(bytes: number): Buffer {
  return chunkRecord(bytes, { tenantNum: TENANT });
}

/** What the engine's commit does for a chunk written by this request (or a revive). */
function commitChunk(fx: Fixture, chunk: Written, refs = 1): void {
  const { store } = fx;
  const existing = store.get<ChunkRecord>(DB.chunks, chunk.key);
  const entry: ChunkRecord = existing ?? {
    segmentId: chunk.segmentId,
    offset: chunk.offset,
    length: chunk.record.length,
    plainLength: chunk.record.length - RECORD_HEADER_SIZE,
    payloadChecksum: chunk.record.readUInt32LE(72),
    refs: 0,
  };
  if (entry.refs === 0 && refs > 0) addLive(fx, entry.segmentId, entry.length);
  entry.refs += refs;
  delete entry.deadSince;
  store.put(DB.chunks, chunk.key, entry);
}

/** A chunk entry whose last reference is gone. */
function deadChunk(fx: Fixture, chunk: Written, deadSince: number): void {
  fx.store.put(DB.chunks, chunk.key, {
    segmentId: chunk.segmentId,
    offset: chunk.offset,
    length: chunk.record.length,
    plainLength: chunk.record.length - RECORD_HEADER_SIZE,
    payloadChecksum: chunk.record.readUInt32LE(72),
    refs: 0,
    deadSince,
  } satisfies ChunkRecord);
}

function addLive(fx: Fixture, segmentId: number, delta: number): void {
  const segment = fx.store.get<SegmentRecord>(DB.segments, segmentKey(segmentId));
  if (!segment) throw new Error(`segment ${segmentId} is not registered`);
  segment.liveBytes += delta;
  fx.store.put(DB.segments, segmentKey(segmentId), segment);
}

function segment(fx: Fixture, segmentId: number): SegmentRecord | undefined {
  fx.store.refresh();
  return fx.store.get<SegmentRecord>(DB.segments, segmentKey(segmentId));
}

function chunk(fx: Fixture, written: Written): ChunkRecord | undefined {
  fx.store.refresh();
  return fx.store.get<ChunkRecord>(DB.chunks, written.key);
}

/** The bytes the chunk's index entry points at, read from its segment file. */
function bytesAt(fx: Fixture, entry: ChunkRecord | undefined): Buffer | undefined {
  if (!entry) return undefined;
  const path = join(fx.paths.segments, segmentFileName(entry.segmentId));
  if (!existsSync(path)) return undefined;
  return readFileSync(path).subarray(entry.offset, entry.offset + entry.length);
}

t.test(
  'live records move verbatim; the old segment is retired, then deleted after its grace',
  async (t) => {
    const fx = await fixture(t);
    const [a, b, c, d] = [record(3000), record(2000), record(5000), record(1000)];
    const { segmentId: old, written } = await writeSealed(fx, [a, b, c, d]);
    const [wa, wb, wc] = written as [Written, Written, Written, Written];
    await fx.store.transact(() => {
      commitChunk(fx, wa);
      deadChunk(fx, wb, Date.now() - 1000);
      commitChunk(fx, wc, 2);
    });
    const before = segment(fx, old);
    t.equal(before?.liveBytes, wa.record.length + wc.record.length);

    const stats = await fx.compactor.runOnce();
    t.match(stats, { chunksDropped: 1, segmentsCompacted: 1, recordsMoved: 2, segmentsDeleted: 0 });
    const movedA = chunk(fx, wa);
    const movedC = chunk(fx, wc);
    t.not(movedA?.segmentId, old, 'the live chunk moved');
    t.equal(movedA?.segmentId, movedC?.segmentId, "both into the compactor's segment");
    t.ok(bytesAt(fx, movedA)?.equals(wa.record), 'record A copied byte for byte');
    t.ok(bytesAt(fx, movedC)?.equals(wc.record), 'record C copied byte for byte');
    t.equal(movedC?.refs, 2, 'reference counts unchanged');
    t.equal(chunk(fx, wb), undefined, 'the dead chunk was dropped');
    const target = movedA?.segmentId as number;
    t.match(segment(fx, target), {
      state: 'open',
      ownerPid: process.pid,
      liveBytes: wa.record.length + wc.record.length,
    });
    t.match(segment(fx, old), { state: 'retired', liveBytes: 0 });
    t.ok(
      existsSync(join(fx.paths.segments, segmentFileName(old))),
      'a retired segment stays for its grace',
    );

    const early = await fx.compactor.runOnce();
    t.equal(early.segmentsDeleted, 0, 'not deleted within the grace');
    t.equal(
      segment(fx, target)?.state,
      'open',
      'the compactor\'s own open segment is not "recovered" by its own pass',
    );
    await settle(350);
    const late = await fx.compactor.runOnce();
    t.equal(late.segmentsDeleted, 1);
    t.notOk(existsSync(join(fx.paths.segments, segmentFileName(old))), 'the file is deleted');
    t.equal(segment(fx, old), undefined, 'and its index entry');
    t.ok(bytesAt(fx, chunk(fx, wa))?.equals(wa.record), 'A still reads back');

    await fx.compactor.stop();
    const sealed = segment(fx, target);
    t.equal(sealed?.state, 'sealed', "stop seals the compactor's segment");
    const path = join(fx.paths.segments, segmentFileName(target));
    t.equal(statSync(path).size, sealed?.size);
    t.equal(
      decodeSealFooter(readFileSync(path), (sealed?.size as number) - SEAL_RECORD_SIZE).recordCount,
      2,
    );
  },
);

t.test('the compactor keeps appending to its own open segment across passes', async (t) => {
  const fx = await fixture(t);
  const targets = new Set<number>();
  const all: Written[] = [];
  for (let round = 0; round < 3; round += 1) {
    const { written } = await writeSealed(fx, [record(4000), record(4000), record(4000)]);
    all.push(...written);
    await fx.store.transact(() => commitChunk(fx, written[0] as Written));
    await fx.compactor.runOnce();
    const moved = chunk(fx, written[0] as Written);
    targets.add(moved?.segmentId as number);
    t.equal(
      segment(fx, moved?.segmentId as number)?.state,
      'open',
      `round ${round}: the target is still open`,
    );
  }
  t.equal(targets.size, 1, 'one open segment took every move');
  const target = [...targets][0] as number;
  const scan = await scanSegment(
    join(fx.paths.segments, segmentFileName(target)),
    () => undefined,
    { withBytes: false },
  );
  // Intact up to the last moved record. (With direct I/O an open segment's file goes on in
  // zero padding up to a block boundary, which a scan stops at like a torn tail.)
  const movedEnd = Math.max(
    ...all
      .filter((_, index) => index % 3 === 0)
      .map((written) => {
        const moved = chunk(fx, written);
        return (moved?.offset ?? 0) + (moved?.length ?? 0);
      }),
  );
  t.equal(scan.validEnd, movedEnd, 'every record up to the last one moved is intact');
  for (const written of all.filter((_, index) => index % 3 === 0)) {
    t.ok(bytesAt(fx, chunk(fx, written))?.equals(written.record), 'moved record reads back');
  }
});

t.test(
  'a chunk revived, and a chunk committed, while the segment is compacted are not lost',
  async (t) => {
    const fx = await fixture(t, { 'storage.dead_chunk_grace': '1h' });
    // E and F come first: the scan has passed them when the compactor starts writing (at A).
    const { segmentId: old, written } = await writeSealed(fx, [
      record(1500),
      record(1500),
      record(4000),
      record(3000),
      record(6000),
    ]);
    const [we, wf, wa, wb, wc] = written as [Written, Written, Written, Written, Written];
    await fx.store.transact(() => {
      commitChunk(fx, wa);
      deadChunk(fx, wb, Date.now() - 1000);
      commitChunk(fx, wc);
    });
    let armed = true;
    await hookFileHandle(t, 'datasync', async (original) => {
      if (armed) {
        armed = false;
        await fx.store.transact(() => {
          commitChunk(fx, wb); // revived by a deduplicated upload
          commitChunk(fx, we); // an upload whose record was written before the seal commits now
          commitChunk(fx, wf);
        });
      }
      return original();
    });
    const stats = await fx.compactor.runOnce();
    t.notOk(armed, 'the commits happened in the middle of the pass');
    t.equal(stats.segmentsCompacted, 1);
    const target = chunk(fx, wa)?.segmentId as number;
    t.not(target, old);
    t.match(
      chunk(fx, wb),
      { segmentId: target, refs: 1 },
      'the revived chunk moved with the others',
    );
    t.ok(bytesAt(fx, chunk(fx, wb))?.equals(wb.record));
    t.match(chunk(fx, we), { segmentId: old }, 'the late chunk still points at the old segment');
    t.equal(
      segment(fx, target)?.liveBytes,
      wa.record.length + wb.record.length + wc.record.length,
      'live bytes moved with the chunks',
    );
    t.match(
      segment(fx, old),
      { state: 'retired', liveBytes: we.record.length + wf.record.length },
      'the retired segment still counts the late chunks',
    );

    await settle(350);
    const next = await fx.compactor.runOnce();
    t.equal(next.segmentsDeleted, 0, 'a retired segment with live chunks is not deleted');
    t.ok(existsSync(join(fx.paths.segments, segmentFileName(old))));
    t.equal(segment(fx, old)?.state, 'sealed', 'it goes back to sealed');
    t.ok(bytesAt(fx, chunk(fx, we))?.equals(we.record), 'the late chunk reads back');

    const again = await fx.compactor.runOnce();
    t.equal(again.recordsMoved, 2, 'the next pass moves the late chunks');
    t.match(chunk(fx, we), { segmentId: target });
    t.match(chunk(fx, wf), { segmentId: target });
    await settle(350);
    const last = await fx.compactor.runOnce();
    t.equal(last.segmentsDeleted, 1, 'now the old segment goes');
    for (const entry of [wa, wb, wc, we, wf])
      t.ok(bytesAt(fx, chunk(fx, entry))?.equals(entry.record), 'every chunk reads back');
  },
);

t.test('dead chunks inside their grace are not copied from segment to segment', async (t) => {
  const fx = await fixture(t, { 'storage.dead_chunk_grace': '1h' });
  const { segmentId: old, written } = await writeSealed(fx, [record(1000), record(20_000)]);
  const [live, dead] = written as [Written, Written];
  await fx.store.transact(() => {
    commitChunk(fx, live);
    deadChunk(fx, dead, Date.now() - 1000);
  });
  // Live 1,000 of ~21,000 bytes, but the dead 20,000 would be copied too: nothing to gain yet.
  const early = await fx.compactor.runOnce();
  t.equal(early.segmentsCompacted, 0, 'a segment whose dead bytes are all in grace waits');
  t.match(chunk(fx, dead), { segmentId: old, refs: 0 }, 'the dead chunk stays where it is');
  t.equal(segment(fx, old)?.state, 'sealed');

  // Once the grace has passed, the entry goes and the segment is compacted: only the live
  // record is copied, and what it held besides counts as reclaimed.
  await fx.store.transact(() => deadChunk(fx, dead, Date.now() - 2 * 3600_000));
  const late = await fx.compactor.runOnce();
  t.equal(late.chunksDropped, 1);
  t.equal(late.segmentsCompacted, 1);
  t.equal(late.recordsMoved, 1, 'only the live record moved');
  t.ok(late.bytesReclaimed >= dead.record.length, 'the dead record is reclaimed');
  t.ok(late.bytesReclaimed < dead.record.length + live.record.length, 'the live one is not');
  t.equal(chunk(fx, dead), undefined);
  t.ok(bytesAt(fx, chunk(fx, live))?.equals(live.record), 'the live chunk reads back');
});

t.test('what a crash in the middle of compaction leaves behind is cleaned up', async (t) => {
  const fx = await fixture(t);
  const { segmentId: old, written } = await writeSealed(fx, [record(3000), record(3000)]);
  const [wa] = written as [Written, Written];
  await fx.store.transact(() => commitChunk(fx, wa));
  // A dead engine had copied A into its own segment (plus a torn tail), then died before the
  // index moved: the copy is garbage.
  const deadEngine = deadPid();
  const copyId = (await fx.store.transact(() => allocSegment(fx.context, { ownerPid: deadEngine })))
    .segmentId;
  writeFileSync(
    join(fx.paths.segments, segmentFileName(copyId)),
    Buffer.concat([
      encodeSegmentHeader({ segmentId: copyId, createdAtMs: Date.now() }),
      wa.record,
      wa.record.subarray(0, 100),
    ]),
  );
  // A segment whose index entry was removed when the engine died before unlinking its file.
  const leftover = 999;
  writeFileSync(
    join(fx.paths.segments, segmentFileName(leftover)),
    Buffer.concat([
      encodeSegmentHeader({ segmentId: leftover, createdAtMs: Date.now() }),
      record(100),
    ]),
  );
  // A retired segment whose file is already gone.
  const gone = (await fx.store.transact(() => allocSegment(fx.context, { ownerPid: deadEngine })))
    .segmentId;
  await fx.store.transact(() => {
    const entry = fx.store.get<SegmentRecord>(DB.segments, segmentKey(gone)) as SegmentRecord;
    fx.store.put(DB.segments, segmentKey(gone), {
      ...entry,
      state: 'retired',
      size: 5000,
      retiredAt: Date.now() - 10_000,
      ownerPid: undefined,
    });
  });

  const stats = await fx.compactor.runOnce();
  t.match(
    segment(fx, copyId),
    { state: 'retired' },
    "the dead engine's copy was recovered, then compacted away (nothing live)",
  );
  t.equal(stats.segmentsDeleted, 1, 'the retired segment without a file is removed');
  t.equal(segment(fx, gone), undefined);
  t.ok(
    existsSync(join(fx.paths.segments, `${segmentFileName(leftover)}.orphan`)),
    'an unknown file is quarantined, not deleted',
  );
  const moved = chunk(fx, wa);
  t.not(moved?.segmentId, old);
  t.ok(bytesAt(fx, moved)?.equals(wa.record), 'the live chunk reads back from its new place');
  await settle(350);
  await fx.compactor.runOnce();
  t.notOk(
    existsSync(join(fx.paths.segments, segmentFileName(copyId))),
    'the garbage copy is deleted',
  );
  t.notOk(existsSync(join(fx.paths.segments, segmentFileName(old))));
});

t.test('a damaged segment is never retired', async (t) => {
  const fx = await fixture(t);
  const { segmentId: old, written } = await writeSealed(fx, [
    record(3000),
    record(3000),
    record(3000),
    record(3000),
  ]);
  const [wa, wb, wc] = written as [Written, Written, Written, Written];
  await fx.store.transact(() => {
    commitChunk(fx, wa);
    commitChunk(fx, wc);
  });
  const path = join(fx.paths.segments, segmentFileName(old));
  const bytes = readFileSync(path);
  bytes[wb.offset + RECORD_HEADER_SIZE + 10] =
    (bytes[wb.offset + RECORD_HEADER_SIZE + 10] as number) ^ 0x40;
  writeFileSync(path, bytes);
  const stats = await fx.compactor.runOnce();
  t.equal(stats.segmentsCompacted, 0);
  t.equal(segment(fx, old)?.state, 'sealed', 'left sealed');
  t.match(
    chunk(fx, wc),
    { segmentId: old },
    'the chunk behind the damage still points at its record',
  );
  t.ok(bytesAt(fx, chunk(fx, wc))?.equals(wc.record), 'which is intact');
  await fx.compactor.runOnce();
  t.ok(existsSync(path), 'the file stays');
});

t.test('empty segments left by recovery are reclaimed', async (t) => {
  const fx = await fixture(t);
  const deadOwner = deadPid();
  const headerOnly = (
    await fx.store.transact(() => allocSegment(fx.context, { ownerPid: deadOwner }))
  ).segmentId;
  writeFileSync(
    join(fx.paths.segments, segmentFileName(headerOnly)),
    encodeSegmentHeader({ segmentId: headerOnly, createdAtMs: Date.now() }),
  );
  const noFile = (await fx.store.transact(() => allocSegment(fx.context, { ownerPid: deadOwner })))
    .segmentId;
  const torn = (await fx.store.transact(() => allocSegment(fx.context, { ownerPid: deadOwner })))
    .segmentId;
  writeFileSync(join(fx.paths.segments, segmentFileName(torn)), randomBytes(40));
  await fx.compactor.runOnce();
  for (const id of [headerOnly, noFile, torn])
    t.equal(segment(fx, id)?.state, 'retired', `segment ${id} retired`);
  await settle(350);
  await fx.compactor.runOnce();
  for (const id of [headerOnly, noFile, torn]) {
    t.equal(segment(fx, id), undefined, `segment ${id} gone from the index`);
    t.notOk(existsSync(join(fx.paths.segments, segmentFileName(id))), `segment ${id} file gone`);
  }
  t.equal(SEGMENT_HEADER_SIZE, 64);
});

t.test('a segment pinned by an upload in flight is retired but not deleted', async (t) => {
  // An engine up long enough for every gateway to have reported its pins.
  const pins = new SegmentPins(Date.now() - 2 * PIN_REPORT_INTERVAL_MS);
  const fx = await fixture(t, {}, pins);
  // The upload's records are written and the segment sealed; nothing references them yet.
  const { segmentId, written } = await writeSealed(fx, [record(4096), record(4096)]);
  const gateway = {};
  pins.set(gateway, [segmentId]);
  await fx.compactor.runOnce();
  t.equal(segment(fx, segmentId)?.state, 'retired', 'judged empty: retired');
  await settle(350);
  await fx.compactor.runOnce();
  t.equal(segment(fx, segmentId)?.state, 'retired', 'past the grace, but pinned: kept');
  t.ok(existsSync(join(fx.paths.segments, segmentFileName(segmentId))), 'its file is there');
  // The upload commits: its chunk now holds the segment, which goes back to sealed.
  commitChunk(fx, written[0] as Written);
  pins.drop(gateway);
  await fx.compactor.runOnce();
  t.equal(segment(fx, segmentId)?.state, 'sealed', 'live again once committed');
  t.ok(bytesAt(fx, chunk(fx, written[0] as Written))?.equals((written[0] as Written).record));
});

t.test(
  'an engine that has just started deletes no segment until pins can be reported',
  async (t) => {
    const pins = new SegmentPins();
    const fx = await fixture(t, {}, pins);
    const { segmentId } = await writeSealed(fx, [record(4096)]);
    await fx.compactor.runOnce();
    t.equal(segment(fx, segmentId)?.state, 'retired', 'retired as empty');
    await settle(350);
    await fx.compactor.runOnce();
    t.equal(
      segment(fx, segmentId)?.state,
      'retired',
      'past its grace, but the engine just started',
    );
    t.notOk(pins.settled(), 'the pins are not settled yet');
    t.ok(pins.settled(Date.now() + 2 * PIN_REPORT_INTERVAL_MS), 'they are two intervals on');
  },
);
