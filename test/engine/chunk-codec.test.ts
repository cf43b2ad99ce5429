// Goal: a chunk encoded into a record decodes to the same bytes, compressed or not, from one
// slice or several; and nothing wrong is ever returned: a flipped payload byte (the read path
// relies on the GCM tag, not the CRC, for these), a flipped header byte, a record cut short, a
// record read under another tenant's key or against another index entry all fail.
// Method: encodeChunk/decodeChunk with random keys on random (incompressible) and repeated
// (compressible) data, then each corruption applied to a copy of the record.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import {
  chunkIdOf,
  decodeChunk,
  encodeChunk,
  type TenantKeys,
} from '../../src/engine/chunk-codec.js';
import { RECORD_HEADER_SIZE } from '../../src/format/record-frame.js';

function keysOf(tenantNum: number): TenantKeys {
  return { tenantNum, dataKey: randomBytes(32), dedupKey: randomBytes(32) };
}

function encode(keys: TenantKeys, slices: Uint8Array[]) {
  const plainLength = slices.reduce((sum, slice) => sum + slice.length, 0);
  const chunkId = chunkIdOf(keys.dedupKey, slices);
  const encoded = encodeChunk(keys, chunkId, slices, plainLength);
  const record = Buffer.concat([encoded.header, ...encoded.payload]);
  const expected = { chunkId, payloadChecksum: encoded.payloadChecksum, plainLength };
  return { record, expected, compressed: encoded.compressed };
}

const random = randomBytes(200_000);
const text = Buffer.from('lightwell object store, '.repeat(8000));

t.test('round trips', async (t) => {
  const keys = keysOf(7);
  const cases: Array<[string, Uint8Array[], boolean]> = [
    ['random, one slice', [random], false],
    [
      'random, three slices',
      [random.subarray(0, 5), random.subarray(5, 70_001), random.subarray(70_001)],
      false,
    ],
    ['text, one slice', [text], true],
    ['text, two slices of a shared buffer', sharedSlices(text, 1001), true],
    ['4 KiB random', [random.subarray(0, 4096)], false],
  ];
  for (const [name, slices, compressed] of cases) {
    const { record, expected, compressed: wasCompressed } = encode(keys, slices);
    t.equal(wasCompressed, compressed, `${name}: compressed ${String(compressed)}`);
    t.ok(decodeChunk(keys, record, expected).equals(Buffer.concat(slices)), `${name}: same bytes`);
  }
});

t.test('corrupt or foreign records never decode', async (t) => {
  const keys = keysOf(7);
  for (const data of [random, text]) {
    const { record, expected } = encode(keys, [data]);
    const payloadLength = record.length - RECORD_HEADER_SIZE;
    for (const at of [0, 1, Math.floor(payloadLength / 2), payloadLength - 17, payloadLength - 1]) {
      const flipped = Buffer.from(record);
      flipByte(flipped, RECORD_HEADER_SIZE + at, 0x01);
      t.throws(
        () => decodeChunk(keys, flipped, expected),
        { code: 'corrupt_data' },
        `payload byte ${at}`,
      );
    }
    for (const at of [0, 20, RECORD_HEADER_SIZE - 1]) {
      const flipped = Buffer.from(record);
      flipByte(flipped, at, 0x80);
      t.throws(() => decodeChunk(keys, flipped, expected), `header byte ${at}`);
    }
    t.throws(
      () => decodeChunk(keys, record.subarray(0, record.length - 1), expected),
      { code: 'corrupt_data' },
      'a record cut short',
    );
    t.throws(
      () => decodeChunk({ ...keys, dataKey: randomBytes(32) }, record, expected),
      { code: 'corrupt_data' },
      'another data key',
    );
    t.throws(
      () => decodeChunk(keysOf(8), record, expected),
      { code: 'corrupt_data' },
      'another tenant',
    );
    t.throws(
      () => decodeChunk(keys, record, { ...expected, chunkId: randomBytes(32) }),
      { code: 'corrupt_data' },
      'another index entry',
    );
  }
});

/** `bytes` copied into a SharedArrayBuffer at an odd offset and cut in two there. */
function sharedSlices(bytes: Buffer, cut: number): Uint8Array[] {
  const shared = new Uint8Array(new SharedArrayBuffer(bytes.length + 3), 3, bytes.length);
  shared.set(bytes);
  return [shared.subarray(0, cut), shared.subarray(cut)];
}

function flipByte(bytes: Buffer, at: number, bits: number): void {
  bytes.writeUInt8(bytes.readUInt8(at) ^ bits, at);
}
