// Goal: what the node that receives a request does with it in a cluster (docs/cluster.md §8a,
// "Writes through any node"): a native multipart completion sent to a node that holds no copy of
// the upload (it is no replica of the bucket) takes the upload from a replica and completes it,
// as the S3 route does, instead of answering 404; a replica that receives a write it forwards
// to the partition's leader stores the body once (the leader's copy coming back is not stored
// again), and a replica sent the records of chunks it already holds stores nothing new.
// Method: the cluster kit, three nodes on real etcd, replication factor 2, so bucket 1 has two
// replicas (by `GET /cluster/layout`) and one node outside it. The native API of each node. The
// bytes a node stores are the sizes of its segment files, summed before and after a write.
// Skips, with the reason, where etcd cannot be had.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { ClusterKit, clusterEnvironment, joinBody, waitFor, type KitNode } from './kit.js';
import { Client, makeKey } from './data-client.js';
import { partitionOf } from '../../src/cluster/layout.js';

const env = await clusterEnvironment();
const RF = ['--cluster.replication_factor', '2'];
const MIB = 1024 * 1024;

/** The bytes of `node`'s segment files. */
async function segmentBytes(node: KitNode): Promise<number> {
  const dir = join(node.dataDir, 'segments');
  let total = 0;
  for (const name of await readdir(dir))
    if (name.endsWith('.seg')) total += (await stat(join(dir, name))).size;
  return total;
}

/** A counter of `node`'s `/metrics` (the engine's cluster figures). */
async function figure(node: KitNode, name: string): Promise<number> {
  const response = await fetch(`http://${node.host}:${node.ports.admin}/metrics`, {
    signal: AbortSignal.timeout(60_000),
  });
  const text = await response.text();
  const line = text
    .split('\n')
    .find((entry) => entry.startsWith(`${name} `) || entry.startsWith(`${name}{`));
  if (line === undefined) throw new Error(`${node.id} exposes no ${name}`);
  return Number(line.slice(line.lastIndexOf(' ') + 1));
}

/** Bucket 1's partition as `node` answers it: its replicas and its leader once it has one. */
async function partitionOfBucket1(
  node: KitNode,
): Promise<{ replicas: string[]; leader: string } | undefined> {
  const answer = await node.admin('GET', '/cluster/layout');
  if (answer.status !== 200) return undefined;
  const entry = (answer.json['partitions'] as Array<{ replicas: string[]; leader?: string }>)[
    partitionOf(1)
  ];
  if (entry?.leader === undefined || !entry.replicas.includes(entry.leader)) return undefined;
  return { replicas: entry.replicas, leader: entry.leader };
}

t.test('what the receiving node does', { skip: env.skip ?? false }, async (t) => {
  const kit = await ClusterKit.create(3, (fn) => t.teardown(fn));
  const nodes = kit.nodes as [KitNode, KitNode, KitNode];
  const [n1, n2, n3] = nodes;
  await Promise.all([
    n1.start({ bootstrap: true, args: RF }),
    n2.start({ args: RF }),
    n3.start({ args: RF }),
  ]);
  for (const node of [n2, n3]) {
    const joined = await n1.admin('POST', '/cluster/consensus/join', joinBody(node));
    t.equal(joined.status, 200, `${node.id} joined: ${JSON.stringify(joined.json)}`);
  }
  const [keyId, secret] = await makeKey(n1);
  const clients = new Map(nodes.map((node) => [node.id, new Client(node, keyId, secret)]));
  const client = (id: string): Client => clients.get(id) as Client;
  await client('n1').login();
  const made = await client('n1').send('POST', '/buckets', JSON.stringify({ name: 'data' }));
  t.equal(made.status, 201, 'bucket data (id 1) made');
  const placed = await waitFor('a leader of bucket 1', () => partitionOfBucket1(n1));
  t.equal(placed.replicas.length, 2, `bucket 1 is on ${placed.replicas.join(', ')}`);
  const outsider = nodes.find((node) => !placed.replicas.includes(node.id)) as KitNode;
  const follower = placed.replicas.find((id) => id !== placed.leader) as string;
  for (const node of nodes) await client(node.id).login();
  // A member coordinates a write itself until its view names the partition's leader (2 s polls):
  // the outsider's completion must be forwarded, which a PUT through it shows it will be.
  await waitFor(`${outsider.id} to forward writes of bucket 1`, async () => {
    const put = await client(outsider.id).put('probe', Buffer.from('probe'));
    if (put.status !== 200) return undefined;
    const forwarded = await figure(outsider, 'lightwell_cluster_writes_forwarded_total');
    return forwarded > 0 ? true : undefined;
  });

  await t.test('a native completion on a node without the upload', async (t) => {
    const created = await client(placed.leader).send('POST', '/buckets/data/multipart/mp', '{}');
    t.equal(created.status, 201, `an upload created on ${placed.leader}`);
    const { uploadId } = JSON.parse(created.bytes.toString()) as { uploadId: string };
    const part = randomBytes(300_000);
    const sent = await client(follower).send(
      'PUT',
      `/buckets/data/multipart/${uploadId}/parts/1/mp`,
      part,
    );
    t.equal(sent.status, 200, `its part sent through ${follower}`);
    const { etag } = JSON.parse(sent.bytes.toString()) as { etag: string };
    const done = await client(outsider.id).send(
      'POST',
      `/buckets/data/multipart/${uploadId}/complete/mp`,
      JSON.stringify({ parts: [{ partNumber: 1, etag }] }),
    );
    t.equal(done.status, 200, `completed through ${outsider.id}: ${done.bytes.toString()}`);
    for (const node of nodes) {
      const read = await client(node.id).get('mp');
      t.ok(read.status === 200 && read.bytes.equals(part), `the object reads back on ${node.id}`);
    }
    const again = await client(outsider.id).send(
      'POST',
      `/buckets/data/multipart/${'0'.repeat(32)}/complete/mp`,
      JSON.stringify({ parts: [{ partNumber: 1, etag }] }),
    );
    t.equal(again.status, 404, 'an upload no replica holds is still a 404');
  });

  await t.test('a replica stores a body it receives once', async (t) => {
    const body = randomBytes(4 * MIB);
    const before = await segmentBytes(client(follower).node);
    const put = await client(follower).put('forwarded', body);
    t.equal(put.status, 200, `a PUT through ${follower}, forwarded to ${placed.leader}`);
    // The leader answers once a majority (both replicas) holds the write: the follower's commit
    // is in its index, and its bytes in its segment files, by now.
    const grown = (await segmentBytes(client(follower).node)) - before;
    t.ok(grown >= 4 * MIB, `${follower} stored the body (${grown} bytes)`);
    t.ok(grown < 5 * MIB, `once, not again from the leader (${grown} bytes for ${4 * MIB})`);

    const second = await segmentBytes(client(follower).node);
    const same = await client(placed.leader).put('same-bytes', body);
    t.equal(same.status, 200, `the same bytes under another key through ${placed.leader}`);
    const added = (await segmentBytes(client(follower).node)) - second;
    t.ok(added < MIB, `${follower} stores no second copy of chunks it holds (${added} bytes)`);
    for (const key of ['forwarded', 'same-bytes']) {
      const read = await client(follower).send(
        'GET',
        `/buckets/data/objects/${key}?versionId=null`,
      );
      t.ok(read.status === 200 && read.bytes.equals(body), `${key} reads from ${follower}'s copy`);
    }
  });
});
