// Listing pages as JSON bytes, written straight from the index records.
//
// Listing had cost about 9 µs per key in the gateway: each object version record was copied
// out of LMDB and decoded whole (msgpack, chunk list copied again), turned into `objectJson`,
// and the page went through JSON.stringify. Here the page is written into one reused buffer,
// and each record's listed fields are read in place from its msgpack bytes (a view of LMDB's
// read buffer, `IndexStore.scanRaw`) and written as JSON: the same bytes as
// `JSON.stringify(objectJson(record, bucket))`, for about 1 µs of CPU per record.
//
// `writeVersionJson` handles every record Lightwell writes and declines (returns false)
// anything it could not reproduce exactly; the caller then decodes that record whole, as
// before. Declined: a schema version other than 1; a missing or mistyped listed field; map
// names that are not strings; in checksums and metadata, names that start with a digit
// (JavaScript puts array-index names first), `__proto__` (msgpackr renames it), repeated names
// (the object keeps the first position and the last value), or more than 64 entries; strings
// that are not valid UTF-8 or that start with a byte order mark (msgpackr's TextDecoder drops
// it); 64-bit integers, float32, NaN and infinities; ext types and the never-used 0xc1; dates
// outside 1970-01-01..9999-12-31 (toISOString writes other years with six digits); bytes past
// the map or missing from it. A top-level name that repeats counts with its last value, as in
// msgpackr. test/native/list-json.prop.test.ts compares both paths.

import { isUtf8 } from 'node:buffer';

/** A buffer grown past this is let go at the next reset (a page of large metadata). */
const WRITER_KEPT_BYTES_MAX = 4 * 1024 * 1024;

/** A growable output buffer, reused from page to page. */
export class JsonWriter {
  buffer: Buffer;
  length = 0;

  constructor(private readonly initialBytes = 64 * 1024) {
    this.buffer = Buffer.allocUnsafe(initialBytes);
  }

  reset(): void {
    this.length = 0;
    if (this.buffer.length > WRITER_KEPT_BYTES_MAX)
      this.buffer = Buffer.allocUnsafe(this.initialBytes);
  }

  /** Makes room for `count` more bytes (the buffer may be replaced). */
  reserve(count: number): void {
    const needed = this.length + count;
    if (needed <= this.buffer.length) return;
    const grown = Buffer.allocUnsafe(Math.max(needed, this.buffer.length * 2));
    this.buffer.copy(grown, 0, 0, this.length);
    this.buffer = grown;
  }

  byte(value: number): void {
    this.reserve(1);
    this.buffer[this.length++] = value;
  }

  /** `text` must be ASCII (names, punctuation, numbers, base64url). */
  ascii(text: string): void {
    this.reserve(text.length);
    const buffer = this.buffer;
    let at = this.length;
    for (let i = 0; i < text.length; i++) buffer[at++] = text.charCodeAt(i);
    this.length = at;
  }

  utf8(text: string): void {
    this.reserve(Buffer.byteLength(text, 'utf8'));
    this.length += this.buffer.write(text, this.length, 'utf8');
  }

  /** The bytes written so far: a view of the shared buffer, valid until the next write. */
  view(): Buffer {
    return this.buffer.subarray(0, this.length);
  }
}

/** The only schema version of object version records this reader knows the layout of. */
const VALUE_SCHEMA_VERSION_1 = 1;
const MAP_ENTRIES_MAX = 64;
const DEPTH_MAX = 32;
/** 9999-12-31T23:59:59.999Z: the last instant toISOString writes with a 4-digit year. */
const ISO_MS_MAX = 253402300799999;
const MS_PER_DAY = 86400000;

const ascii = (text: string): Buffer => Buffer.from(text, 'latin1');

// The fields of objectJson, in its order; versionId comes last because objectJson adds it last.
const OPEN_KEY = ascii('{"key":');
const SIZE = ascii(',"size":');
const ETAG = ascii(',"etag":');
const LAST_MODIFIED = ascii(',"lastModified":"');
const CONTENT_TYPE = ascii('","contentType":');
const CHECKSUMS = ascii(',"checksums":');
const METADATA = ascii(',"storageClass":"STANDARD","metadata":');
const VERSION_ID = ascii(',"versionId":');

const F_KEY = 0;
const F_VERSION_ID = 1;
const F_SIZE = 2;
const F_ETAG = 3;
const F_LAST_MODIFIED = 4;
const F_CONTENT_TYPE = 5;
const F_CHECKSUMS = 6;
const F_METADATA = 7;
const FIELD_NAMES = [
  'key',
  'versionId',
  'size',
  'etag',
  'lastModified',
  'contentType',
  'checksums',
  'metadata',
].map(ascii);
const PROTO = ascii('__proto__');

