// Goal: the record frame codec writes the documented bytes in place, exposes the documented
// AAD, accepts exactly the headers that obey the field rules of docs/on-disk-format.md §2.3,
// and scanRecords stops at the first damaged record.
// Method: write records in place and through encodeRecord and check bytes; build raw headers
// with one rule broken each and a correct checksum, and check each is a format error; check
// the writer's assertions; scan hand-built segments with known damage.

import { crc32c } from '@node-rs/crc32';
import t from 'tap';
import {
  CIPHER_AES_256_GCM,
  CIPHER_NONE,
  COMPRESSION_LZ4,
  COMPRESSION_NONE,
  OFFSET_RECORD_CHUNK_ID,
  OFFSET_RECORD_HEADER_CHECKSUM,
  OFFSET_RECORD_NONCE,
  OFFSET_RECORD_PAYLOAD_CHECKSUM,
  RECORD_AAD_SIZE,
  RECORD_HEADER_SIZE,
  RECORD_KIND_CHUNK,
  RECORD_PAYLOAD_LENGTH_MAX,
  RECORD_PLAIN_LENGTH_MAX,
  decodeRecordHeader,
  encodeRecord,
  recordAad,
  scanRecords,
  sealRecordHeader,
  verifyPayload,
  writeRecordHeader,
  type RecordFields,
} from '../../src/format/record-frame.js';
import { encodeSealFooter } from '../../src/format/seal-footer.js';
import { encodeSegmentHeader } from '../../src/format/segment-header.js';
import { reseal } from './format-testing.js';

const chunkId = Buffer.alloc(32, 0x11);
const nonce = Buffer.alloc(12, 0x22);
const zeroNonce = Buffer.alloc(12);
const plainFields = {
  kind: RECORD_KIND_CHUNK,
  compression: COMPRESSION_NONE,
  cipher: CIPHER_NONE,
  tenantNum: 7,
  plainLength: 5,
  chunkId,
  nonce: zeroNonce,
} as const;

interface RawHeader {
  magic: number;
  recordLength: number;
  kind: number;
  compression: number;
  cipher: number;
  tenantNum: number;
  plainLength: number;
  payloadLength: number;
  chunkId: Buffer;
  nonce: Buffer;
}

const rawDefaults: RawHeader = {
  magic: 0x3152574c,
  recordLength: 85,
  kind: 1,
  compression: 0,
  cipher: 0,
  tenantNum: 7,
  plainLength: 5,
  payloadLength: 5,
  chunkId,
  nonce: zeroNonce,
};

/** A header with any field values and correct checksums, bypassing the writer's rules. */
function rawHeader(overrides: Partial<RawHeader>): Buffer {
  const raw = { ...rawDefaults, ...overrides };
  const target = Buffer.alloc(RECORD_HEADER_SIZE);
  target.writeUInt32LE(raw.magic, 0);
  target.writeUInt32LE(raw.recordLength, 4);
  target.writeUInt8(raw.kind, 8);
  target.writeUInt8(raw.compression, 9);
  target.writeUInt8(raw.cipher, 10);
  target.writeUInt32LE(raw.tenantNum, 12);
  target.writeUInt32LE(raw.plainLength, 16);
  target.writeUInt32LE(raw.payloadLength, 20);
  raw.chunkId.copy(target, 24);
  raw.nonce.copy(target, 56);
  return reseal(target, OFFSET_RECORD_HEADER_CHECKSUM);
}

