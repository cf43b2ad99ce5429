// Content-defined chunking of large bodies: FastCDC with normalized chunking (level 2).
//
// Cut points are a pure function of the content and the average size: the same bytes give the
// same chunks however the body is split into blocks, and an edit disturbs only the chunks near
// it, so unchanged regions deduplicate. Persisted contract (changing any of it changes every
// chunk boundary, so it needs a new chunker version, never an edit in place):
// - GEAR_TABLE: 256 uint32, GEAR[i] = high 32 bits of the i-th output (i = 0..255) of
//   splitmix64 seeded with GEAR_SEED; GEAR_TABLE_CHECKSUM is the SHA-256 of the table written
//   as little-endian uint32.
// - Rolling hash h = (h << 1) + GEAR[byte] mod 2^32. Because of the shift by one, h depends on
//   the last 32 bytes only, so hashing starts 32 bytes before the first allowed cut.
// - With b = log2(avgBytes): minBytes = avgBytes / 4, maxBytes = avgBytes * 4. A chunk of
//   length L (bytes so far, including the byte just hashed) ends when
//     minBytes <= L < avgBytes  and (h & MASK_S) == 0, MASK_S = the top b + 2 bits, or
//     avgBytes <= L < maxBytes  and (h & MASK_L) == 0, MASK_L = the top b - 2 bits, or
//     L == maxBytes.
//   Masks are taken from the top of the 32-bit h, the bits that depend on the most bytes.
//   The last chunk of a body is whatever remains and may be shorter than minBytes.
//   On random data the mean chunk is about 1.13 * avgBytes.
// - Cut points are absolute end offsets in the body.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { BadRequest, InvalidSetting } from '../util/errors.js';
import { RECORD_PLAIN_LENGTH_MAX } from '../format/record-frame.js';
import type { GearKernel } from './gear-kernel.js';

/** Seed of the splitmix64 stream that generates GEAR_TABLE ("Lightwel" in ASCII). */
export const GEAR_SEED = 0x4c6967687477656cn;

/** SHA-256 (hex) of GEAR_TABLE as 1024 little-endian bytes. Part of the dedup contract. */
export const GEAR_TABLE_CHECKSUM =
  'b706aa27652b6fa06442263a4f2f8de9fd6fe4a535a4dc3675477821e55e7e88';

export const chunkAvgBytesDefault = 1 << 20;
export const chunkAvgBytesMin = 1 << 8;
export const chunkAvgBytesMax = 1 << 26;

/**
 * `storage.chunk_bytes_avg` as a process checks it when it starts: a power of two in range whose
 * largest chunk (4 × the average) fits one record (RECORD_PLAIN_LENGTH_MAX), so that no upload
 * can cut a chunk that cannot be stored.
 */
export function checkChunkSetting(avgBytes: number): void {
  const fits =
    Number.isSafeInteger(avgBytes) &&
    avgBytes >= chunkAvgBytesMin &&
    avgBytes <= chunkAvgBytesMax &&
    (avgBytes & (avgBytes - 1)) === 0 &&
    avgBytes * 4 <= RECORD_PLAIN_LENGTH_MAX;
  if (!fits)
    throw InvalidSetting(
      `storage.chunk_bytes_avg must be a power of two from ${chunkAvgBytesMin} bytes to ` +
        `${RECORD_PLAIN_LENGTH_MAX / 4} (its largest chunk, 4 times the average, must fit one ` +
        `record of ${RECORD_PLAIN_LENGTH_MAX} bytes); it is ${avgBytes}`,
    );
}

/** Bytes of history the gear hash depends on. */
const GEAR_WINDOW_BYTES = 32;

function gearTableGenerate(seed: bigint): Uint32Array {
  const table = new Uint32Array(256);
  const mask64 = (1n << 64n) - 1n;
  let state = seed;
  for (let i = 0; i < 256; i++) {
    state = (state + 0x9e3779b97f4a7c15n) & mask64;
    let z = state;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & mask64;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & mask64;
    z = z ^ (z >> 31n);
    table[i] = Number(z >> 32n);
  }
  return table;
}

/** The gear table, for tests and tools. Chunking uses its own copy, so writes here are inert. */
export const GEAR_TABLE: Uint32Array = gearTableGenerate(GEAR_SEED);

/** SHA-256 (hex) of a gear table written as little-endian uint32, to pin GEAR_TABLE. */
export function gearTableChecksum(table: Uint32Array): string {
  const bytes = Buffer.alloc(table.length * 4);
  table.forEach((gear, i) => bytes.writeUInt32LE(gear, i * 4));
  return createHash('sha256').update(bytes).digest('hex');
}

