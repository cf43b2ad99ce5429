// The segment writer: appends records to the one open segment its owner (a worker thread, or
// the engine's compactor) holds, and makes them durable with group fdatasync.
//
// Invariants:
// - One writer per open segment, so offsets are assigned synchronously without locks and
//   concurrent appends write disjoint ranges. Every append is exactly one record.
// - A segment is registered with the engine before its file exists; the file is created with
//   its header, fsynced, and its directory entry fsynced before the first record is appended.
// - `written()` of an append resolves only once its write *and the writes of every record
//   before it in the segment* completed; `durable()` only after an fdatasync that began after
//   that. Writes run concurrently and may finish out of order; recovery cuts a torn segment at
//   its first damaged record, so a record may be acknowledged (committed after the engine's
//   fdatasync of the segment, or after `durable()`) only when nothing before it can be damaged.
//   Concurrent appends share one fdatasync (group commit of data).
// - A failed write or fdatasync breaks the segment at the first record that is not known to be
//   durable: that record and every record behind it fail (`segment_io`), the writer moves to a
//   new segment, and the broken one is cut after its last good record and sealed there.
// - A failed fdatasync (of a record or of the seal) is reported to the registry (`failed`)
//   before anything else happens to the segment: the engine's syncer would not see it. A report
//   that did not arrive (the engine was down) is kept, and sent again by `reregister`.
// - After a reconnect the engine may be a new one, which knows nothing the old one was told
//   and whose handles hear of no write-back that failed before they were opened: `reregister`
//   sends the kept failures, fdatasyncs the open segment through the writer's own handle (held
//   from the segment's creation, so it hears of every failed write-back of the segment), and
//   registers it again (`opened`); until then the engine refuses commits into it
//   (segment-syncer.ts).
// - The engine holds its own handle of the segment from before the first record is written
//   (`opened`), so its fdatasync reports a failed write-back of the segment even while the
//   writer's report of it is still on its way (segment-syncer.ts).
// - A full segment is sealed once: pending writes finish, a seal footer is appended, the file is
//   fsynced (which covers every record in it), and the engine records the final size. No record
//   is appended to a segment once its seal has begun.
// - A seal that fails short of its fdatasync (the footer's write on a full disk, the engine's
//   commit of the size) is tried again, from the truncation to the cut point on, once the writer
//   could create a new segment (space has returned) and at `close()`: the segment is not left
//   open, its records out of compaction's reach, until the process ends. A seal whose
//   fdatasync failed is not retried: the segment is poisoned, and recovery seals it once its
//   writer is gone.
//
// The last bytes of the file system are not the writers': an append that would leave less than
// `spaceFloor` free (by default a thirty-second of the file system, at most 16 MiB) is refused
// with `disk_full` (503). They are the room the engine's index commits and compaction need once
// the space reserve was given back to them (space-reserve.ts): without the floor, uploads into
// segments already open would take that room, and deletes could then not commit. The free bytes
// are read (statfs, one reading at a time, shared by the appends waiting for it) only once the
// appends since the last reading took half of what was above the floor, so a roomy disk costs a
// comparison per append; between readings each append takes its bytes off the estimate before
// it writes, and a reading counts the writes still in flight as taken. The engine's own writers
// (compaction, re-encryption) keep half the floor: they run on the room the reserve gave them,
// and must still leave the index room to commit what they moved.
//
// Direct I/O (`directIo`: the pool workers' and the compactor's segments): records are written
// with O_DIRECT, from the process's memory straight to the device, instead of being copied into
// the page cache by the kernel. That copy (into pages it must allocate and later write back)
// had cost the pool's I/O threads 0.7-0.95 CPU-s per GB stored on the project machine, a fifth
// of a large PUT's CPU.
// Direct writes must start and end on block boundaries and come from aligned memory, so a
// write group is copied into an aligned staging buffer, after the bytes of the segment's last
// partial block (kept in `tail`; they are written again, unchanged) and before zero padding to
// the next boundary, which the next group overwrites. Two writes would share a block, so a
// segment's direct writes run one at a time, in order. Between groups the file therefore ends
// in zeros; recovery cuts an open segment there like any torn tail, and the seal cuts the file
// to its last record before the footer. Where the file system refuses O_DIRECT (tmpfs) or
// buffers cannot be aligned (no native library), writes go through the page cache as before.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import {
  encodeSegmentHeader,
  segmentFileName,
  SEGMENT_HEADER_SIZE,
} from '../../format/segment-header.js';
import { encodeSealFooter } from '../../format/seal-footer.js';
import { DiskFull, SegmentIoError } from '../../util/errors.js';
import { libc, native } from '../../util/libc.js';
import { alignedBuffer } from '../../util/buffer-pool.js';
import { nodeIo, O_DIRECT, O_WRONLY, type Io, type IoFile } from '../../util/io.js';
import { realClock, type Clock } from '../../util/clock.js';
import { segmentBytesFor } from '../space-reserve.js';

