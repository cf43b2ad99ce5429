// The data directory marker: the file `FORMAT`, 64 bytes, written once when a data directory
// is created.
//
// It says "this directory belongs to Lightwell", which format version its files follow, which
// optional features (flags) are in use, and which release created it. Every process reads it
// before touching anything else in the directory and refuses a directory it cannot understand.
//
// Invariants (docs/on-disk-format.md, "Marker file"):
// - Exactly MARKER_SIZE bytes; integers little-endian; reserved bytes written as zero and
//   ignored by readers (they are still covered by the checksum).
// - checksum = CRC32C of bytes [0, OFFSET_MARKER_CHECKSUM).
// - formatVersion is read before the checksum is verified, so that a marker written by a newer
//   release (which may place its checksum elsewhere) yields FormatTooNew, not FormatError.
// - A flag bit this release does not know yields FormatTooNew. Version 1 knows no flags.

import assert from 'node:assert/strict';
import { crc32c } from '../util/crc32c.js';
import { FormatError, FormatTooNew } from '../util/errors.js';
import { hasMagic, readAscii, readU64, writeAscii, writeU64 } from './primitives.js';

/** The format version this release writes. Readers accept 1..FORMAT_VERSION. */
export const FORMAT_VERSION = 1;
export const MARKER_FILE_NAME = 'FORMAT';
export const MARKER_MAGIC = 'LWFORMAT';
export const MARKER_SIZE = 64;
/** Flag bits this release understands; any other set bit means the data is too new. */
export const MARKER_FLAGS_KNOWN = 0n;

export const OFFSET_MARKER_MAGIC = 0;
export const SIZE_MARKER_MAGIC = 8;
export const OFFSET_MARKER_FORMAT_VERSION = 8;
export const SIZE_MARKER_FORMAT_VERSION = 2;
export const OFFSET_MARKER_RESERVED10 = 10;
export const SIZE_MARKER_RESERVED10 = 2;
export const OFFSET_MARKER_RESERVED12 = 12;
export const SIZE_MARKER_RESERVED12 = 4;
export const OFFSET_MARKER_FLAGS = 16;
export const SIZE_MARKER_FLAGS = 8;
export const OFFSET_MARKER_CREATED_BY = 24;
export const SIZE_MARKER_CREATED_BY = 16;
export const OFFSET_MARKER_CREATED_AT_MS = 40;
export const SIZE_MARKER_CREATED_AT_MS = 8;
export const OFFSET_MARKER_RESERVED48 = 48;
export const SIZE_MARKER_RESERVED48 = 12;
export const OFFSET_MARKER_CHECKSUM = 60;
export const SIZE_MARKER_CHECKSUM = 4;

const magicBytes = Buffer.from(MARKER_MAGIC, 'latin1');
assert.equal(magicBytes.length, SIZE_MARKER_MAGIC);
assert.equal(OFFSET_MARKER_CHECKSUM + SIZE_MARKER_CHECKSUM, MARKER_SIZE);

export interface MarkerFields {
  /** The release that created the directory: 1..16 printable ASCII characters. */
  readonly createdBy: string;
  readonly createdAtMs: number;
}

export interface FormatMarker extends MarkerFields {
  readonly formatVersion: number;
  readonly flags: number;
}

/** Encodes a version FORMAT_VERSION marker with no flags. */
export function encodeMarker(fields: MarkerFields): Buffer {
  const target = Buffer.alloc(MARKER_SIZE);
  magicBytes.copy(target, OFFSET_MARKER_MAGIC);
  target.writeUInt16LE(FORMAT_VERSION, OFFSET_MARKER_FORMAT_VERSION);
  target.writeBigUInt64LE(0n, OFFSET_MARKER_FLAGS);
  writeAscii(target, OFFSET_MARKER_CREATED_BY, SIZE_MARKER_CREATED_BY, fields.createdBy);
  writeU64(target, OFFSET_MARKER_CREATED_AT_MS, fields.createdAtMs);
  const checksum = crc32c(target.subarray(0, OFFSET_MARKER_CHECKSUM));
  target.writeUInt32LE(checksum, OFFSET_MARKER_CHECKSUM);
  assert.deepEqual(decodeMarker(target), {
    formatVersion: FORMAT_VERSION,
    flags: 0,
    createdBy: fields.createdBy,
    createdAtMs: fields.createdAtMs,
  });
  return target;
}

/** Decodes the whole contents of a `FORMAT` file. */
export function decodeMarker(source: Buffer): FormatMarker {
  if (!hasMagic(source, OFFSET_MARKER_MAGIC, magicBytes)) {
    throw FormatError('not a Lightwell FORMAT marker (bad magic)', { length: source.length });
  }
  if (source.length < OFFSET_MARKER_FORMAT_VERSION + SIZE_MARKER_FORMAT_VERSION) {
    throw FormatError('FORMAT marker is truncated', { length: source.length });
  }
  const formatVersion = source.readUInt16LE(OFFSET_MARKER_FORMAT_VERSION);
  if (formatVersion > FORMAT_VERSION) {
    const supported = `this release reads format versions up to ${String(FORMAT_VERSION)}`;
    throw FormatTooNew(`data directory has format version ${formatVersion}; ${supported}`, {
      formatVersion,
      supported: FORMAT_VERSION,
    });
  }
  if (formatVersion === 0) throw FormatError('FORMAT marker has format version 0');
  if (source.length !== MARKER_SIZE) {
    throw FormatError(`FORMAT marker is ${source.length} bytes, expected ${MARKER_SIZE}`, {
      length: source.length,
    });
  }
  const checksumStored = source.readUInt32LE(OFFSET_MARKER_CHECKSUM);
  const checksumActual = crc32c(source.subarray(0, OFFSET_MARKER_CHECKSUM));
  if (checksumStored !== checksumActual) {
    throw FormatError('FORMAT marker checksum mismatch', { checksumStored, checksumActual });
  }
  const flags = source.readBigUInt64LE(OFFSET_MARKER_FLAGS);
  if ((flags & ~MARKER_FLAGS_KNOWN) !== 0n) {
    throw FormatTooNew('data directory uses unknown format flags', {
      flags: `0x${flags.toString(16)}`,
    });
  }
  const createdBy = readAscii(
    source,
    OFFSET_MARKER_CREATED_BY,
    SIZE_MARKER_CREATED_BY,
    'createdBy',
  );
  const createdAtMs = readU64(source, OFFSET_MARKER_CREATED_AT_MS, 'createdAtMs');
  return { formatVersion, flags: Number(flags), createdBy, createdAtMs };
}
