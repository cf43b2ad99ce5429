// The frame codec of the binary ingest transport (docs/ingest-protocol.md, the authority on every
// byte here). Pure: bytes in, frames out, and back; no I/O, no clock. One WebSocket binary
// message is one frame, so a decoder sees whole frames and never has to find their ends.
//
// Every decoder checks the whole frame: the type, reserved bytes and unknown flag bits, every
// length against the frame's end and against its limit, UTF-8, integers a JavaScript number
// holds exactly. Whatever it refuses, it refuses with a FrameError carrying the WebSocket close
// code the receiver closes with; it never throws anything else (test/ingest/frames.prop.test.ts).

import type { ChecksumAlg } from '../engine/checksums.js';
import { BadRequest, type LightwellError } from '../util/errors.js';

export const PROTOCOL_VERSION = 1;

export const FRAME_HELLO = 0x01;
export const FRAME_OBJECT = 0x02;
export const FRAME_DATA = 0x03;
export const FRAME_TOKEN = 0x04;
export const FRAME_WELCOME = 0x81;
export const FRAME_ACK = 0x82;
export const FRAME_CREDIT = 0x83;

// WebSocket close codes (docs/ingest-protocol.md, "Closing"). 1000 and 1009 are the RFC's.
export const CLOSE_NORMAL = 1000;
export const CLOSE_TOO_BIG = 1009;
export const CLOSE_MALFORMED = 4400;
export const CLOSE_UNAUTHORIZED = 4401;
export const CLOSE_FORBIDDEN = 4403;
export const CLOSE_NOT_FOUND = 4404;
export const CLOSE_HELLO_TIMEOUT = 4408;
export const CLOSE_TOO_LARGE = 4413;
export const CLOSE_VERSION = 4426;
export const CLOSE_WINDOW = 4429;
export const CLOSE_INTERNAL = 4500;
export const CLOSE_UNAVAILABLE = 4503;

// HELLO: client → server, the first frame of a connection.
export const HELLO_OFFSET_TYPE = 0;
export const HELLO_OFFSET_FLAGS = 1;
export const HELLO_OFFSET_VERSION = 2;
export const HELLO_OFFSET_BUCKET_LENGTH = 3;
export const HELLO_OFFSET_TOKEN_LENGTH = 4;
export const HELLO_FIXED_BYTES = 6;

// WELCOME: server → client, the answer to an accepted HELLO.
export const WELCOME_OFFSET_TYPE = 0;
export const WELCOME_OFFSET_FLAGS = 1;
export const WELCOME_OFFSET_VERSION = 2;
export const WELCOME_OFFSET_RESERVED = 3;
export const WELCOME_OFFSET_WINDOW_OBJECTS = 4;
export const WELCOME_OFFSET_WINDOW_BYTES = 8;
export const WELCOME_OFFSET_FRAME_BYTES_MAX = 12;
export const WELCOME_OFFSET_OBJECT_BYTES_MAX = 16;
export const WELCOME_OFFSET_TOKEN_EXPIRES_AT = 24;
export const WELCOME_FIXED_BYTES = 32;

// OBJECT: client → server, begins an object (and may carry its whole body).
export const OBJECT_OFFSET_TYPE = 0;
export const OBJECT_OFFSET_FLAGS = 1;
export const OBJECT_OFFSET_KEY_LENGTH = 2;
export const OBJECT_OFFSET_SEQUENCE = 4;
export const OBJECT_OFFSET_SIZE = 12;
export const OBJECT_OFFSET_CONTENT_TYPE_LENGTH = 20;
export const OBJECT_OFFSET_METADATA_LENGTH = 22;
export const OBJECT_OFFSET_BUCKET_LENGTH = 24;
export const OBJECT_OFFSET_IDEMPOTENCY_KEY_LENGTH = 25;
export const OBJECT_OFFSET_IF_MATCH_LENGTH = 26;
export const OBJECT_OFFSET_CHECKSUM_COUNT = 27;
export const OBJECT_FIXED_BYTES = 28;
/** OBJECT flag: write only if the key has no current object (If-None-Match: *). */
export const OBJECT_FLAG_IF_NONE_MATCH = 0x01;

