// The record frame: how a chunk (or a seal footer) is laid out inside a segment file.
//
// A record is an 80-byte header followed by payloadLength payload bytes. Records follow the
// 64-byte segment header back to back, with no alignment or padding. This is the hot path of
// every PUT and GET, so the writer fills a caller-owned buffer in place and allocates nothing.
//
// Writing a record, in order:
//   1. writeRecordHeader(target, offset, fields): bytes [0, 72), everything but the checksums.
//   2. Encrypt the payload with AAD = recordAad(target, offset) (bytes [0, 56)), if cipher = 1.
//   3. sealRecordHeader(target, offset, crc32c(payload)): bytes [72, 80).
//
// Invariants (docs/on-disk-format.md, "Record frame"):
// - Integers little-endian; reserved bytes written as zero and ignored by readers.
// - recordLength = RECORD_HEADER_SIZE + payloadLength.
// - payloadChecksum = CRC32C of the payload bytes as stored (after compression and encryption).
// - headerChecksum = CRC32C of header bytes [0, 76), so it covers payloadChecksum too.
// - The AES-GCM AAD is header bytes [0, 56): magic, lengths, kind, codecs, tenant and chunk id.
//   The nonce is the GCM IV; the checksums are not authenticated (they are computed after).
// - plainLength ≤ RECORD_PLAIN_LENGTH_MAX, and the payload length is consistent with the
//   codecs: payload = [lz4 size prefix + block | plain bytes], then + 16-byte tag if encrypted.
// - A seal record (kind 2) has no codecs, tenant 0, zero chunk id and nonce, 32 payload bytes.
// - Readers answer malformed bytes with FormatError only; scanRecords never throws on bytes.

import assert from 'node:assert/strict';
import { crc32c } from '../util/crc32c.js';
import { FormatError } from '../util/errors.js';
import { isZero } from './primitives.js';

export const RECORD_HEADER_SIZE = 80;
/** The bytes "LWR1" read as a little-endian u32. */
export const RECORD_MAGIC = 0x3152574c;

export const RECORD_KIND_CHUNK = 1;
export const RECORD_KIND_SEAL = 2;
export const COMPRESSION_NONE = 0;
/** An lz4 block prefixed with the uncompressed size as a u32 LE (lz4-napi `compressSync`). */
export const COMPRESSION_LZ4 = 1;
export const CIPHER_NONE = 0;
/** AES-256-GCM; the payload is ciphertext followed by the 16-byte tag. */
export const CIPHER_AES_256_GCM = 1;

export type RecordKind = typeof RECORD_KIND_CHUNK | typeof RECORD_KIND_SEAL;
export type Compression = typeof COMPRESSION_NONE | typeof COMPRESSION_LZ4;
export type Cipher = typeof CIPHER_NONE | typeof CIPHER_AES_256_GCM;

export const CIPHER_TAG_SIZE = 16;
export const LZ4_SIZE_PREFIX_SIZE = 4;
/** Bytes of a chunk after decryption and decompression. */
export const RECORD_PLAIN_LENGTH_MAX = 16 * 1024 * 1024;
/**
 * The stored payload of a maximal chunk in the worst case: lz4's bound for incompressible input
 * (n + n/255 + 16), its size prefix, and the GCM tag.
 */
export const RECORD_PAYLOAD_LENGTH_MAX =
  RECORD_PLAIN_LENGTH_MAX +
  Math.floor(RECORD_PLAIN_LENGTH_MAX / 255) +
  16 +
  LZ4_SIZE_PREFIX_SIZE +
  CIPHER_TAG_SIZE;
/** The payload length of every seal footer record (seal-footer.ts). */
export const RECORD_SEAL_PAYLOAD_LENGTH = 32;
/** Header bytes [0, RECORD_AAD_SIZE) are the AES-GCM additional authenticated data. */
export const RECORD_AAD_SIZE = 56;