/** Where each listed field's value starts in the record, -1 when absent. */
const fieldAt = new Int32Array(FIELD_NAMES.length);
/** Where the names of the map being written start and end, pairwise. */
const mapNames = new Int32Array(MAP_ENTRIES_MAX * 2);

/**
 * Appends `JSON.stringify(objectJson(record, bucket))` of the object version record in
 * `value[0, valueLength)` (schema byte and msgpack map, as `src/format/values.ts` encodes it)
 * to `page`, with `versionId` when `versioned` (a bucket that is not Unversioned). Returns
 * false, with `page` unchanged, when it declines the record (see the header).
 */
export function writeVersionJson(
  page: JsonWriter,
  value: Buffer,
  valueLength: number,
  versioned: boolean,
): boolean {
  if (!findListedFields(value, valueLength)) return false;
  if ((fieldAt[F_VERSION_ID] as number) < 0 && versioned) return false;
  // At most 6 bytes out per byte in (a \u00XX escape), plus the names and the date.
  page.reserve(256 + 6 * valueLength);
  const out = page.buffer;
  let o = literal(out, page.length, OPEN_KEY);
  o = writeString(out, o, value, fieldAt[F_KEY] as number);
  if (o < 0) return false;
  o = literal(out, o, SIZE);
  o = writeNumber(out, o, readNumber(value, fieldAt[F_SIZE] as number));
  if (o < 0) return false;
  o = literal(out, o, ETAG);
  o = writeString(out, o, value, fieldAt[F_ETAG] as number);
  if (o < 0) return false;
  o = literal(out, o, LAST_MODIFIED);
  o = writeIsoDate(out, o, readNumber(value, fieldAt[F_LAST_MODIFIED] as number));
  if (o < 0) return false;
  o = literal(out, o, CONTENT_TYPE);
  o = writeString(out, o, value, fieldAt[F_CONTENT_TYPE] as number);
  if (o < 0) return false;
  o = literal(out, o, CHECKSUMS);
  o = writeStringMap(out, o, value, fieldAt[F_CHECKSUMS] as number);
  if (o < 0) return false;
  o = literal(out, o, METADATA);
  o = writeStringMap(out, o, value, fieldAt[F_METADATA] as number);
  if (o < 0) return false;
  if (versioned) {
    o = literal(out, o, VERSION_ID);
    o = writeString(out, o, value, fieldAt[F_VERSION_ID] as number);
    if (o < 0) return false;
  }
  out[o++] = 0x7d; // }
  page.length = o;
  return true;
}

/**
 * Walks the record's top-level map and notes in `fieldAt` where each listed field's value
 * starts (the last one, when a name repeats). False when the record is not a schema-1 map of
 * string names that ends exactly at `end`, or when a field other than versionId is missing.
 */
function findListedFields(src: Buffer, end: number): boolean {
  if (end < 2 || src[0] !== VALUE_SCHEMA_VERSION_1) return false;
  let pos = 1;
  const token = src[pos++] as number;
  let count: number;
  if (token >= 0x80 && token < 0x90) count = token - 0x80;
  else if (token === 0xde && pos + 2 <= end) {
    count = src.readUInt16BE(pos);
    pos += 2;
  } else if (token === 0xdf && pos + 4 <= end) {
    count = src.readUInt32BE(pos);
    pos += 4;
  } else return false;
  fieldAt.fill(-1);
  for (let i = 0; i < count; i++) {
    const nameEnd = skipString(src, pos, end);
    if (nameEnd < 0) return false;
    const length = stringLength(src, pos);
    const field = fieldOf(src, nameEnd - length, length);
    if (field >= 0) fieldAt[field] = nameEnd;
    pos = skipValue(src, nameEnd, end, 0);
    if (pos < 0) return false;
  }
  if (pos !== end) return false;
  for (let field = 0; field < FIELD_NAMES.length; field++) {
    if (field !== F_VERSION_ID && (fieldAt[field] as number) < 0) return false;
  }
  return true;
}

function literal(out: Buffer, at: number, bytes: Buffer): number {
  out.set(bytes, at);
  return at + bytes.length;
}