// DATA: client → server, more body bytes of the open object.
export const DATA_OFFSET_TYPE = 0;
export const DATA_OFFSET_FLAGS = 1;
export const DATA_OFFSET_RESERVED = 2;
export const DATA_OFFSET_SEQUENCE = 4;
export const DATA_FIXED_BYTES = 12;

// TOKEN: client → server, a renewed bearer token for the same access key.
export const TOKEN_OFFSET_TYPE = 0;
export const TOKEN_OFFSET_FLAGS = 1;
export const TOKEN_OFFSET_TOKEN_LENGTH = 2;
export const TOKEN_FIXED_BYTES = 4;

// ACK: server → client, one object's outcome.
export const ACK_OFFSET_TYPE = 0;
export const ACK_OFFSET_FLAGS = 1;
export const ACK_OFFSET_STATUS = 2;
export const ACK_OFFSET_SEQUENCE = 4;
export const ACK_FIXED_BYTES = 12;
/** ACK flag: the object was refused; the JSON is a problem object. */
export const ACK_FLAG_REFUSED = 0x01;

// CREDIT: server → client, body bytes the client may send again.
export const CREDIT_OFFSET_TYPE = 0;
export const CREDIT_OFFSET_FLAGS = 1;
export const CREDIT_OFFSET_RESERVED = 2;
export const CREDIT_OFFSET_BYTES = 4;
export const CREDIT_FIXED_BYTES = 8;

// Limits of the variable fields (the service's own limits are checked where they apply).
export const TOKEN_BYTES_MAX = 4096;
export const BUCKET_BYTES_MAX = 63;
export const KEY_BYTES_MAX = 1024;
export const CONTENT_TYPE_BYTES_MAX = 256;
export const METADATA_BYTES_MAX = 4096;
export const IDEMPOTENCY_KEY_BYTES_MAX = 255;
export const IF_MATCH_BYTES_MAX = 255;
/** The JSON of an ACK: an object's metadata with its user metadata, or a problem object. */
export const ACK_JSON_BYTES_MAX = 16 * 1024;

/** Checksum algorithm codes (OBJECT's checksum entries); their digests have fixed lengths. */
export const CHECKSUM_CODES: ReadonlyArray<readonly [number, ChecksumAlg, number]> = [
  [1, 'CRC32', 4],
  [2, 'CRC32C', 4],
  [3, 'CRC64NVME', 8],
  [4, 'SHA1', 20],
  [5, 'SHA256', 32],
];

export interface HelloFrame {
  readonly type: typeof FRAME_HELLO;
  readonly version: number;
  readonly token: string;
  /** The connection's bucket; empty when every object names its own. */
  readonly bucket: string;
}

export interface WelcomeFrame {
  readonly type: typeof FRAME_WELCOME;
  readonly version: number;
  readonly windowObjects: number;
  readonly windowBytes: number;
  readonly frameBytesMax: number;
  readonly objectBytesMax: number;
  /** When the connection's token expires (ms since the epoch); renew with TOKEN before. */
  readonly tokenExpiresAt: number;
}

export interface ObjectHeader {
  readonly sequence: number;
  readonly size: number;
  /** Empty: the connection's bucket. */
  readonly bucket: string;
  readonly key: string;
  /** Empty: application/octet-stream. */
  readonly contentType: string;
  readonly metadata: ReadonlyArray<readonly [string, string]>;
  readonly checksums: ReadonlyArray<readonly [ChecksumAlg, Uint8Array]>;
  /** Empty: none. */
  readonly idempotencyKey: string;
  /** Empty: none. */
  readonly ifMatch: string;
  readonly ifNoneMatch: boolean;
}

