// Goal: the leader of a bucket's partition is its one writer (docs/cluster.md §8, "Writes through
// any node"): a write sent to any node's public port is forwarded to the leader, made once, and
// reads back from every node; a leader SIGKILLed during ingest loses no acknowledged write, a new
// leader takes over at a higher epoch and the old epoch is fenced; an upload part and completion
// sent straight to a node that missed the upload's create are taken (they answered 404 before).
// Method: the cluster kit, three nodes on real etcd (factor 3), one cluster for the whole file;
// n2 and n3 are restarted once joined, so that their supervisors reach every etcd member. The
// bucket's partition leader L is read from `GET /cluster/layout`, the others are F1 and F2.
// PUTs through each node read back byte for byte from each, and L's `/metrics` counts the
// forwards it ran. Two clients ingest through F1 and F2 (a 503 is retried, as its Retry-After
// says) while L is SIGKILLed; every acknowledged object reads back from F1 and F2, a message sent
// under L's old epoch is refused (`stale_epoch`), and so is a forward sent to a node that does not
// lead. Then, with L back and leading again: F2 is SIGKILLed, an upload is created through F1, L
// SIGKILLed (so its hint of the create cannot reach F2) and F2 started; a part and the
// completion sent straight to F2 are taken, and the object reads back from F1 and F2. Skips, with
// the reason, where etcd cannot be had.
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
  type S3Client,
} from '@aws-sdk/client-s3';
import { clusterEnvironment, waitFor, type KitNode } from './kit.js';
import { threeNodesWithS3 } from './data-client.js';
import { callData } from '../../src/cluster/data-transport.js';
import { clusterPaths, readClusterSecret } from '../../src/cluster/node-state.js';
import { errorCode } from '../../src/util/errors.js';

const env = await clusterEnvironment();
const Bucket = 'data';

async function readOnce(s3: S3Client, Key: string): Promise<Buffer> {
  const got = await s3.send(new GetObjectCommand({ Bucket, Key }));
  const body = got.Body as { transformToByteArray(): Promise<Uint8Array> };
  return Buffer.from(await body.transformToByteArray());
}

