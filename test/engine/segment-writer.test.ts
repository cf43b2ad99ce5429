// Goal: the segment writer's durability contract. Concurrent appends share fdatasyncs (group
// commit of data); `written()` resolves only once the record *and every record before it in
// the segment* were written, and `durable()` only after an fdatasync that began after that, so
// recovery (which cuts at the first damaged record) can never cut an acknowledged record;
// records appended in one event-loop iteration go out in one writev and complete or fail
// together; a failed write fails the records behind it and the writer moves to a fresh
// segment, sealing the broken one at the last good record; a full segment is sealed with a
// footer and its size is registered; the write-out of every 4 MiB written is started early.
// Method: the real SegmentWriter on the real filesystem in a temporary directory. fdatasync and
// writev are observed (counted, held at a gate, or failed with EIO) by wrapping the shared
// FileHandle prototype for the duration of one test; files are checked with the segment scanner
// and the seal-footer codec.
import t from 'tap';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { SegmentWriter, type Appended } from '../../src/engine/segments/segment-writer.js';
import { scanSegment, type ScannedRecord } from '../../src/engine/segments/segment-scan.js';
import { decodeSealFooter, SEAL_RECORD_SIZE } from '../../src/format/seal-footer.js';
import {
  decodeSegmentHeader,
  segmentFileName,
  SEGMENT_HEADER_SIZE,
} from '../../src/format/segment-header.js';
import { RECORD_KIND_CHUNK, RECORD_KIND_SEAL } from '../../src/format/record-frame.js';
import { errorCode } from '../../src/util/errors.js';
import {
  tempDir,
  chunkRecord,
  RecordingRegistry,
  hookFileHandle,
  gate,
  settle,
  track,
} from './segment-testing.js';

const MiB = 1024 * 1024;

/** Lets the writer issue the records appended so far (it gathers them for one iteration). */
const nextIteration = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

function writerIn(
  dir: string,
  segmentBytesMax = 64 * MiB,
): { writer: SegmentWriter; registry: RecordingRegistry } {
  const registry = new RecordingRegistry();
  return { writer: new SegmentWriter({ segmentsDir: dir, registry, segmentBytesMax }), registry };
}

async function records(
  path: string,
): Promise<{ list: ScannedRecord[]; torn: boolean; validEnd: number; fileSize: number }> {
  const list: ScannedRecord[] = [];
  const scan = await scanSegment(
    path,
    (record) => {
      list.push(record);
    },
    { withBytes: true },
  );
  return { list, torn: scan.torn, validEnd: scan.validEnd, fileSize: scan.fileSize };
}

t.test('a new segment starts with its header, and records land where append says', async (t) => {
  const dir = tempDir(t);
  const { writer } = writerIn(dir);
  const record = chunkRecord(1000);
  const appended = await writer.append([record.subarray(0, 80), record.subarray(80)]);
  await appended.durable();
  t.equal(appended.segmentId, 1);
  t.equal(appended.offset, SEGMENT_HEADER_SIZE);
  t.equal(appended.length, record.length);
  const bytes = readFileSync(join(dir, segmentFileName(1)));
  t.equal(decodeSegmentHeader(bytes).segmentId, 1, 'the header names the segment');
  t.ok(
    bytes.subarray(appended.offset, appended.offset + appended.length).equals(record),
    'the record bytes, parts joined',
  );
  await writer.close();
});

