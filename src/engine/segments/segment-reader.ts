// The segment reader: positional reads of whole records, with a small cache of open files.
//
// A reader made with `cachedFirst` copies what the page cache already holds of a record at once
// (preadv2 with RWF_NOWAIT, which never waits for the disk) and reads only the rest through
// libuv's thread pool: for a small record the trip through the pool costs more than the copy.
// A loop of cached reads would never give its event loop a turn (an awaited read that is already
// complete continues at once), so at most CACHED_BYTES_PER_TURN are copied per turn of the loop;
// later reads in the same turn go through the pool, which yields. The gateway's inline reader and
// the pool workers use it; the engine's scrub, a long loop of reads, does not. Such a reader also
// reads a small record without waiting at all (`readNow`), when its segment is already open and
// the page cache holds the whole record: the gateway serves a small object in one synchronous
// pass, with no buffer allocated for the record and no promise.
//
// A reader made with `direct` reads records of at least `direct.minBytes` with O_DIRECT, into an
// aligned staging buffer that it reuses: the pool workers' segments are written that way
// (segment-writer.ts), so their records are not in the page cache, and a buffered read would
// copy each one into pages first (measured here: direct 2.2-2.8 GB/s at 0.12 CPU-s per GB,
// buffered from the disk 0.35-1.3 GB/s at 0.15-2.8). Such a read hands its bytes to the
// caller's `use` and takes the buffer back when `use` returns.
//
// A compacted segment is deleted after a grace period; a reader that still holds its file open
// keeps reading the old bytes (POSIX unlink semantics), and one that finds the file gone gets
// `not_found` with `segmentMissing` set, so that the caller re-resolves the chunk's new location
// once. Cached handles are closed when evicted or after they sit idle.

import { join } from 'node:path';
import {
  decodeSegmentHeader,
  segmentFileName,
  SEGMENT_HEADER_SIZE,
} from '../../format/segment-header.js';
import { NotFound, SegmentIoError } from '../../util/errors.js';
import { libc, type Libc } from '../../util/libc.js';
import { alignedBuffer, BufferPool } from '../../util/buffer-pool.js';
import { alignUp, DIRECT_IO_ALIGNMENT } from './segment-writer.js';
import { nodeIo, O_DIRECT, O_RDONLY, type Io, type IoFile } from '../../util/io.js';
import { realClock, type Clock } from '../../util/clock.js';

const HANDLES_MAX = 64;
const CACHED_BYTES_PER_TURN = 1024 * 1024;
/** The largest record `readNow` reads: its buffer is kept for the next read. */
const READ_NOW_BYTES_MAX = 128 * 1024;
/**
 * A cached handle unused this long is closed. Short, because a handle holds the blocks of a
 * segment that compaction deleted: on a full disk they come back only once it is closed (a
 * segment read steadily stays open; an open costs microseconds).
 */
const IDLE_CLOSE_MS = 10_000;

interface CachedHandle {
  handle: Promise<IoFile>;
  /** The descriptor, once `handle` has opened. */
  fd?: number;
  /** The same file opened with O_DIRECT, once a direct read wanted it. */
  direct?: Promise<IoFile | undefined>;
  usedAt: number;
  /** Reads in progress: a dropped handle is closed only when they are done. */
  readers: number;
  dropped: boolean;
}

export interface SegmentReaderOptions {
  /** Copy what the page cache holds before reading asynchronously (see the header). */
  readonly cachedFirst?: boolean;
  /** The cached read; libc's by default (tests pass their own). */
  readonly readCached?: Libc['readCached'] | undefined;
  /** Read records of at least `minBytes` with O_DIRECT (see the header). */
  readonly direct?: {
    readonly minBytes: number;
    readonly misalignment: (bytes: Uint8Array, alignment: number) => number;
  };
  /** The file system (node:fs by default). The fast paths need a native one. */
  readonly io?: Io;
  /** When a cached handle was last used (idle ones are closed). */
  readonly clock?: Clock;
}

/** Staging buffers kept for reuse: a worker runs two tasks at once. */
const STAGING_KEPT_MAX = 2;

export class SegmentReader {
  private readonly handles = new Map<number, CachedHandle>();
  private readonly sweeper: NodeJS.Timeout;
  private readonly readCached: Libc['readCached'] | undefined;
  /** Bytes copied from the page cache in this turn of the event loop. */
  private cachedThisTurn = 0;
  /** Direct reads: the smallest record read so, and the aligned staging buffers. */
  private readonly direct: { readonly minBytes: number; readonly staging: BufferPool } | undefined;
  /** The file system refused O_DIRECT once: every read is buffered from then on. */
  private directRefused = false;
  /** What `readNow` reads into, grown to the largest record it has read. */
  private nowBuffer = Buffer.alloc(0);
  private readonly io: Io;
  private readonly clock: Clock;

