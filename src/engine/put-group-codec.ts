// The compact encoding of a `putObjects` group's items (protocol.ts `PUT_GROUP_COMMAND`): one
// buffer of fixed-layout fields instead of a msgpack map per item. The small objects of an
// ingest stream send hundreds of items a turn, all of one shape; a msgpack map writes and
// parses every field name of every item, and its decoder builds each object key by key. Here
// each item is a presence mask and its known fields in a fixed order, so neither side touches
// a field name, and the engine decodes an item in one pass over its bytes.
//
// Layout (little-endian), repeated per item after a u32 item count:
//   u32 mask           bit i: known field i (ITEM_FIELDS) follows, in that order
//   fields             by kind: string = u32 byte length + UTF-8, or u32 0xFFFFFFFF: the
//                      same string as this field of the item before (a group's items share
//                      their tenant, bucket, caller and most of their audit row); number = f64;
//                      boolean = u8;
//                      map = u32 count + (string, string) pairs; object = its own mask and
//                      fields (AUDIT_FIELDS, HELD_FIELDS) and rest; chunks = u32 count +
//                      per chunk: 32-byte id, f64 plainLength, u8 has location, then (if it
//                      has) f64 segmentId, offset, length, payloadChecksum
//   u32 rest length    then msgpack of every field that is not known or not of its kind
//                      (0: none)
// A field is known only when its value is of the field's kind (a string map: an object of
// string values; chunks: ids of 32 bytes, no other fields): anything else, `undefined`
// included, goes into the rest, so what decodes is what was encoded, whatever the caller put
// in an item. The rest keeps every rare field (headers, tags, lock, SSE, conditions) without
// a layout of its own. Known fields decode in the order of their list, which is the order the
// service builds them in, then the rest in its own order.
//
// This is the gateway-engine wire only (both ends are one release); nothing of it is stored.

import assert from 'node:assert/strict';
import { Packr } from 'msgpackr';
import { BadRequest } from '../util/errors.js';

type Kind = 'string' | 'number' | 'boolean' | 'map' | 'chunks' | Fields;
/** An object's known fields, in order, and each one's bit in the mask. */
interface Fields {
  readonly list: ReadonlyArray<readonly [string, Kind]>;
  readonly bits: ReadonlyMap<string, number>;
  /** Each field's slot among every object's fields (where its previous string is kept). */
  readonly slots: readonly number[];
}

let slotCount = 0;

function fieldsOf(list: ReadonlyArray<readonly [string, Kind]>): Fields {
  assert(list.length <= 31, 'a mask holds every field');
  return {
    list,
    bits: new Map(list.map(([name], bit) => [name, bit])),
    slots: list.map(() => slotCount++),
  };
}

const AUDIT_FIELDS = fieldsOf([
  ['requestId', 'string'],
  ['actor', 'string'],
  ['action', 'string'],
  ['resource', 'string'],
  ['outcome', 'string'],
  ['status', 'number'],
  ['remoteAddr', 'string'],
  ['time', 'number'],
  ['tenantId', 'string'],
  ['reason', 'string'],
]);

const HELD_FIELDS = fieldsOf([
  ['key', 'string'],
  ['fingerprint', 'string'],
  ['claim', 'string'],
  ['inCommit', 'boolean'],
]);

/** A `putObject` command's fields, in the order service/objects.ts `putArgsOf` builds them. */
const ITEM_FIELDS = fieldsOf([
  ['tenantId', 'string'],
  ['bucket', 'string'],
  ['bucketId', 'number'],
  ['key', 'string'],
  ['size', 'number'],
  ['etag', 'string'],
  ['contentType', 'string'],
  ['metadata', 'map'],
  ['checksums', 'map'],
  ['compressed', 'boolean'],
  ['chunks', 'chunks'],
  ['idempotency', HELD_FIELDS],
  ['caller', 'string'],
  ['audit', AUDIT_FIELDS],
]);

const CHUNK_ID_BYTES = 32;
/** The length of a string that is the one its field had in the item before. */
const REPEAT = 0xffffffff;
/** Strings up to this many characters are encoded and decoded here when they are ASCII. */
const SHORT_STRING_CHARS = 64;
const LOCATION_FIELDS = ['segmentId', 'offset', 'length', 'payloadChecksum'] as const;
const restPackr = new Packr({ useRecords: false, mapsAsObjects: true });

type Loose = Record<string, unknown>;

/** The items of one group as one buffer (its own, not shared with a later call). */
export function encodePutGroup(items: readonly object[]): Buffer {
  const writer = new Writer();
  writer.u32(items.length);
  for (const item of items) writer.object(item as Loose, ITEM_FIELDS);
  return writer.done();
}