t.test('write-out starts every 4 MiB written, over exactly the written bytes', async (t) => {
  const dir = tempDir(t);
  const calls: Array<{ fd: number; offset: number; length: number }> = [];
  const writer = new SegmentWriter({
    segmentsDir: dir,
    registry: new RecordingRegistry(),
    segmentBytesMax: 64 * MiB,
    startWriteback: (fd, offset, length, done) => {
      calls.push({ fd, offset, length });
      setImmediate(done);
      return true;
    },
  });
  const appended: Appended[] = [];
  for (let n = 0; n < 20; n += 1) {
    appended.push(await writer.append([chunkRecord(MiB - 100)]));
    if (n % 3 === 2) await appended.at(-1)?.written();
  }
  await Promise.all(appended.map((a) => a.written()));
  const writtenEnd = (appended.at(-1)?.offset ?? 0) + (appended.at(-1)?.length ?? 0);
  t.ok(calls.length >= 3 && calls.length <= 5, `${calls.length} hints for 20 MiB`);
  let end = SEGMENT_HEADER_SIZE;
  for (const call of calls) {
    t.equal(call.offset, end, 'each hint starts where the last ended');
    t.ok(call.length >= 4 * MiB, `a hint of ${call.length} bytes`);
    end = call.offset + call.length;
  }
  t.ok(end <= writtenEnd && writtenEnd - end < 4 * MiB, 'no hint past the written bytes');
  t.ok(
    calls.every((call) => call.fd > 2),
    'the segment file descriptor',
  );
  await writer.close();
  const none = new SegmentWriter({
    segmentsDir: tempDir(t),
    registry: new RecordingRegistry(),
    segmentBytesMax: 64 * MiB,
    startWriteback: undefined,
  });
  await (await none.append([chunkRecord(5 * MiB)])).durable();
  await none.close();
  t.pass('no hint function: appends work the same');
});

t.test('a hint that cannot start or is still in flight never fails or holds a write', async (t) => {
  let refuse = true;
  let pendingDone: (() => void) | undefined;
  let started = 0;
  const writer = new SegmentWriter({
    segmentsDir: tempDir(t),
    registry: new RecordingRegistry(),
    segmentBytesMax: 64 * MiB,
    startWriteback: (_fd, _offset, _length, done) => {
      if (refuse) return false;
      started += 1;
      pendingDone = done; // held: the hint stays in flight
      return true;
    },
  });
  // Refused hints: every write still succeeds.
  for (let n = 0; n < 6; n += 1) await (await writer.append([chunkRecord(MiB)])).written();
  t.equal(started, 0);
  refuse = false;
  for (let n = 0; n < 12; n += 1) await (await writer.append([chunkRecord(MiB)])).written();
  t.equal(started, 1, 'one hint in flight at a time');
  pendingDone?.();
  await nextIteration();
  for (let n = 0; n < 2; n += 1) await (await writer.append([chunkRecord(MiB)])).written();
  t.equal(started, 2, 'the next write after it settled starts the next hint');
  const closing = writer.close();
  pendingDone?.();
  await closing;
  t.pass('the seal waited for the hint in flight, then closed');
});

t.test('group fdatasync: concurrent appends share syncs', async (t) => {
  const dir = tempDir(t);
  const { writer } = writerIn(dir);
  await (await writer.append([chunkRecord(100)])).durable();
  let syncs = 0;
  await hookFileHandle(t, 'datasync', async (original) => {
    syncs += 1;
    await settle(5);
    return original();
  });
  const count = 200;
  const sent = Array.from({ length: count }, (_, index) => chunkRecord(512 + index));
  const appended = await Promise.all(sent.map((record) => writer.append([record])));
  await Promise.all(appended.map((entry) => entry.durable()));
  t.ok(syncs >= 1, `at least one fdatasync (${syncs})`);
  t.ok(syncs <= 10, `${count} concurrent appends shared ${syncs} fdatasyncs`);
  const offsets = appended.map((entry) => entry.offset);
  t.same(
    [...offsets].sort((a, b) => a - b),
    offsets,
    'offsets are assigned in call order',
  );
  const { list, torn } = await records(join(dir, segmentFileName(1)));
  t.notOk(torn);
  t.equal(list.length, count + 1);
  const byOffset = new Map(list.map((record) => [record.offset, record.bytes]));
  const intact = appended.filter((entry, index) =>
    byOffset.get(entry.offset)?.equals(sent[index] as Buffer),
  ).length;
  t.equal(intact, count, 'every record intact at its offset');
  await writer.close();
});