export interface SegmentRegistry {
  allocate(): Promise<number>;
  seal(segmentId: number, size: number): Promise<void>;
  /**
   * An fdatasync of the segment failed: the bytes it was to make durable may be lost, and the
   * kernel reports that once, to this writer, not to the engine whose own fdatasync of the
   * segment would then succeed. The engine must refuse every later commit into it
   * (segment-syncer.ts). Best effort: a failure to tell it is logged by the caller's registry.
   */
  failed?(segmentId: number): Promise<void>;
  /**
   * The segment's file exists (its header durable) and no record is written yet: the engine
   * opens the handle it will fdatasync the segment with, so that Linux reports to it every
   * write-back of the segment that fails from now on (segment-syncer.ts, `hold`). A writer
   * appends nothing before this resolved; when it fails, the segment is abandoned.
   */
  opened?(segmentId: number): Promise<void>;
}

export interface Appended {
  readonly segmentId: number;
  readonly offset: number;
  readonly length: number;
  /**
   * Resolves once the record and every record before it in its segment are written (in the
   * page cache, or with direct I/O in the device, not yet synced): from then on an fdatasync of
   * the segment, by any process, makes all of them durable (it writes back dirty pages and
   * flushes the device's cache), and a crash cannot leave a damaged record before this one.
   */
  written(): Promise<void>;
  /** Resolves once the record, and every record before it in its segment, is on disk. */
  durable(): Promise<void>;
}

/**
 * Written bytes after which the segment's write-out is started (`startWriteback`), so that the
 * fdatasync before a commit finds little left to write. Without it the kernel starts only at
 * 10% of memory dirty, and the commit of a 64 MiB upload waited for all of its bytes to reach
 * the disk: single-stream 64 MiB PUTs went from 311–319 to 344–363 MB/s with early write-out.
 */
const WRITEBACK_HINT_BYTES = 4 * 1024 * 1024;

/**
 * Starts the write-out of a file range and returns at once; `done` runs once that call has
 * returned. Answers false, and never calls `done`, when it could not start (see
 * Libc.startWriteback: a hint).
 */
export type StartWriteback = (
  fd: number,
  offset: number,
  length: number,
  done: () => void,
) => boolean;

/**
 * Alignment of direct writes: file offsets, lengths and buffer addresses. The logical block size
 * of current devices; devices with 512-byte blocks accept it too.
 */
export const DIRECT_IO_ALIGNMENT = 4096;

/** Staging buffers of direct writes grow in steps of this many bytes. */
const STAGING_GRANULE_BYTES = 1024 * 1024;

/**
 * Direct writes of one segment (see the header): one at a time, each group staged after the
 * bytes of the segment's last partial block and padded to the next block boundary.
 */
class DirectWrites {
  /** Bytes of the segment's last partial block, as on disk: file bytes [end - tailLength, end). */
  private readonly tail = Buffer.alloc(DIRECT_IO_ALIGNMENT);
  private tailLength: number;
  private staging: Buffer | undefined;
  /** Once a direct write failed, what is on disk in its blocks is unknown: nothing more goes. */
  private failed = false;

  constructor(
    private readonly handle: IoFile,
    written: Buffer,
    private readonly misalignment: (bytes: Uint8Array, alignment: number) => number,
  ) {
    // The segment so far (its header): its last partial block is the first tail.
    this.tailLength = written.length % DIRECT_IO_ALIGNMENT;
    written.copy(this.tail, 0, written.length - this.tailLength);
  }

  /** Writes `parts`, which belong at `offset`, the end of everything written before. */
  async write(parts: readonly Buffer[], offset: number): Promise<void> {
    if (this.failed) throw SegmentIoError('an earlier direct write of this segment failed');
    this.failed = true;
    const start = offset - this.tailLength;
    assert.equal(start % DIRECT_IO_ALIGNMENT, 0, 'direct writes continue at the tail');
    const bytes = parts.reduce((sum, part) => sum + part.length, this.tailLength);
    const length = alignUp(bytes);
    const staging = this.stagingFor(length);
    this.tail.copy(staging, 0, 0, this.tailLength);
    let at = this.tailLength;
    for (const part of parts) at += part.copy(staging, at);
    staging.fill(0, bytes, length);
    for (let done = 0; done < length;) {
      const { bytesWritten } = await this.handle.write(staging, done, length - done, start + done);
      if (bytesWritten <= 0 || bytesWritten % DIRECT_IO_ALIGNMENT !== 0)
        throw SegmentIoError('a direct write wrote a partial block', { offset: start + done });
      done += bytesWritten;
    }
    this.tailLength = bytes % DIRECT_IO_ALIGNMENT;
    staging.copy(this.tail, 0, bytes - this.tailLength, bytes);
    this.failed = false;
  }

