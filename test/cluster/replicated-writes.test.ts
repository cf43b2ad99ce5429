// Goal: every kind of write a cluster member takes is on a majority of the bucket's replicas
// when it is acknowledged (docs/cluster.md §8, "Other writes"): multipart uploads (create, parts,
// complete, abort), copies, object tags, retention, legal holds and bucket notification configs;
// and a node that was down when they happened ends up with them. A listing on any node shows the
// whole cluster's objects and pages on across nodes; a bearer token minted on one node is good on
// every node.
// Method: the cluster kit, three nodes on real etcd (replication factor 3). n3 is SIGKILLed
// first, so every acknowledged write had to reach both n1 and n2; the writes go through n1 and
// n2 in turn (an upload created on one node takes parts and is completed on the other). Then n1
// is SIGKILLed and n3 started again: n2 must answer every write from its own copy, and n3 must
// catch up. Skips, with the reason, where etcd cannot be had.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  GetObjectLegalHoldCommand,
  GetObjectRetentionCommand,
  GetObjectTaggingCommand,
  HeadBucketCommand,
  ListObjectsV2Command,
  ListPartsCommand,
  PutObjectCommand,
  PutObjectLegalHoldCommand,
  PutObjectRetentionCommand,
  PutObjectTaggingCommand,
  UploadPartCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { ClusterKit, clusterEnvironment, waitFor, type KitNode } from './kit.js';
import { Client, makeKey } from './data-client.js';
import { s3ClientFor, s3ErrorOf } from '../helpers/s3-sdk.js';

const env = await clusterEnvironment();
const MIB = 1024 * 1024;

async function bytesOf(s3: S3Client, bucket: string, key: string): Promise<Buffer> {
  const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
  return Buffer.from((await got.Body?.transformToByteArray()) ?? []);
}

