// Goal: checksum headers parse strictly, MultiHasher digests equal one-shot references over any
// split of the body (including SharedArrayBuffer views), and the CRC combine functions equal the
// CRC of the concatenation. Method: published check values, a pinned digest of golden vectors,
// and fast-check properties over random bodies and split points (seeds print on failure).
import t from 'tap';
import fc from 'fast-check';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { crc32, crc32c } from '@node-rs/crc32';
import { crc64 } from 'hash-wasm';
import {
  CHECKSUM_ALGS,
  CHECKSUM_DIGEST_BYTES,
  type ChecksumAlg,
  checksumHeaderName,
  combineChecksum,
  crc32Combine,
  crc32cCombine,
  crc64nvmeCombine,
  createMultiHasher,
  parseChecksumAlg,
  parseChecksumHeader,
  preloadChecksums,
} from '../../src/engine/checksums.js';

const CHECK_INPUT = Buffer.from('123456789', 'latin1');

async function crc64Reference(data: Uint8Array): Promise<bigint> {
  return BigInt('0x' + (await crc64(data, '9a6c9329ac4bc9b5')));
}

async function digestAll(parts: readonly Uint8Array[]): Promise<Record<ChecksumAlg, string>> {
  const hasher = await createMultiHasher(CHECKSUM_ALGS);
  for (const part of parts) hasher.update(part);
  return hasher.digest();
}

function splitAt(data: Uint8Array, cuts: readonly number[]): Uint8Array[] {
  const points = [...new Set(cuts.map((c) => c % (data.length + 1)))].sort((a, b) => a - b);
  const parts: Uint8Array[] = [];
  let from = 0;
  for (const point of [...points, data.length]) {
    parts.push(data.subarray(from, point));
    from = point;
  }
  return parts;
}

t.test('check values of "123456789"', async (t) => {
  const hasher = await createMultiHasher(CHECKSUM_ALGS);
  hasher.update(CHECK_INPUT);
  const bytes = hasher.digestBytes();
  t.equal(bytes.CRC32.toString('hex'), 'cbf43926');
  t.equal(bytes.CRC32C.toString('hex'), 'e3069283');
  t.equal(bytes.CRC64NVME.toString('hex'), 'ae8b14860a799888');
  t.equal(bytes.SHA1.toString('hex'), 'f7c3bc1d808e04732adf679965ccc34ca7ae3441');
  t.equal(
    bytes.SHA256.toString('hex'),
    '15e2b0d3c33891ebb0f1ef609ec419420c20e320ce94c65fbc8c3312448eb225',
  );
  for (const alg of CHECKSUM_ALGS) t.equal(bytes[alg].length, CHECKSUM_DIGEST_BYTES[alg], alg);
});

t.test('empty body digests as S3 reports them', async (t) => {
  t.same(await digestAll([]), {
    CRC32: 'AAAAAA==',
    CRC32C: 'AAAAAA==',
    CRC64NVME: 'AAAAAAAAAAA=',
    SHA1: '2jmj7l5rSw0yVb/vlWAYkK/YBwk=',
    SHA256: '47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=',
  });
});

t.test('golden vectors hash to one constant', async (t) => {
  // Any change to an algorithm, its byte order or its encoding changes this constant.
  const vectors = [0, 1, 3, 4, 31, 1000, 65_537].map((length) => {
    const bytes = Buffer.alloc(length);
    for (let i = 0; i < length; i++) bytes[i] = (i * 131 + 7) & 0xff;
    return bytes;
  });
  const all = createHash('sha256');
  for (const vector of vectors) {
    const digests = await digestAll([vector]);
    for (const alg of CHECKSUM_ALGS) all.update(`${alg}=${digests[alg]};`);
  }
  t.equal(all.digest('hex'), '6910e1a06b03cdb3fcea35ca900c8d5c81d38bc797d4ab98401da178d2518b81');
});

t.test('incremental digests equal one-shot references over any split', async (t) => {
  await fc.assert(
    fc.asyncProperty(
      fc.uint8Array({ maxLength: 5000 }),
      fc.array(fc.nat(), { maxLength: 8 }),
      async (data, cuts) => {
        const digests = await digestAll(splitAt(data, cuts));
        const buffer = Buffer.from(data);
        const crc64Bytes = Buffer.alloc(8);
        crc64Bytes.writeBigUInt64BE(await crc64Reference(data));
        const crcBytes = (value: number): string => {
          const bytes = Buffer.alloc(4);
          bytes.writeUInt32BE(value);
          return bytes.toString('base64');
        };
        assert.deepEqual(digests, {
          CRC32: crcBytes(crc32(buffer)),
          CRC32C: crcBytes(crc32c(buffer)),
          CRC64NVME: crc64Bytes.toString('base64'),
          SHA1: createHash('sha1').update(buffer).digest('base64'),
          SHA256: createHash('sha256').update(buffer).digest('base64'),
        });
      },
    ),
    { numRuns: 100 },
  );
  t.pass('100 random bodies and splits');
});