/** A GET, again after a 503 (a read waits for a majority's heads; a loaded node may be late). */
function bytesOf(s3: S3Client, Key: string): Promise<Buffer> {
  return waitFor(`a read of ${Key}`, () =>
    readOnce(s3, Key).catch((error: unknown) => {
      if ((error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 503)
        return undefined;
      throw error;
    }),
  );
}

/** A figure of `node`'s `/metrics`. */
async function figure(node: KitNode, name: string): Promise<number> {
  const response = await fetch(`http://${node.host}:${node.ports.admin}/metrics`, {
    signal: AbortSignal.timeout(60_000),
  });
  const line = (await response.text()).split('\n').find((entry) => entry.startsWith(`${name}{`));
  if (line === undefined) throw new Error(`${node.id} exposes no ${name}`);
  return Number(line.slice(line.lastIndexOf(' ') + 1));
}

/** The bucket's partition, its leader and epoch as `node` reads them once one leads it. */
async function leaderOf(
  node: KitNode,
  not?: string,
): Promise<{ partition: number; leader: string; epoch: number }> {
  return waitFor(
    `a leader of the bucket's partition${not ? ` other than ${not}` : ''}`,
    async () => {
      const layout = await node.admin('GET', '/cluster/layout?tenant=acme');
      const buckets = layout.json['buckets'] as Array<{ name: string; partition: number }>;
      const partition = buckets.find((entry) => entry.name === Bucket)?.partition;
      if (partition === undefined) return undefined;
      const entry = (layout.json['partitions'] as Array<{ leader?: string; epoch?: number }>)[
        partition
      ];
      if (entry?.leader === undefined || entry.leader === not) return undefined;
      return { partition, leader: entry.leader, epoch: entry.epoch ?? 0 };
    },
  );
}

/** PUTs `body` through `s3` until it is acknowledged (a 503 says to retry), within a minute. */
function putUntilTaken(s3: S3Client, Key: string, body: Buffer): Promise<boolean> {
  return waitFor(`the PUT of ${Key}`, () =>
    s3.send(new PutObjectCommand({ Bucket, Key, Body: body })).then(() => true),
  );
}

t.test(
  'writes through any node go to the partition leader',
  { skip: env.skip ?? false },
  async (t) => {
    const cluster = await threeNodesWithS3((fn) => t.teardown(fn));
    const { nodes, s3 } = cluster;
    // Joined nodes' supervisors reach etcd through n1's member alone until they restart
    // (docs/cluster.md §10); restarted, they use every member, so the leader may be killed.
    for (const node of nodes.slice(1)) {
      await node.stop();
      await node.start();
    }
    await waitFor('the key on n1', () =>
      s3[0].send(new CreateBucketCommand({ Bucket })).then(() => true),
    );
    for (const s of s3)
      await waitFor('the bucket on every node', () =>
        s.send(new HeadBucketCommand({ Bucket })).then(() => true),
      );
    const first = await leaderOf(nodes[0]);
    const li = nodes.findIndex((node) => node.id === first.leader);
    const [fi1, fi2] = [0, 1, 2].filter((index) => index !== li) as [number, number];
    const [L, F1, F2] = [nodes[li], nodes[fi1], nodes[fi2]] as [KitNode, KitNode, KitNode];
    const [sL, sF1, sF2] = [s3[li], s3[fi1], s3[fi2]] as [S3Client, S3Client, S3Client];
    t.comment(`partition ${first.partition} led by ${L.id} at epoch ${first.epoch}`);

    // Through every node's public port: made once, read back from every node.
    const led = await figure(L, 'lightwell_cluster_forwards_led_total');
    const written = new Map<string, Buffer>();
    for (const [index, s] of s3.entries()) {
      const body = randomBytes(300_000 + index);
      await s.send(new PutObjectCommand({ Bucket, Key: `via-${index}`, Body: body }));
      written.set(`via-${index}`, body);
    }
    await sF1.send(new PutObjectCommand({ Bucket, Key: 'gone', Body: randomBytes(10) }));
    await sF2.send(new DeleteObjectCommand({ Bucket, Key: 'gone' }));
    t.ok(
      (await figure(L, 'lightwell_cluster_forwards_led_total')) - led >= 4,
      `${L.id} ran the writes of ${F1.id} and ${F2.id}`,
    );
    t.ok((await figure(F1, 'lightwell_cluster_writes_forwarded_total')) >= 2, `${F1.id} forwarded`);
    for (const [index, s] of s3.entries())
      for (const [key, body] of written)
        t.ok((await bytesOf(s, key)).equals(body), `${key} reads back from n${index + 1}`);
    await t.rejects(
      readOnce(sL, 'gone'),
      { name: 'NoSuchKey' },
      'the delete through F2 holds on L',
    );

    // The leader SIGKILLed while two clients ingest through the other nodes.
    const acked = new Map<string, Buffer>();
    let killed = false;
    const ingest = async (s: S3Client, name: string): Promise<void> => {
      for (let i = 0; i < 12; i += 1) {
        const key = `${name}-${i}`;
        const body = randomBytes(40_000 + i);
        if (await putUntilTaken(s, key, body)) acked.set(key, body);
        if (i === 3 && !killed) {
          killed = true;
          await L.kill9();
        }
      }
    };
    await Promise.all([ingest(sF1, 'a'), ingest(sF2, 'b')]);
    t.equal(acked.size, 24, 'every write of both clients was acknowledged in the end');
    const next = await leaderOf(F1, L.id);
    t.ok(next.epoch > first.epoch, `${next.leader} leads at epoch ${next.epoch}`);
    for (const [key, body] of acked) {
      t.ok((await bytesOf(sF1, key)).equals(body), `${key} reads back from ${F1.id}`);
      t.ok((await bytesOf(sF2, key)).equals(body), `${key} reads back from ${F2.id}`);
    }

    // The deposed epoch is fenced, and a node that does not lead refuses a forward.
    const secret = await readClusterSecret(clusterPaths(F1.dataDir));
    const refusal = (to: KitNode, name: string, body: Record<string, unknown>) =>
      callData({ address: to.clusterAddress, name, body, secret, from: L.id }).then(
        () => 'taken',
        (error: unknown) => errorCode(error) ?? String(error),
      );
    const follower = next.leader === F1.id ? F2 : F1;
    t.equal(
      await refusal(follower, 'records', {
        tenantNum: 1,
        records: [],
        layout: 1_000_000,
        partition: first.partition,
        epoch: first.epoch,
      }),
      'stale_epoch',
      "a write under the deposed leader's epoch is refused",
    );
    t.equal(
      await refusal(follower, 'forward', {
        name: 'deleteObject',
        args: { tenantId: 'acme', bucket: Bucket, key: 'via-0' },
        requestId: 'r1',
        partition: first.partition,
        epoch: first.epoch,
      }),
      'stale_epoch',
      'a forward to a node that does not lead is refused before it runs',
    );
    t.ok((await bytesOf(sF1, 'via-0')).length > 0, 'and it changed nothing');

    // L back: it takes its partitions back; then the upload F2 misses.
    await L.start();
    const back = await leaderOf(F1, next.leader);
    t.equal(back.leader, L.id, `${L.id} leads again at epoch ${back.epoch}`);
    await F2.kill9();
    const upload = await waitFor('an upload created through F1', () =>
      sF1.send(new CreateMultipartUploadCommand({ Bucket, Key: 'mp' })),
    );
    // L holds the create's hint for F2: killed before F2 starts, it cannot deliver it.
    await L.kill9();
    await F2.start();
    const part = randomBytes(300_000);
    const uploaded = await waitFor('a part taken through F2, which missed the create', () =>
      sF2
        .send(
          new UploadPartCommand({
            Bucket,
            Key: 'mp',
            UploadId: upload.UploadId,
            PartNumber: 1,
            Body: part,
          }),
        )
        .catch((error: unknown) => {
          if ((error as { name?: string }).name === 'NoSuchUpload') throw error;
          return undefined;
        }),
    );
    t.ok(uploaded.ETag, 'F2 took the part of an upload it missed');
    const done = await waitFor('the completion through F2', () =>
      sF2.send(
        new CompleteMultipartUploadCommand({
          Bucket,
          Key: 'mp',
          UploadId: upload.UploadId,
          MultipartUpload: { Parts: [{ PartNumber: 1, ETag: uploaded.ETag }] },
        }),
      ),
    );
    t.ok(done.ETag, 'and completed it');
    t.ok((await bytesOf(sF1, 'mp')).equals(part), `the object reads back from ${F1.id}`);
    t.ok((await bytesOf(sF2, 'mp')).equals(part), `and from ${F2.id}`);
    for (const [key, body] of acked)
      t.ok((await bytesOf(sF2, key)).equals(body), `${key} still reads back from ${F2.id}`);
  },
);