  constructor(
    private readonly segmentsDir: string,
    options: SegmentReaderOptions = {},
  ) {
    this.io = options.io ?? nodeIo;
    this.clock = options.clock ?? realClock;
    const fast = this.io.native;
    this.readCached =
      options.cachedFirst && fast ? (options.readCached ?? libc()?.readCached) : undefined;
    const direct = fast && O_DIRECT !== 0 ? options.direct : undefined;
    this.direct = direct && {
      minBytes: direct.minBytes,
      staging: new BufferPool(STAGING_KEPT_MAX, (bytes) =>
        alignedBuffer(bytes, DIRECT_IO_ALIGNMENT, direct.misalignment),
      ),
    };
    this.sweeper = setInterval(() => this.closeIdle(), IDLE_CLOSE_MS / 2);
    this.sweeper.unref();
  }

  /**
   * Reads a record and answers what `use` makes of its bytes, which are valid only while `use`
   * runs (a direct read's staging buffer is reused afterwards): `use` must be synchronous and
   * must not keep them.
   */
  async readWith<T>(
    location: { segmentId: number; offset: number; length: number },
    use: (bytes: Buffer) => T,
  ): Promise<T> {
    const cached = this.cachedOf(location.segmentId);
    cached.readers += 1;
    try {
      const direct =
        this.direct && location.length >= this.direct.minBytes ? this.direct : undefined;
      const handle = direct && (await this.openedDirect(cached, location.segmentId));
      if (direct && handle) {
        try {
          return await this.readDirect(handle, direct.staging, location, use);
        } catch (error) {
          // Some file systems open with O_DIRECT but refuse block-aligned reads (larger
          // sectors): read buffered from then on.
          if ((error as NodeJS.ErrnoException).code !== 'EINVAL') throw error;
          this.directRefused = true;
        }
      }
      return use(await this.readBuffered(cached, location));
    } finally {
      cached.readers -= 1;
      if (cached.dropped && cached.readers === 0) closeHandle(cached);
    }
  }

  /**
   * Reads a record without waiting, when its segment is open here and the page cache holds all
   * of it: answers what `use` makes of its bytes, which are valid only while `use` runs (the
   * buffer is reused by the next call), or undefined when the read would wait; then call
   * `readWith`. Such reads count against the same CACHED_BYTES_PER_TURN as `readWith`'s cached
   * copies: many requests handled in one turn (pipelined in one packet, say) read the rest
   * through the pool, which yields.
   */
  readNow<T>(
    location: { segmentId: number; offset: number; length: number },
    use: (bytes: Buffer) => T,
  ): T | undefined {
    const { readCached } = this;
    if (!readCached || location.length > READ_NOW_BYTES_MAX) return undefined;
    if (this.direct && location.length >= this.direct.minBytes) return undefined;
    if (this.cachedThisTurn >= CACHED_BYTES_PER_TURN) return undefined;
    const cached = this.handles.get(location.segmentId);
    if (cached?.fd === undefined) return undefined;
    if (this.nowBuffer.length < location.length)
      this.nowBuffer = Buffer.allocUnsafeSlow(location.length);
    const target = this.nowBuffer.subarray(0, location.length);
    const copied = readCached(cached.fd, target, location.offset);
    this.chargeCached(copied ?? 0);
    if (copied !== location.length) return undefined;
    this.cachedOf(location.segmentId); // marks it used
    return use(target);
  }

  /** Reads a record into a buffer of its own. */
  read(location: { segmentId: number; offset: number; length: number }): Promise<Buffer> {
    return this.readWith(location, (bytes) =>
      this.direct && location.length >= this.direct.minBytes ? Buffer.from(bytes) : bytes,
    );
  }

  private async readDirect<T>(
    handle: IoFile,
    staging: BufferPool,
    location: { segmentId: number; offset: number; length: number },
    use: (bytes: Buffer) => T,
  ): Promise<T> {
    const start = location.offset - (location.offset % DIRECT_IO_ALIGNMENT);
    const end = location.offset + location.length;
    const span = alignUp(end - start);
    const buffer = staging.take(span);
    try {
      let filled = 0;
      // The last block of a sealed segment may be short: the read stops at the file's end.
      while (start + filled < end) {
        const bytesRead = await this.io.pread(
          handle,
          buffer,
          filled,
          span - filled,
          start + filled,
        );
        if (bytesRead === 0)
          throw SegmentIoError(`segment ${location.segmentId} ends before ${end}`);
        filled += bytesRead;
      }
      const from = location.offset - start;
      return use(buffer.subarray(from, from + location.length));
    } finally {
      staging.give(buffer);
    }
  }

  /** The O_DIRECT handle of the segment; undefined where the file system refuses it. */
  private async openedDirect(cached: CachedHandle, segmentId: number): Promise<IoFile | undefined> {
    if (this.directRefused) return undefined;
    await this.opened(cached, segmentId);
    cached.direct ??= this.io
      .open(join(this.segmentsDir, segmentFileName(segmentId)), O_RDONLY | O_DIRECT)
      .catch((error: unknown) => {
        // EINVAL: the file system has no direct I/O. Anything else (the file went away): this
        // read goes through the buffered handle, which still holds the file.
        if ((error as NodeJS.ErrnoException).code === 'EINVAL') this.directRefused = true;
        delete cached.direct;
        return undefined;
      });
    return cached.direct;
  }