/**
 * The table as int32, as the scans read it: the JavaScript loop below stays on 32-bit integer
 * arithmetic, and a GearKernel is given it for its memory.
 */
export const GEAR_INT32: Readonly<Int32Array> = Int32Array.from(GEAR_TABLE, (gear) => gear | 0);
assert.equal(gearTableChecksum(new Uint32Array(GEAR_INT32.buffer)), GEAR_TABLE_CHECKSUM);

/** Top `bits` bits set, as an int32. */
function topBitsMask(bits: number): number {
  return (-1 << (32 - bits)) | 0;
}

/** The hash after the last byte gearScanJs consumed (a second return value, without allocation). */
let gearScanHash = 0;

/**
 * Rolls the gear hash over bytes[from, to) starting from `hash`; returns the index of the first
 * byte after which (h & mask) == 0, or -1. The hot loop: eight bytes per iteration with one
 * combined test, then byte by byte to locate a hit or finish the tail. A GearKernel computes
 * the same in WebAssembly, 2–2.5 times as fast, for bytes in its memory.
 */
/* eslint-disable @typescript-eslint/no-non-null-assertion -- the hot loop: every index is below
   `to` <= bytes.length and every byte below 256 = gear.length; a `??` would be a branch a byte */
export function gearScanJs(
  bytes: Uint8Array,
  from: number,
  to: number,
  hash: number,
  mask: number,
): number {
  const gear = GEAR_INT32;
  let h = hash;
  let i = from;
  const lastOctet = to - 8;
  while (i <= lastOctet) {
    const h1 = ((h << 1) + gear[bytes[i]!]!) | 0;
    const h2 = ((h1 << 1) + gear[bytes[i + 1]!]!) | 0;
    const h3 = ((h2 << 1) + gear[bytes[i + 2]!]!) | 0;
    const h4 = ((h3 << 1) + gear[bytes[i + 3]!]!) | 0;
    const h5 = ((h4 << 1) + gear[bytes[i + 4]!]!) | 0;
    const h6 = ((h5 << 1) + gear[bytes[i + 5]!]!) | 0;
    const h7 = ((h6 << 1) + gear[bytes[i + 6]!]!) | 0;
    const h8 = ((h7 << 1) + gear[bytes[i + 7]!]!) | 0;
    if (
      (h1 & mask) === 0 ||
      (h2 & mask) === 0 ||
      (h3 & mask) === 0 ||
      (h4 & mask) === 0 ||
      (h5 & mask) === 0 ||
      (h6 & mask) === 0 ||
      (h7 & mask) === 0 ||
      (h8 & mask) === 0
    ) {
      break; // A cut within these eight bytes: the loop below finds which.
    }
    h = h8;
    i += 8;
  }
  for (; i < to; i++) {
    h = ((h << 1) + gear[bytes[i]!]!) | 0;
    if ((h & mask) === 0) {
      gearScanHash = h;
      return i;
    }
  }
  gearScanHash = h;
  return -1;
}
/* eslint-enable @typescript-eslint/no-non-null-assertion */

export interface ChunkerOptions {
  /** Target average chunk size; a power of two in [chunkAvgBytesMin, chunkAvgBytesMax]. */
  readonly avgBytes?: number;
  /** Scans the blocks that lie in its memory; others are scanned in JavaScript. */
  readonly kernel?: GearKernel | undefined;
}

/**
 * Finds cut points in a body that arrives as a sequence of blocks. Blocks are read in place,
 * never copied or kept; a chunk may span any number of blocks.
 */
export class Chunker {
  readonly avgBytes: number;
  readonly minBytes: number;
  readonly maxBytes: number;
  private readonly maskS: number;
  private readonly maskL: number;
  /** Absolute offset of the next byte to be pushed. */
  private position = 0;
  /** Absolute offset where the current chunk starts. */
  private chunkStart = 0;
  private hash = 0;
  private finished = false;
  private readonly kernel: GearKernel | undefined;