  /** An aligned staging buffer of at least `length` bytes, reused from write to write. */
  private stagingFor(length: number): Buffer {
    if (this.staging && this.staging.length >= length) return this.staging;
    const size = Math.ceil(length / STAGING_GRANULE_BYTES) * STAGING_GRANULE_BYTES;
    this.staging = alignedBuffer(size, DIRECT_IO_ALIGNMENT, this.misalignment);
    return this.staging;
  }
}

/** `bytes` rounded up to a whole number of direct-I/O blocks. */
export function alignUp(bytes: number): number {
  return Math.ceil(bytes / DIRECT_IO_ALIGNMENT) * DIRECT_IO_ALIGNMENT;
}

/** Buffers in one writev (the system's limit, IOV_MAX, is 1024). */
const GROUP_PARTS_MAX = 512;
/** Bytes after which a write group takes no more records. */
const GROUP_BYTES_MAX = 8 * 1024 * 1024;

/**
 * Consecutive records written with one writev. Its records complete together, or fail together
 * (the segment breaks at the group's first record).
 */
interface WriteGroup {
  readonly first: number;
  last: number;
  readonly offset: number;
  end: number;
  readonly parts: Buffer[];
  readonly written: Promise<void>;
  /** Starts the write (once the group takes no more records). */
  readonly issue: () => void;
}

class OpenSegment {
  size = SEGMENT_HEADER_SIZE;
  /** The seal has begun: nothing more is appended. */
  closing = false;
  /** Writes issued; write n (1-based) is the segment's n-th record. */
  private issued = 0;
  /** Writes 1..contiguous have all completed; they end at `contiguousEnd`. */
  private contiguous = 0;
  private contiguousEnd = SEGMENT_HEADER_SIZE;
  private readonly completedAhead = new Set<number>();
  /** End offsets of the writes past the contiguous prefix (bounded by the writes in flight). */
  private readonly ends = new Map<number, number>();
  /** Writes 1..syncedThrough are durable; they end at `syncedEnd`. */
  private syncedThrough = 0;
  private syncedEnd = SEGMENT_HEADER_SIZE;
  private syncing: Promise<void> | undefined;
  private waiters: Array<() => void> = [];
  /** The first write that is not durable and never will be; set once the segment broke. */
  brokenAt: number | undefined;
  /** Not sealed by the writer: its cut point is unknown (see `checkWriteBack`). */
  leftToRecovery = false;
  private failure: unknown;
  private readonly inFlight = new Set<Promise<unknown>>();
  /** The write group still taking records, if any. */
  private group: WriteGroup | undefined;
  /** Bytes before this offset have had their write-out started. */
  private writebackEnd = SEGMENT_HEADER_SIZE;
  /** The write-out hint in flight (at most one per segment), settled once its call returned. */
  private writeback: Promise<void> | undefined;
  /** The last write group's completion, which a direct write waits for. */
  private previousGroup: Promise<void> = Promise.resolve();

  constructor(
    readonly id: number,
    readonly handle: IoFile,
    private readonly onBroken: (segment: OpenSegment) => void,
    private readonly onSyncFailed: (segment: OpenSegment) => Promise<void>,
    private readonly startWriteback: StartWriteback | undefined,
    /** Present when the segment is written with O_DIRECT (see the header). */
    readonly direct?: DirectWrites,
  ) {}

  /**
   * Issues the write of the next record at `offset`; resolves with its record number. Records
   * appended in one event-loop iteration are written together, with one writev (see
   * WriteGroup).
   */
  write(parts: readonly Buffer[], offset: number, length: number): Promise<number> {
    const number = ++this.issued;
    this.ends.set(number, offset + length);
    let group = this.group;
    if (
      !group ||
      group.end !== offset ||
      group.parts.length + parts.length > GROUP_PARTS_MAX ||
      group.end - group.offset >= GROUP_BYTES_MAX
    ) {
      group = this.openGroup(number, offset);
    }
    for (const part of parts) if (part.length > 0) group.parts.push(part);
    group.last = number;
    group.end = offset + length;
    return group.written.then(() => number);
  }