export interface ObjectFrame extends ObjectHeader {
  readonly type: typeof FRAME_OBJECT;
  /** The first bytes of the body (a view into the decoded frame). */
  readonly body: Uint8Array;
}

export interface DataFrame {
  readonly type: typeof FRAME_DATA;
  readonly sequence: number;
  readonly body: Uint8Array;
}

export interface TokenFrame {
  readonly type: typeof FRAME_TOKEN;
  readonly token: string;
}

export interface AckFrame {
  readonly type: typeof FRAME_ACK;
  readonly sequence: number;
  /** 200, or the status of the problem object. */
  readonly status: number;
  readonly refused: boolean;
  readonly json: unknown;
}

export interface CreditFrame {
  readonly type: typeof FRAME_CREDIT;
  readonly bytes: number;
}

export type ClientFrame = HelloFrame | ObjectFrame | DataFrame | TokenFrame;
export type ServerFrame = WelcomeFrame | AckFrame | CreditFrame;

/** A frame the codec refuses; `details.closeCode` is what the receiver closes with. */
export function FrameError(message: string, closeCode = CLOSE_MALFORMED): LightwellError {
  return BadRequest(message, { closeCode, frame: true });
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
const encoder = new TextEncoder();

/** Reads a frame field by field, refusing a read past the end. */
class Reader {
  readonly view: DataView;
  offset: number;

  constructor(
    readonly bytes: Uint8Array,
    start: number,
  ) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.offset = start;
  }

  fixed(size: number, name: string): void {
    if (this.bytes.length < size)
      throw FrameError(`${name} frame of ${this.bytes.length} bytes, under its ${size}`);
  }

  u8(at: number): number {
    return this.view.getUint8(at);
  }

  u16(at: number): number {
    return this.view.getUint16(at, false);
  }

  u32(at: number): number {
    return this.view.getUint32(at, false);
  }

  u64(at: number, field: string): number {
    const value = this.view.getBigUint64(at, false);
    if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw FrameError(`${field} is over 2^53 - 1`);
    return Number(value);
  }

  take(length: number, field: string): Uint8Array {
    if (this.offset + length > this.bytes.length)
      throw FrameError(`${field} runs past the end of the frame`);
    const part = this.bytes.subarray(this.offset, this.offset + length);
    this.offset += length;
    return part;
  }

  text(length: number, field: string, ascii = false): string {
    const part = this.take(length, field);
    if (ascii) {
      for (const byte of part)
        if (byte < 0x21 || byte > 0x7e) throw FrameError(`${field} is not visible ASCII`);
    }
    try {
      return utf8.decode(part);
    } catch {
      throw FrameError(`${field} is not UTF-8`);
    }
  }

  rest(): Uint8Array {
    const part = this.bytes.subarray(this.offset);
    this.offset = this.bytes.length;
    return part;
  }

  end(name: string): void {
    if (this.offset !== this.bytes.length)
      throw FrameError(`${name} frame has ${this.bytes.length - this.offset} bytes past its end`);
  }
}

function checkFlags(flags: number, known: number, name: string): void {
  if ((flags & ~known) !== 0)
    throw FrameError(`${name} frame has unknown flags 0x${flags.toString(16)}`);
}

function checkLength(length: number, max: number, field: string, min = 0): void {
  if (length < min || length > max)
    throw FrameError(`${field} is ${length} bytes, not ${min}–${max}`);
}

/** Decodes a frame a client sent; FrameError for anything else. */
export function decodeClientFrame(bytes: Uint8Array): ClientFrame {
  if (bytes.length === 0) throw FrameError('empty frame');
  const type = bytes[0] ?? 0;
  switch (type) {
    case FRAME_HELLO:
      return decodeHello(bytes);
    case FRAME_OBJECT:
      return decodeObject(bytes);
    case FRAME_DATA:
      return decodeData(bytes);
    case FRAME_TOKEN:
      return decodeToken(bytes);
    default:
      throw FrameError(`unknown frame type 0x${type.toString(16)}`);
  }
}

