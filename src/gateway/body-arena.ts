// The body arena: every request body byte the gateway holds lives in one SharedArrayBuffer cut
// into fixed blocks. Its size (`limits.inflight_bytes_max`) bounds the gateway's body memory
// under any number of uploads.
//
// Progress guarantee: an upload first reserves the blocks it needs to complete one chunk of the
// largest size (`takeMany`, all at once, FIFO). It keeps that reserve for its whole life and may
// borrow more when blocks are free (`tryTake`), but it never waits for more than its reserve.
// So every admitted upload can always finish its next chunk and release blocks, and uploads
// that cannot be admitted wait with their sockets paused: no deadlock, bounded memory.
//
// Spill reserve: an upload that cannot borrow pauses its socket, but uWS still delivers what it
// had read (about one receive buffer). `tryTake` leaves the last few blocks for those bytes
// (`tryTakeSpill`), so they land in the arena instead of in heap copies.

import assert from 'node:assert';

const SPILL_RESERVE_BLOCKS_MAX = 8;

interface Waiter {
  readonly count: number;
  readonly resolve: (blocks: number[]) => void;
}

export class BodyArena {
  readonly buffer: SharedArrayBuffer;
  readonly bytes: Buffer;
  private readonly free: number[] = [];
  private readonly waiters: Waiter[] = [];

  /** Blocks `tryTake` leaves free for bytes that arrive after a pause. */
  readonly spillReserve: number;

  constructor(
    readonly blockBytes: number,
    readonly blockCount: number,
  ) {
    assert(blockBytes > 0 && blockCount > 0);
    this.spillReserve = Math.min(SPILL_RESERVE_BLOCKS_MAX, Math.floor(blockCount / 8));
    this.buffer = new SharedArrayBuffer(blockBytes * blockCount);
    this.bytes = Buffer.from(this.buffer);
    for (let block = blockCount - 1; block >= 0; block -= 1) this.free.push(block);
  }

  get available(): number {
    return this.free.length;
  }

  /** A block now, or `undefined` when only the spill reserve is free or admissions are waiting. */
  tryTake(): number | undefined {
    return this.waiters.length === 0 && this.free.length > this.spillReserve
      ? this.free.pop()
      : undefined;
  }

  /** Any free block, for bytes that arrived after their upload paused its socket. */
  tryTakeSpill(): number | undefined {
    return this.free.pop();
  }

  /** `count` blocks at once, when that many are free; requests are served in arrival order. */
  takeMany(count: number): Promise<number[]> {
    assert(
      count > 0 && count <= this.blockCount,
      'a reserve larger than the arena can never be met',
    );
    if (this.waiters.length === 0 && this.free.length >= count)
      return Promise.resolve(this.free.splice(-count, count));
    return new Promise((resolve) => this.waiters.push({ count, resolve }));
  }

  release(block: number): void {
    assert(block >= 0 && block < this.blockCount);
    this.free.push(block);
    while (this.waiters.length > 0 && this.free.length >= (this.waiters[0] as Waiter).count) {
      const waiter = this.waiters.shift() as Waiter;
      waiter.resolve(this.free.splice(-waiter.count, waiter.count));
    }
  }

  view(block: number, start: number, end: number): Buffer {
    const base = block * this.blockBytes;
    return this.bytes.subarray(base + start, base + end);
  }
}
