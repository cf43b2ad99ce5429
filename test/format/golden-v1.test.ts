// Goal: current code reads the format version 1 golden files (test/golden/v1/, written once by
// test/golden/make-v1.ts and never regenerated) field for field; the current writers still
// produce those exact bytes; and the CRC32C algorithm and the bytes it covers never change.
// Method: decode the committed files and compare every field with literals copied from the
// layout at the time v1 was defined; decrypt and decompress the chunk payloads with the fixed
// golden test key to pin the AAD and codec order; re-encode every structure from its decoded
// fields and compare bytes; fold a fixed set of CRC32C vectors into one constant.

import { createDecipheriv } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { crc32c } from '@node-rs/crc32';
import { uncompressSync } from 'lz4-napi';
import t from 'tap';
import { decodeMarker, encodeMarker } from '../../src/format/marker.js';
import {
  decodeRecordHeader,
  encodeRecord,
  recordAad,
  scanRecords,
  verifyPayload,
  type RecordHeader,
} from '../../src/format/record-frame.js';
import { decodeSealFooter, encodeSealFooter } from '../../src/format/seal-footer.js';
import { decodeSegmentHeader, encodeSegmentHeader } from '../../src/format/segment-header.js';
import { goldenDir } from '../golden/golden-dir.js';

const directory = goldenDir(1);
const markerBytes = readFileSync(join(directory, 'FORMAT'));
const segmentBytes = readFileSync(join(directory, 'segment.seg'));
const goldenKey = Buffer.from('lightwell-golden-v1-not-a-secret', 'latin1');
/** CRC32C of the CRC32C of every vector below; it changes only if the algorithm or v1 does. */
const STABILITY_CONSTANT = 0x0dcbebb3;

function hex(first: number, length: number): string {
  return Buffer.from([...Array(length).keys()].map((i) => (first + i) & 0xff)).toString('hex');
}

function payloadOf(header: RecordHeader, offset: number): Buffer {
  return segmentBytes.subarray(offset + 80, offset + header.recordLength);
}

function decrypt(source: Buffer, offset: number, header: RecordHeader): Buffer {
  const payload = payloadOf(header, offset);
  const decipher = createDecipheriv('aes-256-gcm', goldenKey, header.nonce);
  decipher.setAAD(recordAad(source, offset));
  decipher.setAuthTag(payload.subarray(payload.length - 16));
  const ciphertext = payload.subarray(0, payload.length - 16);
  return Buffer.concat([decipher.update(ciphertext), decipher.final()]);
}

t.test('v1 FORMAT marker', async (t) => {
  t.equal(markerBytes.length, 64);
  t.same(decodeMarker(markerBytes), {
    formatVersion: 1,
    flags: 0,
    createdBy: 'lightwell-0.1.0',
    createdAtMs: 1767225600000,
  });
  t.equal(markerBytes.readUInt32LE(60), 0x7e349056, 'checksum');
});

t.test('v1 segment header', async (t) => {
  t.equal(segmentBytes.length, 593);
  t.same(decodeSegmentHeader(segmentBytes), {
    formatVersion: 1,
    headerSize: 64,
    flags: 0,
    segmentId: 42,
    createdAtMs: 1767225600123,
  });
  t.equal(segmentBytes.readUInt32LE(60), 0x5167591b, 'headerChecksum');
});

t.test('v1 segment scan', async (t) => {
  const scan = scanRecords(segmentBytes, 64);
  t.match(scan, { validEnd: 593, torn: false, problem: undefined });
  t.same(
    scan.records.map((record) => record.offset),
    [64, 169, 301, 481],
  );
  for (const record of scan.records) {
    verifyPayload(record.header, payloadOf(record.header, record.offset));
  }
});

t.test('v1 record A: no compression, no cipher', async (t) => {
  const a = decodeRecordHeader(segmentBytes, 64);
  t.match(a, {
    kind: 1,
    compression: 0,
    cipher: 0,
    tenantNum: 7,
    plainLength: 25,
    payloadLength: 25,
    recordLength: 105,
    payloadChecksum: 0x27d9dd55,
    headerChecksum: 0x1997875b,
  });
  t.equal(a.chunkId.toString('hex'), hex(0x00, 32));
  t.equal(a.nonce.toString('hex'), '00'.repeat(12));
  t.equal(payloadOf(a, 64).toString('latin1'), 'Lightwell golden chunk A\n');
});