/** Decodes a frame a server sent; FrameError for anything else. */
export function decodeServerFrame(bytes: Uint8Array): ServerFrame {
  if (bytes.length === 0) throw FrameError('empty frame');
  const type = bytes[0];
  if (type === FRAME_WELCOME) return decodeWelcome(bytes);
  if (type === FRAME_ACK) return decodeAck(bytes);
  if (type === FRAME_CREDIT) return decodeCredit(bytes);
  throw FrameError(`unknown frame type 0x${(type ?? 0).toString(16)}`);
}

function decodeHello(bytes: Uint8Array): HelloFrame {
  const reader = new Reader(bytes, HELLO_FIXED_BYTES);
  reader.fixed(HELLO_FIXED_BYTES, 'HELLO');
  checkFlags(reader.u8(HELLO_OFFSET_FLAGS), 0, 'HELLO');
  const version = reader.u8(HELLO_OFFSET_VERSION);
  const bucketLength = reader.u8(HELLO_OFFSET_BUCKET_LENGTH);
  const tokenLength = reader.u16(HELLO_OFFSET_TOKEN_LENGTH);
  checkLength(bucketLength, BUCKET_BYTES_MAX, 'bucket');
  checkLength(tokenLength, TOKEN_BYTES_MAX, 'token', 1);
  const token = reader.text(tokenLength, 'token', true);
  const bucket = reader.text(bucketLength, 'bucket');
  reader.end('HELLO');
  return { type: FRAME_HELLO, version, token, bucket };
}

function decodeWelcome(bytes: Uint8Array): WelcomeFrame {
  const reader = new Reader(bytes, WELCOME_FIXED_BYTES);
  reader.fixed(WELCOME_FIXED_BYTES, 'WELCOME');
  checkFlags(reader.u8(WELCOME_OFFSET_FLAGS), 0, 'WELCOME');
  if (reader.u8(WELCOME_OFFSET_RESERVED) !== 0) throw FrameError('WELCOME reserved byte is set');
  const frame: WelcomeFrame = {
    type: FRAME_WELCOME,
    version: reader.u8(WELCOME_OFFSET_VERSION),
    windowObjects: reader.u32(WELCOME_OFFSET_WINDOW_OBJECTS),
    windowBytes: reader.u32(WELCOME_OFFSET_WINDOW_BYTES),
    frameBytesMax: reader.u32(WELCOME_OFFSET_FRAME_BYTES_MAX),
    objectBytesMax: reader.u64(WELCOME_OFFSET_OBJECT_BYTES_MAX, 'objectBytesMax'),
    tokenExpiresAt: reader.u64(WELCOME_OFFSET_TOKEN_EXPIRES_AT, 'tokenExpiresAt'),
  };
  if (frame.windowObjects < 1) throw FrameError('WELCOME window of no objects');
  if (frame.frameBytesMax < OBJECT_FIXED_BYTES + 1)
    throw FrameError('WELCOME frame limit too small');
  reader.end('WELCOME');
  return frame;
}

