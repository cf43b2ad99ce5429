// The segment reader: positional reads of whole records, with a small cache of open files.
//
// A compacted segment is deleted after a grace period; a reader that still holds its file open
// keeps reading the old bytes (POSIX unlink semantics), and one that finds the file gone gets
// `not_found` with `segmentMissing` set, so that the caller re-resolves the chunk's new location
// once. Cached handles are closed when evicted or after they sit idle.

import { open, type FileHandle } from 'node:fs/promises';
import { read as readCallback } from 'node:fs';
import { join } from 'node:path';
import { segmentFileName } from '../../format/segment-header.js';
import { NotFound, SegmentIoError } from '../../util/errors.js';
import { libc } from '../../util/libc.js';

const HANDLES_MAX = 64;
const IDLE_CLOSE_MS = 30_000;

interface CachedHandle {
  handle: Promise<FileHandle>;
  usedAt: number;
  /** Reads in progress: a dropped handle is closed only when they are done. */
  readers: number;
  dropped: boolean;
}

export class SegmentReader {
  private readonly handles = new Map<number, CachedHandle>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(private readonly segmentsDir: string) {
    this.sweeper = setInterval(() => this.closeIdle(), IDLE_CLOSE_MS);
    this.sweeper.unref();
  }

  async read(location: { segmentId: number; offset: number; length: number }): Promise<Buffer> {
    const cached = this.cachedOf(location.segmentId);
    cached.readers += 1;
    try {
      const handle = await this.opened(cached, location.segmentId);
      const target = Buffer.allocUnsafe(location.length);
      // What the page cache holds is copied at once (RWF_NOWAIT never waits for the disk): a
      // trip through libuv's thread pool costs more than the copy for a small record. The rest,
      // or all of it when nothing is cached, is read asynchronously.
      let filled = libc()?.readCached(handle.fd, target, location.offset) ?? 0;
      while (filled < location.length) {
        // fs.read with a callback: the promise API costs several times more per call. The fd
        // stays valid: a dropped handle is closed only after its last reader.
        const bytesRead = await readAt(
          handle.fd,
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
    } finally {
      cached.readers -= 1;
      if (cached.dropped && cached.readers === 0) closeHandle(cached);
    }
  }

  private cachedOf(segmentId: number): CachedHandle {
    const cached = this.handles.get(segmentId);
    if (cached) {
      cached.usedAt = Date.now();
      this.handles.delete(segmentId);
      this.handles.set(segmentId, cached);
      return cached;
    }
    const handle = open(join(this.segmentsDir, segmentFileName(segmentId)), 'r');
    const entry: CachedHandle = { handle, usedAt: Date.now(), readers: 0, dropped: false };
    this.handles.set(segmentId, entry);
    handle.catch(() => {
      if (this.handles.get(segmentId) === entry) this.handles.delete(segmentId);
    });
    this.evict();
    return entry;
  }

  private async opened(cached: CachedHandle, segmentId: number): Promise<FileHandle> {
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
    if (cached.readers === 0) closeHandle(cached);
  }

  /** Forgets a segment (it was deleted); later reads reopen and find it gone. */
  forget(segmentId: number): void {
    this.drop(segmentId);
  }

  private closeIdle(): void {
    const cutoff = Date.now() - IDLE_CLOSE_MS;
    for (const [segmentId, cached] of this.handles)
      if (cached.usedAt < cutoff) this.drop(segmentId);
  }

  close(): void {
    clearInterval(this.sweeper);
    for (const segmentId of [...this.handles.keys()]) this.drop(segmentId);
  }
}

function readAt(
  fd: number,
  target: Buffer,
  offset: number,
  length: number,
  position: number,
): Promise<number> {
  return new Promise((resolve, reject) => {
    readCallback(fd, target, offset, length, position, (error, bytesRead) =>
      error ? reject(error) : resolve(bytesRead),
    );
  });
}

function closeHandle(cached: CachedHandle): void {
  void cached.handle.then((handle) => handle.close()).catch(() => undefined);
}
