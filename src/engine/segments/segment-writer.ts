// The segment writer: appends records to the one open segment its owner (a worker thread, or
// the engine's compactor) holds, and makes them durable with group fdatasync.
//
// Invariants:
// - One writer per open segment, so offsets are assigned synchronously without locks and
//   concurrent appends write disjoint ranges.
// - A segment is registered with the engine before its file exists; the file is created with
//   its header, fsynced, and its directory entry fsynced before the first record is appended.
// - `durable()` of an append resolves only after an fdatasync that began after the append's
//   write completed. Concurrent appends share one fdatasync (group commit of data).
// - A full segment is sealed: pending writes finish, a seal footer is appended, the file is
//   fsynced, and the engine records the final size.

import { open, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { encodeSegmentHeader, segmentFileName, SEGMENT_HEADER_SIZE } from '../../format/segment-header.js';
import { encodeSealFooter } from '../../format/seal-footer.js';
import { SegmentIoError } from '../../util/errors.js';

export interface SegmentRegistry {
  allocate(): Promise<number>;
  seal(segmentId: number, size: number): Promise<void>;
}

export interface Appended {
  readonly segmentId: number;
  readonly offset: number;
  readonly length: number;
  /** Resolves once the record is on disk. */
  durable(): Promise<void>;
}

class OpenSegment {
  size = SEGMENT_HEADER_SIZE;
  records = 0;
  private writesStarted = 0;
  private writesDone = 0;
  private syncedThrough = 0;
  private syncing: Promise<void> | undefined;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(readonly id: number, readonly handle: FileHandle) {}

  write(parts: readonly Buffer[], offset: number): Promise<number> {
    this.writesStarted += 1;
    const written = writeAll(this.handle, parts, offset).then(() => {
      this.writesDone += 1;
    });
    this.inFlight.add(written);
    void written.finally(() => this.inFlight.delete(written)).catch(() => undefined);
    return written.then(() => this.writesDone);
  }

  /** Resolves when an fdatasync that started after write number `mark` completed has finished. */
  async syncThrough(mark: number): Promise<void> {
    while (this.syncedThrough < mark) {
      this.syncing ??= this.sync().finally(() => {
        this.syncing = undefined;
      });
      await this.syncing;
    }
  }

  private async sync(): Promise<void> {
    const upTo = this.writesDone;
    await this.handle.datasync();
    this.syncedThrough = Math.max(this.syncedThrough, upTo);
  }

  async drain(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
  }
}

async function writeAll(handle: FileHandle, parts: readonly Buffer[], position: number): Promise<void> {
  let offset = position;
  let pending = parts.filter((part) => part.length > 0);
  while (pending.length > 0) {
    const { bytesWritten } = await handle.writev(pending, offset);
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

  constructor(
    private readonly options: { segmentsDir: string; registry: SegmentRegistry; segmentBytesMax: number },
  ) {}

  /** Appends one record (given as parts, written contiguously). */
  async append(parts: readonly Buffer[]): Promise<Appended> {
    const length = parts.reduce((sum, part) => sum + part.length, 0);
    let segment = this.current ?? (await this.openNext());
    if (segment.size > SEGMENT_HEADER_SIZE && segment.size + length > this.options.segmentBytesMax) {
      this.startSeal(segment);
      segment = await this.openNext();
    }
    const offset = segment.size;
    segment.size += length;
    segment.records += 1;
    let mark: number;
    try {
      mark = await segment.write(parts, offset);
    } catch (cause) {
      throw SegmentIoError(`write to segment ${segment.id} failed`, { segmentId: segment.id }, { cause });
    }
    const target = segment;
    return { segmentId: segment.id, offset, length, durable: () => target.syncThrough(mark) };
  }

  private openNext(): Promise<OpenSegment> {
    this.current = undefined;
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
    const segmentId = await this.options.registry.allocate();
    const path = join(this.options.segmentsDir, segmentFileName(segmentId));
    const handle = await open(path, 'wx', 0o644);
    await handle.write(encodeSegmentHeader({ segmentId, createdAtMs: Date.now() }), 0, SEGMENT_HEADER_SIZE, 0);
    await handle.datasync();
    await syncDirectory(this.options.segmentsDir);
    return new OpenSegment(segmentId, handle);
  }

  private startSeal(segment: OpenSegment): void {
    const sealed = this.seal(segment).finally(() => this.sealing.delete(sealed));
    this.sealing.add(sealed);
    sealed.catch(() => undefined);
  }

  private async seal(segment: OpenSegment): Promise<void> {
    await segment.drain();
    const footer = encodeSealFooter({ recordCount: segment.records, dataEnd: segment.size, sealedAtMs: Date.now() });
    await writeAll(segment.handle, [footer], segment.size);
    await segment.handle.datasync();
    await segment.handle.close();
    await this.options.registry.seal(segment.id, segment.size + footer.length);
  }

  /** Seals the open segment (on shutdown) and waits for every seal in progress. */
  async close(): Promise<void> {
    const segment = this.current ?? (await this.opening?.catch(() => undefined));
    this.current = undefined;
    if (segment) this.startSeal(segment);
    await Promise.allSettled([...this.sealing]);
  }
}

export async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