function decodeObject(bytes: Uint8Array): ObjectFrame {
  const reader = new Reader(bytes, OBJECT_FIXED_BYTES);
  reader.fixed(OBJECT_FIXED_BYTES, 'OBJECT');
  const flags = reader.u8(OBJECT_OFFSET_FLAGS);
  checkFlags(flags, OBJECT_FLAG_IF_NONE_MATCH, 'OBJECT');
  const keyLength = reader.u16(OBJECT_OFFSET_KEY_LENGTH);
  const contentTypeLength = reader.u16(OBJECT_OFFSET_CONTENT_TYPE_LENGTH);
  const metadataLength = reader.u16(OBJECT_OFFSET_METADATA_LENGTH);
  const bucketLength = reader.u8(OBJECT_OFFSET_BUCKET_LENGTH);
  const idempotencyKeyLength = reader.u8(OBJECT_OFFSET_IDEMPOTENCY_KEY_LENGTH);
  const ifMatchLength = reader.u8(OBJECT_OFFSET_IF_MATCH_LENGTH);
  const checksumCount = reader.u8(OBJECT_OFFSET_CHECKSUM_COUNT);
  checkLength(keyLength, KEY_BYTES_MAX, 'key', 1);
  checkLength(contentTypeLength, CONTENT_TYPE_BYTES_MAX, 'content type');
  checkLength(metadataLength, METADATA_BYTES_MAX, 'metadata');
  checkLength(bucketLength, BUCKET_BYTES_MAX, 'bucket');
  checkLength(checksumCount, CHECKSUM_CODES.length, 'checksum count');
  const sequence = reader.u64(OBJECT_OFFSET_SEQUENCE, 'sequence');
  const size = reader.u64(OBJECT_OFFSET_SIZE, 'size');
  const bucket = reader.text(bucketLength, 'bucket');
  const key = reader.text(keyLength, 'key');
  const contentType = reader.text(contentTypeLength, 'content type', true);
  const idempotencyKey = reader.text(idempotencyKeyLength, 'idempotency key', true);
  const ifMatch = reader.text(ifMatchLength, 'if-match');
  const checksums = readChecksums(reader, checksumCount);
  const metadata = readMetadata(new Reader(reader.take(metadataLength, 'metadata'), 0));
  const body = reader.rest();
  if (body.length > size) throw FrameError(`OBJECT frame carries more body than its size`);
  return {
    type: FRAME_OBJECT,
    sequence,
    size,
    bucket,
    key,
    contentType,
    metadata,
    checksums,
    idempotencyKey,
    ifMatch,
    ifNoneMatch: (flags & OBJECT_FLAG_IF_NONE_MATCH) !== 0,
    body,
  };
}

function readChecksums(reader: Reader, count: number): Array<[ChecksumAlg, Uint8Array]> {
  const checksums: Array<[ChecksumAlg, Uint8Array]> = [];
  for (let index = 0; index < count; index += 1) {
    const code = reader.take(1, 'checksum algorithm')[0];
    const entry = CHECKSUM_CODES.find(([known]) => known === code);
    if (!entry) throw FrameError(`unknown checksum algorithm ${code ?? 0}`);
    if (checksums.some(([alg]) => alg === entry[1]))
      throw FrameError(`checksum ${entry[1]} given twice`);
    checksums.push([entry[1], reader.take(entry[2], `${entry[1]} digest`)]);
  }
  return checksums;
}

function readMetadata(reader: Reader): Array<[string, string]> {
  const metadata: Array<[string, string]> = [];
  while (reader.offset < reader.bytes.length) {
    const [nameLength = 0] = reader.take(1, 'metadata name length');
    const lengthBytes = reader.take(2, 'metadata value length');
    const valueLength = ((lengthBytes[0] ?? 0) << 8) | (lengthBytes[1] ?? 0);
    checkLength(nameLength, 255, 'metadata name', 1);
    const name = reader.text(nameLength, 'metadata name', true);
    metadata.push([name, reader.text(valueLength, 'metadata value')]);
  }
  return metadata;
}

function decodeData(bytes: Uint8Array): DataFrame {
  const reader = new Reader(bytes, DATA_FIXED_BYTES);
  reader.fixed(DATA_FIXED_BYTES, 'DATA');
  checkFlags(reader.u8(DATA_OFFSET_FLAGS), 0, 'DATA');
  if (reader.u16(DATA_OFFSET_RESERVED) !== 0) throw FrameError('DATA reserved bytes are set');
  const sequence = reader.u64(DATA_OFFSET_SEQUENCE, 'sequence');
  const body = reader.rest();
  if (body.length === 0) throw FrameError('DATA frame without body bytes');
  return { type: FRAME_DATA, sequence, body };
}