  private openGroup(first: number, offset: number): WriteGroup {
    let issue!: () => void;
    const start = new Promise<void>((resolve) => (issue = resolve));
    const parts: Buffer[] = [];
    const direct = this.direct;
    const previous = this.previousGroup;
    const written = start
      .then(() =>
        direct
          ? previous.then(() => direct.write(parts, offset))
          : writeAll(this.handle, parts, offset),
      )
      .then(
        () => {
          for (let number = group.first; number <= group.last; number += 1)
            this.completedAhead.add(number);
          while (this.completedAhead.delete(this.contiguous + 1)) {
            this.contiguous += 1;
            this.contiguousEnd = this.ends.get(this.contiguous) as number;
            this.ends.delete(this.contiguous);
          }
          this.hintWriteback();
          this.wake();
        },
        (error: unknown) => {
          this.breakAt(group.first, error);
          throw error;
        },
      );
    const group: WriteGroup = { first, last: first, offset, end: offset, parts, written, issue };
    this.previousGroup = written.catch(() => undefined);
    this.inFlight.add(written);
    void written.finally(() => this.inFlight.delete(written)).catch(() => undefined);
    // The group takes records until the end of this event-loop iteration (or until it is full).
    if (this.group) this.issueGroup(this.group);
    this.group = group;
    setImmediate(() => this.issueGroup(group));
    return group;
  }

  /**
   * Starts the write-out of what was written since the last hint, once that is 4 MiB, unless a
   * hint is still in flight (the next completed write catches up). Never throws: it runs in a
   * write's completion, which must not fail for it.
   */
  private hintWriteback(): void {
    const pending = this.contiguousEnd - this.writebackEnd;
    if (!this.startWriteback || this.writeback || pending < WRITEBACK_HINT_BYTES) return;
    let done!: () => void;
    const writeback = new Promise<void>((resolve) => (done = resolve));
    if (!this.startWriteback(this.handle.fd, this.writebackEnd, pending, done)) return;
    this.writebackEnd = this.contiguousEnd;
    this.writeback = writeback.then(() => {
      this.writeback = undefined;
    });
  }

  /** Resolves once no write-out hint is in flight on the file descriptor (before close). */
  async writebackSettled(): Promise<void> {
    await this.writeback;
  }

  private issueGroup(group: WriteGroup): void {
    if (this.group === group) this.group = undefined;
    group.issue();
  }

