// The chunk codec: plaintext chunk ⇄ stored record (header + payload).
//
// Encode: keyed chunk id (HMAC-SHA256 under the tenant's dedup key) → LZ4 when a sample shows it
// pays → AES-256-GCM under the tenant data key with a random 96-bit nonce, the record header's
// first 56 bytes as additional data (so a record cannot be replayed under another chunk id,
// tenant or length) → CRC32C of the payload and of the header.
// Decode checks the header's CRC and the record against its index entry, authenticates and
// decrypts (the GCM tag covers every payload byte, see decodeChunk), decompresses and checks the
// length.
//
// Plaintext may arrive as several slices (a chunk that spans two body blocks); only LZ4 needs it
// contiguous, and then it is gathered into one buffer once. The gathered chunk and its LZ4 form
// live in buffers each thread reuses (they are sealed into the payload before encodeChunk
// returns).

import assert from 'node:assert/strict';
import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import { crc32c } from '../util/crc32c.js';
import { compressSync, uncompressSync } from 'lz4-napi';
import {
  type Compression,
  RECORD_HEADER_SIZE,
  writeRecordHeader,
  sealRecordHeader,
  decodeRecordHeader,
  recordAad,
  type RecordHeader,
} from '../format/record-frame.js';
import { CorruptData, isLightwellError } from '../util/errors.js';
import { copyBytes, libc, native, type AesGcm } from '../util/libc.js';
import { ScratchBuffer } from '../util/buffer-pool.js';

export const KIND_CHUNK = 1;
export const COMPRESSION_NONE = 0 as const;
export const COMPRESSION_LZ4 = 1 as const;
export const CIPHER_AES_256_GCM = 1;
const TAG_BYTES = 16;
const EMPTY = new Uint8Array(0);
const SAMPLE_BYTES = 64 * 1024;
/** LZ4 is kept only when it saves at least this share of the sample. */
const COMPRESSION_SAVING_MIN = 0.1;

export interface TenantKeys {
  readonly tenantNum: number;
  readonly dataKey: Buffer;
  readonly dedupKey: Buffer;
  /**
   * Keys a data-key rotation retired, newest first (src/engine/ops/key-rotation.ts). A record
   * that the current key does not authenticate is tried with each; new records never use them.
   */
  readonly retiredDataKeys?: readonly Buffer[];
}

/** HMAC-SHA256 of the chunk's bytes under the tenant's dedup key: the chunk id. */
export function chunkIdOf(dedupKey: Buffer, slices: readonly Uint8Array[]): Buffer {
  const oneCall = native()?.hmacSha256;
  if (oneCall && slices.length <= 2)
    return oneCall(dedupKey, slices[0] ?? EMPTY, slices[1] ?? EMPTY);
  const hmac = createHmac('sha256', dedupKey);
  for (const slice of slices) hmac.update(slice);
  return hmac.digest();
}

export interface EncodedChunk {
  readonly header: Buffer;
  readonly payload: Buffer[];
  readonly payloadLength: number;
  readonly payloadChecksum: number;
  readonly compressed: boolean;
}

/**
 * Encodes a chunk into a record. With `output` (at least `plainLength` + 16 bytes, see
 * `encodeOutputBytes`), the payload is written there when OpenSSL can be reached directly, and
 * the returned payload views it: the caller must keep it untouched until the record is written.
 */
export function encodeChunk(
  keys: TenantKeys,
  chunkId: Buffer,
  slices: readonly Uint8Array[],
  plainLength: number,
  output?: Buffer,
): EncodedChunk {
  let body: readonly Uint8Array[] = slices;
  let compression: Compression = COMPRESSION_NONE;
  const compressed = compressIfItPays(slices, plainLength);
  if (compressed) {
    body = [compressed];
    compression = COMPRESSION_LZ4;
  }
  const bodyLength = body.reduce((sum, slice) => sum + slice.length, 0);
  const nonce = nextNonce();
  const header = Buffer.alloc(RECORD_HEADER_SIZE);
  writeRecordHeader(header, 0, {
    kind: KIND_CHUNK,
    compression,
    cipher: CIPHER_AES_256_GCM,
    tenantNum: keys.tenantNum,
    plainLength,
    payloadLength: bodyLength + TAG_BYTES,
    chunkId,
    nonce,
  });
  const payload = seal(keys.dataKey, nonce, recordAad(header), body, output);
  let payloadChecksum = 0;
  for (const part of payload) payloadChecksum = crc32c(part, payloadChecksum);
  sealRecordHeader(header, 0, payloadChecksum);
  return {
    header,
    payload,
    payloadLength: bodyLength + TAG_BYTES,
    payloadChecksum,
    compressed: compression !== COMPRESSION_NONE,
  };
}

