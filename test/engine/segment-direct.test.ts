// Goal: segments written and read with O_DIRECT (the pool workers' segments) hold exactly the
// records that appends report, whatever their sizes and however appends interleave: each
// group's write re-writes the segment's last partial block unchanged and pads to a block
// boundary that the next group overwrites, so an open segment ends in zeros that recovery's
// scan stops at, and a sealed one is cut to its footer; a failed direct write breaks the
// segment at that record, the writer goes on in a new segment; a file system that refuses
// direct writes gets buffered ones; a direct reader answers every record's bytes, also the last
// one of a sealed file, whose end is not block-aligned, and hands out copies that outlive it.
// Method: the real SegmentWriter and SegmentReader on the temp directory's file system (skipped
// where it has no O_DIRECT), random record sizes from 1 byte to 1.5 MiB appended within one
// event-loop turn and across turns; file bytes checked against the appended records, with the
// segment scanner and the seal-footer codec; faults injected by wrapping FileHandle.write.
import t, { type Test } from 'tap';
import { constants, openSync, closeSync, readFileSync, statSync } from 'node:fs';
import { randomInt } from 'node:crypto';
import { join } from 'node:path';
import {
  SegmentWriter,
  DIRECT_IO_ALIGNMENT,
  type Appended,
} from '../../src/engine/segments/segment-writer.js';
import { SegmentReader } from '../../src/engine/segments/segment-reader.js';
import { scanSegment } from '../../src/engine/segments/segment-scan.js';
import { decodeSealFooter, SEAL_RECORD_SIZE } from '../../src/format/seal-footer.js';
import { segmentFileName, SEGMENT_HEADER_SIZE } from '../../src/format/segment-header.js';
import { errorCode } from '../../src/util/errors.js';
import { native } from '../../src/util/libc.js';
import { tempDir, chunkRecord, RecordingRegistry, hookFileHandle } from './segment-testing.js';

const MiB = 1024 * 1024;

function directSupported(dir: string): boolean {
  if (!native() || !('O_DIRECT' in constants)) return false;
  try {
    const path = join(dir, 'probe');
    closeSync(openSync(path, 'w'));
    closeSync(openSync(path, constants.O_WRONLY | constants.O_DIRECT));
    return true;
  } catch {
    return false;
  }
}

const probeDir = tempDir(t, 'lw-direct-probe-');
const skip = directSupported(probeDir) ? false : 'no O_DIRECT here (or no native library)';

function directWriter(dir: string, segmentBytesMax = 64 * MiB) {
  const registry = new RecordingRegistry();
  const writer = new SegmentWriter({
    segmentsDir: dir,
    registry,
    segmentBytesMax,
    directIo: true,
  });
  return { writer, registry };
}

/** A record of 1 byte to 64 KiB of payload, now and then one of up to 1.5 MiB. */
function randomRecord(): Buffer {
  return chunkRecord(randomInt(0, 8) === 0 ? randomInt(64 * 1024, 1.5 * MiB) : randomInt(1, 65536));
}

function fileHolds(t: Test, path: string, appended: Appended[], records: Buffer[]): void {
  const bytes = readFileSync(path);
  let wrong = 0;
  appended.forEach((entry, index) => {
    const record = records[index] as Buffer;
    if (!bytes.subarray(entry.offset, entry.offset + entry.length).equals(record)) wrong += 1;
  });
  t.equal(wrong, 0, `${appended.length} records at the offsets append answered`);
}

