// Goal: a chunk encoded into a record decodes to the same bytes, compressed or not, from one
// slice or several; and nothing wrong is ever returned: a flipped payload byte (the read path
// relies on the GCM tag, and then tells damage, `reason: checksum`, from another key,
// `reason: authentication`, by the payload's CRC), a flipped header byte, a record cut short, a
// record read under another tenant's key or against another index entry all fail.
// Method: encodeChunk/decodeChunk with random keys on random (incompressible) and repeated
// (compressible) data, also through a reused payload buffer and decoded into split targets (in
// place, or copied for compressed records), then each corruption applied to a copy of the
// record, for every decoder.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import {
  chunkIdOf,
  decodeChunk,
  decodeChunkInto,
  encodeChunk,
  encodeOutputBytes,
  type TenantKeys,
} from '../../src/engine/chunk-codec.js';
import { libc } from '../../src/util/libc.js';
import { RECORD_HEADER_SIZE } from '../../src/format/record-frame.js';

function plainLengthOf(slices: readonly Uint8Array[]): number {
  return slices.reduce((sum, slice) => sum + slice.length, 0);
}

function keysOf(tenantNum: number): TenantKeys {
  return { tenantNum, dataKey: randomBytes(32), dedupKey: randomBytes(32) };
}

function encode(keys: TenantKeys, slices: Uint8Array[], output?: Buffer) {
  const plainLength = slices.reduce((sum, slice) => sum + slice.length, 0);
  const chunkId = chunkIdOf(keys.dedupKey, slices);
  const encoded = encodeChunk(keys, chunkId, slices, plainLength, output);
  const record = Buffer.concat([encoded.header, ...encoded.payload]);
  const expected = { chunkId, payloadChecksum: encoded.payloadChecksum, plainLength };
  return { record, expected, compressed: encoded.compressed };
}

const random = randomBytes(200_000);
const text = Buffer.from('lightwell object store, '.repeat(8000));
/** A payload buffer reused by the cases, as a store thread reuses its own. */
const output = Buffer.alloc(encodeOutputBytes(random.length + text.length));

type Decode = (keys: TenantKeys, record: Buffer, expected: Expected) => Buffer;
type Expected = Parameters<typeof decodeChunk>[2];

/** decodeChunkInto into two targets: in place, or decoded and copied (compressed records). */
const decodeInto: Decode = (keys, record, expected) => {
  const plain = Buffer.alloc(expected.plainLength, 0x5a);
  decodeChunkInto(keys, record, expected, [plain.subarray(0, 1000), plain.subarray(1000)]);
  return plain;
};

const decoders: Array<[string, Decode]> = [
  ['decodeChunk', (keys, record, expected) => decodeChunk(keys, record, expected)],
  [
    'decodeChunk, node:crypto',
    (keys, record, expected) => decodeChunk(keys, record, expected, null),
  ],
  ['decodeChunkInto', decodeInto],
];

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
    t.ok(decodeInto(keys, record, expected).equals(Buffer.concat(slices)), `${name}: into targets`);
    t.ok(
      decodeChunk(keys, record, expected, null).equals(Buffer.concat(slices)),
      `${name}: through node:crypto`,
    );
    // One target, through OpenSSL reached directly and through node:crypto: the in-place
    // decryption, the native LZ4 decoder writing there, or a decode and a copy.
    for (const aesGcm of [libc()?.aesGcm ?? null, null]) {
      const path = aesGcm ? 'OpenSSL' : 'node:crypto';
      const target = Buffer.alloc(plainLengthOf(slices), 0x5a);
      const inPlace = decodeChunkInto(keys, record, expected, [target], aesGcm);
      t.equal(inPlace, !compressed && aesGcm !== null, `${name}, ${path}: decrypted in place`);
      t.ok(target.equals(Buffer.concat(slices)), `${name}, ${path}: one target, same bytes`);
    }
    // The same through a reused payload buffer, dirty from the previous case.
    const plainLength = plainLengthOf(slices);
    output.fill(0xa5, 0, encodeOutputBytes(plainLength));
    const viaOutput = encode(keys, slices, output.subarray(0, encodeOutputBytes(plainLength)));
    t.ok(
      decodeChunk(keys, viaOutput.record, viaOutput.expected).equals(Buffer.concat(slices)),
      `${name}: same bytes through a payload buffer`,
    );
  }
});