function decodeToken(bytes: Uint8Array): TokenFrame {
  const reader = new Reader(bytes, TOKEN_FIXED_BYTES);
  reader.fixed(TOKEN_FIXED_BYTES, 'TOKEN');
  checkFlags(reader.u8(TOKEN_OFFSET_FLAGS), 0, 'TOKEN');
  const tokenLength = reader.u16(TOKEN_OFFSET_TOKEN_LENGTH);
  checkLength(tokenLength, TOKEN_BYTES_MAX, 'token', 1);
  const token = reader.text(tokenLength, 'token', true);
  reader.end('TOKEN');
  return { type: FRAME_TOKEN, token };
}

function decodeAck(bytes: Uint8Array): AckFrame {
  const reader = new Reader(bytes, ACK_FIXED_BYTES);
  reader.fixed(ACK_FIXED_BYTES, 'ACK');
  const flags = reader.u8(ACK_OFFSET_FLAGS);
  checkFlags(flags, ACK_FLAG_REFUSED, 'ACK');
  const refused = (flags & ACK_FLAG_REFUSED) !== 0;
  const status = reader.u16(ACK_OFFSET_STATUS);
  if (refused ? status < 400 || status > 599 : status !== 200)
    throw FrameError(`ACK status ${status} does not fit its flags`);
  const sequence = reader.u64(ACK_OFFSET_SEQUENCE, 'sequence');
  const text = reader.text(bytes.length - ACK_FIXED_BYTES, 'ACK JSON');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw FrameError('ACK JSON does not parse');
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    throw FrameError('ACK JSON is not an object');
  return { type: FRAME_ACK, sequence, status, refused, json };
}

function decodeCredit(bytes: Uint8Array): CreditFrame {
  const reader = new Reader(bytes, CREDIT_FIXED_BYTES);
  reader.fixed(CREDIT_FIXED_BYTES, 'CREDIT');
  checkFlags(reader.u8(CREDIT_OFFSET_FLAGS), 0, 'CREDIT');
  if (reader.u16(CREDIT_OFFSET_RESERVED) !== 0) throw FrameError('CREDIT reserved bytes are set');
  const credit = reader.u32(CREDIT_OFFSET_BYTES);
  if (credit === 0) throw FrameError('CREDIT of no bytes');
  reader.end('CREDIT');
  return { type: FRAME_CREDIT, bytes: credit };
}

/** Writes a frame whose size is known up front. */
class Writer {
  readonly bytes: Uint8Array;
  readonly view: DataView;
  offset: number;

  constructor(size: number, fixed: number) {
    this.bytes = new Uint8Array(size);
    this.view = new DataView(this.bytes.buffer);
    this.offset = fixed;
  }

  put(part: Uint8Array): void {
    this.bytes.set(part, this.offset);
    this.offset += part.length;
  }

  u64(at: number, value: number): void {
    this.view.setBigUint64(at, BigInt(value), false);
  }
}

function encoded(text: string, max: number, field: string, min = 0): Uint8Array {
  const bytes = encoder.encode(text);
  checkLength(bytes.length, max, field, min);
  return bytes;
}

export function encodeHello(frame: Omit<HelloFrame, 'type'>): Uint8Array {
  const token = encoded(frame.token, TOKEN_BYTES_MAX, 'token', 1);
  const bucket = encoded(frame.bucket, BUCKET_BYTES_MAX, 'bucket');
  const writer = new Writer(HELLO_FIXED_BYTES + token.length + bucket.length, HELLO_FIXED_BYTES);
  writer.view.setUint8(HELLO_OFFSET_TYPE, FRAME_HELLO);
  writer.view.setUint8(HELLO_OFFSET_VERSION, frame.version);
  writer.view.setUint8(HELLO_OFFSET_BUCKET_LENGTH, bucket.length);
  writer.view.setUint16(HELLO_OFFSET_TOKEN_LENGTH, token.length, false);
  writer.put(token);
  writer.put(bucket);
  return writer.bytes;
}

