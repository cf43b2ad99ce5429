// Field-level helpers shared by the codecs of src/format/: u64, ASCII, magic and zero checks.
//
// Invariants:
// - All integers are little-endian (docs/on-disk-format.md, "Byte tables").
// - A u64 field holds a JS number no larger than Number.MAX_SAFE_INTEGER (2^53 - 1). Writers
//   assert it (a larger value is a bug); readers answer a larger value with FormatError.
// - ASCII fields hold printable ASCII (0x20..0x7e), then NUL padding to the field's size.
// - Writers pass bad input only through a bug, so they assert. Readers face bytes from disk,
//   so they throw FormatError and never anything else.
// This module persists nothing by itself; it is the vocabulary of the modules that do.

import assert from 'node:assert/strict';
import { FormatError } from '../util/errors.js';

/** The largest integer a u64 field may hold, so that it survives a JS number exactly. */
export const U64_VALUE_MAX = Number.MAX_SAFE_INTEGER;

const U64_VALUE_MAX_BIG = BigInt(U64_VALUE_MAX);

/** Writes a non-negative safe integer as a u64. */
export function writeU64(target: Buffer, offset: number, value: number): void {
  if (!(Number.isSafeInteger(value) && value >= 0)) assert.fail(`u64 value out of range: ${value}`);
  target.writeBigUInt64LE(BigInt(value), offset);
}

/** Reads a u64 that must be a safe integer; `field` names it in the error. */
export function readU64(source: Buffer, offset: number, field: string): number {
  const value = source.readBigUInt64LE(offset);
  if (value > U64_VALUE_MAX_BIG) {
    throw FormatError(`${field} exceeds 2^53 - 1`, { field, value: value.toString() });
  }
  return Number(value);
}

/** True when `value` is non-empty printable ASCII of at most `size` bytes. */
export function isAsciiField(value: string, size: number): boolean {
  if (value.length === 0 || value.length > size) return false;
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (code < 0x20 || code > 0x7e) return false;
  }
  return true;
}

/** Writes printable ASCII NUL-padded to `size` bytes. */
export function writeAscii(target: Buffer, offset: number, size: number, value: string): void {
  if (!isAsciiField(value, size))
    assert.fail(`not a printable ASCII field of ${size} bytes: ${value}`);
  target.fill(0, offset, offset + size);
  const written = target.write(value, offset, size, 'latin1');
  assert.equal(written, value.length);
}

/** Reads a NUL-padded printable ASCII field of `size` bytes. */
export function readAscii(source: Buffer, offset: number, size: number, field: string): string {
  let length = 0;
  while (length < size && source.readUInt8(offset + length) !== 0) length++;
  if (!isZero(source, offset + length, offset + size)) {
    throw FormatError(`${field} has bytes after its NUL padding`, { field });
  }
  const value = source.toString('latin1', offset, offset + length);
  if (!isAsciiField(value, size)) {
    throw FormatError(`${field} is not printable ASCII`, { field });
  }
  return value;
}

/** True when `source` holds `magic` at `offset` (and is long enough to). */
export function hasMagic(source: Buffer, offset: number, magic: Buffer): boolean {
  if (source.length < offset + magic.length) return false;
  return source.compare(magic, 0, magic.length, offset, offset + magic.length) === 0;
}

/** True when every byte of `bytes[start..end)` is zero. */
export function isZero(bytes: Uint8Array, start: number, end: number): boolean {
  for (let i = start; i < end; i++) {
    if (bytes[i] !== 0) return false;
  }
  return true;
}