t.test('encodeRecord writes the documented bytes', async (t) => {
  const record = encodeRecord(plainFields, Buffer.from('hello'));
  t.equal(record.length, 85);
  t.equal(record.toString('latin1', 0, 4), 'LWR1');
  t.equal(record.readUInt32LE(4), 85, 'recordLength');
  t.same([...record.subarray(8, 12)], [1, 0, 0, 0], 'kind, codecs, reserved');
  t.equal(record.readUInt32LE(12), 7, 'tenantNum');
  t.equal(record.readUInt32LE(16), 5, 'plainLength');
  t.equal(record.readUInt32LE(20), 5, 'payloadLength');
  t.ok(record.subarray(24, 56).equals(chunkId), 'chunkId');
  t.ok(record.subarray(56, 72).equals(Buffer.alloc(16)), 'nonce and reserved');
  t.equal(record.readUInt32LE(72), crc32c(Buffer.from('hello')), 'payloadChecksum');
  t.equal(record.readUInt32LE(76), crc32c(record.subarray(0, 76)), 'headerChecksum');
  t.equal(record.toString('latin1', 80), 'hello');
  const header = decodeRecordHeader(record, 0);
  t.match(header, { ...plainFields, payloadLength: 5, recordLength: 85 });
  verifyPayload(header, record.subarray(RECORD_HEADER_SIZE));
});

t.test('in-place write at an offset, AAD and views', async (t) => {
  const offset = 13;
  const payload = Buffer.from('ciphertext and sixteen tag bytes');
  const fields: RecordFields = {
    kind: RECORD_KIND_CHUNK,
    compression: COMPRESSION_LZ4,
    cipher: CIPHER_AES_256_GCM,
    tenantNum: 0xffffffff,
    plainLength: RECORD_PLAIN_LENGTH_MAX,
    payloadLength: payload.length,
    chunkId,
    nonce,
  };
  const target = Buffer.alloc(offset + RECORD_HEADER_SIZE + payload.length + 7, 0xee);
  writeRecordHeader(target, offset, fields);
  t.ok(target.subarray(offset + 72, offset + 80).equals(Buffer.alloc(8, 0xee)), 'checksums left');
  const aad = recordAad(target, offset);
  t.equal(aad.length, RECORD_AAD_SIZE);
  t.equal(aad.buffer, target.buffer, 'AAD is a view, not a copy');
  t.equal(aad.byteOffset, target.byteOffset + offset);
  const aadBefore = Buffer.from(aad);
  payload.copy(target, offset + RECORD_HEADER_SIZE);
  sealRecordHeader(target, offset, crc32c(payload));
  t.ok(recordAad(target, offset).equals(aadBefore), 'sealing does not change the AAD');
  const header = decodeRecordHeader(target, offset);
  t.match(header, { ...fields, recordLength: RECORD_HEADER_SIZE + payload.length });
  t.equal(header.chunkId.buffer, target.buffer, 'chunkId is a view');
  t.equal(header.nonce.byteOffset, target.byteOffset + offset + OFFSET_RECORD_NONCE);
  t.equal(target.readUInt8(offset - 1), 0xee, 'bytes before the record untouched');
  t.equal(target.readUInt8(target.length - 1), 0xee, 'bytes after the record untouched');
  t.ok(recordAad(encodeRecord(plainFields, Buffer.from('hello'))).length === 56, 'default offset');
});

t.test('verifyPayload', async (t) => {
  const record = encodeRecord(plainFields, Buffer.from('hello'));
  const header = decodeRecordHeader(record, 0);
  t.throws(() => verifyPayload(header, Buffer.from('hell')), { code: 'format_error' }, 'short');
  t.throws(() => verifyPayload(header, Buffer.from('hellO')), {
    code: 'format_error',
    message: 'payload checksum mismatch',
  });
});