/** Which listed field the name `src[start, start + length)` is; -1: none. */
function fieldOf(src: Buffer, start: number, length: number): number {
  let field: number;
  switch (length) {
    case 3:
      field = F_KEY;
      break;
    case 4:
      field = src[start] === 0x73 ? F_SIZE : F_ETAG;
      break;
    case 8:
      field = F_METADATA;
      break;
    case 9:
      field = src[start] === 0x76 ? F_VERSION_ID : F_CHECKSUMS;
      break;
    case 11:
      field = F_CONTENT_TYPE;
      break;
    case 12:
      field = F_LAST_MODIFIED;
      break;
    default:
      return -1;
  }
  return bytesEqual(src, start, length, FIELD_NAMES[field] as Uint8Array) ? field : -1;
}

function bytesEqual(src: Uint8Array, start: number, length: number, name: Uint8Array): boolean {
  if (length !== name.length) return false;
  for (let i = 0; i < length; i++) if (src[start + i] !== name[i]) return false;
  return true;
}

function rangesEqual(src: Uint8Array, a: number, aEnd: number, b: number, bEnd: number): boolean {
  if (aEnd - a !== bEnd - b) return false;
  for (let i = 0; a + i < aEnd; i++) if (src[a + i] !== src[b + i]) return false;
  return true;
}

/** The byte length of the string whose header is at `at` (already checked by skipString). */
function stringLength(src: Buffer, at: number): number {
  const token = src[at] as number;
  if (token >= 0xa0 && token < 0xc0) return token - 0xa0;
  if (token === 0xd9) return src[at + 1] as number;
  if (token === 0xda) return src.readUInt16BE(at + 1);
  return src.readUInt32BE(at + 1);
}

/** The end of the msgpack string at `at`, or -1 when there is none or it runs past `end`. */
function skipString(src: Buffer, at: number, end: number): number {
  if (at >= end) return -1;
  const token = src[at] as number;
  let start: number;
  let length: number;
  if (token >= 0xa0 && token < 0xc0) {
    start = at + 1;
    length = token - 0xa0;
  } else if (token === 0xd9 && at + 2 <= end) {
    start = at + 2;
    length = src[at + 1] as number;
  } else if (token === 0xda && at + 3 <= end) {
    start = at + 3;
    length = src.readUInt16BE(at + 1);
  } else if (token === 0xdb && at + 5 <= end) {
    start = at + 5;
    length = src.readUInt32BE(at + 1);
  } else return -1;
  return start + length <= end ? start + length : -1;
}

/**
 * The end of the msgpack value at `at`, or -1 for what the fast path declines: ext types,
 * the never-used 0xc1, maps with keys that are not strings, nesting deeper than DEPTH_MAX, or
 * anything running past `end`.
 */
function skipValue(src: Buffer, at: number, end: number, depth: number): number {
  if (at >= end) return -1;
  const token = src[at] as number;
  let pos = at + 1;
  if (token < 0x80 || token >= 0xe0) return pos;
  if (token < 0x90) return skipMap(src, pos, end, token - 0x80, depth);
  if (token < 0xa0) return skipArray(src, pos, end, token - 0x90, depth);
  if (token < 0xc0) return skipString(src, at, end);
  let size: number;
  switch (token) {
    case 0xc0:
    case 0xc2:
    case 0xc3:
      return pos;
    case 0xd9:
    case 0xda:
    case 0xdb:
      return skipString(src, at, end);
    case 0xc4:
      if (pos + 1 > end) return -1;
      size = 1 + (src[pos] as number);
      break;
    case 0xc5:
      if (pos + 2 > end) return -1;
      size = 2 + src.readUInt16BE(pos);
      break;
    case 0xc6:
      if (pos + 4 > end) return -1;
      size = 4 + src.readUInt32BE(pos);
      break;
    case 0xcc:
    case 0xd0:
      size = 1;
      break;
    case 0xcd:
    case 0xd1:
      size = 2;
      break;
    case 0xca:
    case 0xce:
    case 0xd2:
      size = 4;
      break;
    case 0xcb:
    case 0xcf:
    case 0xd3:
      size = 8;
      break;
    case 0xdc:
      if (pos + 2 > end) return -1;
      return skipArray(src, pos + 2, end, src.readUInt16BE(pos), depth);
    case 0xdd:
      if (pos + 4 > end) return -1;
      return skipArray(src, pos + 4, end, src.readUInt32BE(pos), depth);
    case 0xde:
      if (pos + 2 > end) return -1;
      return skipMap(src, pos + 2, end, src.readUInt16BE(pos), depth);
    case 0xdf:
      if (pos + 4 > end) return -1;
      return skipMap(src, pos + 4, end, src.readUInt32BE(pos), depth);
    default:
      return -1;
  }
  pos += size;
  return pos <= end ? pos : -1;
}