export const OFFSET_RECORD_MAGIC = 0;
export const SIZE_RECORD_MAGIC = 4;
export const OFFSET_RECORD_RECORD_LENGTH = 4;
export const SIZE_RECORD_RECORD_LENGTH = 4;
export const OFFSET_RECORD_KIND = 8;
export const SIZE_RECORD_KIND = 1;
export const OFFSET_RECORD_COMPRESSION = 9;
export const SIZE_RECORD_COMPRESSION = 1;
export const OFFSET_RECORD_CIPHER = 10;
export const SIZE_RECORD_CIPHER = 1;
export const OFFSET_RECORD_RESERVED11 = 11;
export const SIZE_RECORD_RESERVED11 = 1;
export const OFFSET_RECORD_TENANT_NUM = 12;
export const SIZE_RECORD_TENANT_NUM = 4;
export const OFFSET_RECORD_PLAIN_LENGTH = 16;
export const SIZE_RECORD_PLAIN_LENGTH = 4;
export const OFFSET_RECORD_PAYLOAD_LENGTH = 20;
export const SIZE_RECORD_PAYLOAD_LENGTH = 4;
export const OFFSET_RECORD_CHUNK_ID = 24;
export const SIZE_RECORD_CHUNK_ID = 32;
export const OFFSET_RECORD_NONCE = 56;
export const SIZE_RECORD_NONCE = 12;
export const OFFSET_RECORD_RESERVED68 = 68;
export const SIZE_RECORD_RESERVED68 = 4;
export const OFFSET_RECORD_PAYLOAD_CHECKSUM = 72;
export const SIZE_RECORD_PAYLOAD_CHECKSUM = 4;
export const OFFSET_RECORD_HEADER_CHECKSUM = 76;
export const SIZE_RECORD_HEADER_CHECKSUM = 4;

assert.equal(OFFSET_RECORD_HEADER_CHECKSUM + SIZE_RECORD_HEADER_CHECKSUM, RECORD_HEADER_SIZE);
assert.equal(OFFSET_RECORD_NONCE, RECORD_AAD_SIZE);
assert.equal(Buffer.from('LWR1', 'latin1').readUInt32LE(0), RECORD_MAGIC);

/** What the writer supplies; the magic, lengths' sum and checksums are derived. */
export interface RecordFields {
  readonly kind: RecordKind;
  readonly compression: Compression;
  readonly cipher: Cipher;
  readonly tenantNum: number;
  readonly plainLength: number;
  readonly payloadLength: number;
  /** 32 bytes: the chunk's keyed content hash. Zero for a seal record. */
  readonly chunkId: Uint8Array;
  /** 12 bytes: the AES-GCM IV. Zero when cipher = 0. */
  readonly nonce: Uint8Array;
}

/**
 * A decoded, checksum-verified record header. `chunkId` and `nonce` are views into the buffer
 * that was decoded (no copy): copy them before that buffer is reused.
 */
export interface RecordHeader extends RecordFields {
  readonly recordLength: number;
  readonly payloadChecksum: number;
  readonly headerChecksum: number;
  readonly chunkId: Buffer;
  readonly nonce: Buffer;
}