t.test('every write is on a majority of replicas', { skip: env.skip ?? false }, async (t) => {
  const kit = await ClusterKit.create(3, (fn) => t.teardown(fn));
  const [n1, n2, n3] = kit.nodes as [KitNode, KitNode, KitNode];
  await kit.formCluster(3);
  const [keyId, secret] = await makeKey(n1);
  const natives = [n1, n2, n3].map((node) => new Client(node, keyId, secret));
  for (const client of natives) await client.login();
  const [s1, s2, s3] = [n1, n2, n3].map((node) =>
    s3ClientFor(new URL(node.publicUrl).origin, { accessKeyId: keyId, secretKey: secret }),
  ) as [S3Client, S3Client, S3Client];
  await s1.send(new CreateBucketCommand({ Bucket: 'data' }));
  await s1.send(new CreateBucketCommand({ Bucket: 'locked', ObjectLockEnabledForBucket: true }));
  await s1.send(new CreateBucketCommand({ Bucket: 'hooked' }));
  for (const s of [s2, s3])
    for (const bucket of ['data', 'locked', 'hooked'])
      await waitFor(`bucket ${bucket} on every node`, () =>
        s.send(new HeadBucketCommand({ Bucket: bucket })).then(() => true),
      );

  // A bearer token minted on n1 is good on the other members too.
  for (const node of [n2, n3]) {
    const borrowed = new Client(node, keyId, secret);
    borrowed.token = (natives[0] as Client).token;
    const answer = await borrowed.send('GET', '/buckets/data/objects/none');
    t.equal(answer.status, 404, `n1's bearer token is taken on ${node.id}`);
  }

  const doomed = randomBytes(1000);
  await s1.send(new PutObjectCommand({ Bucket: 'data', Key: 'doomed', Body: doomed }));
  await n3.kill9();
  await s1.send(new DeleteObjectCommand({ Bucket: 'data', Key: 'doomed' }));

  // An upload created on n1, a part through each node, completed on n2.
  const part1 = randomBytes(5 * MIB);
  const part2 = randomBytes(3000);
  const created = await s1.send(new CreateMultipartUploadCommand({ Bucket: 'data', Key: 'big' }));
  const upload = { Bucket: 'data', Key: 'big', UploadId: created.UploadId };
  const e1 = await s2.send(new UploadPartCommand({ ...upload, PartNumber: 1, Body: part1 }));
  const e2 = await s1.send(new UploadPartCommand({ ...upload, PartNumber: 2, Body: part2 }));
  await s2.send(
    new CompleteMultipartUploadCommand({
      ...upload,
      MultipartUpload: {
        Parts: [
          { PartNumber: 1, ETag: e1.ETag ?? '' },
          { PartNumber: 2, ETag: e2.ETag ?? '' },
        ],
      },
    }),
  );
  // One left open with a part, one aborted on another node than the one that made it.
  const open = await s2.send(new CreateMultipartUploadCommand({ Bucket: 'data', Key: 'open' }));
  const openUpload = { Bucket: 'data', Key: 'open', UploadId: open.UploadId };
  await s1.send(new UploadPartCommand({ ...openUpload, PartNumber: 1, Body: part2 }));
  const gone = await s1.send(new CreateMultipartUploadCommand({ Bucket: 'data', Key: 'gone' }));
  const goneUpload = { Bucket: 'data', Key: 'gone', UploadId: gone.UploadId };
  await s1.send(new UploadPartCommand({ ...goneUpload, PartNumber: 1, Body: part2 }));
  await s2.send(new AbortMultipartUploadCommand(goneUpload));

  // A copy on n2 of an object written on n1, then the source's tags changed on n1.
  const source = randomBytes(40_000);
  await s1.send(new PutObjectCommand({ Bucket: 'data', Key: 'src', Body: source }));
  await s2.send(new CopyObjectCommand({ Bucket: 'data', Key: 'copied', CopySource: 'data/src' }));
  const tags = [{ Key: 'colour', Value: 'teal' }];
  await s1.send(
    new PutObjectTaggingCommand({ Bucket: 'data', Key: 'src', Tagging: { TagSet: tags } }),
  );

  // Retention set on n2 and a legal hold on n1, of an object written on n1.
  const until = new Date(Date.now() + 86_400_000);
  until.setMilliseconds(0);
  await s1.send(new PutObjectCommand({ Bucket: 'locked', Key: 'held', Body: source }));
  await s2.send(
    new PutObjectRetentionCommand({
      Bucket: 'locked',
      Key: 'held',
      Retention: { Mode: 'GOVERNANCE', RetainUntilDate: until },
    }),
  );
  await s1.send(
    new PutObjectLegalHoldCommand({ Bucket: 'locked', Key: 'held', LegalHold: { Status: 'ON' } }),
  );

  // A notification config, set through n1's native API.
  const hook = {
    configs: [{ id: 'h1', url: 'http://93.184.216.34/hook', events: ['object-created'] }],
  };
  const set = await (natives[0] as Client).send(
    'PUT',
    '/buckets/hooked/notifications',
    JSON.stringify(hook),
  );
  t.equal(set.status, 200, `notification config set: ${set.bytes.toString()}`);

  await n1.kill9();
  await n3.start();

  // Listings on n3, which missed every write, show the whole cluster's objects, page by page;
  // a native continuation token from n2 carries on on n3.
  const listed: string[] = [];
  let token: string | undefined;
  do {
    const page = await s3.send(
      new ListObjectsV2Command({ Bucket: 'data', MaxKeys: 2, ContinuationToken: token }),
    );
    listed.push(...(page.Contents ?? []).map((entry) => entry.Key ?? ''));
    token = page.NextContinuationToken;
  } while (token !== undefined);
  t.same(listed, ['big', 'copied', 'src'], 'an S3 listing on n3, in pages of 2');
  const first = await (natives[1] as Client).send('GET', '/buckets/data/objects?maxKeys=2');
  const firstPage = JSON.parse(first.bytes.toString()) as {
    objects: Array<{ key: string }>;
    nextContinuationToken: string;
  };
  t.same(
    firstPage.objects.map((entry) => entry.key),
    ['big', 'copied'],
    'page 1 on n2',
  );
  const next = await (natives[2] as Client).send(
    'GET',
    `/buckets/data/objects?maxKeys=2&continuationToken=${encodeURIComponent(firstPage.nextContinuationToken)}`,
  );
  t.equal(next.status, 200, `page 2 on n3: ${next.bytes.toString().slice(0, 300)}`);
  const nextPage = JSON.parse(next.bytes.toString()) as { objects: Array<{ key: string }> };
  t.same(
    nextPage.objects.map((entry) => entry.key),
    ['src'],
    "page 2 on n3, with n2's token",
  );

  // n2 took every acknowledged write itself.
  const expectations = async (s: S3Client, where: string): Promise<void> => {
    t.ok(
      (await bytesOf(s, 'data', 'big')).equals(Buffer.concat([part1, part2])),
      `big on ${where}`,
    );
    t.ok((await bytesOf(s, 'data', 'copied')).equals(source), `the copy on ${where}`);
    const tagged = await s.send(new GetObjectTaggingCommand({ Bucket: 'data', Key: 'src' }));
    t.same(tagged.TagSet, tags, `the tags on ${where}`);
    const retention = await s.send(
      new GetObjectRetentionCommand({ Bucket: 'locked', Key: 'held' }),
    );
    t.equal(retention.Retention?.Mode, 'GOVERNANCE', `the retention on ${where}`);
    t.equal(retention.Retention?.RetainUntilDate?.getTime(), until.getTime());
    const hold = await s.send(new GetObjectLegalHoldCommand({ Bucket: 'locked', Key: 'held' }));
    t.equal(hold.LegalHold?.Status, 'ON', `the legal hold on ${where}`);
  };
  await expectations(s2, 'n2');
  const parts = await s2.send(new ListPartsCommand(openUpload));
  t.same(
    parts.Parts?.map((part) => part.PartNumber),
    [1],
    'the open upload and its part on n2',
  );
  t.equal((await s3ErrorOf(s2.send(new ListPartsCommand(goneUpload)))).status, 404, 'aborted');
  const c2 = natives[1] as Client;
  await c2.login();
  const hooks = await c2.send('GET', '/buckets/hooked/notifications');
  t.match(JSON.parse(hooks.bytes.toString()), { configs: [{ id: 'h1' }] }, 'the config on n2');

  // n3 was down for all of it and catches up (reads pull what is missing, a restart repairs).
  await waitFor('n3 to catch up on every write', async () => {
    const tagged = await s3.send(new GetObjectTaggingCommand({ Bucket: 'data', Key: 'src' }));
    const hold = await s3.send(new GetObjectLegalHoldCommand({ Bucket: 'locked', Key: 'held' }));
    return tagged.TagSet?.length === 1 && hold.LegalHold?.Status === 'ON' ? true : undefined;
  });
  await expectations(s3, 'n3');
});
