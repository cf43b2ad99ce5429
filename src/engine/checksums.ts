// Whole-object checksums, as clients send them in `X-Service-Checksum-<alg>` headers (the
// S3 `x-amz-checksum-*` scheme), and the CRC arithmetic to join per-part checksums.
//
// Invariants:
// - A header value is the standard base64 (with padding) of the big-endian digest: 4 bytes for
//   CRC32 and CRC32C, 8 for CRC64NVME, 20 for SHA1, 32 for SHA256. Anything else is refused.
// - The CRCs are the standard ones: CRC-32/ISO-HDLC (zlib), CRC-32C (Castagnoli) and
//   CRC-64/NVME; the check value of "123456789" is cbf43926, e3069283, ae8b14860a799888.
// - `crcXCombine(crcA, crcB, lengthB)` equals the CRC of A followed by B, so parts hashed in
//   parallel join into the whole-object CRC without reading the data again (zlib's
//   crc32_combine: multiply crcA by x^(8 * lengthB) modulo the polynomial).
//
// Backends, chosen by measurement (see MEASUREMENTS.md and bench/micro/engine):
// CRC32 from @node-rs/crc32 (hardware), CRC32C from src/util/crc32c.ts, CRC64NVME from
// hash-wasm, SHA-1, SHA-256 and MD5 (the S3 ETag, not a checksum header) from node:crypto. Every backend accepts a Uint8Array view on a SharedArrayBuffer.
//
// Nothing here is persisted by this module; the digests it returns may be.
import assert from 'node:assert/strict';
import { createHash, type Hash } from 'node:crypto';
import { crc32 } from '@node-rs/crc32';
import { crc32c } from '../util/crc32c.js';
import { createCRC64, type IHasher } from 'hash-wasm';
import { BadRequest } from '../util/errors.js';

export type ChecksumAlg = 'CRC32' | 'CRC32C' | 'CRC64NVME' | 'SHA1' | 'SHA256';
export type CrcAlg = 'CRC32' | 'CRC32C' | 'CRC64NVME';
/**
 * What a body can be hashed with: the checksum algorithms, and MD5 for the S3 ETag (asked for
 * only by S3 writes; it is not a checksum a client declares in a checksum header).
 */
export type DigestAlg = ChecksumAlg | 'MD5';

/** The digest algorithms a hasher accepts. */
export const DIGEST_ALGS: readonly DigestAlg[] = Object.freeze([
  'CRC32',
  'CRC32C',
  'CRC64NVME',
  'SHA1',
  'SHA256',
  'MD5',
]);

export const CHECKSUM_ALGS: readonly ChecksumAlg[] = Object.freeze([
  'CRC32',
  'CRC32C',
  'CRC64NVME',
  'SHA1',
  'SHA256',
]);

/** Digest length in bytes of each algorithm. */
export const CHECKSUM_DIGEST_BYTES: Readonly<Record<ChecksumAlg, number>> = Object.freeze({
  CRC32: 4,
  CRC32C: 4,
  CRC64NVME: 8,
  SHA1: 20,
  SHA256: 32,
});

/** Digest length in bytes of each digest algorithm. */
export const DIGEST_BYTES: Readonly<Record<DigestAlg, number>> = Object.freeze({
  ...CHECKSUM_DIGEST_BYTES,
  MD5: 16,
});

/** Lower-case header name prefix; the algorithm name follows, e.g. `x-service-checksum-crc32c`. */
export const CHECKSUM_HEADER_PREFIX = 'x-service-checksum-';

/** hash-wasm's polynomial argument for CRC-64/NVME (the reflected form of 0xad93d23594c93659). */
const CRC64NVME_POLYNOMIAL_HEX = '9a6c9329ac4bc9b5';

/** Idle CRC-64 wasm instances kept for reuse; each instance owns at least one 64 KiB page. */
export const crc64HasherPoolMax = 64;

/** Parses an algorithm name case-insensitively, e.g. the suffix of a checksum header. */
export function parseChecksumAlg(name: string): ChecksumAlg | undefined {
  switch (name.toUpperCase()) {
    case 'CRC32':
      return 'CRC32';
    case 'CRC32C':
      return 'CRC32C';
    case 'CRC64NVME':
      return 'CRC64NVME';
    case 'SHA1':
      return 'SHA1';
    case 'SHA256':
      return 'SHA256';
    default:
      return undefined;
  }
}

/** The lower-case header that carries a checksum of this algorithm. */
export function checksumHeaderName(alg: ChecksumAlg): string {
  return CHECKSUM_HEADER_PREFIX + alg.toLowerCase();
}