/** Writes header bytes [0, 72) of a record at `offset`: all but the two checksums. */
export function writeRecordHeader(target: Buffer, offset: number, fields: RecordFields): void {
  // Checks on the write path build their message only when they fail: a template literal given
  // to assert.ok is formatted on every call (number-to-string conversions on every record).
  if (!(Number.isSafeInteger(offset) && offset >= 0)) assert.fail(`bad record offset ${offset}`);
  assert.ok(offset + RECORD_HEADER_SIZE <= target.length, 'record header past end of target');
  if (!isU32(fields.tenantNum)) assert.fail(`bad tenantNum ${fields.tenantNum}`);
  if (!isU32(fields.plainLength)) assert.fail(`bad plainLength ${fields.plainLength}`);
  if (!isU32(fields.payloadLength)) assert.fail(`bad payloadLength ${fields.payloadLength}`);
  assert.equal(fields.chunkId.length, SIZE_RECORD_CHUNK_ID);
  assert.equal(fields.nonce.length, SIZE_RECORD_NONCE);
  const problem = recordFieldsProblem(fields);
  assert.equal(problem, undefined, problem);

  target.writeUInt32LE(RECORD_MAGIC, offset + OFFSET_RECORD_MAGIC);
  target.writeUInt32LE(
    RECORD_HEADER_SIZE + fields.payloadLength,
    offset + OFFSET_RECORD_RECORD_LENGTH,
  );
  target.writeUInt8(fields.kind, offset + OFFSET_RECORD_KIND);
  target.writeUInt8(fields.compression, offset + OFFSET_RECORD_COMPRESSION);
  target.writeUInt8(fields.cipher, offset + OFFSET_RECORD_CIPHER);
  target.writeUInt8(0, offset + OFFSET_RECORD_RESERVED11);
  target.writeUInt32LE(fields.tenantNum, offset + OFFSET_RECORD_TENANT_NUM);
  target.writeUInt32LE(fields.plainLength, offset + OFFSET_RECORD_PLAIN_LENGTH);
  target.writeUInt32LE(fields.payloadLength, offset + OFFSET_RECORD_PAYLOAD_LENGTH);
  target.set(fields.chunkId, offset + OFFSET_RECORD_CHUNK_ID);
  target.set(fields.nonce, offset + OFFSET_RECORD_NONCE);
  target.writeUInt32LE(0, offset + OFFSET_RECORD_RESERVED68);
}

/**
 * Fills header bytes [72, 80): the payload checksum and then the header checksum, which covers
 * it. Call after writeRecordHeader and after the payload is final (compressed, encrypted).
 */
export function sealRecordHeader(target: Buffer, offset: number, payloadChecksum: number): void {
  if (!isU32(payloadChecksum)) assert.fail(`bad payloadChecksum ${payloadChecksum}`);
  assert.ok(offset + RECORD_HEADER_SIZE <= target.length, 'record header past end of target');
  assert.equal(target.readUInt32LE(offset + OFFSET_RECORD_MAGIC), RECORD_MAGIC);
  target.writeUInt32LE(payloadChecksum, offset + OFFSET_RECORD_PAYLOAD_CHECKSUM);
  const headerChecksum = crc32c(target.subarray(offset, offset + OFFSET_RECORD_HEADER_CHECKSUM));
  target.writeUInt32LE(headerChecksum, offset + OFFSET_RECORD_HEADER_CHECKSUM);
  const sealed = readRecordHeader(target, offset);
  if (typeof sealed === 'string') assert.fail(sealed);
}

/**
 * Encodes a whole record (header and payload) into a new buffer. Convenient for seal footers,
 * tests and tools; the write path uses writeRecordHeader and sealRecordHeader in place.
 */
export function encodeRecord(
  fields: Omit<RecordFields, 'payloadLength'>,
  payload: Uint8Array,
): Buffer {
  const target = Buffer.alloc(RECORD_HEADER_SIZE + payload.length);
  writeRecordHeader(target, 0, { ...fields, payloadLength: payload.length });
  target.set(payload, RECORD_HEADER_SIZE);
  sealRecordHeader(target, 0, crc32c(payload));
  return target;
}

/** The AES-GCM additional authenticated data of the record whose header is at `offset`. */
export function recordAad(source: Buffer, offset = 0): Buffer {
  assert.ok(offset >= 0 && offset + RECORD_AAD_SIZE <= source.length, 'AAD past end of source');
  return source.subarray(offset, offset + RECORD_AAD_SIZE);
}

/** Decodes and verifies the record header at `offset`; the payload is not checked. */
export function decodeRecordHeader(source: Buffer, offset: number): RecordHeader {
  const header = readRecordHeader(source, offset);
  if (typeof header === 'string') throw FormatError(header, { offset });
  return header;
}

