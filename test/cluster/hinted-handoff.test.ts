// Goal: a replica that misses writes after their majority answered gets them without a repair
// (docs/cluster.md §8a, "Hints"): the coordinator keeps each failed or timed-out send and sends it
// again, in order, until it lands.
// Method: the cluster kit, three nodes on real etcd (replication factor 3). n3's processes are
// frozen (SIGSTOP: it neither answers nor restarts, so its catch-up at start never runs); through
// n1 and n2, objects are written, one deleted, and a multipart upload created on n1, given a part
// on n2 and completed on n1, each acknowledged by n1 and n2. n3 is resumed (SIGCONT), and with no
// rebalance and no read on n3, n3's own index comes to hold every key at the sequence n1 holds
// (asked with the signed `heads` data message, which reads only the node's own copy); n1's and
// n2's figures count the hints delivered. Then every object reads back byte for byte from n3.
// Skips, with the reason, where etcd cannot be had.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import {
  CompleteMultipartUploadCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  PutObjectCommand,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { clusterEnvironment, waitFor, type KitNode } from './kit.js';
import { threeNodesWithS3 } from './data-client.js';
import { callData } from '../../src/cluster/data-transport.js';
import { clusterPaths, readClusterSecret } from '../../src/cluster/node-state.js';

const env = await clusterEnvironment();
const Bucket = 'data';
/** The writes made while n3 is frozen: 8 PUTs, a DELETE, an upload's create, part, completion. */
const WRITES = 12;

/** A figure of `node`'s `/metrics` (the engine's cluster figures). */
async function figure(node: KitNode, name: string): Promise<number> {
  const response = await fetch(`http://${node.host}:${node.ports.admin}/metrics`, {
    signal: AbortSignal.timeout(60_000),
  });
  const text = await response.text();
  const line = text.split('\n').find((entry) => entry.startsWith(`${name}{`));
  if (line === undefined) throw new Error(`${node.id} exposes no ${name}`);
  return Number(line.slice(line.lastIndexOf(' ') + 1));
}

t.test('missed writes reach the replica from hints', { skip: env.skip ?? false }, async (t) => {
  const cluster = await threeNodesWithS3((fn) => t.teardown(fn));
  const [n1, n2, n3] = cluster.nodes;
  const [s1, s2, s3] = cluster.s3;
  await waitFor('the key on n1', () =>
    s1.send(new CreateBucketCommand({ Bucket })).then(() => true),
  );
  for (const s of [s2, s3])
    await waitFor('the bucket on every node', () =>
      s.send(new HeadBucketCommand({ Bucket })).then(() => true),
    );
  const bodies = new Map<string, Buffer>();
  await s1.send(new PutObjectCommand({ Bucket, Key: 'doomed', Body: randomBytes(1000) }));

  const secret = await readClusterSecret(clusterPaths(n1.dataDir));
  const headsOn = async (node: KitNode, keys: string[]) =>
    (
      await callData({
        address: node.clusterAddress,
        name: 'heads',
        body: { tenantId: 'acme', bucket: Bucket, keys },
        secret,
        from: 'n1',
      })
    )['heads'] as Array<{ seq: number; deleted: boolean }>;
  await waitFor('n3 to hold the first object', async () =>
    (await headsOn(n3, ['doomed']))[0]?.seq ? true : undefined,
  );

  n3.signalGroup('SIGSTOP');
  t.teardown(() => n3.signalGroup('SIGCONT'));
  for (let index = 0; index < 8; index += 1) {
    const key = `k${index}`;
    const body = randomBytes(20_000 + index * 50_000);
    bodies.set(key, body);
    const s = index % 2 === 0 ? s1 : s2;
    await s.send(new PutObjectCommand({ Bucket, Key: key, Body: body }));
  }
  await s2.send(new DeleteObjectCommand({ Bucket, Key: 'doomed' }));
  const upload = await s1.send(new CreateMultipartUploadCommand({ Bucket, Key: 'mp' }));
  const part = randomBytes(300_000);
  const uploaded = await s2.send(
    new UploadPartCommand({
      Bucket,
      Key: 'mp',
      UploadId: upload.UploadId,
      PartNumber: 1,
      Body: part,
    }),
  );
  await s1.send(
    new CompleteMultipartUploadCommand({
      Bucket,
      Key: 'mp',
      UploadId: upload.UploadId,
      MultipartUpload: { Parts: [{ PartNumber: 1, ETag: uploaded.ETag }] },
    }),
  );
  bodies.set('mp', part);
  t.pass('every write acknowledged by n1 and n2 while n3 is frozen');

  // Every send to n3 times out (30 s) and is held as a hint: one per write.
  const pending = async () =>
    (await figure(n1, 'lightwell_cluster_hints_pending')) +
    (await figure(n2, 'lightwell_cluster_hints_pending'));
  t.equal(
    await waitFor(
      'every send to n3 to time out and be held as a hint',
      async () => ((await pending()) === WRITES ? WRITES : undefined),
      180_000,
    ),
    WRITES,
    'n1 and n2 hold a hint for each write n3 missed',
  );
  n3.signalGroup('SIGCONT');
  const keys = ['doomed', ...bodies.keys()];
  const wanted = await headsOn(n1, keys);
  for (const [index, head] of wanted.entries())
    t.ok(head.seq > 0, `n1 holds ${String(keys[index])} (${head.deleted ? 'deleted' : 'live'})`);
  await waitFor(
    'n3 to hold every key as n1 does, from hints alone',
    async () => {
      const held = await headsOn(n3, keys).catch(() => []);
      return JSON.stringify(held) === JSON.stringify(wanted) ? true : undefined;
    },
    240_000,
  );
  t.pass('n3 holds every write it missed, at the same sequences, without a repair');
  for (const node of [n1, n2])
    await waitFor(`${node.id} to hold no hints`, async () =>
      (await figure(node, 'lightwell_cluster_hints_pending')) === 0 ? true : undefined,
    );
  const delivered =
    (await figure(n1, 'lightwell_cluster_hints_delivered_total')) +
    (await figure(n2, 'lightwell_cluster_hints_delivered_total'));
  t.equal(delivered, WRITES, 'the hints delivered are counted');

  for (const [key, body] of bodies) {
    const got = await s3.send(new GetObjectCommand({ Bucket, Key: key }));
    const bytes = Buffer.from(
      await (got.Body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray(),
    );
    t.ok(bytes.equals(body), `${key} reads back byte for byte from n3`);
  }
});