export function encodeWelcome(frame: Omit<WelcomeFrame, 'type'>): Uint8Array {
  const writer = new Writer(WELCOME_FIXED_BYTES, WELCOME_FIXED_BYTES);
  const { view } = writer;
  view.setUint8(WELCOME_OFFSET_TYPE, FRAME_WELCOME);
  view.setUint8(WELCOME_OFFSET_VERSION, frame.version);
  view.setUint32(WELCOME_OFFSET_WINDOW_OBJECTS, frame.windowObjects, false);
  view.setUint32(WELCOME_OFFSET_WINDOW_BYTES, frame.windowBytes, false);
  view.setUint32(WELCOME_OFFSET_FRAME_BYTES_MAX, frame.frameBytesMax, false);
  writer.u64(WELCOME_OFFSET_OBJECT_BYTES_MAX, frame.objectBytesMax);
  writer.u64(WELCOME_OFFSET_TOKEN_EXPIRES_AT, frame.tokenExpiresAt);
  return writer.bytes;
}

/** The header bytes of an OBJECT frame, without body bytes (see `encodeObject`). */
function objectParts(header: ObjectHeader): Uint8Array[] {
  const metadata: Uint8Array[] = [];
  for (const [name, value] of header.metadata) {
    const nameBytes = encoded(name, 255, 'metadata name', 1);
    const valueBytes = encoded(value, 0xffff, 'metadata value');
    metadata.push(
      Uint8Array.of(nameBytes.length, valueBytes.length >> 8, valueBytes.length & 0xff),
      nameBytes,
      valueBytes,
    );
  }
  const checksums: Uint8Array[] = [];
  for (const [alg, digest] of header.checksums) {
    const entry = CHECKSUM_CODES.find(([, name]) => name === alg);
    if (!entry || digest.length !== entry[2]) throw FrameError(`bad ${alg} checksum entry`);
    checksums.push(Uint8Array.of(entry[0]), digest);
  }
  return [
    encoded(header.bucket, BUCKET_BYTES_MAX, 'bucket'),
    encoded(header.key, KEY_BYTES_MAX, 'key', 1),
    encoded(header.contentType, CONTENT_TYPE_BYTES_MAX, 'content type'),
    encoded(header.idempotencyKey, IDEMPOTENCY_KEY_BYTES_MAX, 'idempotency key'),
    encoded(header.ifMatch, IF_MATCH_BYTES_MAX, 'if-match'),
    ...checksums,
    ...metadata,
  ];
}

/** An OBJECT frame with the first `body` bytes of the object (all of them for a small one). */
export function encodeObject(
  header: ObjectHeader,
  body: Uint8Array = new Uint8Array(0),
): Uint8Array {
  const [bucket, key, contentType, idempotencyKey, ifMatch, ...tail] = objectParts(header) as [
    Uint8Array,
    Uint8Array,
    Uint8Array,
    Uint8Array,
    Uint8Array,
    ...Uint8Array[],
  ];
  const checksumBytes = header.checksums.reduce((sum, [, digest]) => sum + 1 + digest.length, 0);
  const metadataLength = tail.reduce((sum, part) => sum + part.length, 0) - checksumBytes;
  checkLength(metadataLength, METADATA_BYTES_MAX, 'metadata');
  if (body.length > header.size) throw FrameError('OBJECT frame carries more body than its size');
  const headerBytes =
    OBJECT_FIXED_BYTES +
    bucket.length +
    key.length +
    contentType.length +
    idempotencyKey.length +
    ifMatch.length +
    checksumBytes +
    metadataLength;
  const writer = new Writer(headerBytes + body.length, OBJECT_FIXED_BYTES);
  const { view } = writer;
  view.setUint8(OBJECT_OFFSET_TYPE, FRAME_OBJECT);
  view.setUint8(OBJECT_OFFSET_FLAGS, header.ifNoneMatch ? OBJECT_FLAG_IF_NONE_MATCH : 0);
  view.setUint16(OBJECT_OFFSET_KEY_LENGTH, key.length, false);
  writer.u64(OBJECT_OFFSET_SEQUENCE, header.sequence);
  writer.u64(OBJECT_OFFSET_SIZE, header.size);
  view.setUint16(OBJECT_OFFSET_CONTENT_TYPE_LENGTH, contentType.length, false);
  view.setUint16(OBJECT_OFFSET_METADATA_LENGTH, metadataLength, false);
  view.setUint8(OBJECT_OFFSET_BUCKET_LENGTH, bucket.length);
  view.setUint8(OBJECT_OFFSET_IDEMPOTENCY_KEY_LENGTH, idempotencyKey.length);
  view.setUint8(OBJECT_OFFSET_IF_MATCH_LENGTH, ifMatch.length);
  view.setUint8(OBJECT_OFFSET_CHECKSUM_COUNT, header.checksums.length);
  for (const part of [bucket, key, contentType, idempotencyKey, ifMatch, ...tail]) writer.put(part);
  writer.put(body);
  return writer.bytes;
}