/** Checks a record's payload (exactly payloadLength bytes) against its header. */
export function verifyPayload(header: RecordHeader, payload: Uint8Array): void {
  if (payload.length !== header.payloadLength) {
    throw FormatError('payload length mismatch', {
      payloadLength: header.payloadLength,
      length: payload.length,
    });
  }
  const checksumActual = crc32c(payload);
  if (checksumActual !== header.payloadChecksum) {
    throw FormatError('payload checksum mismatch', {
      checksumStored: header.payloadChecksum,
      checksumActual,
    });
  }
}

export interface ScannedRecord {
  /** Offset of the record's header in the scanned buffer. */
  readonly offset: number;
  readonly header: RecordHeader;
}

export interface RecordScan {
  /** Every intact record from startOffset on, in order. */
  readonly records: ScannedRecord[];
  /** End of the last intact record (startOffset if none): where recovery truncates. */
  readonly validEnd: number;
  /** True when bytes follow validEnd. */
  readonly torn: boolean;
  /** Why the scan stopped before the end of the buffer, for logs; undefined if it did not. */
  readonly problem: string | undefined;
}

/**
 * Walks the records of `source` from `startOffset` and stops at the first record whose header
 * is invalid, whose length runs past the buffer, or whose payload checksum fails. It also stops
 * after a seal footer, which is always a segment's last record. Never throws on any bytes.
 *
 * Offsets are relative to `source`. A caller scanning a file through a window must treat a
 * record that runs past the window's end as "read more", not as torn.
 */
export function scanRecords(source: Buffer, startOffset: number): RecordScan {
  assert.ok(
    Number.isSafeInteger(startOffset) && startOffset >= 0 && startOffset <= source.length,
    `bad startOffset ${startOffset}`,
  );
  const records: ScannedRecord[] = [];
  let offset = startOffset;
  let problem: string | undefined;
  while (offset < source.length) {
    const header = readRecordHeader(source, offset);
    if (typeof header === 'string') {
      problem = header;
      break;
    }
    const end = offset + header.recordLength;
    if (end > source.length) {
      problem = 'record runs past the end of the buffer';
      break;
    }
    if (crc32c(source.subarray(offset + RECORD_HEADER_SIZE, end)) !== header.payloadChecksum) {
      problem = 'payload checksum mismatch';
      break;
    }
    records.push({ offset, header });
    offset = end;
    if (header.kind === RECORD_KIND_SEAL) {
      if (offset < source.length) problem = 'bytes follow the seal footer';
      break;
    }
  }
  return { records, validEnd: offset, torn: offset < source.length, problem };
}

/** Reads and verifies a header; answers a description of the first problem instead of one. */
function readRecordHeader(source: Buffer, offset: number): RecordHeader | string {
  if (offset + RECORD_HEADER_SIZE > source.length) return 'record header is truncated';
  if (source.readUInt32LE(offset + OFFSET_RECORD_MAGIC) !== RECORD_MAGIC) {
    return 'bad record magic';
  }
  const headerChecksum = source.readUInt32LE(offset + OFFSET_RECORD_HEADER_CHECKSUM);
  const checksumActual = crc32c(source.subarray(offset, offset + OFFSET_RECORD_HEADER_CHECKSUM));
  if (headerChecksum !== checksumActual) return 'record header checksum mismatch';
  const kind = source.readUInt8(offset + OFFSET_RECORD_KIND);
  const compression = source.readUInt8(offset + OFFSET_RECORD_COMPRESSION);
  const cipher = source.readUInt8(offset + OFFSET_RECORD_CIPHER);
  if (kind !== RECORD_KIND_CHUNK && kind !== RECORD_KIND_SEAL) return `unknown kind ${kind}`;
  if (compression !== COMPRESSION_NONE && compression !== COMPRESSION_LZ4) {
    return `unknown compression ${compression}`;
  }
  if (cipher !== CIPHER_NONE && cipher !== CIPHER_AES_256_GCM) return `unknown cipher ${cipher}`;
  const chunkIdStart = offset + OFFSET_RECORD_CHUNK_ID;
  const nonceStart = offset + OFFSET_RECORD_NONCE;
  const header: RecordHeader = {
    kind,
    compression,
    cipher,
    tenantNum: source.readUInt32LE(offset + OFFSET_RECORD_TENANT_NUM),
    plainLength: source.readUInt32LE(offset + OFFSET_RECORD_PLAIN_LENGTH),
    payloadLength: source.readUInt32LE(offset + OFFSET_RECORD_PAYLOAD_LENGTH),
    chunkId: source.subarray(chunkIdStart, chunkIdStart + SIZE_RECORD_CHUNK_ID),
    nonce: source.subarray(nonceStart, nonceStart + SIZE_RECORD_NONCE),
    recordLength: source.readUInt32LE(offset + OFFSET_RECORD_RECORD_LENGTH),
    payloadChecksum: source.readUInt32LE(offset + OFFSET_RECORD_PAYLOAD_CHECKSUM),
    headerChecksum,
  };
  if (header.recordLength !== RECORD_HEADER_SIZE + header.payloadLength) {
    return 'recordLength is not header size plus payloadLength';
  }
  return recordFieldsProblem(header) ?? header;
}

