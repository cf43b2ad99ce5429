// Goal: the seal footer is a well-formed kind 2 record with the documented payload, and its
// decoder rejects every footer that is not one, or whose fields cannot be true.
// Method: encode a known footer and check its bytes; build footers whose payload breaks one
// rule (through encodeRecord, so the frame itself is valid) and check each is a format error;
// check the encoder's assertions.

import { crc32c } from '@node-rs/crc32';
import t from 'tap';
import {
  CIPHER_NONE,
  COMPRESSION_NONE,
  RECORD_HEADER_SIZE,
  RECORD_KIND_CHUNK,
  RECORD_KIND_SEAL,
  decodeRecordHeader,
  encodeRecord,
} from '../../src/format/record-frame.js';
import {
  OFFSET_SEAL_DATA_END,
  OFFSET_SEAL_RECORD_COUNT,
  OFFSET_SEAL_RESERVED24,
  OFFSET_SEAL_SEALED_AT_MS,
  SEAL_PAYLOAD_SIZE,
  SEAL_RECORD_SIZE,
  decodeSealFooter,
  decodeSealPayload,
  encodeSealFooter,
} from '../../src/format/seal-footer.js';

const footer = { recordCount: 3, dataEnd: 481, sealedAtMs: 1767225660000 };

/** A seal record around any 32-byte payload. */
function sealRecord(payload: Buffer): Buffer {
  return encodeRecord(
    {
      kind: RECORD_KIND_SEAL,
      compression: COMPRESSION_NONE,
      cipher: CIPHER_NONE,
      tenantNum: 0,
      plainLength: SEAL_PAYLOAD_SIZE,
      chunkId: Buffer.alloc(32),
      nonce: Buffer.alloc(12),
    },
    payload,
  );
}

function payloadWith(values: { recordCount: bigint; dataEnd: bigint; sealedAtMs: bigint }) {
  const payload = Buffer.alloc(SEAL_PAYLOAD_SIZE);
  payload.writeBigUInt64LE(values.recordCount, OFFSET_SEAL_RECORD_COUNT);
  payload.writeBigUInt64LE(values.dataEnd, OFFSET_SEAL_DATA_END);
  payload.writeBigUInt64LE(values.sealedAtMs, OFFSET_SEAL_SEALED_AT_MS);
  return payload;
}

t.test('round trip and bytes', async (t) => {
  const encoded = encodeSealFooter(footer);
  t.equal(encoded.length, SEAL_RECORD_SIZE);
  t.equal(SEAL_RECORD_SIZE, 112);
  t.match(decodeRecordHeader(encoded, 0), {
    kind: 2,
    compression: 0,
    cipher: 0,
    tenantNum: 0,
    plainLength: 32,
    payloadLength: 32,
    recordLength: 112,
  });
  const payload = encoded.subarray(RECORD_HEADER_SIZE);
  t.equal(payload.readBigUInt64LE(OFFSET_SEAL_RECORD_COUNT), 3n);
  t.equal(payload.readBigUInt64LE(OFFSET_SEAL_DATA_END), 481n);
  t.equal(payload.readBigUInt64LE(OFFSET_SEAL_SEALED_AT_MS), 1767225660000n);
  t.equal(payload.readBigUInt64LE(OFFSET_SEAL_RESERVED24), 0n);
  t.same(decodeSealFooter(encoded, 0), footer);
  const atOffset = Buffer.concat([Buffer.alloc(5), encoded]);
  t.same(decodeSealFooter(atOffset, 5), footer);
  t.same(decodeSealPayload(decodeRecordHeader(encoded, 0), payload), footer);
  const empty = { recordCount: 0, dataEnd: 64, sealedAtMs: 0 };
  t.same(decodeSealFooter(encodeSealFooter(empty), 0), empty, 'an empty segment');
});

t.test('readers ignore the reserved field', async (t) => {
  const payload = payloadWith({ recordCount: 3n, dataEnd: 481n, sealedAtMs: 5n });
  payload.writeBigUInt64LE(2n ** 64n - 1n, OFFSET_SEAL_RESERVED24);
  const expected = { recordCount: 3, dataEnd: 481, sealedAtMs: 5 };
  t.same(decodeSealFooter(sealRecord(payload), 0), expected);
});

t.test('footers that cannot be true are format errors', async (t) => {
  const formatError = { code: 'format_error' };
  const cases: Array<[string, { recordCount: bigint; dataEnd: bigint; sealedAtMs: bigint }]> = [
    ['dataEnd inside the segment header', { recordCount: 0n, dataEnd: 63n, sealedAtMs: 0n }],
    ['too many records for dataEnd', { recordCount: 2n, dataEnd: 223n, sealedAtMs: 0n }],
    ['recordCount beyond 2^53 - 1', { recordCount: 2n ** 53n, dataEnd: 64n, sealedAtMs: 0n }],
    ['sealedAtMs beyond 2^53 - 1', { recordCount: 0n, dataEnd: 64n, sealedAtMs: 2n ** 63n }],
  ];
  for (const [name, values] of cases) {
    t.throws(() => decodeSealFooter(sealRecord(payloadWith(values)), 0), formatError, name);
  }
  const tight = sealRecord(payloadWith({ recordCount: 2n, dataEnd: 224n, sealedAtMs: 0n }));
  t.same(decodeSealFooter(tight, 0), { recordCount: 2, dataEnd: 224, sealedAtMs: 0 }, 'tight fit');

  const chunk = encodeRecord(
    {
      kind: RECORD_KIND_CHUNK,
      compression: COMPRESSION_NONE,
      cipher: CIPHER_NONE,
      tenantNum: 1,
      plainLength: 32,
      chunkId: Buffer.alloc(32, 1),
      nonce: Buffer.alloc(12),
    },
    Buffer.alloc(32),
  );
  t.throws(() => decodeSealFooter(chunk, 0), formatError, 'a chunk record');
  t.throws(() => decodeSealPayload(decodeRecordHeader(chunk, 0), chunk.subarray(80)), formatError);
  const good = encodeSealFooter(footer);
  t.throws(() => decodeSealFooter(good.subarray(0, 111), 0), formatError, 'truncated payload');
  t.throws(() => decodeSealFooter(good.subarray(0, 79), 0), formatError, 'truncated header');
  const badPayload = Buffer.from(good);
  badPayload.writeUInt8(badPayload.readUInt8(100) ^ 1, 100);
  t.throws(() => decodeSealFooter(badPayload, 0), formatError, 'payload checksum');
  t.not(crc32c(badPayload.subarray(80)), crc32c(good.subarray(80)));
});

t.test('the encoder asserts on impossible footers', async (t) => {
  const assertion = { code: 'ERR_ASSERTION' };
  t.throws(() => encodeSealFooter({ ...footer, dataEnd: 10 }), assertion, 'dataEnd');
  t.throws(() => encodeSealFooter({ ...footer, recordCount: 6 }), assertion, 'recordCount');
  t.throws(() => encodeSealFooter({ ...footer, sealedAtMs: -1 }), assertion, 'sealedAtMs');
  t.throws(() => encodeSealFooter({ ...footer, recordCount: 0.5 }), assertion, 'fraction');
});