  constructor(options: ChunkerOptions = {}) {
    const avgBytes = options.avgBytes ?? chunkAvgBytesDefault;
    const valid =
      Number.isSafeInteger(avgBytes) &&
      avgBytes >= chunkAvgBytesMin &&
      avgBytes <= chunkAvgBytesMax &&
      (avgBytes & (avgBytes - 1)) === 0;
    if (!valid) {
      throw BadRequest('chunk avgBytes must be a power of two within the allowed range', {
        avgBytes,
        avgBytesMin: chunkAvgBytesMin,
        avgBytesMax: chunkAvgBytesMax,
      });
    }
    const avgBits = Math.log2(avgBytes);
    this.avgBytes = avgBytes;
    this.minBytes = avgBytes / 4;
    this.maxBytes = avgBytes * 4;
    this.maskS = topBitsMask(avgBits + 2);
    this.maskL = topBitsMask(avgBits - 2);
    this.kernel = options.kernel;
    assert.ok(this.minBytes >= GEAR_WINDOW_BYTES);
  }

  /** Bytes pushed so far. */
  get length(): number {
    return this.position;
  }

  /** Scans the next block; returns the end offsets of the chunks it completed, ascending. */
  push(block: Uint8Array): number[] {
    assert.ok(!this.finished, 'Chunker used after finish');
    const cuts: number[] = [];
    // A plain Uint8Array view (not a Buffer) keeps the element loads in gearScanJs monomorphic.
    const bytes =
      block.constructor === Uint8Array
        ? block
        : new Uint8Array(block.buffer, block.byteOffset, block.byteLength);
    const blockLength = bytes.length;
    const base = this.position;
    const kernel = this.kernel?.covers(bytes) ? this.kernel : undefined;
    const scan = (from: number, to: number, hash: number, mask: number): number => {
      if (!kernel) return gearScanJs(bytes, from, to, hash, mask);
      const at = kernel.scan(bytes, from, to, hash, mask);
      gearScanHash = kernel.hash;
      return at;
    };
    // Block-relative indexes, derived from the current chunk start (see the header comment):
    // hashing starts at `hashFrom`, maskS checks at `checkFrom`, maskL at `normalFrom`, and
    // the byte at `maxAt` ends the chunk unconditionally.
    const hashLead = this.minBytes - GEAR_WINDOW_BYTES - base;
    const checkLead = this.minBytes - 1 - base;
    const normalLead = this.avgBytes - 1 - base;
    const maxLead = this.maxBytes - 1 - base;
    let chunkStart = this.chunkStart;
    let h = this.hash;
    let i = 0;
    while (i < blockLength) {
      const hashFrom = chunkStart + hashLead;
      if (i <= hashFrom) {
        // Cut-point skipping: bytes before hashFrom cannot influence the next cut.
        i = hashFrom;
        h = 0;
        if (i >= blockLength) break;
      }
      const checkFrom = Math.min(chunkStart + checkLead, blockLength);
      // eslint-disable-next-line @typescript-eslint/no-non-null-assertion -- as in gearScanJs
      for (; i < checkFrom; i++) h = ((h << 1) + GEAR_INT32[bytes[i]!]!) | 0;
      let cutAt = -1;
      const normalFrom = Math.min(chunkStart + normalLead, blockLength);
      if (i < normalFrom) {
        cutAt = scan(i, normalFrom, h, this.maskS);
        h = gearScanHash;
        i = cutAt < 0 ? normalFrom : cutAt;
      }
      const maxAt = chunkStart + maxLead;
      const scanTo = Math.min(maxAt, blockLength);
      if (cutAt < 0 && i < scanTo) {
        cutAt = scan(i, scanTo, h, this.maskL);
        h = gearScanHash;
        i = cutAt < 0 ? scanTo : cutAt;
      }
      if (cutAt < 0 && i === maxAt && i < blockLength) cutAt = i;
      if (cutAt < 0) break;
      const chunkEnd = base + cutAt + 1;
      assert.ok(chunkEnd - chunkStart >= this.minBytes && chunkEnd - chunkStart <= this.maxBytes);
      chunkStart = chunkEnd;
      cuts.push(chunkStart);
      i = cutAt + 1;
    }
    this.position = base + blockLength;
    this.chunkStart = chunkStart;
    this.hash = h;
    return cuts;
  }

  /** Ends the body; returns the end of the last chunk, or nothing if no bytes remain. */
  finish(): number[] {
    assert.ok(!this.finished, 'Chunker finished twice');
    this.finished = true;
    return this.position > this.chunkStart ? [this.position] : [];
  }
}

/** Cut points of a whole body held in one buffer (tests, tools). */
export function chunkBoundaries(body: Uint8Array, options: ChunkerOptions = {}): number[] {
  const chunker = new Chunker(options);
  return [...chunker.push(body), ...chunker.finish()];
}
