// Buffers a thread reuses from one task to the next, buffers aligned for direct I/O, and bytes
// that cross to another thread alone.
//
// A fresh buffer per record costs page faults, a fill and garbage-collection work for every byte
// stored or read; a thread has at most a few tasks in flight, so a small pool of the largest
// buffers it needed serves them all.

/**
 * Keeps at most `keptMax` buffers, the largest ones given back; `take` answers a kept one that
 * is large enough, or a new one from `allocate`.
 */
export class BufferPool {
  private readonly kept: Buffer[] = [];

  constructor(
    private readonly keptMax: number,
    private readonly allocate: (bytes: number) => Buffer,
  ) {}

  take(bytes: number): Buffer {
    const fit = this.kept.findIndex((buffer) => buffer.length >= bytes);
    if (fit >= 0) return this.kept.splice(fit, 1)[0] as Buffer;
    return this.allocate(bytes);
  }

  give(buffer: Buffer): void {
    this.kept.push(buffer);
    this.kept.sort((a, b) => b.length - a.length);
    this.kept.length = Math.min(this.kept.length, this.keptMax);
  }
}

/**
 * One buffer a thread reuses for work that ends before the next use (a synchronous call that
 * copies its result elsewhere): it grows to the largest size asked for, in whole `granule`s, and
 * is never given back. A fresh buffer per use cost an allocation of up to the largest chunk,
 * which under many concurrent uploads fragmented the allocator's heap.
 */
export class ScratchBuffer {
  private buffer = Buffer.alloc(0);

  constructor(private readonly granule: number) {}

  /** A view of `bytes` bytes, valid until the next `take`. */
  take(bytes: number): Buffer {
    if (this.buffer.length < bytes)
      this.buffer = Buffer.allocUnsafeSlow(Math.ceil(bytes / this.granule) * this.granule);
    return this.buffer.subarray(0, bytes);
  }
}

/**
 * A buffer of `bytes` whose first byte lies on an `alignment` boundary (a power of two), as
 * O_DIRECT wants: allocated `alignment` bytes larger, and cut where `misalignment` (the native
 * library's; JavaScript cannot see addresses) says the boundary is.
 */
export function alignedBuffer(
  bytes: number,
  alignment: number,
  misalignment: (bytes: Uint8Array, alignment: number) => number,
): Buffer {
  const memory = Buffer.allocUnsafeSlow(bytes + alignment);
  const skip = (alignment - misalignment(memory, alignment)) % alignment;
  return memory.subarray(skip, skip + bytes);
}

/**
 * `bytes` in an ArrayBuffer of exactly their size: `bytes` itself when it already is, else a
 * copy. A message to another thread (a Piscina task or its answer) copies the whole ArrayBuffer
 * behind each view it holds, not the view: a 32-byte key or chunk id cut from Node's 8 KiB
 * buffer pool, or from a decoded index record, would otherwise carry all of that memory (other
 * requests' bytes) into the other thread, once per task.
 */
export function ownBytes(bytes: Uint8Array): Uint8Array<ArrayBuffer> {
  const { buffer } = bytes;
  if (
    bytes.byteOffset === 0 &&
    bytes.byteLength === buffer.byteLength &&
    buffer instanceof ArrayBuffer
  ) {
    return bytes as Uint8Array<ArrayBuffer>;
  }
  return new Uint8Array(bytes);
}
