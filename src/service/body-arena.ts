// The body arena: every request body byte the gateway holds lives in one SharedArrayBuffer cut
// into fixed blocks. Its size (the gateway's share of `limits.inflight_bytes_max`, see
// `gatewayShare`) bounds the gateway's body memory under any number of uploads.
//
// Progress guarantee: an upload first reserves the blocks it needs to complete one chunk of the
// largest size and to pause (`takeMany`, all at once; upload.ts says how many). It keeps that
// reserve for its whole life and may borrow more when blocks are free (`tryTake`), but it never
// waits for more than its reserve. Waiting admissions are served in turn by owner (the tenant),
// each owner's in arrival order, so that one tenant's queue of uploads does not hold back
// another's: the owner whose turn it is is served before anyone else, and none waits forever.
// So every admitted upload can always finish its next chunk and release blocks, and uploads
// that cannot be admitted wait with their sockets paused: no deadlock, bounded memory.
//
// Bytes that uWebSockets.js delivers after an upload paused its socket land in that upload's
// own reserve (its pause slack, see upload.ts), not in blocks shared with other uploads.

import assert from 'node:assert';
import { copyBytes } from '../util/libc.js';
import {
  GEAR_KERNEL_MEMORY_BYTES_MAX,
  GEAR_KERNEL_TABLE_BYTES,
  WASM_PAGE_BYTES,
} from '../engine/gear-kernel.js';

type Copy = (target: Uint8Array, offset: number, source: Uint8Array) => void;

/**
 * The shared memory of an arena. A gateway makes it for each of its listener threads before it
 * starts its pool, whose threads read and write the blocks of every listener's arenas.
 */
export interface ArenaMemory {
  readonly buffer: SharedArrayBuffer;
  /** Set when the blocks and the gear kernel's table fit in one WebAssembly memory. */
  readonly memory?: WebAssembly.Memory | undefined;
  /** Where the blocks end; the gear kernel's table follows them in `memory`. */
  readonly kernelOffset: number;
}

export function arenaMemory(blockBytes: number, blockCount: number): ArenaMemory {
  const blocksBytes = blockBytes * blockCount;
  const memoryBytes = blocksBytes + GEAR_KERNEL_TABLE_BYTES;
  if (memoryBytes > GEAR_KERNEL_MEMORY_BYTES_MAX)
    return { buffer: new SharedArrayBuffer(blocksBytes), kernelOffset: blocksBytes };
  const pages = Math.ceil(memoryBytes / WASM_PAGE_BYTES);
  const memory = new WebAssembly.Memory({ initial: pages, maximum: pages, shared: true });
  return { buffer: memory.buffer as SharedArrayBuffer, memory, kernelOffset: blocksBytes };
}

interface Waiter {
  readonly count: number;
  readonly resolve: (blocks: number[]) => void;
}

export class BodyArena {
  readonly buffer: SharedArrayBuffer;
  readonly bytes: Buffer;
  /**
   * The arena as a shared WebAssembly memory, when it fits in one the gear kernel can scan: its
   * buffer is `buffer`, so the ordered stage's gear scan reads body bytes in place. The kernel
   * keeps its table at `kernelOffset`, after the blocks.
   */
  readonly memory: WebAssembly.Memory | undefined;
  readonly kernelOffset: number;
  private readonly free: number[] = [];
  /**
   * Waiting admissions by owner, each owner's in arrival order; the map's own order is the
   * owners' turns (the one whose turn it is first; an owner served goes to the back).
   */
  private readonly waiters = new Map<number, Waiter[]>();

  /**
   * `copy` defaults to `copyBytes` (libc's memmove where it can be reached): `TypedArray.set`
   * into a SharedArrayBuffer copies byte by byte unless source and target are equally aligned
   * modulo 8, which body bytes, at whatever offsets uWS delivers them, mostly are not.
   */
  constructor(
    readonly blockBytes: number,
    readonly blockCount: number,
    private readonly copy: Copy = copyBytes,
    shared: ArenaMemory = arenaMemory(blockBytes, blockCount),
  ) {
    assert(blockBytes > 0 && blockCount > 0);
    this.kernelOffset = blockBytes * blockCount;
    assert(shared.kernelOffset === this.kernelOffset, 'the memory was made for other blocks');
    this.memory = shared.memory;
    this.buffer = shared.buffer;
    // The blocks only: whatever follows them in the memory is the kernel's.
    this.bytes = Buffer.from(this.buffer, 0, this.kernelOffset);
    for (let block = blockCount - 1; block >= 0; block -= 1) this.free.push(block);
  }

  get available(): number {
    return this.free.length;
  }

  /** Admissions are waiting for their reserve: blocks freed now go to them. */
  get waiting(): boolean {
    return this.waiters.size > 0;
  }

  /** A block now, or `undefined` when none is free or admissions are waiting. */
  tryTake(): number | undefined {
    return this.waiters.size === 0 ? this.free.pop() : undefined;
  }

  /** `count` blocks now, or `undefined` when fewer are free or admissions are waiting. */
  tryTakeMany(count: number): number[] | undefined {
    assert(
      count > 0 && count <= this.blockCount,
      'a reserve larger than the arena can never be met',
    );
    return this.waiters.size === 0 && this.free.length >= count
      ? this.free.splice(-count, count)
      : undefined;
  }

  /**
   * `count` blocks at once, when that many are free and it is this request's turn: owners take
   * turns, and an owner's requests are served in arrival order.
   */
  takeMany(count: number, owner = 0): Promise<number[]> {
    const blocks = this.tryTakeMany(count);
    if (blocks) return Promise.resolve(blocks);
    return new Promise((resolve) => {
      const queue = this.waiters.get(owner);
      if (queue) queue.push({ count, resolve });
      else this.waiters.set(owner, [{ count, resolve }]);
    });
  }

  release(block: number): void {
    assert(block >= 0 && block < this.blockCount);
    assert(!this.free.includes(block), 'block released twice');
    this.free.push(block);
    for (const [owner, queue] of this.waiters) {
      const waiter = queue[0] as Waiter;
      if (this.free.length < waiter.count) return;
      queue.shift();
      // Deleting the entry being visited and adding one at the end is safe in a Map's loop.
      this.waiters.delete(owner);
      if (queue.length > 0) this.waiters.set(owner, queue);
      waiter.resolve(this.free.splice(-waiter.count, waiter.count));
    }
  }

  /** Copies `source` into the arena at byte `offset` (a block's base plus an offset in it). */
  write(offset: number, source: Uint8Array): void {
    this.copy(this.bytes, offset, source);
  }

  /** Releases every block of `blocks`. */
  releaseAll(blocks: readonly number[]): void {
    for (const block of blocks) this.release(block);
  }

  view(block: number, start: number, end: number): Buffer {
    const base = block * this.blockBytes;
    return this.bytes.subarray(base + start, base + end);
  }
}