/** Bytes `encodeChunk` may write into its `output` for a chunk of `plainLength` bytes. */
export function encodeOutputBytes(plainLength: number): number {
  return plainLength + TAG_BYTES; // LZ4 is kept only when it is shorter
}

/** AES-256-GCM of `body`: ciphertext parts, then the tag. */
function seal(
  key: Buffer,
  nonce: Buffer,
  aad: Buffer,
  body: readonly Uint8Array[],
  output: Buffer | undefined,
): Buffer[] {
  const aesGcm = libc()?.aesGcm;
  if (output && aesGcm) return [output.subarray(0, aesGcm.seal(key, nonce, aad, body, output))];
  const cipher = createCipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES });
  cipher.setAAD(aad);
  const payload: Buffer[] = body.map((slice) => cipher.update(slice));
  cipher.final();
  payload.push(cipher.getAuthTag());
  return payload;
}

const NONCE_BYTES = 12;
/** Nonces drawn from the CSPRNG per call: one call per 4,096 chunks instead of one per chunk. */
const NONCES_PER_DRAW = 4096;
let nonces = Buffer.alloc(0);
let nonceOffset = 0;

/** A fresh random 96-bit nonce. Every draw is a new buffer: a nonce is never handed out twice. */
function nextNonce(): Buffer {
  if (nonceOffset + NONCE_BYTES > nonces.length) {
    nonces = randomBytes(NONCE_BYTES * NONCES_PER_DRAW);
    nonceOffset = 0;
  }
  const nonce = nonces.subarray(nonceOffset, nonceOffset + NONCE_BYTES);
  nonceOffset += NONCE_BYTES;
  return nonce;
}

/**
 * The LZ4 form of the chunk when it is at least 10% smaller. A chunk larger than the 64 KiB
 * sample is compressed only when its first 64 KiB shrink by that much; a smaller chunk is its
 * own sample, compressed once.
 */
function compressIfItPays(slices: readonly Uint8Array[], plainLength: number): Buffer | undefined {
  const first = slices[0];
  if (!first || plainLength < 512) return undefined;
  if (plainLength > SAMPLE_BYTES || slices.length > 1) {
    const sample = first.subarray(0, Math.min(first.length, SAMPLE_BYTES));
    if (sample.length < 512 || !compressedIfItPays(sample, sampleScratch)) return undefined;
  }
  return compressedIfItPays(gather(slices, plainLength), lz4Scratch);
}

// Buffers of this thread (one per thread, as this module): where a chunk's slices are joined for
// LZ4, where its LZ4 form is written, and where a sample is compressed (only its length is kept).
const SCRATCH_GRANULE_BYTES = 64 * 1024;
const joinScratch = new ScratchBuffer(SCRATCH_GRANULE_BYTES);
const lz4Scratch = new ScratchBuffer(SCRATCH_GRANULE_BYTES);
const sampleScratch = new ScratchBuffer(SCRATCH_GRANULE_BYTES);

/** The longest LZ4 form of `length` bytes that saves COMPRESSION_SAVING_MIN of them. */
function payingLength(length: number): number {
  return Math.ceil(length * (1 - COMPRESSION_SAVING_MIN)) - 1;
}

/**
 * The LZ4 form of `bytes` when it pays, in `scratch` (valid until its next use). Lightwell's
 * native compressor gives up as soon as the form would not pay (a 64 KiB sample of random bytes:
 * 4.5 against lz4-napi's 620 us); lz4-napi's `uncompressSync` reads what either writes.
 */
function compressedIfItPays(bytes: Uint8Array, scratch: ScratchBuffer): Buffer | undefined {
  const limit = payingLength(bytes.length);
  const compress = native()?.lz4Compress;
  if (!compress) {
    const compressed = compressSync(asBuffer(bytes));
    return compressed.length <= limit ? compressed : undefined;
  }
  const target = scratch.take(limit);
  const written = compress(bytes, target);
  return written === 0 ? undefined : target.subarray(0, written);
}

/** The stored LZ4 form of all of `bytes`, whatever it saves, with the compressor in use. */
export function lz4Compressed(bytes: Uint8Array): Buffer {
  const compress = native()?.lz4Compress;
  if (!compress) return compressSync(asBuffer(bytes));
  // LZ4_COMPRESSBOUND, plus the u32 length: room for any input
  const target = Buffer.allocUnsafe(bytes.length + Math.floor(bytes.length / 255) + 16 + 4);
  const written = compress(bytes, target);
  assert.ok(written > 0, 'LZ4 output exceeded its bound');
  return target.subarray(0, written);
}