t.test('headers that break a rule are format errors', async (t) => {
  const cases: Array<[string, Buffer]> = [
    ['truncated', rawHeader({}).subarray(0, 79)],
    ['bad magic', rawHeader({ magic: 0x3252574c })],
    ['recordLength', rawHeader({ recordLength: 86 })],
    ['kind 0', rawHeader({ kind: 0 })],
    ['kind 3', rawHeader({ kind: 3 })],
    ['compression 2', rawHeader({ compression: 2 })],
    ['cipher 2', rawHeader({ cipher: 2 })],
    [
      'plainLength over the maximum',
      rawHeader({ compression: 1, plainLength: RECORD_PLAIN_LENGTH_MAX + 1 }),
    ],
    [
      'payloadLength over the maximum',
      rawHeader({
        compression: 1,
        payloadLength: RECORD_PAYLOAD_LENGTH_MAX + 1,
        recordLength: RECORD_PAYLOAD_LENGTH_MAX + 81,
      }),
    ],
    ['plain payload length', rawHeader({ plainLength: 4 })],
    ['encrypted payload without tag room', rawHeader({ cipher: 1, nonce })],
    [
      'lz4 shorter than its prefix',
      rawHeader({ compression: 1, payloadLength: 3, recordLength: 83 }),
    ],
    [
      'lz4 and cipher shorter than prefix and tag',
      rawHeader({ compression: 1, cipher: 1, nonce, payloadLength: 19, recordLength: 99 }),
    ],
    ['nonce without cipher', rawHeader({ nonce })],
    ['seal with compression', rawHeader({ kind: 2, compression: 1, chunkId: Buffer.alloc(32) })],
    ['seal with cipher', rawHeader({ kind: 2, cipher: 1, nonce, chunkId: Buffer.alloc(32) })],
    ['seal with tenant', sealHeader({ tenantNum: 1 })],
    ['seal with chunk id', sealHeader({ chunkId })],
    ['seal with nonce', sealHeader({ nonce })],
    ['seal payload length', sealHeader({ plainLength: 31, payloadLength: 31, recordLength: 111 })],
  ];
  for (const [name, header] of cases) {
    t.throws(() => decodeRecordHeader(header, 0), { code: 'format_error' }, name);
  }
  const flipped = rawHeader({});
  flipped.writeUInt8(flipped.readUInt8(30) ^ 4, 30);
  t.throws(() => decodeRecordHeader(flipped, 0), { code: 'format_error' }, 'header checksum');
  t.throws(() => decodeRecordHeader(rawHeader({}), 1), { code: 'format_error' }, 'offset');
  // The controls: the defaults and a well-formed seal header are accepted.
  t.match(decodeRecordHeader(rawHeader({}), 0), { kind: 1, payloadLength: 5 });
  t.match(decodeRecordHeader(sealHeader({}), 0), { kind: 2, payloadLength: 32 });
  const reserved = rawHeader({});
  reserved.writeUInt8(0xff, 11);
  reserved.writeUInt32LE(0xffffffff, 68);
  t.match(decodeRecordHeader(reseal(reserved, 76), 0), { kind: 1 }, 'reserved bytes ignored');
});

function sealHeader(overrides: Partial<RawHeader>): Buffer {
  return rawHeader({
    kind: 2,
    tenantNum: 0,
    plainLength: 32,
    payloadLength: 32,
    recordLength: 112,
    chunkId: Buffer.alloc(32),
    nonce: zeroNonce,
    ...overrides,
  });
}

t.test('the writer asserts on invalid fields', async (t) => {
  const assertion = { code: 'ERR_ASSERTION' };
  const target = Buffer.alloc(200);
  const fields: RecordFields = { ...plainFields, payloadLength: 5 };
  const bad: Array<[string, RecordFields]> = [
    ['kind 3', { ...fields, kind: 3 as 1 }],
    ['compression 2', { ...fields, compression: 2 as 1 }],
    ['cipher 2', { ...fields, cipher: 2 as 1 }],
    ['negative tenant', { ...fields, tenantNum: -1 }],
    ['fractional plainLength', { ...fields, plainLength: 4.5 }],
    ['payloadLength above u32', { ...fields, payloadLength: 2 ** 32 }],
    ['short chunk id', { ...fields, chunkId: Buffer.alloc(31) }],
    ['short nonce', { ...fields, nonce: Buffer.alloc(11) }],
    ['lengths disagree', { ...fields, plainLength: 6 }],
    ['nonce without cipher', { ...fields, nonce }],
  ];
  for (const [name, invalid] of bad) {
    t.throws(() => writeRecordHeader(target, 0, invalid), assertion, name);
  }
  t.throws(() => writeRecordHeader(target, 121, fields), assertion, 'past the end of target');
  t.throws(() => writeRecordHeader(target, -1, fields), assertion, 'negative offset');
  t.throws(() => sealRecordHeader(Buffer.alloc(80), 0, 0), assertion, 'seal before write');
  writeRecordHeader(target, 0, fields);
  t.throws(() => sealRecordHeader(target, 0, -1), assertion, 'bad payload checksum');
  t.throws(() => recordAad(target, 150), assertion, 'AAD past the end');
});