function skipArray(src: Buffer, at: number, end: number, count: number, depth: number): number {
  if (depth >= DEPTH_MAX) return -1;
  let pos = at;
  for (let i = 0; i < count && pos >= 0; i++) pos = skipValue(src, pos, end, depth + 1);
  return pos;
}

function skipMap(src: Buffer, at: number, end: number, count: number, depth: number): number {
  if (depth >= DEPTH_MAX) return -1;
  let pos = at;
  for (let i = 0; i < count && pos >= 0; i++) {
    pos = skipString(src, pos, end);
    if (pos >= 0) pos = skipValue(src, pos, end, depth + 1);
  }
  return pos;
}

// JSON.stringify's escapes for bytes below 0x80: 0 copies the byte, 1 is \u00XX, else the
// escape letter after the backslash.
const ESCAPE = new Uint8Array(0x80);
for (let b = 0; b < 0x20; b++) ESCAPE[b] = 1;
ESCAPE[0x08] = 0x62; // \b
ESCAPE[0x09] = 0x74; // \t
ESCAPE[0x0a] = 0x6e; // \n
ESCAPE[0x0c] = 0x66; // \f
ESCAPE[0x0d] = 0x72; // \r
ESCAPE[0x22] = 0x22; // \"
ESCAPE[0x5c] = 0x5c; // \\
const HEX = ascii('0123456789abcdef');

/** Writes the msgpack string at `at` as a JSON string; -1 when it is not a string we copy. */
function writeString(out: Buffer, o: number, src: Buffer, at: number): number {
  const token = src[at] as number;
  let start: number;
  if (token >= 0xa0 && token < 0xc0) start = at + 1;
  else if (token === 0xd9) start = at + 2;
  else if (token === 0xda) start = at + 3;
  else if (token === 0xdb) start = at + 5;
  else return -1;
  const stop = start + stringLength(src, at);
  out[o++] = 0x22;
  let checked = false;
  for (let p = start; p < stop; p++) {
    const b = src[p] as number;
    if (b >= 0x80) {
      // Valid UTF-8 decodes to the same text in every decoder msgpackr may use, and
      // JSON.stringify leaves all of it as is. TextDecoder (msgpackr's, for strings over 64
      // bytes) drops a leading byte order mark.
      if (!checked) {
        if (!isUtf8(src.subarray(start, stop))) return -1;
        if (src[start] === 0xef && src[start + 1] === 0xbb && src[start + 2] === 0xbf) return -1;
        checked = true;
      }
      out[o++] = b;
      continue;
    }
    const escape = ESCAPE[b] as number;
    if (escape === 0) {
      out[o++] = b;
    } else if (escape === 1) {
      out[o++] = 0x5c;
      out[o++] = 0x75;
      out[o++] = 0x30;
      out[o++] = 0x30;
      out[o++] = HEX[b >> 4] as number;
      out[o++] = HEX[b & 15] as number;
    } else {
      out[o++] = 0x5c;
      out[o++] = escape;
    }
  }
  out[o++] = 0x22;
  return o;
}

/**
 * A map of string names to string values as JSON.stringify writes the object msgpackr decodes
 * it to; -1 for what could come out in another order or with other names (see the header).
 */
function writeStringMap(out: Buffer, o: number, src: Buffer, at: number): number {
  const token = src[at] as number;
  let count: number;
  let pos: number;
  if (token >= 0x80 && token < 0x90) {
    count = token - 0x80;
    pos = at + 1;
  } else if (token === 0xde) {
    count = src.readUInt16BE(at + 1);
    pos = at + 3;
  } else if (token === 0xdf) {
    count = src.readUInt32BE(at + 1);
    pos = at + 5;
  } else return -1;
  if (count > MAP_ENTRIES_MAX) return -1;
  out[o++] = 0x7b; // {
  for (let i = 0; i < count; i++) {
    // Names and values were bounds-checked by skipValue.
    const valueAt = skipString(src, pos, Number.MAX_SAFE_INTEGER);
    const start = valueAt - stringLength(src, pos);
    if (start < valueAt && (src[start] as number) >= 0x30 && (src[start] as number) <= 0x39)
      return -1;
    if (bytesEqual(src, start, valueAt - start, PROTO)) return -1;
    for (let j = 0; j < i; j++) {
      if (
        rangesEqual(src, start, valueAt, mapNames[2 * j] as number, mapNames[2 * j + 1] as number)
      )
        return -1;
    }
    mapNames[2 * i] = start;
    mapNames[2 * i + 1] = valueAt;
    if (i > 0) out[o++] = 0x2c; // ,
    o = writeString(out, o, src, pos);
    if (o < 0) return -1;
    out[o++] = 0x3a; // :
    o = writeString(out, o, src, valueAt);
    if (o < 0) return -1;
    pos = skipString(src, valueAt, Number.MAX_SAFE_INTEGER);
  }
  out[o++] = 0x7d; // }
  return o;
}