/**
 * Decodes a checksum header value into its digest bytes. Only canonical padded base64 of
 * exactly the digest length is accepted: no whitespace, no URL-safe alphabet, no stray bits.
 */
export function parseChecksumHeader(alg: ChecksumAlg, value: string): Buffer {
  const digestBytes = CHECKSUM_DIGEST_BYTES[alg];
  const valueLength = 4 * Math.ceil(digestBytes / 3);
  const header = checksumHeaderName(alg);
  if (value.length !== valueLength) {
    throw BadRequest(
      `${header} must be ${valueLength} characters of base64 (a ${digestBytes}-byte digest)`,
      { header, lengthExpected: valueLength, lengthActual: value.length },
    );
  }
  // Node's decoder skips characters outside the alphabet, so re-encoding is what makes the
  // check strict: only the canonical spelling of a digest of the right length round-trips.
  const digest = Buffer.from(value, 'base64');
  if (digest.length !== digestBytes || digest.toString('base64') !== value) {
    throw BadRequest(`${header} is not canonical base64 of a ${digestBytes}-byte digest`, {
      header,
    });
  }
  return digest;
}

// ---------------------------------------------------------------------------------------------
// Incremental hashing of one body with several algorithms at once.

const crc64HasherPool: IHasher[] = [];

async function crc64HasherAcquire(): Promise<IHasher> {
  const pooled = crc64HasherPool.pop();
  if (pooled !== undefined) return pooled.init();
  const hasher = await createCRC64(CRC64NVME_POLYNOMIAL_HEX);
  return hasher.init();
}

function crc64HasherRelease(hasher: IHasher): void {
  if (crc64HasherPool.length < crc64HasherPoolMax) crc64HasherPool.push(hasher);
}

/**
 * Compiles the CRC-64 wasm module and fills the pool with `count` instances, e.g. at worker
 * start. Optional: without it the first CRC64NVME hasher pays ~20 ms of compilation and each
 * hasher beyond the pool ~0.2 ms of instantiation.
 */
export async function preloadChecksums(count = 1): Promise<void> {
  const wanted = Math.min(count, crc64HasherPoolMax) - crc64HasherPool.length;
  const created = await Promise.all(
    Array.from({ length: Math.max(0, wanted) }, () => createCRC64(CRC64NVME_POLYNOMIAL_HEX)),
  );
  for (const hasher of created) crc64HasherRelease(hasher);
}

/**
 * Hashes one body with a fixed set of algorithms, one `update` per received block. Build it
 * with `createMultiHasher`. `digest()` (or `dispose()`) ends it; using it afterwards is a bug.
 */
export class MultiHasher<A extends DigestAlg = ChecksumAlg> {
  readonly algs: readonly A[];
  private crc32State: number | undefined;
  private crc32cState: number | undefined;
  private crc64Hasher: IHasher | undefined;
  private sha1: Hash | undefined;
  private sha256: Hash | undefined;
  private md5: Hash | undefined;
  private bytesHashed = 0;
  private ended = false;

  /**
   * Internal: use `createMultiHasher`. `crc64Hasher` is a CRC-64/NVME hasher from the pool;
   * it returns to the pool when this hasher ends.
   */
  constructor(options: { algs: readonly A[]; crc64Hasher: IHasher | undefined }) {
    const algs = [...new Set(options.algs)];
    const wanted = new Set<DigestAlg>(algs);
    for (const alg of algs) {
      if (!DIGEST_ALGS.includes(alg)) assert.fail(`unknown algorithm ${alg}`);
    }
    assert.equal(wanted.has('CRC64NVME'), options.crc64Hasher !== undefined);
    this.algs = Object.freeze(algs);
    this.crc32State = wanted.has('CRC32') ? 0 : undefined;
    this.crc32cState = wanted.has('CRC32C') ? 0 : undefined;
    this.crc64Hasher = options.crc64Hasher;
    this.sha1 = wanted.has('SHA1') ? createHash('sha1') : undefined;
    this.sha256 = wanted.has('SHA256') ? createHash('sha256') : undefined;
    this.md5 = wanted.has('MD5') ? createHash('md5') : undefined;
  }

  /** Bytes passed to `update` so far. */
  get length(): number {
    return this.bytesHashed;
  }

  /** Feeds the next bytes of the body. The view is read, never kept or copied. */
  update(block: Uint8Array): void {
    assert.ok(!this.ended, 'MultiHasher used after digest');
    if (this.crc32State !== undefined) this.crc32State = crc32(block, this.crc32State);
    if (this.crc32cState !== undefined) this.crc32cState = crc32c(block, this.crc32cState);
    if (this.crc64Hasher !== undefined) this.crc64Hasher.update(block);
    if (this.sha1 !== undefined) this.sha1.update(block);
    if (this.sha256 !== undefined) this.sha256.update(block);
    if (this.md5 !== undefined) this.md5.update(block);
    this.bytesHashed += block.length;
  }