/** The items `encodePutGroup` encoded; a malformed buffer is a 400 (`bad_request`). */
export function decodePutGroup(bytes: Uint8Array): Loose[] {
  const buffer = Buffer.isBuffer(bytes)
    ? bytes
    : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const reader = new Reader(buffer);
  try {
    const count = reader.u32();
    // Each item takes at least its mask and rest length: a count beyond that is a lie.
    if (count * 8 > buffer.length) throw BadRequest('a putObjects group counts too many items');
    const items: Loose[] = [];
    for (let index = 0; index < count; index++) items.push(reader.object(ITEM_FIELDS));
    if (reader.offset !== buffer.length) throw BadRequest('bytes after a putObjects group');
    return items;
  } catch (error) {
    if (error instanceof RangeError) throw BadRequest('a truncated putObjects group');
    throw error;
  }
}

function isStringMap(value: unknown): value is Record<string, string> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  if (Buffer.isBuffer(value) || Object.getPrototypeOf(value) !== Object.prototype) return false;
  // A `__proto__` key would be a prototype, not a field, where the decoder assigns it.
  if (Object.prototype.hasOwnProperty.call(value, '__proto__')) return false;
  for (const key in value) if (typeof (value as Loose)[key] !== 'string') return false;
  return true;
}

function isPlainObject(value: unknown): value is Loose {
  return (
    typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype
  );
}

/** Chunks of the layout: a Buffer id of 32 bytes, a number plainLength, a numeric location. */
function isLayoutChunks(value: unknown): value is Loose[] {
  if (!Array.isArray(value)) return false;
  for (const chunk of value as unknown[]) {
    if (!isPlainObject(chunk)) return false;
    const { id, plainLength, location } = chunk;
    if (!Buffer.isBuffer(id) || id.length !== CHUNK_ID_BYTES) return false;
    if (typeof plainLength !== 'number') return false;
    let fields = 2;
    if (location !== undefined) {
      if (!isPlainObject(location) || Object.keys(location).length !== LOCATION_FIELDS.length)
        return false;
      for (const name of LOCATION_FIELDS) if (typeof location[name] !== 'number') return false;
      fields += 1;
    } else if ('location' in chunk) return false;
    if (Object.keys(chunk).length !== fields) return false;
  }
  return true;
}

function fits(value: unknown, kind: Kind): boolean {
  switch (kind) {
    case 'string':
    case 'number':
    case 'boolean':
      return typeof value === kind;
    case 'map':
      return isStringMap(value);
    case 'chunks':
      return isLayoutChunks(value);
    default:
      return isPlainObject(value);
  }
}

class Writer {
  private buffer = Buffer.allocUnsafe(64 * 1024);
  private offset = 0;

  private ensure(bytes: number): void {
    if (this.offset + bytes <= this.buffer.length) return;
    let size = this.buffer.length * 2;
    while (size < this.offset + bytes) size *= 2;
    const grown = Buffer.allocUnsafe(size);
    this.buffer.copy(grown, 0, 0, this.offset);
    this.buffer = grown;
  }

  u32(value: number): void {
    this.ensure(4);
    this.buffer.writeUInt32LE(value, this.offset);
    this.offset += 4;
  }

  f64(value: number): void {
    this.ensure(8);
    this.buffer.writeDoubleLE(value, this.offset);
    this.offset += 8;
  }

  u8(value: number): void {
    this.ensure(1);
    this.buffer[this.offset++] = value;
  }

  string(value: string): void {
    this.ensure(4 + value.length * 3);
    const buffer = this.buffer;
    const start = this.offset + 4;
    let length = -1;
    // A short ASCII string is copied here: a call into the runtime costs more than the copy.
    if (value.length <= SHORT_STRING_CHARS) {
      let index = 0;
      for (; index < value.length; index++) {
        const code = value.charCodeAt(index);
        if (code >= 0x80) break;
        buffer[start + index] = code;
      }
      if (index === value.length) length = index;
    }
    if (length < 0) length = buffer.write(value, start, 'utf8');
    buffer.writeUInt32LE(length, this.offset);
    this.offset = start + length;
  }

  bytes(value: Uint8Array): void {
    this.ensure(value.length);
    this.buffer.set(value, this.offset);
    this.offset += value.length;
  }

  /** The string each slot had in the item before (see REPEAT). */
  private readonly previous: unknown[] = [];

  object(value: Loose, fields: Fields): void {
    let mask = 0;
    let rest: Loose | undefined;
    for (const name in value) {
      const bit = fields.bits.get(name);
      const field = value[name];
      if (bit !== undefined && fits(field, (fields.list[bit] as readonly [string, Kind])[1]))
        mask |= 1 << bit;
      else (rest ??= {})[name] = field;
    }
    this.u32(mask);
    for (let bit = 0; bit < fields.list.length; bit++) {
      if (!(mask & (1 << bit))) continue;
      const [name, kind] = fields.list[bit] as readonly [string, Kind];
      this.field(value[name], kind, fields.slots[bit] as number);
    }
    if (rest === undefined) {
      this.u32(0);
      return;
    }
    const packed = restPackr.pack(rest);
    this.u32(packed.length);
    this.bytes(packed);
  }

