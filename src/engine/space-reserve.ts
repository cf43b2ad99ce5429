// The data directory's space reserve: room that a full disk still has for the engine itself.
//
// Deleting objects on a full disk frees nothing at once: the bytes are reclaimed by compaction,
// which must first copy what the affected segments still hold, and by LMDB commits, which need
// fresh pages. So the engine keeps `reserve` (a file of preallocated blocks, next to `FORMAT`)
// of `storage.space_reserve` bytes, capped at an eighth of the file system, and gives those
// blocks back (truncates the file) only to itself: when a compaction pass on a nearly full disk
// needs room to copy a segment, or when an LMDB commit failed for lack of space. While the
// reserve is not whole the engine refuses new segments to the writers (`disk_full`, 503 with
// Retry-After), so the room goes to reclaiming, not to new uploads; once compaction has freed
// enough, the reserve is taken again and writes resume, without a restart.
//
// Segment size follows the disk: a compaction copies at most a segment's live bytes (under
// `storage.compaction_live_ratio` of it), and a 256 MiB segment on a 96 MiB disk could never be
// copied. `segmentBytesFor` caps segments at a sixteenth of the file system (never under 4 MiB),
// so a sealed candidate's copy always fits in the reserve with room to spare for LMDB.
//
// Invariants:
// - The reserve file holds allocated blocks (posix_fallocate, or zeros written and synced where
//   that is missing), never a sparse hole: a hole gives no room back when truncated.
// - `whole` is true only while the file holds the whole target: the writers' new segments are
//   refused otherwise (see the engine's `allocSegment`).

import { join } from 'node:path';
import type { Logger } from 'pino';
import { nodeIo, type Io, type IoFile } from '../util/io.js';
import { libc } from '../util/libc.js';
import { errorCode, isLightwellError } from '../util/errors.js';

const MiB = 1024 * 1024;
/** Segments are never capped below this (a few of the largest chunks). */
export const SEGMENT_BYTES_FLOOR = 4 * MiB;
/** The reserve takes at most this share of the file system. */
const RESERVE_SHARE = 8;
/** Segments take at most this share of the file system. */
const SEGMENT_SHARE = 16;
/** Zeros written per write where blocks cannot be preallocated. */
const ZERO_WRITE_BYTES = MiB;
const ENOSPC = 28;

/** `storage.segment_bytes_max`, capped for a file system of `totalBytes` (see the header). */
export function segmentBytesFor(configured: number, totalBytes: number | undefined): number {
  if (totalBytes === undefined || totalBytes <= 0) return configured;
  const cap = Math.max(SEGMENT_BYTES_FLOOR, Math.floor(totalBytes / SEGMENT_SHARE));
  return Math.min(configured, cap);
}

/** `storage.space_reserve`, capped for a file system of `totalBytes`. */
export function reserveBytesFor(configured: number, totalBytes: number): number {
  return Math.min(configured, Math.floor(totalBytes / RESERVE_SHARE));
}

export interface SpaceFigures {
  readonly totalBytes: number;
  readonly freeBytes: number;
}