  /** Ends hashing and returns the big-endian digest bytes of every algorithm. */
  digestBytes(): Record<A, Buffer> {
    assert.ok(!this.ended, 'MultiHasher digested twice');
    this.ended = true;
    const digests: Partial<Record<DigestAlg, Buffer>> = {};
    if (this.crc32State !== undefined) digests.CRC32 = uint32Bytes(this.crc32State);
    if (this.crc32cState !== undefined) digests.CRC32C = uint32Bytes(this.crc32cState);
    if (this.crc64Hasher !== undefined) {
      // hash-wasm returns the CRC as big-endian bytes, the order the header wants.
      digests.CRC64NVME = bufferView(this.crc64Hasher.digest('binary'));
      crc64HasherRelease(this.crc64Hasher);
      this.crc64Hasher = undefined;
    }
    if (this.sha1 !== undefined) digests.SHA1 = this.sha1.digest();
    if (this.sha256 !== undefined) digests.SHA256 = this.sha256.digest();
    if (this.md5 !== undefined) digests.MD5 = this.md5.digest();
    for (const alg of this.algs) {
      assert.equal(digests[alg]?.length, DIGEST_BYTES[alg]);
    }
    return digests as Record<A, Buffer>;
  }

  /** Ends hashing and returns every digest as base64, the form of the checksum headers. */
  digest(): Record<A, string> {
    const bytes = this.digestBytes();
    const digests: Partial<Record<A, string>> = {};
    for (const alg of this.algs) digests[alg] = bytes[alg].toString('base64');
    return digests as Record<A, string>;
  }

  /** Ends hashing without a result, e.g. when the request was aborted. */
  dispose(): void {
    if (this.ended) return;
    this.ended = true;
    if (this.crc64Hasher !== undefined) crc64HasherRelease(this.crc64Hasher);
    this.crc64Hasher = undefined;
  }
}

/**
 * Builds a hasher for `algs`. Asynchronous only because a CRC-64 wasm instance may have to be
 * created; finished hashers return theirs to a pool, so steady state creates none.
 */
export async function createMultiHasher<A extends DigestAlg>(
  algs: readonly A[],
): Promise<MultiHasher<A>> {
  const wanted: readonly DigestAlg[] = algs;
  const crc64Hasher = wanted.includes('CRC64NVME') ? await crc64HasherAcquire() : undefined;
  return new MultiHasher({ algs, crc64Hasher });
}

function uint32Bytes(value: number): Buffer {
  const bytes = Buffer.allocUnsafe(4);
  bytes.writeUInt32BE(value >>> 0, 0);
  return bytes;
}

// ---------------------------------------------------------------------------------------------
// CRC combination (zlib crc32_combine, 1.2.12 and later).
//
// The CRCs here are reflected: bit 31 (bit 63) of a value is the coefficient of x^0. For CRCs
// whose init and final XOR are equal (true for all three), crc(A || B) is
// crc(A) * x^(8 * |B|) mod P, XOR crc(B). x^(8n) is a product of the table entries
// x^(2^k) for the set bits k of 8n.

const CRC32_POLY_REFLECTED = 0xedb88320;
const CRC32C_POLY_REFLECTED = 0x82f63b78;
const CRC64NVME_POLY_REFLECTED_HI = 0x9a6c9329;
const CRC64NVME_POLY_REFLECTED_LO = 0xac4bc9b5;

/** Powers x^(2^k) for k < 64 cover every length up to Number.MAX_SAFE_INTEGER bytes. */
const X2N_TABLE_LENGTH = 64;

/** a * b mod P for 32-bit reflected polynomials. */
function multModP32(a: number, b: number, poly: number): number {
  let p = 0;
  let bb = b;
  for (let m = 0x80000000; m !== 0; m >>>= 1) {
    if ((a & m) !== 0) {
      p ^= bb;
      if ((a & (m - 1)) === 0) break;
    }
    bb = (bb & 1) !== 0 ? (bb >>> 1) ^ poly : bb >>> 1;
  }
  return p >>> 0;
}

function x2nTable32(poly: number): Uint32Array {
  const table = new Uint32Array(X2N_TABLE_LENGTH);
  let p = 1 << 30; // x^1
  table[0] = p;
  for (let k = 1; k < X2N_TABLE_LENGTH; k++) {
    p = multModP32(p, p, poly);
    table[k] = p;
  }
  return table;
}

