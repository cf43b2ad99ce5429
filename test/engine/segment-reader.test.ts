// Goal: a segment reader answers a record's exact bytes whichever way they arrive: all from the
// page cache, part from it and the rest read asynchronously, or none from it; and a reader with
// `cachedFirst` copies at most 1 MiB per turn of the event loop, so a loop of reads still lets
// the loop run. `readNow` answers the same bytes without waiting, but only when the segment is
// open and the cache holds the whole record; otherwise it answers undefined and reads nothing.
// Method: a segment file of random bytes and a reader whose cached read is a fake that copies a
// chosen share of the range (or nothing) and counts its calls; the same reads with libc's real
// `readCached` where it exists.
import t, { type Test } from 'tap';
import { closeSync, mkdtempSync, mkdirSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SegmentReader } from '../../src/engine/segments/segment-reader.js';
import { encodeSegmentHeader, segmentFileName } from '../../src/format/segment-header.js';
import { libc } from '../../src/util/libc.js';

const SEGMENT_ID = 7;

function segmentDir(t: Test, bytes: Buffer): string {
  const dir = mkdtempSync(join(tmpdir(), 'lw-reader-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(dir, { recursive: true });
  // A real header: the reader checks that the file is the segment its name says.
  encodeSegmentHeader({ segmentId: SEGMENT_ID, createdAtMs: 0 }).copy(bytes, 0);
  writeFileSync(join(dir, segmentFileName(SEGMENT_ID)), bytes);
  return dir;
}

/** A cached read that copies `share` of each range (0: a miss), counting its calls. */
function fakeCache(bytes: Buffer, share: number) {
  const fake = {
    calls: 0,
    readCached(_fd: number, target: Uint8Array, position: number): number | undefined {
      fake.calls += 1;
      const length = Math.floor(target.length * share);
      if (length === 0) return undefined;
      target.set(bytes.subarray(position, position + length));
      return length;
    },
  };
  return fake;
}

const ranges = [
  { offset: 0, length: 4096 },
  { offset: 12_345, length: 70_001 },
  { offset: 500_000, length: 1 },
];

for (const share of [1, 0.5, 0]) {
  t.test(`records read back exactly when the cache holds ${share * 100}% of them`, async (t) => {
    const bytes = randomBytes(600_000);
    const fake = fakeCache(bytes, share);
    const reader = new SegmentReader(segmentDir(t, bytes), {
      cachedFirst: true,
      readCached: (fd, target, position) => fake.readCached(fd, target, position),
    });
    t.teardown(() => reader.close());
    for (const range of ranges) {
      const read = await reader.read({ segmentId: SEGMENT_ID, ...range });
      t.ok(
        read.equals(bytes.subarray(range.offset, range.offset + range.length)),
        `${range.length} B`,
      );
    }
    t.equal(fake.calls, ranges.length, 'one cached attempt per read');
  });
}

/**
 * A cachedFirst reader over `bytes` with a fake cache that holds all of them, its segment open
 * and a new turn of the event loop begun, with the fake's call count at 0.
 */
async function openedReader(t: Test, bytes: Buffer) {
  const fake = fakeCache(bytes, 1);
  const reader = new SegmentReader(segmentDir(t, bytes), {
    cachedFirst: true,
    readCached: (fd, target, position) => fake.readCached(fd, target, position),
  });
  t.teardown(() => reader.close());
  await reader.read({ segmentId: SEGMENT_ID, offset: 0, length: 1 }); // opens the file
  await new Promise((resolve) => setImmediate(resolve));
  fake.calls = 0;
  return { reader, fake };
}

t.test('at most 1 MiB is copied from the cache per turn of the event loop', async (t) => {
  const bytes = randomBytes(4 * 1024 * 1024);
  const { reader, fake } = await openedReader(t, bytes);
  // Twelve 256 KiB reads started in one turn: the first four fill the turn's 1 MiB.
  const reads = Array.from({ length: 12 }, (_, i) =>
    reader.read({ segmentId: SEGMENT_ID, offset: i * 262_144, length: 262_144 }),
  );
  const results = await Promise.all(reads);
  t.equal(fake.calls, 4, 'four cached copies, the other eight through the thread pool');
  results.forEach((read, i) =>
    t.ok(read.equals(bytes.subarray(i * 262_144, (i + 1) * 262_144)), `read ${i}`),
  );
  await new Promise((resolve) => setImmediate(resolve));
  await reader.read({ segmentId: SEGMENT_ID, offset: 0, length: 10 });
  t.equal(fake.calls, 5, 'the next turn copies from the cache again');
});

t.test('a reader without cachedFirst never tries the cache', async (t) => {
  const bytes = randomBytes(10_000);
  const fake = fakeCache(bytes, 1);
  const reader = new SegmentReader(segmentDir(t, bytes), {
    readCached: (fd, target, position) => fake.readCached(fd, target, position),
  });
  t.teardown(() => reader.close());
  const read = await reader.read({ segmentId: SEGMENT_ID, offset: 100, length: 5000 });
  t.ok(read.equals(bytes.subarray(100, 5100)));
  t.equal(fake.calls, 0);
});

t.test('with libc: the same bytes', { skip: !libc()?.readCached }, async (t) => {
  const bytes = randomBytes(300_000);
  const reader = new SegmentReader(segmentDir(t, bytes), { cachedFirst: true });
  t.teardown(() => reader.close());
  for (const range of ranges.filter((r) => r.offset + r.length <= bytes.length)) {
    const read = await reader.read({ segmentId: SEGMENT_ID, ...range });
    t.ok(read.equals(bytes.subarray(range.offset, range.offset + range.length)));
  }
  await t.rejects(reader.read({ segmentId: SEGMENT_ID, offset: 299_000, length: 2000 }), {
    code: 'segment_io',
  });
});

t.test('readNow: the whole record from the cache, or nothing', async (t) => {
  const bytes = randomBytes(300_000);
  let share = 1;
  const fake = fakeCache(bytes, 1);
  const reader = new SegmentReader(segmentDir(t, bytes), {
    cachedFirst: true,
    readCached: (fd, target, position) => {
      const copied = fake.readCached(fd, target, position);
      return copied === undefined ? undefined : Math.floor(copied * share);
    },
  });
  t.teardown(() => reader.close());
  const at = { segmentId: SEGMENT_ID, offset: 1000, length: 5000 };
  const copy = (read: Buffer): Buffer => Buffer.from(read);
  t.equal(reader.readNow(at, copy), undefined, 'not before the segment is open');
  t.equal(fake.calls, 0, 'and no read tried');
  await reader.read({ segmentId: SEGMENT_ID, offset: 0, length: 1 }); // opens the file
  t.ok(reader.readNow(at, copy)?.equals(bytes.subarray(1000, 6000)), 'the exact bytes');
  const second = reader.readNow({ ...at, offset: 200_000, length: 70_000 }, copy);
  t.ok(second?.equals(bytes.subarray(200_000, 270_000)), 'a larger record after a smaller one');
  share = 0.5;
  const before = fake.calls;
  t.equal(reader.readNow(at, copy), undefined, 'a record the cache holds only part of');
  t.equal(fake.calls, before + 1);
  share = 1;
  t.equal(
    reader.readNow({ ...at, length: 128 * 1024 + 1 }, copy),
    undefined,
    'a record over 128 KiB',
  );
  t.throws(
    () =>
      reader.readNow(at, () => {
        throw new RangeError('use failed');
      }),
    RangeError,
    "use's error reaches the caller",
  );
  reader.forget(SEGMENT_ID);
  t.equal(reader.readNow(at, copy), undefined, 'not once the segment is forgotten');
});

/** Whether libc's cached read works in the temp directory (a file just written is cached). */
function nowaitReads(): boolean {
  const dir = mkdtempSync(join(tmpdir(), 'lw-reader-probe-'));
  try {
    const path = join(dir, 'probe');
    writeFileSync(path, 'probe');
    const fd = openSync(path, 'r');
    try {
      return libc()?.readCached?.(fd, Buffer.alloc(5), 0) === 5;
    } finally {
      closeSync(fd);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const NOWAIT_SKIP = nowaitReads()
  ? false
  : 'no RWF_NOWAIT reads here (no libc, or the file system)';

t.test('readNow with libc: the same bytes', { skip: NOWAIT_SKIP }, async (t) => {
  const bytes = randomBytes(100_000);
  const reader = new SegmentReader(segmentDir(t, bytes), { cachedFirst: true });
  t.teardown(() => reader.close());
  await reader.read({ segmentId: SEGMENT_ID, offset: 0, length: 1 });
  const read = reader.readNow({ segmentId: SEGMENT_ID, offset: 4096, length: 9000 }, (b) =>
    Buffer.from(b),
  );
  t.ok(read?.equals(bytes.subarray(4096, 13_096)));
  const plain = new SegmentReader(segmentDir(t, bytes));
  t.teardown(() => plain.close());
  await plain.read({ segmentId: SEGMENT_ID, offset: 0, length: 1 });
  t.equal(
    plain.readNow({ segmentId: SEGMENT_ID, offset: 0, length: 10 }, (b) => b.length),
    undefined,
    'a reader without cachedFirst never reads now',
  );
});

t.test('readNow copies at most 1 MiB per turn, as cached reads do', async (t) => {
  const bytes = randomBytes(200_000);
  const { reader } = await openedReader(t, bytes);
  const at = { segmentId: SEGMENT_ID, offset: 0, length: 128 * 1024 };
  const reads = Array.from({ length: 9 }, () => reader.readNow(at, (b) => b.length));
  t.same(reads, [...new Array<number>(8).fill(128 * 1024), undefined], 'eight, then none');
  const late = await reader.read(at);
  t.ok(late.equals(bytes.subarray(0, 128 * 1024)), 'a read in the same turn goes through the pool');
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(
    reader.readNow(at, (b) => b.length),
    128 * 1024,
    'the next turn reads now again',
  );
});

t.test("a file that holds another segment's header is refused, never read", async (t) => {
  const bytes = randomBytes(4096);
  const dir = segmentDir(t, bytes);
  // Segment 8's file is a copy of segment 7's: misplaced.
  writeFileSync(join(dir, segmentFileName(8)), bytes);
  const reader = new SegmentReader(dir);
  t.teardown(() => reader.close());
  t.same(
    await reader.read({ segmentId: SEGMENT_ID, offset: 100, length: 10 }),
    bytes.subarray(100, 110),
  );
  const error = await reader
    .read({ segmentId: 8, offset: 100, length: 10 })
    .catch((e: unknown) => e);
  t.match(error, { code: 'segment_io' });
  t.match(String((error as { cause?: unknown }).cause ?? error), /header of segment 7/);
});
