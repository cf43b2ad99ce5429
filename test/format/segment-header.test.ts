// Goal: the segment header codec writes the documented bytes and rejects every malformed,
// corrupt or too-new header with the right error code; segment file names follow the rule.
// Method: encode a known header and check bytes and round trip; tamper with single fields
// (re-computing the checksum where the test is about the field) and check each error code;
// check the encoder's assertions; check file names at the edges of the id range.

import t from 'tap';
import {
  OFFSET_SEGMENT_HEADER_CREATED_AT_MS,
  OFFSET_SEGMENT_HEADER_FLAGS,
  OFFSET_SEGMENT_HEADER_FORMAT_VERSION,
  OFFSET_SEGMENT_HEADER_HEADER_CHECKSUM,
  OFFSET_SEGMENT_HEADER_HEADER_SIZE,
  OFFSET_SEGMENT_HEADER_RESERVED12,
  OFFSET_SEGMENT_HEADER_RESERVED40,
  OFFSET_SEGMENT_HEADER_SEGMENT_ID,
  SEGMENT_HEADER_SIZE,
  decodeSegmentHeader,
  encodeSegmentHeader,
  parseSegmentFileName,
  segmentFileName,
} from '../../src/format/segment-header.js';
import { reseal } from './format-testing.js';

const fields = { segmentId: 42, createdAtMs: 1767225600123 };
const decoded = { formatVersion: 1, headerSize: 64, flags: 0, ...fields };

function tampered(change: (target: Buffer) => void): Buffer {
  const target = encodeSegmentHeader(fields);
  change(target);
  return reseal(target, OFFSET_SEGMENT_HEADER_HEADER_CHECKSUM);
}

t.test('round trip and bytes', async (t) => {
  const encoded = encodeSegmentHeader(fields);
  t.equal(encoded.length, SEGMENT_HEADER_SIZE);
  t.equal(encoded.toString('latin1', 0, 8), 'LWSEGMNT');
  t.equal(encoded.readUInt16LE(OFFSET_SEGMENT_HEADER_HEADER_SIZE), 64);
  t.equal(encoded.readBigUInt64LE(OFFSET_SEGMENT_HEADER_SEGMENT_ID), 42n);
  t.same(decodeSegmentHeader(encoded), decoded);
  // The header is the start of a file: bytes after it are not the header's business.
  t.same(decodeSegmentHeader(Buffer.concat([encoded, Buffer.alloc(10, 0xab)])), decoded);
});

t.test('readers ignore reserved bytes', async (t) => {
  const header = tampered((target) => {
    target.fill(0xff, OFFSET_SEGMENT_HEADER_RESERVED12, OFFSET_SEGMENT_HEADER_FLAGS);
    target.fill(0xff, OFFSET_SEGMENT_HEADER_RESERVED40, OFFSET_SEGMENT_HEADER_HEADER_CHECKSUM);
  });
  t.same(decodeSegmentHeader(header), decoded);
});

t.test('malformed headers are format errors', async (t) => {
  const formatError = { code: 'format_error' };
  const good = encodeSegmentHeader(fields);
  t.throws(() => decodeSegmentHeader(Buffer.alloc(0)), formatError, 'empty');
  t.throws(() => decodeSegmentHeader(Buffer.alloc(64)), formatError, 'zeros');
  t.throws(() => decodeSegmentHeader(good.subarray(0, 9)), formatError, 'no version');
  t.throws(() => decodeSegmentHeader(good.subarray(0, 63)), formatError, 'one byte short');
  const badChecksum = Buffer.from(good);
  badChecksum.writeUInt8(good.readUInt8(SEGMENT_HEADER_SIZE - 1) ^ 0x80, SEGMENT_HEADER_SIZE - 1);
  t.throws(() => decodeSegmentHeader(badChecksum), formatError, 'checksum');
  const version0 = tampered((target) =>
    target.writeUInt16LE(0, OFFSET_SEGMENT_HEADER_FORMAT_VERSION),
  );
  t.throws(() => decodeSegmentHeader(version0), formatError, 'version 0');
  const headerSize = tampered((target) =>
    target.writeUInt16LE(128, OFFSET_SEGMENT_HEADER_HEADER_SIZE),
  );
  t.throws(() => decodeSegmentHeader(headerSize), formatError, 'headerSize');
  const hugeId = tampered((target) =>
    target.writeBigUInt64LE(2n ** 64n - 1n, OFFSET_SEGMENT_HEADER_SEGMENT_ID),
  );
  t.throws(() => decodeSegmentHeader(hugeId), formatError, 'segmentId beyond 2^53 - 1');
  const hugeTime = tampered((target) =>
    target.writeBigUInt64LE(2n ** 53n, OFFSET_SEGMENT_HEADER_CREATED_AT_MS),
  );
  t.throws(() => decodeSegmentHeader(hugeTime), formatError, 'createdAtMs beyond 2^53 - 1');
});

t.test('newer headers are format_too_new', async (t) => {
  const tooNew = { code: 'format_too_new' };
  const version2 = tampered((target) =>
    target.writeUInt16LE(2, OFFSET_SEGMENT_HEADER_FORMAT_VERSION),
  );
  t.throws(() => decodeSegmentHeader(version2), tooNew, 'version 2');
  t.throws(() => decodeSegmentHeader(version2.subarray(0, 12)), tooNew, 'version 2, short');
  for (const bit of [0n, 7n, 63n]) {
    const flagged = tampered((target) =>
      target.writeBigUInt64LE(1n << bit, OFFSET_SEGMENT_HEADER_FLAGS),
    );
    t.throws(() => decodeSegmentHeader(flagged), tooNew, `unknown flag bit ${bit}`);
  }
});

t.test('the encoder asserts on invalid fields', async (t) => {
  const assertion = { code: 'ERR_ASSERTION' };
  t.throws(() => encodeSegmentHeader({ ...fields, segmentId: -1 }), assertion, 'negative id');
  t.throws(() => encodeSegmentHeader({ ...fields, segmentId: 2 ** 53 }), assertion, 'unsafe id');
  t.throws(() => encodeSegmentHeader({ ...fields, createdAtMs: 0.5 }), assertion, 'fraction');
});

t.test('segment file names', async (t) => {
  t.equal(segmentFileName(0), '0000000000000000.seg');
  t.equal(segmentFileName(42), '0000000000000042.seg');
  t.equal(segmentFileName(Number.MAX_SAFE_INTEGER), '9007199254740991.seg');
  t.equal(parseSegmentFileName('0000000000000042.seg'), 42);
  t.equal(parseSegmentFileName('9007199254740991.seg'), Number.MAX_SAFE_INTEGER);
  const notNames = [
    '',
    '42.seg',
    '000000000000042.seg',
    '00000000000000042.seg',
    '0000000000000042.seg.tmp',
    '0000000000000042.SEG',
    '000000000000004a.seg',
    '-000000000000042.seg',
    ' 0000000000000042.seg',
    '9007199254740992.seg',
    '9999999999999999.seg',
    'FORMAT',
  ];
  for (const name of notNames) t.equal(parseSegmentFileName(name), undefined, `"${name}"`);
  t.throws(() => segmentFileName(-1), { code: 'ERR_ASSERTION' });
  t.throws(() => segmentFileName(1.5), { code: 'ERR_ASSERTION' });
});