/** The msgpack number at `at` as msgpackr decodes it; NaN for types the fast path declines. */
function readNumber(src: Buffer, at: number): number {
  const token = src[at] as number;
  if (token < 0x80) return token;
  if (token >= 0xe0) return token - 0x100;
  switch (token) {
    case 0xcb:
      return src.readDoubleBE(at + 1);
    case 0xcc:
      return src[at + 1] as number;
    case 0xcd:
      return src.readUInt16BE(at + 1);
    case 0xce:
      return src.readUInt32BE(at + 1);
    case 0xd0:
      return src.readInt8(at + 1);
    case 0xd1:
      return src.readInt16BE(at + 1);
    case 0xd2:
      return src.readInt32BE(at + 1);
    default:
      return Number.NaN;
  }
}

/** A finite number as JSON.stringify writes it; -1 for NaN and infinities. */
function writeNumber(out: Buffer, o: number, value: number): number {
  if (Number.isSafeInteger(value)) {
    if (value < 0) {
      out[o++] = 0x2d; // -
      value = -value;
    }
    return writeDigits(out, o, value, 1);
  }
  if (!Number.isFinite(value)) return -1;
  const text = String(value);
  for (let i = 0; i < text.length; i++) out[o++] = text.charCodeAt(i);
  return o;
}

/** Decimal digits of a non-negative safe integer, zero-padded to at least `width`. */
function writeDigits(out: Buffer, o: number, value: number, width: number): number {
  let digits = 1;
  for (let rest = value; rest >= 10; rest = Math.floor(rest / 10)) digits++;
  if (digits < width) digits = width;
  let p = o + digits;
  for (let i = 0; i < digits; i++) {
    const next = Math.floor(value / 10);
    out[--p] = 0x30 + (value - next * 10);
    value = next;
  }
  return o + digits;
}

// `YYYY-MM-DDT` of the last day written: the records of a page mostly share their day.
let isoDay = Number.NaN;
const isoDayText = Buffer.alloc(11);

/**
 * `new Date(ms).toISOString()` (without quotes) for whole milliseconds in 1970..9999; -1 for
 * any other value (toISOString writes 6-digit years outside 0..9999, and throws past ±8.64e15).
 */
function writeIsoDate(out: Buffer, o: number, ms: number): number {
  if (!Number.isInteger(ms) || ms < 0 || ms > ISO_MS_MAX) return -1;
  const day = Math.floor(ms / MS_PER_DAY);
  if (day !== isoDay) {
    civilDate(day);
    isoDay = day;
  }
  o = literal(out, o, isoDayText);
  let rest = ms - day * MS_PER_DAY;
  const hours = Math.floor(rest / 3600000);
  rest -= hours * 3600000;
  const minutes = Math.floor(rest / 60000);
  rest -= minutes * 60000;
  const seconds = Math.floor(rest / 1000);
  o = writeDigits(out, o, hours, 2);
  out[o++] = 0x3a; // :
  o = writeDigits(out, o, minutes, 2);
  out[o++] = 0x3a;
  o = writeDigits(out, o, seconds, 2);
  out[o++] = 0x2e; // .
  o = writeDigits(out, o, rest - seconds * 1000, 3);
  out[o++] = 0x5a; // Z
  return o;
}

/** Fills isoDayText with the proleptic Gregorian date of `day` days after 1970-01-01. */
function civilDate(day: number): void {
  // Howard Hinnant's days_from_civil, inverted (eras of 400 years starting on March 1st).
  const z = day + 719468;
  const era = Math.floor(z / 146097);
  const dayOfEra = z - era * 146097;
  const yearOfEra = Math.floor(
    (dayOfEra -
      Math.floor(dayOfEra / 1460) +
      Math.floor(dayOfEra / 36524) -
      Math.floor(dayOfEra / 146096)) /
      365,
  );
  const dayOfYear =
    dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100));
  const shiftedMonth = Math.floor((5 * dayOfYear + 2) / 153);
  const dayOfMonth = dayOfYear - Math.floor((153 * shiftedMonth + 2) / 5) + 1;
  const month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9;
  const year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0);
  const text = isoDayText;
  writeDigits(text, 0, year, 4);
  text[4] = 0x2d;
  writeDigits(text, 5, month, 2);
  text[7] = 0x2d;
  writeDigits(text, 8, dayOfMonth, 2);
  text[10] = 0x54; // T
}
