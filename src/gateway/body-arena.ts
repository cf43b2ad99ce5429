// The body arena: every request body byte the gateway holds lives in one SharedArrayBuffer cut
// into fixed blocks. Its size (`limits.inflight_bytes_max`) bounds the gateway's body memory
// under any number of uploads: an upload that cannot get a block pauses its socket and waits
// (FIFO) until a block is released.

import assert from 'node:assert';

export class BodyArena {
  readonly buffer: SharedArrayBuffer;
  readonly bytes: Buffer;
  private readonly free: number[] = [];
  private readonly waiters: Array<(block: number) => void> = [];

  constructor(readonly blockBytes: number, readonly blockCount: number) {
    assert(blockBytes > 0 && blockCount > 0);
    this.buffer = new SharedArrayBuffer(blockBytes * blockCount);
    this.bytes = Buffer.from(this.buffer);
    for (let block = blockCount - 1; block >= 0; block -= 1) this.free.push(block);
  }

  get available(): number {
    return this.free.length;
  }

  /** A block now, or `undefined` when the arena is exhausted. */
  tryTake(): number | undefined {
    return this.waiters.length === 0 ? this.free.pop() : undefined;
  }

  /** A block when one is free; waiters are served in arrival order. */
  take(): Promise<number> {
    const block = this.tryTake();
    if (block !== undefined) return Promise.resolve(block);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  release(block: number): void {
    assert(block >= 0 && block < this.blockCount);
    const waiter = this.waiters.shift();
    if (waiter) waiter(block);
    else this.free.push(block);
  }

  view(block: number, start: number, end: number): Buffer {
    const base = block * this.blockBytes;
    return this.bytes.subarray(base + start, base + end);
  }
}
