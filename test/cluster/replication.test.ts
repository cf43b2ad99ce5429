// Goal: objects in a cluster (docs/cluster.md §8): a PUT on any node is read back byte for byte
// from every node at once (the write waited for a majority of replicas, and a read first asks a
// majority for the newest copy); with one node SIGKILLed in the middle of an ingest from several
// clients, every acknowledged write reads back from the survivors, and once the node is back, from
// it too (it catches up on what it missed); a DELETE on one node is a 404 on every node, also on
// the one that was down when it happened.
// Method: the cluster kit, three nodes on real etcd (replication factor 3); the native API of each
// node's public port. Skips, with the reason, where etcd cannot be had.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { GetObjectCommand, PutObjectCommand, DeleteObjectCommand } from '@aws-sdk/client-s3';
import {
  ClusterKit,
  clusterEnvironment,
  joinBody,
  replicasOfBucket,
  waitFor,
  type KitNode,
} from './kit.js';
import { Client, makeKey } from './data-client.js';
import { s3ClientFor, s3ErrorOf } from '../helpers/s3-sdk.js';

const env = await clusterEnvironment();

t.test('objects are replicated to a majority', { skip: env.skip ?? false }, async (t) => {
  const kit = await ClusterKit.create(4, (fn) => t.teardown(fn));
  const [n1, , n3, n4] = kit.nodes as [KitNode, KitNode, KitNode, KitNode];
  await kit.formCluster(3);
  const [keyId, secret] = await makeKey(kit.nodes[0] as KitNode);
  const clients = kit.nodes.slice(0, 3).map((node) => new Client(node, keyId, secret));
  const [c1, c2, c3] = clients as [Client, Client, Client];
  await c1.login();
  t.equal((await c1.send('POST', '/buckets', JSON.stringify({ name: 'data' }))).status, 201);
  for (const client of [c2, c3]) await client.login();

  const small = randomBytes(100 * 1024);
  const large = randomBytes(3 * 1024 * 1024 + 17);
  t.equal((await c2.put('small', small)).status, 200, 'a PUT on n2');
  t.equal((await c3.put('large', large)).status, 200, 'a PUT of several chunks on n3');
  for (const client of clients) {
    const read = await client.get('small');
    t.equal(read.status, 200, `small read on ${client.node.id}`);
    t.ok(read.bytes.equals(small), `small byte for byte on ${client.node.id}`);
    t.ok((await client.get('large')).bytes.equals(large), `large on ${client.node.id}`);
  }

  // S3 goes through the same service: a PUT on n1 is read on n3; a DELETE on n3 is gone on n2.
  const s3 = kit.nodes
    .slice(0, 3)
    .map((node) =>
      s3ClientFor(new URL(node.publicUrl).origin, { accessKeyId: keyId, secretKey: secret }),
    );
  const viaS3 = randomBytes(70 * 1024);
  await s3[0]?.send(new PutObjectCommand({ Bucket: 'data', Key: 's3-object', Body: viaS3 }));
  const got = await s3[2]?.send(new GetObjectCommand({ Bucket: 'data', Key: 's3-object' }));
  const gotBytes = Buffer.from((await got?.Body?.transformToByteArray()) ?? []);
  t.ok(gotBytes.equals(viaS3), 'an S3 PUT on n1 is read through S3 on n3');
  t.ok((await c2.get('s3-object')).bytes.equals(viaS3), 'and through the native API on n2');
  await s3[2]?.send(new DeleteObjectCommand({ Bucket: 'data', Key: 's3-object' }));
  const gone = await s3ErrorOf(
    s3[1]?.send(new GetObjectCommand({ Bucket: 'data', Key: 's3-object' })) ?? Promise.resolve(),
  );
  t.equal(gone.status, 404, 'an S3 DELETE on n3 is a 404 through S3 on n2');

  // Ingest from two clients; n3 is SIGKILLed after the first few writes.
  const acknowledged = new Map<string, Buffer>();
  const ingest = async (client: Client, prefix: string): Promise<void> => {
    for (let index = 0; index < 12; index += 1) {
      const body = randomBytes(8 * 1024 + index);
      const key = `${prefix}-${index}`;
      const answer = await client.put(key, body).catch(() => ({ status: 0 }));
      if (answer.status === 200) acknowledged.set(key, body);
      if (prefix === 'a' && index === 3) await n3.kill9();
    }
  };
  await Promise.all([ingest(c1, 'a'), ingest(c2, 'b')]);
  t.ok(
    acknowledged.size >= 20,
    `most writes acknowledged with one node down (${acknowledged.size})`,
  );
  for (const client of [c1, c2])
    for (const [key, body] of acknowledged) {
      const read = await client.get(key);
      t.ok(read.status === 200 && read.bytes.equals(body), `${key} on ${client.node.id}`);
    }

  t.equal((await c2.send('DELETE', '/buckets/data/objects/small')).status, 204, 'a DELETE');
  t.equal((await c1.get('small')).status, 404, 'deleted on n1');

  await n3.start();
  await c3.login();
  for (const [key, body] of acknowledged) {
    const read = await c3.get(key);
    t.ok(read.status === 200 && read.bytes.equals(body), `${key} on n3, back`);
  }
  t.equal((await c3.get('small')).status, 404, 'the delete n3 missed is seen on n3');
  t.ok((await c3.get('large')).bytes.equals(large), 'what n3 held is still there');

  const rebalance = async (dryRun: boolean): Promise<Record<string, unknown>> => {
    const answer = await n1.rebalance(
      { tenantId: 'acme', reason: 'test', confirmTenant: 'acme' },
      dryRun,
    );
    t.equal(answer.status, 200, JSON.stringify(answer.json));
    return answer.json;
  };
  const repaired = await rebalance(false);
  t.match(repaired, {
    mode: 'cluster-rebalance',
    replication: { counts: { buckets: 3, replicasUnreachable: 0 } },
  });
  t.match(await rebalance(true), { replication: { counts: { copiesSent: 0, deletesSent: 0 } } });

  // A fourth node joins; the bucket's replica set now names it (bucket id 1, by the stored layout) and
  // a rebalance copies every object onto it.
  await n4.start();
  const joined = await n1.admin('POST', '/cluster/consensus/join', joinBody(n4));
  t.equal(joined.status, 200, JSON.stringify(joined.json));
  const owners = await replicasOfBucket(n1, 1);
  t.ok(owners.includes('n4'), `n4 is a replica of the bucket (${owners.join(', ')})`);
  // Moments after its join, n4 may not answer a repair's first calls yet (it is still taking in
  // the cluster's records): the report counts it unreachable, and a rebalance is run again.
  let bytesSent = 0;
  const moved = await waitFor('a rebalance onto n4 that reaches every replica', async () => {
    const report = await rebalance(false);
    const counts = (report['replication'] as { counts: Record<string, number> }).counts;
    bytesSent += counts['bytesSent'] ?? 0;
    return bytesSent > 0 && counts['replicasUnreachable'] === 0 ? report : undefined;
  });
  t.match(moved, { replication: { counts: { replicasUnreachable: 0 } } });
  t.ok(bytesSent > 0, `the rebalance copied onto n4 (${bytesSent} bytes)`);
  t.match(await rebalance(true), { replication: { counts: { copiesSent: 0 } } });
  const c4 = new Client(n4, keyId, secret);
  await c4.login();
  for (const [key, body] of acknowledged) {
    const read = await c4.get(key);
    t.ok(read.status === 200 && read.bytes.equals(body), `${key} on n4`);
  }
});