/**
 * One polynomial's tables, plus the operator x^(8 * length) of the last length used: parts of
 * an object mostly share one length, and then a combine is a single product.
 */
interface Crc32Combiner {
  readonly poly: number;
  readonly x2n: Uint32Array;
  lengthCached: number;
  operatorCached: number;
}

function crc32CombinerCreate(poly: number): Crc32Combiner {
  return { poly, x2n: x2nTable32(poly), lengthCached: 0, operatorCached: 0x80000000 };
}

const CRC32_COMBINER = crc32CombinerCreate(CRC32_POLY_REFLECTED);
const CRC32C_COMBINER = crc32CombinerCreate(CRC32C_POLY_REFLECTED);

function assertCombineLength(lengthB: number): void {
  if (!(Number.isSafeInteger(lengthB) && lengthB >= 0)) assert.fail(`bad length ${lengthB}`);
}

function crcCombine32(
  combiner: Crc32Combiner,
  crcs: { crcA: number; crcB: number; lengthB: number },
): number {
  const { crcA, crcB, lengthB } = crcs;
  assert.ok(crcA >>> 0 === crcA && crcB >>> 0 === crcB, 'CRC-32 values are uint32');
  assertCombineLength(lengthB);
  const { poly, x2n } = combiner;
  if (combiner.lengthCached !== lengthB) {
    // x^(8 * lengthB): start at k = 3 (the factor 8) and walk the bits of lengthB.
    let operator = 0x80000000; // x^0
    let n = lengthB;
    let k = 3;
    while (n > 0) {
      if (n % 2 === 1) operator = multModP32(x2n[k] ?? 0, operator, poly);
      n = Math.floor(n / 2);
      k++;
    }
    combiner.lengthCached = lengthB;
    combiner.operatorCached = operator;
  }
  return (multModP32(combiner.operatorCached, crcA, poly) ^ crcB) >>> 0;
}

/** CRC-32 (zlib) of A || B from the CRCs of A and B and the length of B in bytes. */
export function crc32Combine(crcA: number, crcB: number, lengthB: number): number {
  return crcCombine32(CRC32_COMBINER, { crcA, crcB, lengthB });
}

/** CRC-32C of A || B from the CRCs of A and B and the length of B in bytes. */
export function crc32cCombine(crcA: number, crcB: number, lengthB: number): number {
  return crcCombine32(CRC32C_COMBINER, { crcA, crcB, lengthB });
}

// The 64-bit arithmetic runs on two uint32 halves; BigInt would allocate at every step.
// Results come back through these two slots to keep the helpers allocation-free.
let product64Hi = 0;
let product64Lo = 0;

/** (aHi:aLo) * (bHi:bLo) mod P for CRC-64/NVME, into product64Hi:product64Lo. */
function multModP64(aHi: number, aLo: number, bHi: number, bLo: number): void {
  let pHi = 0;
  let pLo = 0;
  let hi = bHi;
  let lo = bLo;
  // Coefficients of a from x^0 (bit 31 of aHi) upwards; b runs through b * x^k.
  // Stops after the last set coefficient of a.
  words: for (let word = 0; word < 2; word++) {
    const a = word === 0 ? aHi : aLo;
    for (let m = 0x80000000; m !== 0; m >>>= 1) {
      if ((a & m) !== 0) {
        pHi ^= hi;
        pLo ^= lo;
        if ((a & (m - 1)) === 0 && (word === 1 || aLo === 0)) break words;
      }
      const carry = lo & 1;
      lo = (lo >>> 1) | (hi << 31);
      hi >>>= 1;
      if (carry !== 0) {
        hi ^= CRC64NVME_POLY_REFLECTED_HI;
        lo ^= CRC64NVME_POLY_REFLECTED_LO;
      }
    }
  }
  product64Hi = pHi >>> 0;
  product64Lo = pLo >>> 0;
}

const CRC64NVME_X2N = ((): Uint32Array => {
  // Entry k is x^(2^k) as [hi, lo] at 2k, 2k + 1.
  const table = new Uint32Array(2 * X2N_TABLE_LENGTH);
  let hi = 1 << 30; // x^1
  let lo = 0;
  table[0] = hi;
  table[1] = lo;
  for (let k = 1; k < X2N_TABLE_LENGTH; k++) {
    multModP64(hi, lo, hi, lo);
    hi = product64Hi;
    lo = product64Lo;
    table[2 * k] = hi;
    table[2 * k + 1] = lo;
  }
  return table;
})();