  private field(value: unknown, kind: Kind, slot: number): void {
    switch (kind) {
      case 'string':
        if (this.previous[slot] === value) return this.u32(REPEAT);
        this.previous[slot] = value;
        return this.string(value as string);
      case 'number':
        return this.f64(value as number);
      case 'boolean':
        return this.u8(value ? 1 : 0);
      case 'map':
        return this.map(value as Record<string, string>);
      case 'chunks':
        return this.chunks(value as Loose[]);
      default:
        return this.object(value as Loose, kind);
    }
  }

  private map(value: Record<string, string>): void {
    const names = Object.keys(value);
    this.u32(names.length);
    for (const name of names) {
      this.string(name);
      this.string(value[name] as string);
    }
  }

  private chunks(chunks: Loose[]): void {
    this.u32(chunks.length);
    for (const chunk of chunks) {
      this.bytes(chunk['id'] as Buffer);
      this.f64(chunk['plainLength'] as number);
      const location = chunk['location'] as
        Record<(typeof LOCATION_FIELDS)[number], number> | undefined;
      this.u8(location === undefined ? 0 : 1);
      if (location !== undefined) for (const name of LOCATION_FIELDS) this.f64(location[name]);
    }
  }

  /** A copy of what was written, exactly as long. */
  done(): Buffer {
    const out = Buffer.allocUnsafe(this.offset);
    this.buffer.copy(out, 0, 0, this.offset);
    return out;
  }
}

class Reader {
  offset = 0;
  /** The string each slot had in the item before (see REPEAT). */
  private readonly previous: unknown[] = [];

  constructor(private readonly buffer: Buffer) {}

  private take(bytes: number): number {
    const at = this.offset;
    if (at + bytes > this.buffer.length) throw new RangeError('past the end');
    this.offset = at + bytes;
    return at;
  }

  u32(): number {
    return this.buffer.readUInt32LE(this.take(4));
  }

  private f64(): number {
    return this.buffer.readDoubleLE(this.take(8));
  }

  private u8(): number {
    return this.buffer[this.take(1)] as number;
  }

  private string(slot: number): string {
    const length = this.u32();
    if (length === REPEAT) {
      const previous = this.previous[slot];
      if (typeof previous !== 'string') throw BadRequest('a putObjects item repeats nothing');
      return previous;
    }
    const at = this.take(length);
    const text = this.buffer.toString('utf8', at, at + length);
    if (slot >= 0) this.previous[slot] = text;
    return text;
  }

  object(fields: Fields): Loose {
    const mask = this.u32();
    if (mask >>> fields.list.length !== 0)
      throw BadRequest('a putObjects item names an unknown field');
    const value: Loose = {};
    for (let bit = 0; bit < fields.list.length; bit++) {
      if (!(mask & (1 << bit))) continue;
      const [name, kind] = fields.list[bit] as readonly [string, Kind];
      value[name] = this.field(kind, fields.slots[bit] as number);
    }
    const restLength = this.u32();
    if (restLength > 0) {
      const at = this.take(restLength);
      let rest: unknown;
      try {
        rest = restPackr.unpack(this.buffer.subarray(at, at + restLength));
      } catch {
        throw BadRequest('a putObjects item has a malformed rest');
      }
      if (!isPlainObject(rest)) throw BadRequest('a putObjects item has a malformed rest');
      for (const name in rest) value[name] = rest[name];
    }
    return value;
  }

  private field(kind: Kind, slot: number): unknown {
    switch (kind) {
      case 'string':
        return this.string(slot);
      case 'number':
        return this.f64();
      case 'boolean':
        return this.u8() !== 0;
      case 'map':
        return this.map();
      case 'chunks':
        return this.chunks();
      default:
        return this.object(kind);
    }
  }

  private map(): Record<string, string> {
    const count = this.u32();
    const value: Record<string, string> = {};
    for (let index = 0; index < count; index++) {
      const name = this.string(-1);
      value[name] = this.string(-1);
    }
    return value;
  }

  private chunks(): Loose[] {
    const count = this.u32();
    // A chunk takes at least 41 bytes: a count beyond the bytes left is a lie.
    if (count * 41 > this.buffer.length - this.offset) throw new RangeError('too many chunks');
    const chunks: Loose[] = [];
    for (let index = 0; index < count; index++) {
      const at = this.take(CHUNK_ID_BYTES);
      // A copy: the frame's bytes are not kept beyond the command.
      const id = Buffer.from(this.buffer.subarray(at, at + CHUNK_ID_BYTES));
      const chunk: Loose = { id, plainLength: this.f64() };
      if (this.u8() !== 0) {
        const location: Record<string, number> = {};
        for (const name of LOCATION_FIELDS) location[name] = this.f64();
        chunk['location'] = location;
      }
      chunks.push(chunk);
    }
    return chunks;
  }
}