/** Which LZ4 compressor `lz4Compressed` and the chunk codec use. */
export function lz4Implementation(): 'native' | 'lz4-napi' {
  return native()?.lz4Compress ? 'native' : 'lz4-napi';
}

/** The slices as one run of bytes: the one slice itself, or a copy in this thread's scratch. */
function gather(slices: readonly Uint8Array[], length: number): Uint8Array {
  if (slices.length === 1 && slices[0]) return slices[0];
  const joined = joinScratch.take(length);
  let offset = 0;
  for (const slice of slices) {
    copyBytes(joined, offset, slice); // slices of the shared arena: see copyBytes
    offset += slice.length;
  }
  return joined;
}

interface ExpectedRecord {
  chunkId: Uint8Array;
  payloadChecksum: number;
  plainLength: number;
}

/**
 * Verifies and opens a stored record; `expected` pins what the index says it must be.
 * `aesGcm` is OpenSSL reached directly where it can be (creating a node:crypto decipher costs
 * about 5% of a small GET's CPU); null takes node:crypto's path (tests cover it so).
 */
export function decodeChunk(
  keys: TenantKeys,
  record: Buffer,
  expected: ExpectedRecord,
  aesGcm: AesGcm | null = libc()?.aesGcm ?? null,
): Buffer {
  const checked = checkRecord(keys, record, expected);
  return withRetiredKeys(keys, checked, (under) => plaintextOf(under, record, checked, aesGcm));
}

/**
 * `open` with the tenant's current key, then, while the record fails authentication, with each
 * retired key. Only an authentication failure moves on: any other error is the record's.
 * A payload that fails authentication is checked against its CRC32C first: bytes damaged on the
 * disk or on the way (`reason: checksum`) authenticate under no key, and are told apart from
 * intact bytes under another key or forged (`reason: authentication`). The CRC costs nothing on
 * a read that authenticates (the tag covers every payload byte, a stronger check).
 */
function withRetiredKeys<T>(
  keys: TenantKeys,
  checked: { header: RecordHeader; payload: Buffer },
  open: (keys: TenantKeys) => T,
): T {
  try {
    return open(keys);
  } catch (error) {
    if (failedAuthentication(error) && crc32c(checked.payload) !== checked.header.payloadChecksum)
      throw CorruptData(
        'record payload fails its checksum',
        { reason: 'checksum' },
        { cause: error },
      );
    const retired = keys.retiredDataKeys;
    if (retired === undefined || !failedAuthentication(error)) throw error;
    for (const dataKey of retired) {
      try {
        return open({ ...keys, dataKey });
      } catch (again) {
        if (!failedAuthentication(again)) throw again;
      }
    }
    throw error;
  }
}

function failedAuthentication(error: unknown): boolean {
  return isLightwellError(error) && error.details['reason'] === 'authentication';
}

/**
 * As decodeChunk, but the plaintext goes into `targets` (in order; their lengths add up to the
 * plain length). Answers true when it was decrypted there in place, which needs an uncompressed
 * record and OpenSSL reached directly; false when it was decoded first and then copied (or, for
 * a compressed record and one target, decompressed there). Throws as decodeChunk does, and then
 * the targets may hold unauthenticated bytes.
 */
export function decodeChunkInto(
  keys: TenantKeys,
  record: Buffer,
  expected: ExpectedRecord,
  targets: readonly Uint8Array[],
  aesGcm: AesGcm | null = libc()?.aesGcm ?? null,
): boolean {
  const checked = checkRecord(keys, record, expected);
  const { header, payload } = checked;
  if (aesGcm && header.compression === COMPRESSION_NONE) {
    if (payload.length - TAG_BYTES !== header.plainLength) {
      throw CorruptData('record decodes to the wrong length');
    }
    withRetiredKeys(keys, checked, (under) =>
      openPayload(aesGcm, under, record, header, payload, targets),
    );
    return true;
  }
  const [single] = targets;
  const compressed = header.compression === COMPRESSION_LZ4;
  const into = compressed && targets.length === 1 && native()?.lz4Decompress ? single : undefined;
  const plain = withRetiredKeys(keys, checked, (under) =>
    plaintextOf(under, record, checked, aesGcm, into),
  );
  if (into) return false; // decompressed straight into the target
  let offset = 0;
  for (const target of targets) {
    copyBytes(target, 0, plain.subarray(offset, offset + target.length));
    offset += target.length;
  }
  return false;
}

