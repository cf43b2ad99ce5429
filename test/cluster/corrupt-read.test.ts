// Goal: a GET on a node whose own copy of a chunk fails its checksum answers the right bytes,
// read from another replica, and leaves that node's copy repaired (docs/cluster.md §8a,
// "Corrupt replicas"): a scrub on the node then finds nothing corrupt, and later reads are local.
// Both read paths are covered: a small object read on the listener's thread (one chunk of at
// most 64 KiB) and a larger one read by the worker pool.
// Method: the cluster kit, three nodes on real etcd (replication factor 3). Two objects written
// through n1's S3 API and read once on n2 (so n2's segment holds the small one, then the large
// one, the only data n2 wrote); then one byte inverted in each of the two records in n2's
// segment file, and both objects read through n2's S3 API. Skips, with the reason, where etcd
// cannot be had.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { open, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import {
  CreateBucketCommand,
  GetObjectCommand,
  HeadBucketCommand,
  PutObjectCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { ClusterKit, clusterEnvironment, waitFor, type KitNode } from './kit.js';
import { makeKey } from './data-client.js';
import { s3ClientFor } from '../helpers/s3-sdk.js';

const env = await clusterEnvironment();
const SMALL = 20_000;
const LARGE = 300_000;
/** Past the segment header (64 bytes) and the small record's header (80): its payload. */
const IN_SMALL = 5_000;

/** Inverts the bytes at `offsets` of the largest segment file of `node`. */
async function flipBytes(node: KitNode, offsets: (size: number) => number[]): Promise<void> {
  const dir = join(node.dataDir, 'segments');
  const files = await Promise.all(
    (await readdir(dir))
      .filter((name) => name.endsWith('.seg'))
      .map(async (name) => ({ path: join(dir, name), size: (await stat(join(dir, name))).size })),
  );
  const largest = files.sort((a, b) => b.size - a.size)[0];
  if (largest === undefined || largest.size < SMALL + LARGE) throw new Error(`no data in ${dir}`);
  const file = await open(largest.path, 'r+');
  try {
    for (const at of offsets(largest.size)) {
      const byte = Buffer.alloc(1);
      await file.read(byte, 0, 1, at);
      byte[0] = (byte[0] as number) ^ 0xff;
      await file.write(byte, 0, 1, at);
    }
    await file.sync();
  } finally {
    await file.close();
  }
}

async function bytesOf(s3: S3Client, key: string): Promise<Buffer> {
  const got = await s3.send(new GetObjectCommand({ Bucket: 'data', Key: key }));
  return Buffer.from((await got.Body?.transformToByteArray()) ?? []);
}

t.test('a corrupt copy is read from a replica', { skip: env.skip ?? false }, async (t) => {
  const kit = await ClusterKit.create(3, (fn) => t.teardown(fn));
  const [n1, n2] = kit.nodes as [KitNode, KitNode, KitNode];
  await kit.formCluster(3);
  const [keyId, secret] = await makeKey(n1);
  const [s1, s2] = [n1, n2].map((node) =>
    s3ClientFor(new URL(node.publicUrl).origin, { accessKeyId: keyId, secretKey: secret }),
  ) as [S3Client, S3Client];
  await waitFor('the key on n1', () =>
    s1.send(new CreateBucketCommand({ Bucket: 'data' })).then(() => true),
  );
  await waitFor('bucket data on n2', () =>
    s2.send(new HeadBucketCommand({ Bucket: 'data' })).then(() => true),
  );
  const small = randomBytes(SMALL);
  const large = randomBytes(LARGE);
  for (const [key, body] of [
    ['small', small],
    ['large', large],
  ] as const) {
    await s1.send(new PutObjectCommand({ Bucket: 'data', Key: key, Body: body }));
    t.ok((await bytesOf(s2, key)).equals(body), `n2 holds ${key}`);
  }

  await flipBytes(n2, (size) => [IN_SMALL, Math.floor((SMALL + size) / 2)]);
  t.ok((await bytesOf(s2, 'small')).equals(small), 'the small object reads right on n2');
  t.ok((await bytesOf(s2, 'large')).equals(large), 'the large object reads right on n2');

  // The reads repaired n2's own copies: its scrub finds nothing corrupt, and reads stay right.
  const answer = await n2.rebalance({ tenantId: 'acme', reason: 'test', confirmTenant: 'acme' });
  t.equal(answer.status, 200, JSON.stringify(answer.json));
  t.match(answer.json, { counts: { corruptChunks: 0 } }, 'nothing corrupt left on n2');
  t.ok((await bytesOf(s2, 'small')).equals(small), 'the small object reads right again');
  t.ok((await bytesOf(s2, 'large')).equals(large), 'the large object reads right again');
});
