// Goal: cluster mode takes no port but those DECISIONS.md names: the node-to-node data traffic
// rides on `cluster.listen` itself (docs/cluster.md §7), so several nodes run on one host with
// consecutive `cluster.listen` ports (7001, 7002, 7003), which a hidden "port + 1" would break.
// Method: the cluster kit's same-host mode (one loopback address, each node with its own ports
// and etcd ports); a PUT on n1, then n1 SIGKILLed: n2 and n3 must each answer the object byte
// for byte from their own replicas. Skips, with the reason, where etcd cannot be had.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { CreateBucketCommand, GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import type { S3Client } from '@aws-sdk/client-s3';
import { ClusterKit, clusterEnvironment, waitFor, type KitNode } from './kit.js';
import { makeKey } from './data-client.js';
import { s3ClientFor } from '../helpers/s3-sdk.js';

const env = await clusterEnvironment();

t.test('nodes on consecutive cluster ports replicate', { skip: env.skip ?? false }, async (t) => {
  const kit = await ClusterKit.create(3, (fn) => t.teardown(fn), { sameHost: true });
  const [n1, n2, n3] = kit.nodes as [KitNode, KitNode, KitNode];
  t.same(
    kit.nodes.map((node) => node.clusterAddress.split(':')[1]),
    ['7001', '7002', '7003'],
    'consecutive cluster.listen ports on one address',
  );
  await kit.formCluster(3);
  const [keyId, secret] = await makeKey(n1);
  const [s1, s2, s3] = [n1, n2, n3].map((node) =>
    s3ClientFor(new URL(node.publicUrl).origin, { accessKeyId: keyId, secretKey: secret }),
  ) as [S3Client, S3Client, S3Client];
  await s1.send(new CreateBucketCommand({ Bucket: 'data' }));
  const body = randomBytes(300_000);
  await s1.send(new PutObjectCommand({ Bucket: 'data', Key: 'one', Body: body }));
  await n1.kill9();
  for (const [node, s] of [
    [n2, s2],
    [n3, s3],
  ] as const) {
    const got = await waitFor(`the object on ${node.id} after n1 is gone`, async () => {
      const answer = await s.send(new GetObjectCommand({ Bucket: 'data', Key: 'one' }));
      return Buffer.from((await answer.Body?.transformToByteArray()) ?? []);
    });
    t.ok(got.equals(body), `${node.id} answers the object byte for byte`);
  }
});