  private async readBuffered(
    cached: CachedHandle,
    location: { segmentId: number; offset: number; length: number },
  ): Promise<Buffer> {
    const handle = await this.opened(cached, location.segmentId);
    const target = Buffer.allocUnsafe(location.length);
    let filled = 0;
    if (this.readCached && this.cachedThisTurn < CACHED_BYTES_PER_TURN) {
      filled = this.readCached(handle.fd, target, location.offset) ?? 0;
      this.chargeCached(filled);
    }
    while (filled < location.length) {
      // The fd stays valid: a dropped handle is closed only after its last reader.
      const bytesRead = await this.io.pread(
        handle,
        target,
        filled,
        location.length - filled,
        location.offset + filled,
      );
      if (bytesRead === 0)
        throw SegmentIoError(
          `segment ${location.segmentId} ends before ${location.offset + location.length}`,
        );
      filled += bytesRead;
    }
    return target;
  }

  /**
   * Counts bytes copied from the page cache in this turn. The first attempt of a turn schedules
   * the count's reset; a miss counts as one byte so that the count is no longer 0 and the reset
   * is scheduled once.
   */
  private chargeCached(bytes: number): void {
    if (this.cachedThisTurn === 0) setImmediate(() => (this.cachedThisTurn = 0));
    this.cachedThisTurn += Math.max(bytes, 1);
  }

  private cachedOf(segmentId: number): CachedHandle {
    const cached = this.handles.get(segmentId);
    if (cached) {
      cached.usedAt = this.clock.now();
      this.handles.delete(segmentId);
      this.handles.set(segmentId, cached);
      return cached;
    }
    const handle = this.openChecked(segmentId);
    const entry: CachedHandle = { handle, usedAt: this.clock.now(), readers: 0, dropped: false };
    this.handles.set(segmentId, entry);
    handle.then(
      (opened) => {
        // A dropped handle is closed once its readers are done: readNow must not use it.
        if (!entry.dropped) entry.fd = opened.fd;
      },
      () => {
        if (this.handles.get(segmentId) === entry) this.handles.delete(segmentId);
      },
    );
    this.evict();
    return entry;
  }

  /**
   * Opens a segment file and checks that its header names the segment its name says: a file
   * misplaced under another segment's name would answer another chunk's bytes at an offset.
   * One read of 64 bytes per open (handles are cached).
   */
  private async openChecked(segmentId: number): Promise<IoFile> {
    const handle = await this.io.open(join(this.segmentsDir, segmentFileName(segmentId)), 'r');
    const head = Buffer.alloc(SEGMENT_HEADER_SIZE);
    let headerId: number | undefined;
    try {
      const bytesRead = await this.io.pread(handle, head, 0, SEGMENT_HEADER_SIZE, 0);
      headerId =
        bytesRead === SEGMENT_HEADER_SIZE ? decodeSegmentHeader(head).segmentId : undefined;
    } catch (error) {
      await handle.close().catch(() => undefined);
      throw SegmentIoError(
        `cannot read the header of segment ${segmentId}`,
        { segmentId },
        {
          cause: error,
        },
      );
    }
    if (headerId !== segmentId) {
      await handle.close().catch(() => undefined);
      throw SegmentIoError(
        `segment file ${segmentId} holds the header of segment ${String(headerId)}`,
        {
          segmentId,
          headerSegmentId: headerId,
        },
      );
    }
    return handle;
  }

  private async opened(cached: CachedHandle, segmentId: number): Promise<IoFile> {
    try {
      return await cached.handle;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
        throw NotFound(`segment ${segmentId} is gone`, { segmentMissing: true, segmentId });
      }
      throw SegmentIoError(`cannot open segment ${segmentId}`, { segmentId }, { cause: error });
    }
  }

  private evict(): void {
    while (this.handles.size > HANDLES_MAX) {
      const oldest = this.handles.keys().next().value as number;
      this.drop(oldest);
    }
  }

  private drop(segmentId: number): void {
    const cached = this.handles.get(segmentId);
    this.handles.delete(segmentId);
    if (!cached) return;
    cached.dropped = true;
    delete cached.fd;
    if (cached.readers === 0) closeHandle(cached);
  }

  /** Forgets a segment (it was deleted); later reads reopen and find it gone. */
  forget(segmentId: number): void {
    this.drop(segmentId);
  }

  private closeIdle(): void {
    const cutoff = this.clock.now() - IDLE_CLOSE_MS;
    for (const [segmentId, cached] of this.handles)
      if (cached.usedAt < cutoff) this.drop(segmentId);
  }

  close(): void {
    clearInterval(this.sweeper);
    for (const segmentId of [...this.handles.keys()]) this.drop(segmentId);
  }
}

function closeHandle(cached: CachedHandle): void {
  void cached.handle.then((handle) => handle.close()).catch(() => undefined);
  void cached.direct?.then((handle) => handle?.close()).catch(() => undefined);
}