t.test('every backend accepts views on a SharedArrayBuffer', async (t) => {
  const shared = new SharedArrayBuffer(4096);
  const sharedBytes = new Uint8Array(shared);
  for (let i = 0; i < sharedBytes.length; i++) sharedBytes[i] = (i * 7) & 0xff;
  const sharedView = Buffer.from(shared, 100, 3000);
  const plainCopy = Buffer.from(sharedView);
  t.same(
    await digestAll([sharedView.subarray(0, 1000), new Uint8Array(shared, 1100, 2000)]),
    await digestAll([plainCopy]),
  );
});

t.test('digest keys are exactly the requested algorithms', async (t) => {
  const hasher = await createMultiHasher(['SHA256', 'CRC32C', 'CRC32C']);
  hasher.update(CHECK_INPUT);
  t.equal(hasher.length, 9);
  t.same(Object.keys(hasher.digest()).sort(), ['CRC32C', 'SHA256']);
  t.throws(() => hasher.update(CHECK_INPUT), { code: 'ERR_ASSERTION' }, 'update after digest');
  t.throws(() => hasher.digest(), { code: 'ERR_ASSERTION' }, 'digest twice');
  const none = await createMultiHasher([]);
  none.update(CHECK_INPUT);
  t.same(none.digest(), {});
});

t.test('pooled CRC-64 hashers start clean', async (t) => {
  // A disposed or digested hasher returns its wasm instance to the pool mid-state.
  const abandoned = await createMultiHasher(['CRC64NVME']);
  abandoned.update(Buffer.from('stale state'));
  abandoned.dispose();
  abandoned.dispose();
  const concurrent = await Promise.all([1, 2, 3].map(() => createMultiHasher(['CRC64NVME'])));
  concurrent.forEach((hasher, n) => {
    hasher.update(Buffer.from(`body ${n}`));
  });
  for (const [n, hasher] of concurrent.entries()) {
    const expected = await crc64Reference(Buffer.from(`body ${n}`));
    t.equal(hasher.digestBytes().CRC64NVME.readBigUInt64BE(0), expected, `body ${n}`);
  }
  await preloadChecksums(4);
  await preloadChecksums(2);
  const reused = await createMultiHasher(['CRC64NVME']);
  reused.update(CHECK_INPUT);
  t.equal(reused.digest().CRC64NVME, Buffer.from('ae8b14860a799888', 'hex').toString('base64'));
});

t.test('algorithm names parse case-insensitively', async (t) => {
  for (const alg of CHECKSUM_ALGS) {
    t.equal(parseChecksumAlg(alg), alg);
    t.equal(parseChecksumAlg(alg.toLowerCase()), alg);
  }
  t.equal(parseChecksumAlg('Crc64Nvme'), 'CRC64NVME');
  for (const name of ['', 'md5', 'crc64', 'sha-256', '__proto__', 'toString', ' crc32']) {
    t.equal(parseChecksumAlg(name), undefined, JSON.stringify(name));
  }
  t.equal(checksumHeaderName('CRC64NVME'), 'x-service-checksum-crc64nvme');
});

t.test('header values round-trip and malformed ones are refused', async (t) => {
  for (const alg of CHECKSUM_ALGS) {
    const digest = Buffer.alloc(CHECKSUM_DIGEST_BYTES[alg], 0xa5);
    t.same(parseChecksumHeader(alg, digest.toString('base64')), digest, alg);
  }
  const refused: [ChecksumAlg, string][] = [
    ['CRC32', ''],
    ['CRC32', 'AAAAAA='], // padding missing
    ['CRC32', 'AAAAAAA='], // 5 bytes' worth of characters in 4-byte form
    ['CRC32', 'AAAAAB=='], // stray bits after the last byte
    ['CRC32', 'AAAA AA='],
    ['CRC32', 'AAAAAA==\n'],
    ['CRC32', 'AAAAAAAA'], // six bytes
    ['CRC32C', '-_-_-w=='], // URL-safe alphabet
    ['CRC64NVME', 'AAAAAA=='], // a CRC32-sized value
    ['CRC64NVME', 'AAAAAAAAAAAA'],
    ['SHA1', '2jmj7l5rSw0yVb/vlWAYkK/YBwk'],
    ['SHA256', '47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU'],
    ['SHA256', '47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuF!='],
    ['SHA256', '2jmj7l5rSw0yVb/vlWAYkK/YBwk='],
  ];
  for (const [alg, value] of refused) {
    t.throws(() => parseChecksumHeader(alg, value), { code: 'bad_request' }, `${alg} ${value}`);
  }
  const error = t.throws(() => parseChecksumHeader('CRC32', 'AA=='));
  t.match(String(error), /x-service-checksum-crc32/, 'message names the header');
});