t.test('records of any size land where append says', { skip }, async (t) => {
  const dir = tempDir(t);
  const { writer, registry } = directWriter(dir);
  const records: Buffer[] = [];
  const appended: Appended[] = [];
  for (let turn = 0; turn < 12; turn += 1) {
    // Several appends in one turn share a write group; the turns' groups run one at a time.
    const batch = Array.from({ length: randomInt(1, 6) }, randomRecord);
    records.push(...batch);
    appended.push(...(await Promise.all(batch.map((record) => writer.append([record])))));
  }
  await Promise.all(appended.map((entry) => entry.durable()));
  const path = join(dir, segmentFileName(1));
  t.ok(appended.every((entry) => entry.segmentId === 1));
  const end = (appended.at(-1) as Appended).offset + (appended.at(-1) as Appended).length;
  const size = statSync(path).size;
  t.equal(size % DIRECT_IO_ALIGNMENT, 0, 'an open segment ends on a block boundary');
  t.ok(size >= end && size < end + DIRECT_IO_ALIGNMENT, 'with less than a block of padding');
  t.ok(
    readFileSync(path)
      .subarray(end)
      .equals(Buffer.alloc(size - end)),
    'the padding is zeros',
  );
  fileHolds(t, path, appended, records);
  const scan = await scanSegment(path, () => undefined, { withBytes: false });
  t.equal(scan.validEnd, end, 'recovery would cut exactly after the last record');

  await writer.close();
  const { segmentId, size: sealedSize } = registry.sealed[0] ?? { segmentId: 0, size: 0 };
  t.equal(segmentId, 1);
  t.equal(statSync(path).size, sealedSize, 'sealed: the file is cut to its footer');
  const footer = decodeSealFooter(readFileSync(path), sealedSize - SEAL_RECORD_SIZE);
  t.equal(footer.recordCount, records.length);
  t.equal(footer.dataEnd, end);
  const sealedScan = await scanSegment(path, () => undefined, { withBytes: false });
  t.notOk(sealedScan.torn, 'a sealed segment scans clean to its end');
  fileHolds(t, path, appended, records);
});

t.test('full segments roll over, each sealed at its last record', { skip }, async (t) => {
  const dir = tempDir(t);
  const { writer, registry } = directWriter(dir, 3 * MiB);
  // 40 records of 150-155 KB: about 6 MB, at least two 3 MiB segments.
  const records = Array.from({ length: 40 }, (_, index) =>
    chunkRecord(150_000 + ((index * 7919) % 5000)),
  );
  const appended: Appended[] = [];
  for (const record of records) appended.push(await writer.append([record]));
  await Promise.all(appended.map((entry) => entry.durable()));
  await writer.close();
  t.ok(registry.sealed.length >= 2, `${registry.sealed.length} segments`);
  for (const { segmentId, size } of registry.sealed) {
    const path = join(dir, segmentFileName(segmentId));
    const mine = appended.filter((entry) => entry.segmentId === segmentId);
    t.equal(statSync(path).size, size, `segment ${segmentId}: registered size is the file size`);
    t.equal(decodeSealFooter(readFileSync(path), size - SEAL_RECORD_SIZE).recordCount, mine.length);
    fileHolds(
      t,
      path,
      mine,
      mine.map((entry) => records[appended.indexOf(entry)] as Buffer),
    );
  }
});

t.test('a failed direct write breaks the segment at that record', { skip }, async (t) => {
  const dir = tempDir(t);
  const { writer, registry } = directWriter(dir);
  const first = await writer.append([chunkRecord(5000)]);
  await first.durable();
  let failNext = true;
  await hookFileHandle(t, 'write', async (original, args) => {
    // (buffer, offset, length, position): fail the next record write, not the header probe.
    if (failNext && (args[3] as number) > 0) {
      failNext = false;
      throw Object.assign(new Error('injected EIO'), { code: 'EIO' });
    }
    return original();
  });
  // Both in one write group: the group's write fails, and both appends with it.
  const failing = writer.append([chunkRecord(3000)]);
  const behind = writer.append([chunkRecord(3000)]);
  const [failed, alsoFailed] = await Promise.allSettled([failing, behind]);
  t.equal(failed.status, 'rejected');
  t.equal(alsoFailed.status, 'rejected', 'a record behind a failed one fails too');
  t.equal(errorCode((failed as PromiseRejectedResult).reason), 'segment_io');
  await first.durable();
  t.pass('the record before the failure stays durable');
  const record = chunkRecord(4000);
  const next = await writer.append([record]);
  await next.durable();
  t.not(next.segmentId, first.segmentId, 'the writer moved to a new segment');
  await writer.close();
  const sealedFirst = registry.sealed.find((entry) => entry.segmentId === first.segmentId);
  t.equal(sealedFirst?.size, first.offset + first.length + SEAL_RECORD_SIZE, 'cut after record 1');
  const path = join(dir, segmentFileName(next.segmentId));
  t.ok(
    readFileSync(path)
      .subarray(next.offset, next.offset + next.length)
      .equals(record),
  );
});

