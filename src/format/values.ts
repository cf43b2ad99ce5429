// The value codec of the index: how every LMDB value that Lightwell writes is encoded.
//
// A value is one u8 schema version followed by one MessagePack map. The schema version belongs
// to the record family (src/engine/index/schema.ts keeps one per database and migrates older
// versions on read); this codec only carries it and never interprets it beyond "not zero".
//
// Invariants (docs/on-disk-format.md, "Index value"):
// - Plain MessagePack: no msgpackr record extension, no shared structures, no bundled strings,
//   no structured-clone extensions. Any MessagePack decoder can read a value.
// - Deterministic: the same value with the same key order encodes to the same bytes. Maps use
//   the smallest map header (fixmap, map16, map32), non-integers are always float64.
// - Properties whose value is `undefined` are omitted, as JSON.stringify does.
// - Integers beyond 32 bits are written as float64 by msgpackr; 64-bit integers written by
//   another encoder decode as JS numbers (values are kept ≤ 2^53 - 1).
// - Decoded binary values are copies, never views of the (possibly LMDB-owned) source.
// - The top-level value is a map (a plain object); anything else is a FormatError.

import assert from 'node:assert/strict';
import { FLOAT32_OPTIONS, Packr, type Options } from 'msgpackr';
import { FormatError } from '../util/errors.js';

/** The first schema version of every record family. */
export const VALUE_SCHEMA_VERSION = 1;
/** The largest schema version the u8 field can hold. */
export const VALUE_SCHEMA_VERSION_MAX = 0xff;

export const OFFSET_VALUE_SCHEMA_VERSION = 0;
export const SIZE_VALUE_SCHEMA_VERSION = 1;
export const OFFSET_VALUE_BODY = 1;

// Every option that shapes the bytes is spelled out, so that a msgpackr default that changes
// between releases cannot change the format. `skipValues` is not in msgpackr's Options type
// (2.1.3) but is read by its encoder.
const packrOptions: Options & { skipValues: unknown[] } = {
  useRecords: false,
  mapsAsObjects: true,
  int64AsType: 'number',
  variableMapSize: true,
  useFloat32: FLOAT32_OPTIONS.NEVER,
  moreTypes: false,
  structuredClone: false,
  bundleStrings: false,
  sequential: false,
  useTimestamp32: false,
  encodeUndefinedAsNil: false,
  copyBuffers: true,
  skipValues: [undefined],
};
const packr = new Packr(packrOptions);

export interface DecodedValue {
  readonly schemaVersion: number;
  readonly value: Record<string, unknown>;
}

/** Encodes `value` (a plain object) under `schemaVersion` (1..255). */
export function encodeValue(schemaVersion: number, value: object): Buffer {
  if (!isSchemaVersion(schemaVersion)) assert.fail(`bad schemaVersion ${schemaVersion}`);
  assert.ok(isPlainMap(value), 'value must be a plain object');
  const body = packr.pack(value);
  const target = Buffer.allocUnsafe(OFFSET_VALUE_BODY + body.length);
  target.writeUInt8(schemaVersion, OFFSET_VALUE_SCHEMA_VERSION);
  target.set(body, OFFSET_VALUE_BODY);
  return target;
}

/** Decodes a value; malformed bytes give FormatError and nothing else. */
export function decodeValue(source: Buffer): DecodedValue {
  if (source.length < OFFSET_VALUE_BODY + 1) {
    throw FormatError('index value is truncated', { length: source.length });
  }
  const schemaVersion = source.readUInt8(OFFSET_VALUE_SCHEMA_VERSION);
  if (!isSchemaVersion(schemaVersion)) throw FormatError('index value has schema version 0');
  let value: unknown;
  try {
    value = packr.unpack(source.subarray(OFFSET_VALUE_BODY));
  } catch (cause) {
    throw FormatError('index value is not valid MessagePack', { schemaVersion }, { cause });
  }
  if (!isPlainMap(value)) throw FormatError('index value is not a map', { schemaVersion });
  return { schemaVersion, value };
}

function isSchemaVersion(value: number): boolean {
  return Number.isInteger(value) && value >= 1 && value <= VALUE_SCHEMA_VERSION_MAX;
}

function isPlainMap(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false;
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}
