// The segment header: the first 64 bytes of every segment file `segments/<id>.seg`, and the
// segment file naming rule.
//
// A segment file is this header followed by records (record-frame.ts); a sealed segment ends
// with a seal footer record (seal-footer.ts). The header names the segment (its id is also its
// file name, so a renamed or misplaced file is caught), the format version that wrote it and
// the optional features (flags) its records use.
//
// Invariants (docs/on-disk-format.md, "Segment header"):
// - Exactly SEGMENT_HEADER_SIZE bytes at file offset 0; headerSize repeats that size.
// - Integers little-endian; reserved bytes written as zero and ignored by readers (they are
//   still covered by the checksum).
// - headerChecksum = CRC32C of bytes [0, OFFSET_SEGMENT_HEADER_HEADER_CHECKSUM).
// - formatVersion is checked before the checksum: newer → FormatTooNew; an unknown flag bit →
//   FormatTooNew; anything else malformed → FormatError.
// - The file name is the id as 16 zero-padded decimal digits plus `.seg`. Every safe integer
//   (< 2^53) fits in 16 digits, so names sort in id order.

import assert from 'node:assert/strict';
import { crc32c } from '../util/crc32c.js';
import { FormatError, FormatTooNew } from '../util/errors.js';
import { FORMAT_VERSION } from './marker.js';
import { U64_VALUE_MAX, hasMagic, readU64, writeU64 } from './primitives.js';

export const SEGMENT_DIRECTORY_NAME = 'segments';
export const SEGMENT_MAGIC = 'LWSEGMNT';
export const SEGMENT_HEADER_SIZE = 64;
/** Flag bits this release understands; any other set bit means the segment is too new. */
export const SEGMENT_FLAGS_KNOWN = 0n;
/** Digits of the zero-padded decimal id in a segment file name. */
export const SEGMENT_FILE_NAME_DIGITS = 16;

export const OFFSET_SEGMENT_HEADER_MAGIC = 0;
export const SIZE_SEGMENT_HEADER_MAGIC = 8;
export const OFFSET_SEGMENT_HEADER_FORMAT_VERSION = 8;
export const SIZE_SEGMENT_HEADER_FORMAT_VERSION = 2;
export const OFFSET_SEGMENT_HEADER_HEADER_SIZE = 10;
export const SIZE_SEGMENT_HEADER_HEADER_SIZE = 2;
export const OFFSET_SEGMENT_HEADER_RESERVED12 = 12;
export const SIZE_SEGMENT_HEADER_RESERVED12 = 4;
export const OFFSET_SEGMENT_HEADER_FLAGS = 16;
export const SIZE_SEGMENT_HEADER_FLAGS = 8;
export const OFFSET_SEGMENT_HEADER_SEGMENT_ID = 24;
export const SIZE_SEGMENT_HEADER_SEGMENT_ID = 8;
export const OFFSET_SEGMENT_HEADER_CREATED_AT_MS = 32;
export const SIZE_SEGMENT_HEADER_CREATED_AT_MS = 8;
export const OFFSET_SEGMENT_HEADER_RESERVED40 = 40;
export const SIZE_SEGMENT_HEADER_RESERVED40 = 20;
export const OFFSET_SEGMENT_HEADER_HEADER_CHECKSUM = 60;
export const SIZE_SEGMENT_HEADER_HEADER_CHECKSUM = 4;

const magicBytes = Buffer.from(SEGMENT_MAGIC, 'latin1');
assert.equal(magicBytes.length, SIZE_SEGMENT_HEADER_MAGIC);
assert.equal(
  OFFSET_SEGMENT_HEADER_HEADER_CHECKSUM + SIZE_SEGMENT_HEADER_HEADER_CHECKSUM,
  SEGMENT_HEADER_SIZE,
);
assert.ok(String(U64_VALUE_MAX).length <= SEGMENT_FILE_NAME_DIGITS);

export interface SegmentHeaderFields {
  readonly segmentId: number;
  readonly createdAtMs: number;
}

export interface SegmentHeader extends SegmentHeaderFields {
  readonly formatVersion: number;
  readonly headerSize: number;
  readonly flags: number;
}