/**
 * The fields as the rules read them: the codes are plain numbers, because the writer asserts
 * what its callers' types promise and the reader checks what the bytes say.
 */
type RecordFieldsUnchecked = Omit<RecordFields, 'kind' | 'compression' | 'cipher'> & {
  readonly kind: number;
  readonly compression: number;
  readonly cipher: number;
};

/** The rules a header's fields obey, shared by writer (asserted) and reader (FormatError). */
function recordFieldsProblem(fields: RecordFieldsUnchecked): string | undefined {
  if (fields.kind !== RECORD_KIND_CHUNK && fields.kind !== RECORD_KIND_SEAL) {
    return `unknown kind ${String(fields.kind)}`;
  }
  if (fields.compression !== COMPRESSION_NONE && fields.compression !== COMPRESSION_LZ4) {
    return `unknown compression ${String(fields.compression)}`;
  }
  if (fields.cipher !== CIPHER_NONE && fields.cipher !== CIPHER_AES_256_GCM) {
    return `unknown cipher ${String(fields.cipher)}`;
  }
  if (fields.plainLength > RECORD_PLAIN_LENGTH_MAX) return 'plainLength exceeds the maximum';
  if (fields.payloadLength > RECORD_PAYLOAD_LENGTH_MAX) return 'payloadLength exceeds the maximum';
  if (fields.cipher === CIPHER_NONE && !isZero(fields.nonce, 0, SIZE_RECORD_NONCE)) {
    return 'nonce must be zero without a cipher';
  }
  if (fields.kind === RECORD_KIND_SEAL) {
    if (fields.compression !== COMPRESSION_NONE || fields.cipher !== CIPHER_NONE) {
      return 'seal record with a codec';
    }
    if (fields.tenantNum !== 0) return 'seal record with a tenant';
    if (!isZero(fields.chunkId, 0, SIZE_RECORD_CHUNK_ID)) return 'seal record with a chunk id';
    if (fields.payloadLength !== RECORD_SEAL_PAYLOAD_LENGTH) return 'seal record payload length';
  }
  const tagSize = fields.cipher === CIPHER_AES_256_GCM ? CIPHER_TAG_SIZE : 0;
  if (fields.compression === COMPRESSION_NONE) {
    if (fields.payloadLength !== fields.plainLength + tagSize) {
      return 'payloadLength does not match plainLength';
    }
  } else if (fields.payloadLength < LZ4_SIZE_PREFIX_SIZE + tagSize) {
    return 'payloadLength too short for its codecs';
  }
  return undefined;
}

function isU32(value: number): boolean {
  return Number.isInteger(value) && value >= 0 && value <= 0xffffffff;
}