t.test('v1 record B: AES-256-GCM', async (t) => {
  const b = decodeRecordHeader(segmentBytes, 169);
  t.match(b, {
    kind: 1,
    compression: 0,
    cipher: 1,
    tenantNum: 7,
    plainLength: 36,
    payloadLength: 52,
    recordLength: 132,
    payloadChecksum: 0x63066b25,
    headerChecksum: 0x8fda072c,
  });
  t.equal(b.chunkId.toString('hex'), hex(0x20, 32));
  t.equal(b.nonce.toString('hex'), hex(0xa0, 12));
  const plainB = decrypt(segmentBytes, 169, b);
  t.equal(plainB.toString('latin1'), 'Lightwell golden chunk B, encrypted\n');
  t.equal(plainB.length, b.plainLength);
});

t.test('v1 record C: lz4, then AES-256-GCM', async (t) => {
  const c = decodeRecordHeader(segmentBytes, 301);
  t.match(c, {
    kind: 1,
    compression: 1,
    cipher: 1,
    tenantNum: 0xfffffffe,
    plainLength: 4096,
    payloadLength: 100,
    recordLength: 180,
    payloadChecksum: 0x94bcb2ab,
    headerChecksum: 0x7ec0a89a,
  });
  t.equal(c.chunkId.toString('hex'), hex(0xc0, 32));
  t.equal(c.nonce.toString('hex'), hex(0xb0, 12));
  const compressed = decrypt(segmentBytes, 301, c);
  t.equal(compressed.readUInt32LE(0), 4096, 'lz4 size prefix');
  const plainC = uncompressSync(compressed);
  const expectedC = Buffer.alloc(4096);
  expectedC.fill('Lightwell golden chunk C, compressed then encrypted.\n', 'latin1');
  t.ok(plainC.equals(expectedC), 'chunk C decrypts, then decompresses to its plain bytes');
});

t.test('v1 seal footer', async (t) => {
  t.match(decodeRecordHeader(segmentBytes, 481), {
    kind: 2,
    compression: 0,
    cipher: 0,
    tenantNum: 0,
    plainLength: 32,
    payloadLength: 32,
    recordLength: 112,
    payloadChecksum: 0x3cf1381f,
    headerChecksum: 0xcd2baddf,
  });
  t.same(decodeSealFooter(segmentBytes, 481), {
    recordCount: 3,
    dataEnd: 481,
    sealedAtMs: 1767225660000,
  });
});

t.test('an AAD that differs by one byte fails authentication', async (t) => {
  const b = decodeRecordHeader(segmentBytes, 169);
  const tampered = Buffer.from(segmentBytes);
  tampered.writeUInt32LE(8, 169 + 12);
  t.throws(() => decrypt(tampered, 169, b), /authenticate/, 'tenantNum is authenticated');
});

t.test('current writers reproduce the v1 bytes', async (t) => {
  const marker = decodeMarker(markerBytes);
  t.ok(encodeMarker(marker).equals(markerBytes), 'FORMAT');
  const header = decodeSegmentHeader(segmentBytes);
  t.ok(encodeSegmentHeader(header).equals(segmentBytes.subarray(0, 64)), 'segment header');
  for (const { offset, header: record } of scanRecords(segmentBytes, 64).records) {
    const bytes = segmentBytes.subarray(offset, offset + record.recordLength);
    if (record.kind === 2) {
      const footer = decodeSealFooter(segmentBytes, offset);
      t.ok(encodeSealFooter(footer).equals(bytes), `seal footer at ${offset}`);
      continue;
    }
    const rebuilt = encodeRecord(record, payloadOf(record, offset));
    t.ok(rebuilt.equals(bytes), `record at ${offset}`);
  }
});

t.test('checksum stability', async (t) => {
  // RFC 3720 appendix B.4 vectors and the CRC-32C check value pin the algorithm itself.
  t.equal(crc32c(Buffer.from('123456789', 'latin1')), 0xe3069283);
  t.equal(crc32c(Buffer.alloc(32, 0x00)), 0x8a9136aa);
  t.equal(crc32c(Buffer.alloc(32, 0xff)), 0x62a8ab43);
  t.equal(crc32c(Buffer.from(hex(0, 32), 'hex')), 0x46dd794e);
  t.equal(crc32c(Buffer.from(hex(0, 32), 'hex').reverse()), 0x113fdb5c);
  // Every covered range of the golden files, folded into one constant.
  const vectors: Buffer[] = [
    Buffer.alloc(0),
    Buffer.from('123456789', 'latin1'),
    markerBytes.subarray(0, 60),
    segmentBytes.subarray(0, 60),
    markerBytes,
    segmentBytes,
  ];
  for (const { offset, header } of scanRecords(segmentBytes, 64).records) {
    vectors.push(segmentBytes.subarray(offset, offset + 76));
    vectors.push(payloadOf(header, offset));
  }
  const folded = Buffer.alloc(vectors.length * 4);
  vectors.forEach((vector, index) => folded.writeUInt32LE(crc32c(vector), index * 4));
  t.equal(vectors.length, 14);
  t.equal(crc32c(folded), STABILITY_CONSTANT, 'one constant for all vectors');
});