/**
 * Decrypts (and decompresses) a checked record into a buffer of its own, or for a compressed
 * record into `into` (its plain length) where the native decoder can write there.
 */
function plaintextOf(
  keys: TenantKeys,
  record: Buffer,
  { header, payload }: { header: RecordHeader; payload: Buffer },
  aesGcm: AesGcm | null,
  into?: Uint8Array,
): Buffer {
  let plain: Buffer;
  if (aesGcm) {
    plain = Buffer.allocUnsafe(payload.length - TAG_BYTES);
    openPayload(aesGcm, keys, record, header, payload, [plain]);
  } else {
    const decipher = createDecipheriv('aes-256-gcm', keys.dataKey, header.nonce, {
      authTagLength: TAG_BYTES,
    });
    decipher.setAAD(recordAad(record.subarray(0, RECORD_HEADER_SIZE)));
    decipher.setAuthTag(payload.subarray(payload.length - TAG_BYTES));
    try {
      plain = decipher.update(payload.subarray(0, payload.length - TAG_BYTES));
      const tail = decipher.final(); // empty for GCM; checks the tag
      if (tail.length > 0) plain = Buffer.concat([plain, tail]);
    } catch (cause) {
      throw CorruptData('record failed authentication', { reason: 'authentication' }, { cause });
    }
  }
  if (header.compression === COMPRESSION_LZ4) plain = decompressed(plain, header.plainLength, into);
  if (plain.length !== header.plainLength) throw CorruptData('record decodes to the wrong length');
  return plain;
}

/**
 * The plain bytes of a stored LZ4 form (u32 LE length, block), written into `into` where given
 * and Lightwell's native decoder is built (it writes where it is told; lz4-napi allocates).
 */
function decompressed(stored: Buffer, plainLength: number, into?: Uint8Array): Buffer {
  const decompress = native()?.lz4Decompress;
  if (!decompress) return uncompressSync(stored);
  if (stored.length < 4 || stored.readUInt32LE(0) !== plainLength) {
    throw CorruptData('record decodes to the wrong length');
  }
  const target = into
    ? Buffer.from(into.buffer, into.byteOffset, into.length)
    : Buffer.allocUnsafe(plainLength);
  if (target.length !== plainLength) throw CorruptData('record decodes to the wrong length');
  const written = decompress(stored.subarray(4), target);
  if (written !== plainLength) throw CorruptData('record does not decompress');
  return target;
}

/** Decrypts the payload into `targets` and checks its tag; throws CorruptData if it fails. */
function openPayload(
  aesGcm: AesGcm,
  keys: TenantKeys,
  record: Buffer,
  header: RecordHeader,
  payload: Buffer,
  targets: readonly Uint8Array[],
): void {
  const opened = aesGcm.open(
    keys.dataKey,
    header.nonce,
    recordAad(record.subarray(0, RECORD_HEADER_SIZE)),
    payload.subarray(0, payload.length - TAG_BYTES),
    payload.subarray(payload.length - TAG_BYTES),
    targets,
  );
  if (!opened) throw CorruptData('record failed authentication', { reason: 'authentication' });
}

/** The record's header and payload, once they agree with each other and with the index. */
function checkRecord(
  keys: TenantKeys,
  record: Buffer,
  expected: ExpectedRecord,
): { header: RecordHeader; payload: Buffer } {
  const header: RecordHeader = decodeRecordHeader(record, 0);
  const payload = record.subarray(RECORD_HEADER_SIZE, RECORD_HEADER_SIZE + header.payloadLength);
  // The payload's CRC32C is not recomputed on a read that authenticates: the GCM tag covers
  // every payload byte, and the header as AAD, before any plaintext is returned, which is a
  // stronger check of the same bytes (a tenth of a GET's CPU saved). A read that fails
  // authentication checks it (`withRetiredKeys`); recovery and the scrub, which have no key or
  // must tell a torn tail from a forgery, check it always.
  if (payload.length !== header.payloadLength || payload.length < TAG_BYTES) {
    throw CorruptData('record payload is shorter than its header or a GCM tag says', {
      payloadLength: header.payloadLength,
      length: payload.length,
    });
  }
  if (
    header.payloadChecksum !== expected.payloadChecksum ||
    header.plainLength !== expected.plainLength ||
    header.tenantNum !== keys.tenantNum ||
    Buffer.compare(header.chunkId, expected.chunkId) !== 0 // no copy of either id per read
  ) {
    throw CorruptData('record does not match its index entry');
  }
  return { header, payload };
}

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes)
    ? bytes
    : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