export class SpaceReserve {
  /** Bytes the file holds now. */
  private held = 0;
  private target = 0;
  private changing: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly options: {
      /** The data directory's root: the reserve is `reserve` in it. */
      root: string;
      /** `storage.space_reserve` (0: none). */
      configuredBytes: number;
      log: Logger;
      io?: Io;
    },
  ) {}

  get path(): string {
    return join(this.options.root, 'reserve');
  }

  private get io(): Io {
    return this.options.io ?? nodeIo;
  }

  /** The file holds the whole reserve: writers may have new segments. */
  get whole(): boolean {
    return this.held >= this.target;
  }

  /** The file system's size and free bytes, or undefined where the Io cannot tell. */
  async figures(): Promise<SpaceFigures | undefined> {
    return this.io.statfs?.(this.options.root);
  }

  /**
   * Takes the reserve at start: the target is fixed from the file system's size, and the file
   * is grown to it where there is room (the rest is taken by a later `restore`).
   */
  async open(): Promise<void> {
    const figures = await this.figures();
    if (!figures) return;
    this.target = reserveBytesFor(this.options.configuredBytes, figures.totalBytes);
    this.held = await this.io.size(this.path).catch(() => 0);
    if (this.held > this.target) await this.truncate(this.target);
    await this.restore();
    if (!this.whole)
      this.options.log.warn(
        { heldBytes: this.held, reserveBytes: this.target },
        'the data filesystem has no room for the space reserve; new writes are refused until ' +
          'there is',
      );
  }

  /**
   * Gives the reserve's blocks back to the file system (for compaction or an LMDB commit);
   * answers the bytes freed. Writers get no new segment until `restore` made it whole again.
   */
  release(reason: string): Promise<number> {
    return this.serially(async () => {
      const freed = this.held;
      if (freed === 0) return 0;
      await this.truncate(0);
      this.options.log.warn({ freedBytes: freed, reason }, 'space reserve released');
      return freed;
    });
  }

  /**
   * Takes the reserve back where the file system has room for it and, on top, `headroom` bytes
   * (so that writes resuming do not meet a full disk at once); answers whether it is whole.
   */
  restore(headroom = 0): Promise<boolean> {
    return this.serially(async () => {
      if (this.whole) return true;
      const figures = await this.figures();
      const missing = this.target - this.held;
      if (!figures || figures.freeBytes < missing + headroom) return false;
      await this.grow();
      const taken = this.held >= this.target;
      if (taken) this.options.log.info({ reserveBytes: this.target }, 'space reserve taken');
      return taken;
    });
  }

  private serially<T>(step: () => Promise<T>): Promise<T> {
    const next = this.changing.then(step);
    this.changing = next.catch(() => undefined);
    return next;
  }

  private async truncate(length: number): Promise<void> {
    const handle = await this.io.open(this.path, 'r+');
    try {
      await handle.truncate(length);
    } finally {
      await handle.close();
    }
    this.held = length;
  }

  /** Grows the file to the target with allocated blocks; stops, keeping what it got, at ENOSPC. */
  private async grow(): Promise<void> {
    const created = this.held === 0;
    const handle = await this.io.open(this.path, created ? 'w' : 'r+', 0o600);
    try {
      const allocate = this.io.native ? libc()?.allocateSpace : undefined;
      const result = allocate
        ? await allocateWith(allocate, handle.fd, this.held, this.target - this.held)
        : undefined;
      if (result === 0) this.held = this.target;
      else if (result === ENOSPC) return;
      else await this.writeZeros(handle);
      await handle.datasync();
    } finally {
      await handle.close();
      // What the file holds: a partial allocation may have taken some blocks.
      this.held = Math.min(this.target, await this.io.size(this.path).catch(() => 0));
    }
    if (created) await this.io.syncDirectory(this.options.root);
  }

  private async writeZeros(handle: IoFile): Promise<void> {
    const zeros = Buffer.alloc(ZERO_WRITE_BYTES);
    for (let at = this.held; at < this.target;) {
      const length = Math.min(zeros.length, this.target - at);
      try {
        at += (await handle.write(zeros, 0, length, at)).bytesWritten;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOSPC' || isLightwellError(error)) return;
        throw error;
      }
    }
  }
}

/**
 * Runs `step`, a start-up step that commits to the index (recovery); when its commit found the
 * disk full, gives the reserve back and runs it once more, so that a restart on a full disk
 * does not wedge. The step must be one that may run again (recovery is: it starts every time
 * from what the disk and the index hold, and a failed commit applied nothing).
 */
export async function withRoom<T>(
  reserve: SpaceReserve,
  reason: string,
  step: () => Promise<T>,
): Promise<T> {
  try {
    return await step();
  } catch (error) {
    if (errorCode(error) !== 'disk_full' || (await reserve.release(reason)) === 0) throw error;
    return step();
  }
}

/** posix_fallocate on libuv's pool: its error number, or undefined when it could not run. */
function allocateWith(
  allocate: NonNullable<ReturnType<typeof libc>>['allocateSpace'] & object,
  fd: number,
  offset: number,
  length: number,
): Promise<number | undefined> {
  return new Promise((resolve) => {
    if (!allocate(fd, offset, length, (errno) => resolve(errno < 0 ? undefined : errno)))
      resolve(undefined);
  });
}