/** The bytes an OBJECT frame of `header` takes before its body bytes. */
export function objectHeaderBytes(header: ObjectHeader): number {
  return encodeObject({ ...header, size: 0 }).length;
}

export function encodeData(sequence: number, body: Uint8Array): Uint8Array {
  if (body.length === 0) throw FrameError('DATA frame without body bytes');
  const writer = new Writer(DATA_FIXED_BYTES + body.length, DATA_FIXED_BYTES);
  writer.view.setUint8(DATA_OFFSET_TYPE, FRAME_DATA);
  writer.u64(DATA_OFFSET_SEQUENCE, sequence);
  writer.put(body);
  return writer.bytes;
}

export function encodeToken(token: string): Uint8Array {
  const bytes = encoded(token, TOKEN_BYTES_MAX, 'token', 1);
  const writer = new Writer(TOKEN_FIXED_BYTES + bytes.length, TOKEN_FIXED_BYTES);
  writer.view.setUint8(TOKEN_OFFSET_TYPE, FRAME_TOKEN);
  writer.view.setUint16(TOKEN_OFFSET_TOKEN_LENGTH, bytes.length, false);
  writer.put(bytes);
  return writer.bytes;
}

/**
 * One ACK per object, so written straight into a pooled Buffer (no separate encoding of the
 * JSON, no ArrayBuffer and DataView of its own): the same bytes as the other encoders' path.
 */
export function encodeAck(frame: Omit<AckFrame, 'type'>): Uint8Array {
  const text = JSON.stringify(frame.json);
  const length = Buffer.byteLength(text, 'utf8');
  checkLength(length, ACK_JSON_BYTES_MAX, 'ACK JSON', 2);
  const sequence = frame.sequence;
  if (!Number.isSafeInteger(sequence) || sequence < 0)
    throw FrameError(`ACK sequence ${sequence} is not a whole number under 2^53`);
  const bytes = Buffer.allocUnsafe(ACK_FIXED_BYTES + length);
  bytes[ACK_OFFSET_TYPE] = FRAME_ACK;
  bytes[ACK_OFFSET_FLAGS] = frame.refused ? ACK_FLAG_REFUSED : 0;
  bytes.writeUInt16BE(frame.status, ACK_OFFSET_STATUS);
  bytes.writeUInt32BE(Math.floor(sequence / 2 ** 32), ACK_OFFSET_SEQUENCE);
  bytes.writeUInt32BE(sequence >>> 0, ACK_OFFSET_SEQUENCE + 4);
  bytes.write(text, ACK_FIXED_BYTES, length, 'utf8');
  return bytes;
}

export function encodeCredit(bytes: number): Uint8Array {
  if (bytes < 1 || bytes > 0xffffffff) throw FrameError(`CREDIT of ${bytes} bytes`);
  const writer = new Writer(CREDIT_FIXED_BYTES, CREDIT_FIXED_BYTES);
  writer.view.setUint8(CREDIT_OFFSET_TYPE, FRAME_CREDIT);
  writer.view.setUint32(CREDIT_OFFSET_BYTES, bytes, false);
  return writer.bytes;
}