  /** Resolves when records 1..number have all been written (not necessarily synced). */
  async writtenThrough(number: number): Promise<void> {
    for (;;) {
      this.checkNotBroken(number);
      if (this.contiguous >= number) return;
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  /** Resolves when records 1..number are all written and covered by a completed fdatasync. */
  async syncThrough(number: number): Promise<void> {
    for (;;) {
      this.checkNotBroken(number);
      if (this.syncedThrough >= number) return;
      if (this.contiguous < number) {
        await this.writtenThrough(number);
        continue;
      }
      this.syncing ??= this.sync().finally(() => {
        this.syncing = undefined;
      });
      await this.syncing;
    }
  }

  /**
   * An fdatasync through this handle that starts now, whatever is synced already: it reports a
   * write-back of the segment that failed since the handle was opened (after a failure, the
   * segment breaks as after any failed fdatasync). Answers whether the segment is whole.
   */
  async checkWriteBack(): Promise<boolean> {
    while (this.syncing) await this.syncing;
    if (this.brokenAt !== undefined) return false;
    try {
      await this.handle.datasync();
      return true;
    } catch (error) {
      // The engine's own fdatasyncs made records durable that this writer never synced, and it
      // committed them: the writer cannot tell where they end, so it does not cut the segment
      // (`leftToRecovery`), which recovery cuts at its first damaged record once the writer is
      // gone. Records not known durable here fail, and nothing more is appended.
      this.leftToRecovery = true;
      await this.onSyncFailed(this);
      this.breakAt(this.syncedThrough + 1, error);
      return false;
    }
  }

  private checkNotBroken(number: number): void {
    if (this.brokenAt !== undefined && this.brokenAt <= number) {
      throw SegmentIoError(
        `segment ${this.id} failed before record ${number} was durable`,
        { segmentId: this.id },
        { cause: this.failure },
      );
    }
  }

  private async sync(): Promise<void> {
    // A broken segment never syncs past its break: contiguous < brokenAt unless the break was
    // an earlier fdatasync failure, which leaves nothing more to sync.
    if (this.brokenAt !== undefined && this.contiguous >= this.brokenAt) return;
    const upTo = this.contiguous;
    const upToEnd = this.contiguousEnd;
    try {
      await this.handle.datasync();
    } catch (error) {
      // After a failed fdatasync the state of every unsynced page is unknown.
      await this.onSyncFailed(this);
      this.breakAt(this.syncedThrough + 1, error);
      return;
    }
    this.markSynced(upTo, upToEnd);
  }

  /**
   * Records 1..upTo, ending at `end`, are on disk (an fdatasync that began after they were
   * written finished).
   */
  markSynced(upTo: number, end: number): void {
    if (upTo <= this.syncedThrough) return;
    this.syncedThrough = upTo;
    this.syncedEnd = end;
  }

  private breakAt(number: number, error: unknown): void {
    const first = this.brokenAt === undefined;
    if (first || number < (this.brokenAt as number)) this.brokenAt = number;
    this.failure ??= error;
    this.wake();
    if (first) this.onBroken(this);
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }

  /**
   * Where the segment is sealed, and how many records stay before that point; call after
   * `drain()`. A broken segment is cut after its last good record: after a failed write every
   * write before it has completed (contiguous = brokenAt - 1); after a failed fdatasync only the
   * records it had synced before are known good (syncedThrough = brokenAt - 1).
   */
  cutPoint(): { offset: number; records: number } {
    if (this.brokenAt === undefined) return { offset: this.size, records: this.issued };
    const records = this.brokenAt - 1;
    if (records === this.syncedThrough) return { offset: this.syncedEnd, records };
    if (records === this.contiguous) return { offset: this.contiguousEnd, records };
    throw SegmentIoError(
      `segment ${this.id}: no cut point for a break at record ${this.brokenAt}`,
      { segmentId: this.id },
    );
  }

  async drain(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }
}

async function writeAll(handle: IoFile, parts: readonly Buffer[], position: number): Promise<void> {
  let offset = position;
  let pending = parts.filter((part) => part.length > 0);
  while (pending.length > 0) {
    const { bytesWritten } = await handle.writev(pending, offset);
    if (bytesWritten === 0) throw SegmentIoError('writev wrote nothing', { offset });
    offset += bytesWritten;
    pending = skipWritten(pending, bytesWritten);
  }
}

function skipWritten(parts: Buffer[], written: number): Buffer[] {
  let rest = written;
  const remaining: Buffer[] = [];
  for (const part of parts) {
    if (rest >= part.length) rest -= part.length;
    else {
      remaining.push(rest > 0 ? part.subarray(rest) : part);
      rest = 0;
    }
  }
  return remaining;
}

export class SegmentWriter {
  private current: OpenSegment | undefined;
  private opening: Promise<OpenSegment> | undefined;
  private readonly sealing = new Set<Promise<void>>();
  /** Segments whose seal failed short of its fdatasync: sealed again later (see the header). */
  private readonly unsealed = new Map<number, OpenSegment>();
  /** Segments whose failed fdatasync the registry has not confirmed hearing of. */
  private readonly unreported = new Set<number>();

  constructor(
    private readonly options: {
      segmentsDir: string;
      registry: SegmentRegistry;
      segmentBytesMax: number;
      /** Defaults to libc's sync_file_range where it can be reached; none elsewhere. */
      startWriteback?: StartWriteback | undefined;
      /** Writes records with O_DIRECT where the file system and the native library allow. */
      directIo?: boolean;
      /** The file system (node:fs by default; tests inject faults). */
      io?: Io;
      /** Timestamps of headers and footers (the wall clock by default). */
      clock?: Clock;
      /** Bytes appends leave free on a disk of `totalBytes` (see the header); 0: none. */
      spaceFloor?: (totalBytes: number) => number;
    },
  ) {
    this.io = options.io ?? nodeIo;
    this.clock = options.clock ?? realClock;
  }

  private readonly io: Io;
  private readonly clock: Clock;
  /**
   * `segmentBytesMax`, capped for the file system the segments are on (space-reserve.ts), so
   * that compaction can copy a segment on a small disk; known once the first segment is made.
   */
  private bytesMax: number | undefined;
  /** The floor (see the header), once known; 0: none. */
  private floor: number | undefined;
  /** Free bytes at the last reading, and that less what appends took since. */
  private freeRead = 0;
  private freeLeft = 0;
  /** Bytes of appends whose writes have not completed (not yet in a reading's figures). */
  private inFlight = 0;
  private reading: Promise<void> | undefined;

  /** Appends one record (given as parts, written contiguously). */
  async append(parts: readonly Buffer[]): Promise<Appended> {
    const length = parts.reduce((sum, part) => sum + part.length, 0);
    // Awaits only when the free bytes must be read (see the header).
    if (this.floor !== 0 && this.mustRead(length))
      await (this.reading ??= this.readFree().finally(() => (this.reading = undefined)));
    const taken = this.floor === 0 ? 0 : this.takeRoom(length);
    let segment: OpenSegment;
    for (;;) {
      segment =
        this.current ??
        (await this.openNext().catch((error: unknown) => this.giveBack(taken, error)));
      if (segment.closing) continue;
      if (
        segment.size > SEGMENT_HEADER_SIZE &&
        segment.size + length > (this.bytesMax ?? this.options.segmentBytesMax)
      ) {
        this.retire(segment);
        continue;
      }
      break;
    }
    const offset = segment.size;
    segment.size += length;
    let number: number;
    try {
      number = await segment.write(parts, offset, length);
    } catch (cause) {
      throw writeFailure(`write to segment ${segment.id} failed`, segment.id, cause);
    } finally {
      this.inFlight -= taken;
    }
    const target = segment;
    return {
      segmentId: segment.id,
      offset,
      length,
      written: () => target.writtenThrough(number),
      durable: () => target.syncThrough(number),
    };
  }

  /** An append that took room failed before it wrote: its bytes go back to the estimate. */
  private giveBack(taken: number, error: unknown): never {
    this.inFlight -= taken;
    this.freeLeft += taken;
    throw error;
  }

  /** Whether an append of `length` bytes needs a new reading of the free bytes first. */
  private mustRead(length: number): boolean {
    const floor = this.floor;
    return floor === undefined || this.freeLeft - length - floor < (this.freeRead - floor) / 2;
  }

  /**
   * Takes `length` bytes off the free estimate (answering what it took), or refuses if that
   * would cross the floor.
   */
  private takeRoom(length: number): number {
    const floor = this.floor ?? 0;
    if (floor === 0) return 0;
    if (this.freeLeft - length < floor)
      throw DiskFull('the data filesystem is short of space; its last bytes are kept', {
        freeBytes: this.freeLeft,
      });
    this.freeLeft -= length;
    this.inFlight += length;
    return length;
  }

  private async readFree(): Promise<void> {
    const figures = await this.io.statfs?.(this.options.segmentsDir).catch(() => undefined);
    if (!figures) {
      this.floor ??= 0; // a file system that cannot tell: no floor
      return;
    }
    this.floor ??= (this.options.spaceFloor ?? spaceFloorFor)(figures.totalBytes);
    this.freeRead = figures.freeBytes - this.inFlight;
    this.freeLeft = this.freeRead;
  }

  private openNext(): Promise<OpenSegment> {
    this.opening ??= this.create().then(
      (segment) => {
        this.current = segment;
        this.opening = undefined;
        return segment;
      },
      (error: unknown) => {
        this.opening = undefined;
        throw error;
      },
    );
    return this.opening;
  }

  private async create(): Promise<OpenSegment> {
    const { io } = this;
    this.bytesMax ??= segmentBytesFor(
      this.options.segmentBytesMax,
      (await io.statfs?.(this.options.segmentsDir).catch(() => undefined))?.totalBytes,
    );
    const segmentId = await this.options.registry.allocate();
    const path = join(this.options.segmentsDir, segmentFileName(segmentId));
    let handle: IoFile;
    try {
      handle = await io.open(path, 'wx', 0o644);
    } catch (error) {
      await this.abandon(segmentId, path);
      throw writeFailure(`cannot create segment ${segmentId}`, segmentId, error);
    }
    const header = encodeSegmentHeader({ segmentId, createdAtMs: this.clock.now() });
    try {
      await handle.write(header, 0, SEGMENT_HEADER_SIZE, 0);
      await handle.datasync();
      await io.syncDirectory(this.options.segmentsDir);
      await this.options.registry.opened?.(segmentId);
    } catch (error) {
      await handle.close().catch(() => undefined);
      await this.abandon(segmentId, path);
      throw writeFailure(`cannot create segment ${segmentId}`, segmentId, error);
    }
    // A segment could be made: there is room again for the seals that found none.
    this.retrySeals();
    const direct =
      this.options.directIo && io.native ? await openDirect(io, path, header) : undefined;
    // The buffered handle served the header; a direct segment goes on with its own.
    if (direct) await handle.close().catch(() => undefined);
    return new OpenSegment(
      segmentId,
      direct?.handle ?? handle,
      (broken) => this.retire(broken),
      (failed) => this.reportSyncFailure(failed.id),
      direct || !io.native
        ? undefined
        : 'startWriteback' in this.options
          ? this.options.startWriteback
          : libc()?.startWriteback,
      direct?.writes,
    );
  }

  /**
   * A segment that could not be created holds no record: its file goes, and it is sealed empty,
   * so that compaction retires its entry now instead of leaving it open (and its file's blocks
   * taken) until the writer's process ends. Best effort, never throws: what is left is what
   * recovery finds of a writer that died.
   */
  private async abandon(segmentId: number, path: string): Promise<void> {
    // The removal is made durable too: the file's name may be durable already, and a crash
    // would bring back a file that the index says is empty.
    await this.io
      .unlink(path)
      .then(() => this.io.syncDirectory(this.options.segmentsDir))
      .catch(() => undefined);
    await this.options.registry.seal(segmentId, 0).catch(() => undefined);
  }

  /**
   * Tells the registry that an fdatasync of the segment failed; never throws. A report that
   * did not arrive is kept for `reregister`.
   */
  private async reportSyncFailure(segmentId: number): Promise<void> {
    const { registry } = this.options;
    if (!registry.failed) return;
    this.unreported.add(segmentId);
    try {
      await registry.failed(segmentId);
      this.unreported.delete(segmentId);
    } catch {
      // Kept: sent again at the next connection.
    }
  }

  /**
   * Whether the engine must hear from this writer after it restarted: a segment is open (or
   * being created), or a failure's report did not arrive.
   */
  get needsEngine(): boolean {
    return this.current !== undefined || this.opening !== undefined || this.unreported.size > 0;
  }

  /**
   * After a new connection to the engine (which may have restarted; see the header): sends
   * again the failures it has not confirmed, then checks the open segment's write-back through
   * the writer's own handle and registers the segment again. Never throws: what is not done is
   * done at the next connection, and meanwhile the engine refuses commits into the segment.
   */
  async reregister(): Promise<void> {
    const { registry } = this.options;
    await Promise.all([...this.unreported].map((segmentId) => this.reportSyncFailure(segmentId)));
    const segment = this.current ?? (await this.opening?.catch(() => undefined));
    if (!segment || segment.closing || !registry.opened) return;
    // A failure is reported by the segment's own sync path (onSyncFailed), which breaks it.
    if (!(await segment.checkWriteBack())) return;
    try {
      await registry.opened(segment.id);
    } catch {
      // Registered at the next connection; meanwhile the engine refuses commits into it.
    }
  }

  /** Stops appending to `segment` and seals it (once). */
  private retire(segment: OpenSegment): void {
    if (this.current === segment) this.current = undefined;
    if (segment.closing) return;
    segment.closing = true;
    this.track(this.seal(segment));
  }

  private track(seal: Promise<void>): void {
    const sealed = seal.finally(() => this.sealing.delete(sealed));
    this.sealing.add(sealed);
    sealed.catch(() => undefined);
  }

  /** Seals again the segments whose seal failed short of its fdatasync (see the header). */
  private retrySeals(): void {
    for (const segment of this.unsealed.values()) {
      this.unsealed.delete(segment.id);
      this.track(this.sealAgain(segment));
    }
  }

  /**
   * A seal again, through a new handle of the page cache: the file is cut to the segment's cut
   * point (a footer may have been written in part), and the footer written, synced and
   * committed as the first seal would have.
   */
  private async sealAgain(segment: OpenSegment): Promise<void> {
    let handle: IoFile | undefined;
    try {
      await this.writeSeal(segment, async () => {
        const { offset, records } = segment.cutPoint();
        handle = await this.io.open(
          join(this.options.segmentsDir, segmentFileName(segment.id)),
          'r+',
        );
        await handle.truncate(offset);
        return { handle, offset, records };
      });
    } finally {
      await handle?.close().catch(() => undefined);
    }
  }

  /** Resolves once no seal is in progress (tests). */
  async sealsSettled(): Promise<void> {
    await Promise.allSettled([...this.sealing]);
  }

  private async seal(segment: OpenSegment): Promise<void> {
    let plain: IoFile | undefined;
    try {
      await this.writeSeal(segment, async () => {
        await segment.drain();
        if (segment.leftToRecovery)
          throw SegmentIoError(`segment ${segment.id} is left for recovery to cut and seal`, {
            segmentId: segment.id,
          });
        const { offset, records } = segment.cutPoint();
        // The footer is not block-aligned: a segment written directly is sealed through a
        // handle of the page cache (every direct write has completed, so the two agree), and
        // cut first, since its file ends in the zero padding of its last block.
        if (segment.direct) {
          plain = await this.io.open(
            join(this.options.segmentsDir, segmentFileName(segment.id)),
            'r+',
          );
        }
        const handle = plain ?? segment.handle;
        if (segment.brokenAt !== undefined || plain) await handle.truncate(offset);
        return { handle, offset, records };
      });
    } finally {
      // FileHandle.close waits for the operations still running on the handle, but not for a
      // write-out hint, which holds only the descriptor number: a hint still queued when the
      // number is reused would land on another file (harmless, but not ours to touch).
      await segment.writebackSettled();
      await Promise.allSettled([plain?.close()]);
      await segment.handle.close();
    }
  }

  /**
   * The steps every seal shares, after `prepare` gave the handle to seal through, cut at the
   * segment's cut point: the footer's write, the fdatasync (a failure reported to the registry
   * first), and the engine's commit of the size. A seal that failed short of its fdatasync (a
   * full disk, above all) or at the commit is sealed again later (see the header).
   */
  private async writeSeal(
    segment: OpenSegment,
    prepare: () => Promise<{ handle: IoFile; offset: number; records: number }>,
  ): Promise<void> {
    let phase: SealPhase = 'write';
    try {
      const { handle, offset, records } = await prepare();
      const footer = encodeSealFooter({
        recordCount: records,
        dataEnd: offset,
        sealedAtMs: this.clock.now(),
      });
      await writeAll(handle, [footer], offset);
      phase = 'sync';
      try {
        await handle.datasync();
      } catch (error) {
        await this.reportSyncFailure(segment.id);
        throw error;
      }
      // This fdatasync began after every record before the cut was written: they are durable.
      segment.markSynced(records, offset);
      phase = 'commit';
      await this.options.registry.seal(segment.id, offset + footer.length);
    } catch (error) {
      if (sealAgainAfter(phase, error)) this.unsealed.set(segment.id, segment);
      throw error;
    }
  }

  /**
   * Seals the open segment (on shutdown) and waits for every seal in progress; answers whether
   * all of them succeeded (a segment whose seal failed is left to recovery).
   */
  async close(): Promise<boolean> {
    const segment = this.current ?? (await this.opening?.catch(() => undefined));
    if (segment) this.retire(segment);
    this.retrySeals();
    const seals = await Promise.allSettled([...this.sealing]);
    return seals.every((seal) => seal.status === 'fulfilled');
  }
}

/**
 * A second handle of a new segment that writes with O_DIRECT, where the file system accepts it
 * (tmpfs refuses with EINVAL) and buffers can be aligned (the native library is there).
 */
async function openDirect(
  io: Io,
  path: string,
  written: Buffer,
): Promise<{ handle: IoFile; writes: DirectWrites } | undefined> {
  const misalignment = native()?.misalignment;
  if (!misalignment || O_DIRECT === 0) return undefined;
  let handle: IoFile;
  try {
    handle = await io.open(path, O_WRONLY | O_DIRECT);
  } catch {
    return undefined;
  }
  const writes = new DirectWrites(handle, written, misalignment);
  try {
    // Some file systems accept the flag and refuse the writes: find out before a record depends
    // on it, by writing the header's block again (the header and zero padding).
    await writes.write([], written.length);
  } catch {
    await handle.close().catch(() => undefined);
    return undefined;
  }
  return { handle, writes };
}

/** How far a seal got: its footer's write, its fdatasync, the engine's commit of its size. */
type SealPhase = 'write' | 'sync' | 'commit';

/**
 * Whether a seal that failed is tried again (see the header): one that found the disk full
 * before its fdatasync, or whose size the engine did not commit; never one whose fdatasync
 * failed.
 */
function sealAgainAfter(phase: SealPhase, error: unknown): boolean {
  return phase === 'commit' || (phase === 'write' && enospc(error));
}

/** The uploads' floor of free bytes on a file system of `totalBytes` (see the header). */
export function spaceFloorFor(totalBytes: number): number {
  return Math.min(16 * 1024 * 1024, Math.floor(totalBytes / 32));
}

/** The engine's own writers' floor: half the uploads' (see the header). */
export function engineSpaceFloorFor(totalBytes: number): number {
  return Math.floor(spaceFloorFor(totalBytes) / 2);
}

/**
 * The error of a failed append or segment creation: `disk_full` (503, reaching clients as
 * `unavailable` with Retry-After) when the filesystem is full, so that a client retries later
 * rather than report a fault; `segment_io` (500) otherwise. The writer moves to a new segment
 * after either, so writes resume, without a restart, as soon as space returns.
 */
function writeFailure(message: string, segmentId: number, cause: unknown): Error {
  if (enospc(cause)) return DiskFull(`${message}: no space left`, { segmentId }, { cause });
  return SegmentIoError(message, { segmentId }, { cause });
}

function enospc(error: unknown): boolean {
  for (let at = error, depth = 0; at && depth < 4; depth += 1) {
    if ((at as NodeJS.ErrnoException).code === 'ENOSPC') return true;
    at = (at as { cause?: unknown }).cause;
  }
  return false;
}

/** Makes a directory's entries durable (node:fs by default). */
export function syncDirectory(dir: string, io: Io = nodeIo): Promise<void> {
  return io.syncDirectory(dir);
}