t.test('an encoded chunk keeps its bytes while later chunks are encoded', async (t) => {
  // The gathered slices and the LZ4 form live in buffers the thread reuses: an encoded chunk
  // whose payload viewed them would change under the next encode.
  const keys = keysOf(5);
  const first = sharedSlices(text, 777);
  const plainLength = plainLengthOf(first);
  const withoutOutput = encodeChunk(keys, chunkIdOf(keys.dedupKey, first), first, plainLength);
  const ownOutput = Buffer.alloc(encodeOutputBytes(plainLength));
  const withOutput = encodeChunk(
    keys,
    chunkIdOf(keys.dedupKey, first),
    first,
    plainLength,
    ownOutput,
  );
  t.ok(withoutOutput.compressed && withOutput.compressed, 'the first chunk is compressed');
  const other = Buffer.from('another text, other words; '.repeat(9000));
  for (const slices of [sharedSlices(other, 5000), sharedSlices(other.subarray(0, 3000), 100)]) {
    encodeChunk(keys, chunkIdOf(keys.dedupKey, slices), slices, plainLengthOf(slices));
  }
  for (const [name, encoded] of [
    ['node:crypto', withoutOutput],
    ['payload buffer', withOutput],
  ] as const) {
    const record = Buffer.concat([encoded.header, ...encoded.payload]);
    const expected = {
      chunkId: chunkIdOf(keys.dedupKey, first),
      payloadChecksum: encoded.payloadChecksum,
      plainLength,
    };
    t.ok(decodeChunk(keys, record, expected).equals(text), `${name}: the first chunk's bytes`);
  }
});

t.test('the payload is written into the output buffer where OpenSSL is reachable', async (t) => {
  const keys = keysOf(3);
  const chunkId = chunkIdOf(keys.dedupKey, [random]);
  const encoded = encodeChunk(keys, chunkId, [random], random.length, output);
  const [payload] = encoded.payload;
  if (libc()?.aesGcm) {
    t.equal(encoded.payload.length, 1, 'ciphertext and tag in one part');
    t.equal(payload?.buffer, output.buffer, 'the part views the output buffer');
    t.equal(payload?.byteOffset, output.byteOffset);
  } else {
    t.not(payload?.buffer, output.buffer, 'node:crypto allocates its own');
  }
  t.equal(encoded.payloadLength, random.length + 16);
});

t.test('corrupt or foreign records never decode', async (t) => {
  const keys = keysOf(7);
  for (const [name, decode] of decoders) {
    t.comment(name);
    for (const data of [random, text]) {
      const { record, expected } = encode(keys, [data]);
      const payloadLength = record.length - RECORD_HEADER_SIZE;
      for (const at of [
        0,
        1,
        Math.floor(payloadLength / 2),
        payloadLength - 17,
        payloadLength - 1,
      ]) {
        const flipped = Buffer.from(record);
        flipByte(flipped, RECORD_HEADER_SIZE + at, 0x01);
        t.throws(
          () => decode(keys, flipped, expected),
          { code: 'corrupt_data', details: { reason: 'checksum' } },
          `payload byte ${at}: damaged bytes, told by the CRC`,
        );
      }
      for (const at of [0, 20, RECORD_HEADER_SIZE - 1]) {
        const flipped = Buffer.from(record);
        flipByte(flipped, at, 0x80);
        t.throws(() => decode(keys, flipped, expected), `header byte ${at}`);
      }
      t.throws(
        () => decode(keys, record.subarray(0, record.length - 1), expected),
        { code: 'corrupt_data' },
        'a record cut short',
      );
      t.throws(
        () => decode({ ...keys, dataKey: randomBytes(32) }, record, expected),
        { code: 'corrupt_data', details: { reason: 'authentication' } },
        'another data key: intact bytes that do not authenticate',
      );
      t.throws(
        () => decode(keysOf(8), record, expected),
        { code: 'corrupt_data' },
        'another tenant',
      );
      t.throws(
        () => decode(keys, record, { ...expected, chunkId: randomBytes(32) }),
        { code: 'corrupt_data' },
        'another index entry',
      );
    }
  }
});

t.test(
  'a record under a retired data key decodes with it; new records use the current key',
  async (t) => {
    const old = keysOf(9);
    for (const data of [random, text]) {
      const { record, expected } = encode(old, [data]);
      const rotated: TenantKeys = {
        ...old,
        dataKey: randomBytes(32),
        retiredDataKeys: [randomBytes(32), old.dataKey],
      };
      for (const [name, decode] of decoders) {
        t.same(decode(rotated, record, expected), data, `${name}: read with the retired key`);
        t.throws(
          () => decode({ ...rotated, retiredDataKeys: [randomBytes(32)] }, record, expected),
          { code: 'corrupt_data' },
          `${name}: no key opens it`,
        );
        const moved = { ...expected, chunkId: randomBytes(32) };
        t.throws(() => decode(rotated, record, moved), { code: 'corrupt_data' }, `${name}: index`);
      }
      const fresh = encode(rotated, [data]);
      t.same(
        decodeChunk({ ...rotated, retiredDataKeys: [] }, fresh.record, fresh.expected, null),
        data,
        'a new record opens with the current key alone',
      );
    }
  },
);

/** `bytes` copied into a SharedArrayBuffer at an odd offset and cut in two there. */
function sharedSlices(bytes: Buffer, cut: number): Uint8Array[] {
  const shared = new Uint8Array(new SharedArrayBuffer(bytes.length + 3), 3, bytes.length);
  shared.set(bytes);
  return [shared.subarray(0, cut), shared.subarray(cut)];
}

function flipByte(bytes: Buffer, at: number, bits: number): void {
  bytes.writeUInt8(bytes.readUInt8(at) ^ bits, at);
}