t.test(
  'records appended in one iteration share one writev; a failed one fails them all',
  async (t) => {
    const dir = tempDir(t);
    const { writer } = writerIn(dir);
    await (await writer.append([chunkRecord(100)])).durable();
    const writes: number[] = [];
    let fail = false;
    await hookFileHandle(t, 'writev', async (original, args) => {
      writes.push((args[0] as Buffer[]).length);
      if (fail) throw Object.assign(new Error('EIO: injected'), { code: 'EIO' });
      return original();
    });
    const batch = Array.from({ length: 20 }, (_, index) => chunkRecord(200 + index));
    const appended = await Promise.all(batch.map((record) => writer.append([record])));
    t.same(writes, [20], 'twenty records, one writev');
    await Promise.all(appended.map((entry) => entry.durable()));
    const { list } = await records(join(dir, segmentFileName(1)));
    t.equal(list.length, 21, 'every record of the group is in the segment');

    fail = true;
    const failed = await Promise.allSettled(
      Array.from({ length: 3 }, () => writer.append([chunkRecord(300)])),
    );
    t.same(
      failed.map((outcome) => outcome.status),
      ['rejected', 'rejected', 'rejected'],
      'a failed group write fails each of its records',
    );
    t.equal(writes.length, 2, 'the three were one write');
    fail = false;
    await writer.close();
  },
);

t.test('durable() resolves only after an fdatasync that began after the write', async (t) => {
  const dir = tempDir(t);
  const { writer } = writerIn(dir);
  await (await writer.append([chunkRecord(100)])).durable();
  const gates: Array<ReturnType<typeof gate>> = [];
  let started = 0;
  let finished = 0;
  let holding = true;
  await hookFileHandle(t, 'datasync', async (original) => {
    if (!holding) return original();
    const held = gate();
    gates.push(held);
    started += 1;
    await held.promise;
    const result = await original();
    finished += 1;
    return result;
  });
  const first = await writer.append([chunkRecord(1000)]);
  const firstDurable = track(first.durable());
  await settle();
  t.equal(started, 1, 'the first durable() started an fdatasync');
  t.notOk(firstDurable.settled, 'not durable while the fdatasync is held');

  // Written while sync #1 is in progress: sync #1 does not cover it.
  const second = await writer.append([chunkRecord(1000)]);
  const secondDurable = track(second.durable());
  gates[0]?.open();
  await firstDurable.promise;
  await settle();
  t.equal(finished, 1);
  t.notOk(secondDurable.settled, 'a record written during an fdatasync waits for the next one');
  t.equal(started, 2, 'a second fdatasync was started for it');
  gates[1]?.open();
  await secondDurable.promise;
  t.equal(finished, 2);
  holding = false;
  await writer.close();
});

t.test(
  'a record is not durable before every earlier record of its segment is written',
  async (t) => {
    // Recovery cuts a torn segment at its first damaged record. If a small record written after a
    // large one could be acknowledged while the large one is still being written, a crash would
    // leave the acknowledged record behind the cut, and recovery would delete it.
    const dir = tempDir(t);
    const { writer } = writerIn(dir);
    await (await writer.append([chunkRecord(100)])).durable();
    const held = gate();
    const big = chunkRecord(2 * MiB);
    await hookFileHandle(t, 'writev', async (original, args) => {
      const parts = args[0] as Buffer[];
      if (parts.includes(big)) await held.promise;
      return original();
    });
    const bigAppend = track(writer.append([big]));
    await nextIteration(); // the next record goes into a write of its own
    const small = await writer.append([chunkRecord(100)]);
    const smallWritten = track(small.written());
    const smallDurable = track(small.durable());
    await settle(100);
    t.notOk(bigAppend.settled, 'the large write is held');
    t.notOk(
      smallWritten.settled,
      'the small record, behind the held one, does not count as written (the engine would sync and commit it)',
    );
    t.notOk(smallDurable.settled, 'nor as durable');
    held.open();
    await (await bigAppend.promise).durable();
    await smallWritten.promise;
    await smallDurable.promise;
    t.pass('both written and durable once the earlier write completed');
    await writer.close();
  },
);