/** Encodes the header of a new segment at version FORMAT_VERSION with no flags. */
export function encodeSegmentHeader(fields: SegmentHeaderFields): Buffer {
  const target = Buffer.alloc(SEGMENT_HEADER_SIZE);
  magicBytes.copy(target, OFFSET_SEGMENT_HEADER_MAGIC);
  target.writeUInt16LE(FORMAT_VERSION, OFFSET_SEGMENT_HEADER_FORMAT_VERSION);
  target.writeUInt16LE(SEGMENT_HEADER_SIZE, OFFSET_SEGMENT_HEADER_HEADER_SIZE);
  target.writeBigUInt64LE(0n, OFFSET_SEGMENT_HEADER_FLAGS);
  writeU64(target, OFFSET_SEGMENT_HEADER_SEGMENT_ID, fields.segmentId);
  writeU64(target, OFFSET_SEGMENT_HEADER_CREATED_AT_MS, fields.createdAtMs);
  const checksum = crc32c(target.subarray(0, OFFSET_SEGMENT_HEADER_HEADER_CHECKSUM));
  target.writeUInt32LE(checksum, OFFSET_SEGMENT_HEADER_HEADER_CHECKSUM);
  assert.deepEqual(decodeSegmentHeader(target), {
    formatVersion: FORMAT_VERSION,
    headerSize: SEGMENT_HEADER_SIZE,
    flags: 0,
    segmentId: fields.segmentId,
    createdAtMs: fields.createdAtMs,
  });
  return target;
}

/**
 * Decodes the header from the start of `source`, which may hold more of the file after it.
 */
export function decodeSegmentHeader(source: Buffer): SegmentHeader {
  if (!hasMagic(source, OFFSET_SEGMENT_HEADER_MAGIC, magicBytes)) {
    throw FormatError('not a Lightwell segment (bad magic)', { length: source.length });
  }
  if (source.length < OFFSET_SEGMENT_HEADER_FORMAT_VERSION + SIZE_SEGMENT_HEADER_FORMAT_VERSION) {
    throw FormatError('segment header is truncated', { length: source.length });
  }
  const formatVersion = source.readUInt16LE(OFFSET_SEGMENT_HEADER_FORMAT_VERSION);
  if (formatVersion > FORMAT_VERSION) {
    throw FormatTooNew(`segment has format version ${formatVersion}`, {
      formatVersion,
      supported: FORMAT_VERSION,
    });
  }
  if (formatVersion === 0) throw FormatError('segment has format version 0');
  if (source.length < SEGMENT_HEADER_SIZE) {
    throw FormatError('segment header is truncated', { length: source.length });
  }
  const checksumStored = source.readUInt32LE(OFFSET_SEGMENT_HEADER_HEADER_CHECKSUM);
  const checksumActual = crc32c(source.subarray(0, OFFSET_SEGMENT_HEADER_HEADER_CHECKSUM));
  if (checksumStored !== checksumActual) {
    throw FormatError('segment header checksum mismatch', { checksumStored, checksumActual });
  }
  const headerSize = source.readUInt16LE(OFFSET_SEGMENT_HEADER_HEADER_SIZE);
  if (headerSize !== SEGMENT_HEADER_SIZE) {
    throw FormatError(`segment headerSize is ${headerSize}, expected ${SEGMENT_HEADER_SIZE}`, {
      headerSize,
    });
  }
  const flags = source.readBigUInt64LE(OFFSET_SEGMENT_HEADER_FLAGS);
  if ((flags & ~SEGMENT_FLAGS_KNOWN) !== 0n) {
    throw FormatTooNew('segment uses unknown format flags', { flags: `0x${flags.toString(16)}` });
  }
  const segmentId = readU64(source, OFFSET_SEGMENT_HEADER_SEGMENT_ID, 'segmentId');
  const createdAtMs = readU64(source, OFFSET_SEGMENT_HEADER_CREATED_AT_MS, 'createdAtMs');
  return { formatVersion, headerSize, flags: Number(flags), segmentId, createdAtMs };
}

/** The file name of segment `segmentId`: `0000000000000042.seg`. */
export function segmentFileName(segmentId: number): string {
  if (!(Number.isSafeInteger(segmentId) && segmentId >= 0))
    assert.fail(`bad segment id ${segmentId}`);
  return `${String(segmentId).padStart(SEGMENT_FILE_NAME_DIGITS, '0')}.seg`;
}

const segmentFileNamePattern = /^([0-9]{16})\.seg$/;

/** The segment id named by `name`, or undefined when `name` is not a segment file name. */
export function parseSegmentFileName(name: string): number | undefined {
  const digits = segmentFileNamePattern.exec(name)?.[1];
  if (digits === undefined) return undefined;
  const segmentId = Number(digits);
  if (!Number.isSafeInteger(segmentId)) return undefined;
  return segmentId;
}