function segmentWith(records: Buffer[]): Buffer {
  return Buffer.concat([encodeSegmentHeader({ segmentId: 1, createdAtMs: 0 }), ...records]);
}

t.test('scanRecords', async (t) => {
  t.same(scanRecords(Buffer.alloc(0), 0), {
    records: [],
    validEnd: 0,
    torn: false,
    problem: undefined,
  });
  const a = encodeRecord(plainFields, Buffer.from('hello'));
  const b = encodeRecord({ ...plainFields, plainLength: 0 }, Buffer.alloc(0));
  const clean = segmentWith([a, b]);
  const scan = scanRecords(clean, 64);
  t.same(
    scan.records.map((record) => record.offset),
    [64, 149],
  );
  t.match(scan, { validEnd: clean.length, torn: false, problem: undefined });
  t.match(scanRecords(clean, clean.length), { records: [], validEnd: clean.length, torn: false });

  const zeroTail = Buffer.concat([clean, Buffer.alloc(4096)]);
  t.match(scanRecords(zeroTail, 64), { validEnd: clean.length, torn: true, problem: /magic/ });

  const cut = clean.subarray(0, clean.length - 1);
  t.match(scanRecords(cut, 64), { validEnd: 149, torn: true, problem: /truncated/ });
  const cutPayload = segmentWith([a]).subarray(0, 64 + 84);
  t.match(scanRecords(cutPayload, 64), { validEnd: 64, torn: true, problem: /past the end/ });

  const badPayload = Buffer.from(clean);
  badPayload.writeUInt8(0x48, 64 + RECORD_HEADER_SIZE);
  t.match(scanRecords(badPayload, 64), { validEnd: 64, torn: true, problem: /payload checksum/ });
  const badHeader = Buffer.from(clean);
  badHeader.writeUInt8(0, 149 + OFFSET_RECORD_CHUNK_ID);
  t.match(scanRecords(badHeader, 64), { validEnd: 149, torn: true, problem: /header checksum/ });
  const badPayloadChecksum = Buffer.from(clean);
  badPayloadChecksum.writeUInt32LE(0, 64 + OFFSET_RECORD_PAYLOAD_CHECKSUM);
  t.match(scanRecords(badPayloadChecksum, 64), { validEnd: 64, torn: true });

  const seal = encodeSealFooter({ recordCount: 2, dataEnd: clean.length, sealedAtMs: 1 });
  const sealed = segmentWith([a, b, seal]);
  const sealedScan = scanRecords(sealed, 64);
  t.equal(sealedScan.records.length, 3);
  t.match(sealedScan, { validEnd: sealed.length, torn: false, problem: undefined });
  const afterSeal = Buffer.concat([sealed, a]);
  t.match(scanRecords(afterSeal, 64), {
    validEnd: sealed.length,
    torn: true,
    problem: 'bytes follow the seal footer',
  });

  t.throws(() => scanRecords(clean, clean.length + 1), { code: 'ERR_ASSERTION' });
  t.throws(() => scanRecords(clean, -1), { code: 'ERR_ASSERTION' });
});