t.test(
  'a failed write fails the records behind it; the writer moves on and seals the broken segment at the last good record',
  async (t) => {
    const dir = tempDir(t);
    const { writer, registry } = writerIn(dir);
    const good = await writer.append([chunkRecord(300)]);
    await good.durable();
    const badRecord = chunkRecord(5000);
    const held = gate();
    await hookFileHandle(t, 'writev', async (original, args) => {
      const parts = args[0] as Buffer[];
      if (parts.includes(badRecord)) {
        await held.promise;
        throw Object.assign(new Error('EIO: injected'), { code: 'EIO' });
      }
      return original();
    });
    const bad = track(writer.append([badRecord]));
    await nextIteration(); // the next record goes into a write of its own
    const behind = await writer.append([chunkRecord(200)]);
    const behindWritten = track(behind.written());
    const behindDurable = track(behind.durable());
    held.open();
    await bad.promise.catch(() => undefined);
    t.equal(errorCode(bad.error), 'segment_io', 'the failed write rejects with segment_io');
    await behindDurable.promise.catch(() => undefined);
    t.equal(behindDurable.ok, false, 'a record behind the hole is never acknowledged');
    t.equal(errorCode(behindDurable.error), 'segment_io');
    await behindWritten.promise.catch(() => undefined);
    t.equal(errorCode(behindWritten.error), 'segment_io', 'nor reported as written');

    const after = await writer.append([chunkRecord(400)]);
    await after.durable();
    t.not(after.segmentId, good.segmentId, 'the next append goes to a new segment');
    await settle(50);
    const sealed = registry.sealed.find((entry) => entry.segmentId === good.segmentId);
    t.ok(sealed, 'the broken segment was sealed');
    const path = join(dir, segmentFileName(good.segmentId));
    const cut = good.offset + good.length;
    t.equal(sealed?.size, cut + SEAL_RECORD_SIZE, 'sealed right after the last good record');
    t.equal(statSync(path).size, cut + SEAL_RECORD_SIZE, 'the file was cut there');
    const footer = decodeSealFooter(readFileSync(path), cut);
    t.same(
      { recordCount: footer.recordCount, dataEnd: footer.dataEnd },
      { recordCount: 1, dataEnd: cut },
    );
    const { list, torn } = await records(path);
    t.notOk(torn);
    t.same(
      list.map((record) => record.header.kind),
      [RECORD_KIND_CHUNK, RECORD_KIND_SEAL],
    );
    await writer.close();
  },
);

t.test('a failed fdatasync fails every record it should have covered', async (t) => {
  const dir = tempDir(t);
  const { writer, registry } = writerIn(dir);
  const good = await writer.append([chunkRecord(300)]);
  await good.durable();
  let fail = true;
  await hookFileHandle(t, 'datasync', async (original) => {
    if (fail) {
      fail = false;
      throw Object.assign(new Error('EIO: injected fsync failure'), { code: 'EIO' });
    }
    return original();
  });
  const lost = await writer.append([chunkRecord(300)]);
  await t.rejects(lost.durable(), { code: 'segment_io' }, 'not durable after a failed fdatasync');
  const after = await writer.append([chunkRecord(300)]);
  await after.durable();
  t.not(after.segmentId, good.segmentId, 'the writer left the segment whose fsync failed');
  await settle(50);
  const cut = good.offset + good.length;
  t.same(
    registry.sealed.find((entry) => entry.segmentId === good.segmentId),
    { segmentId: good.segmentId, size: cut + SEAL_RECORD_SIZE },
    'sealed after the last record known durable',
  );
  await writer.close();
});

t.test('sealing writes a footer and registers the size', async (t) => {
  const dir = tempDir(t);
  const recordBytes = 80 + 1000;
  const { writer, registry } = writerIn(dir, SEGMENT_HEADER_SIZE + 3 * recordBytes + 10);
  const appended: Appended[] = [];
  for (let index = 0; index < 7; index += 1)
    appended.push(await writer.append([chunkRecord(1000)]));
  await Promise.all(appended.map((entry) => entry.durable()));
  t.same(
    appended.map((entry) => entry.segmentId),
    [1, 1, 1, 2, 2, 2, 3],
    'three records per segment',
  );
  await writer.close();
  t.same(
    registry.sealed.map((entry) => entry.segmentId).sort(),
    [1, 2, 3],
    'every segment sealed, the open one on close',
  );
  for (const { segmentId, size } of registry.sealed) {
    const path = join(dir, segmentFileName(segmentId));
    t.equal(statSync(path).size, size, `segment ${segmentId}: registered size is the file size`);
    const footer = decodeSealFooter(readFileSync(path), size - SEAL_RECORD_SIZE);
    const expected = appended.filter((entry) => entry.segmentId === segmentId);
    t.equal(footer.recordCount, expected.length);
    t.equal(footer.dataEnd, size - SEAL_RECORD_SIZE);
    const { list, torn } = await records(path);
    t.notOk(torn, 'a sealed segment scans clean to its end');
    t.equal(
      list.filter((record) => record.header.kind === RECORD_KIND_CHUNK).length,
      expected.length,
    );
    t.equal(list.at(-1)?.header.kind, RECORD_KIND_SEAL, 'the footer is the last record');
  }
});