const UINT64_MAX = (1n << 64n) - 1n;

// The operator x^(8 * length) of the last length used, as for the 32-bit combiners.
let crc64LengthCached = 0;
let crc64OperatorCachedHi = 0x80000000; // x^0
let crc64OperatorCachedLo = 0;

/** CRC-64/NVME of A || B from the CRCs of A and B and the length of B in bytes. */
export function crc64nvmeCombine(crcA: bigint, crcB: bigint, lengthB: number): bigint {
  assert.ok(crcA >= 0n && crcA <= UINT64_MAX && crcB >= 0n && crcB <= UINT64_MAX);
  assertCombineLength(lengthB);
  if (crc64LengthCached !== lengthB) {
    let operatorHi = 0x80000000; // x^0
    let operatorLo = 0;
    let n = lengthB;
    let k = 3;
    while (n > 0) {
      if (n % 2 === 1) {
        const xHi = CRC64NVME_X2N[2 * k] ?? 0;
        const xLo = CRC64NVME_X2N[2 * k + 1] ?? 0;
        multModP64(xHi, xLo, operatorHi, operatorLo);
        operatorHi = product64Hi;
        operatorLo = product64Lo;
      }
      n = Math.floor(n / 2);
      k++;
    }
    crc64LengthCached = lengthB;
    crc64OperatorCachedHi = operatorHi;
    crc64OperatorCachedLo = operatorLo;
  }
  const aHi = Number(crcA >> 32n);
  const aLo = Number(crcA & 0xffffffffn);
  multModP64(crc64OperatorCachedHi, crc64OperatorCachedLo, aHi, aLo);
  const hi = (product64Hi ^ Number(crcB >> 32n)) >>> 0;
  const lo = (product64Lo ^ Number(crcB & 0xffffffffn)) >>> 0;
  return (BigInt(hi) << 32n) | BigInt(lo);
}

/**
 * Joins two big-endian CRC digests (header or `digestBytes` form): the digest of A || B.
 * Lets parts hashed in parallel, or multipart uploads, produce a whole-object CRC.
 */
export function combineChecksum(options: {
  alg: CrcAlg;
  digestA: Uint8Array;
  digestB: Uint8Array;
  lengthB: number;
}): Buffer {
  const { alg, lengthB } = options;
  const digestA = bufferView(options.digestA);
  const digestB = bufferView(options.digestB);
  assert.equal(digestA.length, CHECKSUM_DIGEST_BYTES[alg]);
  assert.equal(digestB.length, CHECKSUM_DIGEST_BYTES[alg]);
  switch (alg) {
    case 'CRC32': {
      const crc = crc32Combine(digestA.readUInt32BE(0), digestB.readUInt32BE(0), lengthB);
      return uint32Bytes(crc);
    }
    case 'CRC32C': {
      const crc = crc32cCombine(digestA.readUInt32BE(0), digestB.readUInt32BE(0), lengthB);
      return uint32Bytes(crc);
    }
    case 'CRC64NVME': {
      const crcA = digestA.readBigUInt64BE(0);
      const crc = crc64nvmeCombine(crcA, digestB.readBigUInt64BE(0), lengthB);
      const bytes = Buffer.allocUnsafe(8);
      bytes.writeBigUInt64BE(crc, 0);
      return bytes;
    }
  }
}

function bufferView(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * S3's composite multipart checksum: the digest, with the same algorithm, of the parts'
 * digests joined in part order, then `-<parts>` (`x-amz-checksum-type: COMPOSITE`). Unlike a
 * combined CRC it says nothing of the whole object's bytes, only of its parts.
 */
export async function compositeChecksum(
  alg: ChecksumAlg,
  partDigests: readonly Uint8Array[],
): Promise<string> {
  assert.ok(partDigests.length > 0, 'a composite checksum needs at least one part');
  const hasher = await createMultiHasher([alg]);
  for (const digest of partDigests) {
    assert.equal(digest.length, CHECKSUM_DIGEST_BYTES[alg]);
    hasher.update(digest);
  }
  return `${hasher.digest()[alg]}-${partDigests.length}`;
}

/** S3's multipart ETag: the MD5 of the parts' MD5 digests joined in order, then `-<parts>`. */
export function multipartMd5Etag(partMd5s: readonly Uint8Array[]): string {
  assert.ok(partMd5s.length > 0, 'a multipart ETag needs at least one part');
  const hash = createHash('md5');
  for (const md5 of partMd5s) {
    assert.equal(md5.length, DIGEST_BYTES.MD5);
    hash.update(md5);
  }
  return `"${hash.digest('hex')}-${partMd5s.length}"`;
}
