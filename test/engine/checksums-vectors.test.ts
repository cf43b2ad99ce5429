// Goal: the digests S3 clients compare against are exactly AWS's: the flexible-checksum
// algorithms give the vectors AWS publishes in its own SDK tests (awslabs/aws-c-s3,
// tests/s3_checksums_*_tests.c: NIST inputs for CRC32C and SHA-256, "aaaaaaaaaa" and 32 zero
// bytes for CRC64NVME), in one update or fed byte-wise; MD5 (the S3 ETag) gives RFC 1321's
// vectors; the composite multipart checksum and the multipart ETag follow S3's definitions.
import t from 'tap';
import { createHash } from 'node:crypto';
import {
  CHECKSUM_ALGS,
  compositeChecksum,
  createMultiHasher,
  multipartMd5Etag,
  type DigestAlg,
} from '../../src/engine/checksums.js';

const ABC = Buffer.from('abc');
const NIST_448 = Buffer.from('abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq');
const NIST_896 = Buffer.from(
  'abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu',
);

const VECTORS: readonly { alg: DigestAlg; input: Buffer; hex: string }[] = [
  { alg: 'CRC32C', input: ABC, hex: '364b3fb7' },
  { alg: 'CRC32C', input: Buffer.alloc(0), hex: '00000000' },
  { alg: 'CRC32C', input: NIST_448, hex: '071325f5' },
  { alg: 'CRC32C', input: NIST_896, hex: '3f60a4b9' },
  { alg: 'CRC32C', input: Buffer.alloc(1_000_000, 'a'), hex: '436fe240' },
  { alg: 'CRC32', input: ABC, hex: '352441c2' },
  { alg: 'CRC64NVME', input: Buffer.from('aaaaaaaaaa'), hex: '0c1a80036d65c555' },
  { alg: 'CRC64NVME', input: Buffer.alloc(0), hex: '0000000000000000' },
  { alg: 'CRC64NVME', input: Buffer.alloc(32), hex: 'cf3473434d4ecf3b' },
  { alg: 'SHA1', input: ABC, hex: 'a9993e364706816aba3e25717850c26c9cd0d89d' },
  {
    alg: 'SHA256',
    input: ABC,
    hex: 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
  },
  {
    alg: 'SHA256',
    input: NIST_896,
    hex: 'cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1',
  },
  {
    alg: 'SHA256',
    input: Buffer.alloc(1_000_000, 'a'),
    hex: 'cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0',
  },
  { alg: 'MD5', input: Buffer.alloc(0), hex: 'd41d8cd98f00b204e9800998ecf8427e' },
  { alg: 'MD5', input: ABC, hex: '900150983cd24fb0d6963f7d28e17f72' },
];

t.test('AWS and NIST vectors, in one update and byte by byte', async (t) => {
  for (const { alg, input, hex } of VECTORS) {
    const whole = await createMultiHasher([alg]);
    whole.update(input);
    t.equal(whole.digestBytes()[alg].toString('hex'), hex, `${alg} of ${input.length} bytes`);
    if (input.length > 1000) continue;
    const split = await createMultiHasher([alg]);
    for (let at = 0; at < input.length; at++) split.update(input.subarray(at, at + 1));
    t.equal(split.digestBytes()[alg].toString('hex'), hex, `${alg} byte-wise`);
  }
});

t.test('MD5 rides along with the checksums without changing them', async (t) => {
  const alone = await createMultiHasher(CHECKSUM_ALGS);
  const withMd5 = await createMultiHasher([...CHECKSUM_ALGS, 'MD5'] as const);
  alone.update(NIST_896);
  withMd5.update(NIST_896);
  const expected = alone.digest();
  const got = withMd5.digest();
  for (const alg of CHECKSUM_ALGS) t.equal(got[alg], expected[alg], alg);
  t.equal(got.MD5, createHash('md5').update(NIST_896).digest('base64'));
});

t.test('composite checksum: the digest of the part digests, then the part count', async (t) => {
  const parts = [Buffer.alloc(5 * 1024 * 1024, 1), Buffer.from('tail')];
  for (const alg of CHECKSUM_ALGS) {
    const partDigests: Buffer[] = [];
    for (const part of parts) {
      const hasher = await createMultiHasher([alg]);
      hasher.update(part);
      partDigests.push(hasher.digestBytes()[alg]);
    }
    const joined = await createMultiHasher([alg]);
    joined.update(Buffer.concat(partDigests));
    t.equal(
      await compositeChecksum(alg, partDigests),
      `${joined.digest()[alg]}-2`,
      `${alg} composite of two parts`,
    );
  }
  // S3's documented SHA-256 case: sha256(sha256(part1) || sha256(part2)), base64, "-2".
  const sha = (bytes: Buffer): Buffer => createHash('sha256').update(bytes).digest();
  t.equal(
    await compositeChecksum('SHA256', parts.map(sha)),
    `${sha(Buffer.concat(parts.map(sha))).toString('base64')}-2`,
  );
});

t.test('multipart ETag: md5 of the part md5s, then the part count', async (t) => {
  const md5 = (text: string): Buffer => createHash('md5').update(text).digest();
  const parts = [md5('a'), md5('b'), md5('c')];
  t.equal(
    multipartMd5Etag(parts),
    `"${createHash('md5').update(Buffer.concat(parts)).digest('hex')}-3"`,
  );
  t.match(multipartMd5Etag([md5('x')]), /^"[0-9a-f]{32}-1"$/);
  t.throws(() => multipartMd5Etag([]));
  t.throws(() => multipartMd5Etag([Buffer.alloc(3)]));
});