t.test('where direct writes are refused, records go through the page cache', async (t) => {
  const dir = tempDir(t);
  // The probe: the first block written again right after the header.
  await hookFileHandle(t, 'write', async (original, args) => {
    if ((args[2] as number) === DIRECT_IO_ALIGNMENT && (args[3] as number) === 0)
      throw Object.assign(new Error('injected EINVAL'), { code: 'EINVAL' });
    return original();
  });
  const { writer } = directWriter(dir);
  const records = Array.from({ length: 5 }, () => chunkRecord(randomInt(1, 20_000)));
  const appended = await Promise.all(records.map((record) => writer.append([record])));
  await Promise.all(appended.map((entry) => entry.durable()));
  const path = join(dir, segmentFileName(1));
  const last = appended.at(-1) as Appended;
  t.equal(statSync(path).size, last.offset + last.length, 'no padding: buffered writes');
  fileHolds(t, path, appended, records);
  await writer.close();
});

t.test('a direct reader answers every record, the sealed last one too', { skip }, async (t) => {
  const dir = tempDir(t);
  const { writer } = directWriter(dir);
  const records = Array.from({ length: 24 }, randomRecord);
  const appended: Appended[] = [];
  for (const record of records) appended.push(await writer.append([record]));
  await Promise.all(appended.map((entry) => entry.durable()));
  await writer.close();
  const misalignment = native()?.misalignment;
  if (!misalignment) throw new TypeError('no native library');
  const reader = new SegmentReader(dir, { direct: { minBytes: 1, misalignment } });
  t.teardown(() => reader.close());
  const copies: Buffer[] = [];
  let wrong = 0;
  await Promise.all(
    appended.map(async (entry, index) => {
      const location = { segmentId: entry.segmentId, offset: entry.offset, length: entry.length };
      const same = await reader.readWith(location, (bytes) =>
        bytes.equals(records[index] as Buffer),
      );
      if (!same) wrong += 1;
      copies[index] = await reader.read(location);
    }),
  );
  t.equal(wrong, 0, 'readWith hands each record its own bytes, also when reads overlap');
  t.ok(
    copies.every((copy, index) => copy.equals(records[index] as Buffer)),
    'read answers copies that stay valid after later reads',
  );
  const missing = reader.read({ segmentId: 99, offset: SEGMENT_HEADER_SIZE, length: 10 });
  await t.rejects(missing, { code: 'not_found' });
});

t.test('a direct read the file system refuses is read buffered', { skip }, async (t) => {
  const dir = tempDir(t);
  const { writer } = directWriter(dir);
  const record = chunkRecord(70_000);
  const entry = await writer.append([record]);
  await entry.durable();
  await writer.close();
  // A wrong alignment makes every direct read fail with EINVAL, as a file system with larger
  // sectors would.
  const reader = new SegmentReader(dir, { direct: { minBytes: 1, misalignment: () => 1 } });
  t.teardown(() => reader.close());
  const location = { segmentId: entry.segmentId, offset: entry.offset, length: entry.length };
  t.ok((await reader.read(location)).equals(record), 'the first read falls back');
  t.ok((await reader.read(location)).equals(record), 'and so do later ones');
});