t.test('appends that waited for a new segment never write into one being sealed', async (t) => {
  // Many appends arrive while the first segment is being created; together they overflow it.
  const dir = tempDir(t);
  const recordBytes = 80 + 4000;
  const { writer, registry } = writerIn(dir, SEGMENT_HEADER_SIZE + 2 * recordBytes);
  const appended = await Promise.all(
    Array.from({ length: 9 }, () => writer.append([chunkRecord(4000)])),
  );
  await Promise.all(appended.map((entry) => entry.durable()));
  await writer.close();
  const perSegment = new Map<number, number>();
  for (const entry of appended)
    perSegment.set(entry.segmentId, (perSegment.get(entry.segmentId) ?? 0) + 1);
  t.ok(
    [...perSegment.values()].every((count) => count <= 2),
    'no segment holds more than fits',
  );
  t.equal(
    new Set(registry.sealed.map((entry) => entry.segmentId)).size,
    registry.sealed.length,
    'each segment sealed once',
  );
  for (const { segmentId, size } of registry.sealed) {
    const path = join(dir, segmentFileName(segmentId));
    const { list, torn } = await records(path);
    t.notOk(torn, `segment ${segmentId} scans clean`);
    t.equal(statSync(path).size, size);
    const footer = decodeSealFooter(readFileSync(path), size - SEAL_RECORD_SIZE);
    t.equal(
      footer.recordCount,
      perSegment.get(segmentId) ?? 0,
      `segment ${segmentId}: footer counts its records`,
    );
    t.equal(list.length, (perSegment.get(segmentId) ?? 0) + 1);
  }
});

t.test('durable() of a record in a segment sealed meanwhile still resolves', async (t) => {
  const dir = tempDir(t);
  const recordBytes = 80 + 1000;
  const { writer } = writerIn(dir, SEGMENT_HEADER_SIZE + recordBytes);
  const first = await writer.append([chunkRecord(1000)]);
  const second = await writer.append([chunkRecord(1000)]); // seals segment 1
  t.not(first.segmentId, second.segmentId);
  await settle(50); // the seal has closed segment 1's file by now
  await first.durable();
  await second.durable();
  t.pass('durable after the seal');
  await writer.close();
});

t.test('a failed fdatasync is reported to the registry before anything else', async (t) => {
  // The kernel reports a failed write-back once, to the file that asked: the engine, whose own
  // fdatasync of the segment would then succeed over lost pages, must hear it from the writer.
  const dir = tempDir(t);
  const registry = new RecordingRegistry();
  const failed: number[] = [];
  const writer = new SegmentWriter({
    segmentsDir: dir,
    segmentBytesMax: 64 * MiB,
    registry: Object.assign(registry, {
      failed: (segmentId: number) => {
        failed.push(segmentId);
        return Promise.resolve();
      },
    }),
  });
  const first = await writer.append([chunkRecord(100)]);
  await first.written();
  let fail = true;
  await hookFileHandle(t, 'datasync', async (original) => {
    if (fail) {
      fail = false;
      throw Object.assign(new Error('EIO: injected'), { code: 'EIO' });
    }
    return original();
  });
  await t.rejects(first.durable(), { code: 'segment_io' }, 'the record is not durable');
  t.same(failed, [first.segmentId], 'the registry heard of the failure');
  await writer.close();
  // The seal's own fdatasync failing is reported too.
  const second = await writer.append([chunkRecord(100)]);
  await second.written();
  fail = true;
  t.equal(await writer.close(), false, 'the seal failed');
  t.same(failed, [first.segmentId, second.segmentId]);
});