t.test('CRC combine equals the CRC of the concatenation', async (t) => {
  await fc.assert(
    fc.asyncProperty(fc.uint8Array({ maxLength: 3000 }), fc.nat(), async (data, cut) => {
      const split = cut % (data.length + 1);
      const [a, b] = [Buffer.from(data.subarray(0, split)), Buffer.from(data.subarray(split))];
      const whole = Buffer.from(data);
      assert.equal(crc32Combine(crc32(a), crc32(b), b.length), crc32(whole));
      assert.equal(crc32cCombine(crc32c(a), crc32c(b), b.length), crc32c(whole));
      const crc64Whole = await crc64Reference(whole);
      const crc64A = await crc64Reference(a);
      assert.equal(crc64nvmeCombine(crc64A, await crc64Reference(b), b.length), crc64Whole);
    }),
    { numRuns: 200 },
  );
  t.pass('200 random splits');
});

t.test('CRC combine is associative for lengths up to 2^53', async (t) => {
  // Joining (A, B) then C must equal joining A with (B, C): this exercises every power of
  // x in the tables, far beyond lengths that could be hashed in a test.
  const length = fc.oneof(fc.nat(4096), fc.maxSafeNat());
  const u32 = fc.nat({ max: 0xffffffff });
  fc.assert(
    fc.property(u32, u32, u32, length, length, (a, b, c, lengthB, lengthC) => {
      fc.pre(lengthB + lengthC <= Number.MAX_SAFE_INTEGER);
      for (const combine of [crc32Combine, crc32cCombine]) {
        const left = combine(combine(a, b, lengthB), c, lengthC);
        assert.equal(left, combine(a, combine(b, c, lengthC), lengthB + lengthC));
      }
    }),
    { numRuns: 300 },
  );
  const u64 = fc.bigInt({ min: 0n, max: (1n << 64n) - 1n });
  fc.assert(
    fc.property(u64, u64, u64, length, length, (a, b, c, lengthB, lengthC) => {
      fc.pre(lengthB + lengthC <= Number.MAX_SAFE_INTEGER);
      const left = crc64nvmeCombine(crc64nvmeCombine(a, b, lengthB), c, lengthC);
      assert.equal(left, crc64nvmeCombine(a, crc64nvmeCombine(b, c, lengthC), lengthB + lengthC));
    }),
    { numRuns: 300 },
  );
  t.pass('300 random triples per width');
});

t.test('CRC combine edge cases', async (t) => {
  t.equal(crc32Combine(0xcbf43926, 0, 0), 0xcbf43926, 'empty B leaves A');
  t.equal(crc32cCombine(0, 0xe3069283, 9), 0xe3069283, 'empty A');
  t.equal(crc64nvmeCombine(0xae8b14860a799888n, 0n, 0), 0xae8b14860a799888n);
  const zeros = Buffer.alloc(1 << 20);
  const joined = crc32cCombine(crc32c(CHECK_INPUT), crc32c(zeros), zeros.length);
  t.equal(joined, crc32c(Buffer.concat([CHECK_INPUT, zeros])), '1 MiB of zeros');
  t.throws(() => crc32Combine(-1, 0, 1), { code: 'ERR_ASSERTION' });
  t.throws(() => crc32Combine(0, 0, -1), { code: 'ERR_ASSERTION' });
  t.throws(() => crc32Combine(0, 0, 1.5), { code: 'ERR_ASSERTION' });
  t.throws(() => crc64nvmeCombine(1n << 64n, 0n, 1), { code: 'ERR_ASSERTION' });
});

t.test('combineChecksum joins part digests into the whole-object digest', async (t) => {
  const body = Buffer.alloc(300_000);
  for (let i = 0; i < body.length; i++) body[i] = (i * 2654435761) >>> 24;
  const parts = [0, 100_000, 100_001].map((from, n, starts) => body.subarray(from, starts[n + 1]));
  const algs = ['CRC32', 'CRC32C', 'CRC64NVME'] as const;
  const whole = await createMultiHasher(algs);
  whole.update(body);
  const expected = whole.digestBytes();
  for (const alg of algs) {
    let joined: Buffer | undefined;
    for (const part of parts) {
      const hasher = await createMultiHasher([alg]);
      hasher.update(part);
      const digest = hasher.digestBytes()[alg];
      joined =
        joined === undefined
          ? digest
          : combineChecksum({ alg, digestA: joined, digestB: digest, lengthB: part.length });
    }
    t.same(joined, expected[alg], alg);
  }
});
