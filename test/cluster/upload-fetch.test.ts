// Goal: a replica that missed an upload's create takes the upload from another replica when a
// part or the completion of it reaches it (docs/cluster.md §8a, "Other writes"), instead of
// refusing them as for an unknown upload, which with another replica down left the upload unable
// to take a part (503).
// Method: the cluster kit, three nodes on real etcd (replication factor 3). n3 is SIGKILLed; an
// upload is created through n1, which is then SIGKILLed too (its hints of the create for n3 go
// with it); n3 is started again. With n1 down, a part through n2 needs n3 to take it: it is
// acknowledged, the upload is completed through n2, and the object reads back byte for byte from
// n3's own copy (a read by version id reads only the local copy) and from n2. Skips, with the
// reason, where etcd cannot be had.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import {
  CompleteMultipartUploadCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  HeadBucketCommand,
  UploadPartCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { clusterEnvironment, waitFor } from './kit.js';
import { threeNodesWithS3 } from './data-client.js';

const env = await clusterEnvironment();
const Bucket = 'data';

async function bytesOf(s3: S3Client, Key: string, VersionId?: string): Promise<Buffer> {
  const got = await s3.send(
    new GetObjectCommand({ Bucket, Key, ...(VersionId === undefined ? {} : { VersionId }) }),
  );
  const body = got.Body as { transformToByteArray(): Promise<Uint8Array> };
  return Buffer.from(await body.transformToByteArray());
}

t.test('a missed upload is taken from a replica', { skip: env.skip ?? false }, async (t) => {
  const cluster = await threeNodesWithS3((fn) => t.teardown(fn));
  const [n1, , n3] = cluster.nodes;
  const [s1, s2, s3] = cluster.s3;
  await waitFor('the key on n1', () =>
    s1.send(new CreateBucketCommand({ Bucket })).then(() => true),
  );
  for (const s of [s2, s3])
    await waitFor('the bucket on every node', () =>
      s.send(new HeadBucketCommand({ Bucket })).then(() => true),
    );

  await n3.kill9();
  const upload = await s1.send(new CreateMultipartUploadCommand({ Bucket, Key: 'mp' }));
  t.ok(upload.UploadId, 'an upload created through n1 while n3 is down');
  await n1.kill9();
  await n3.start();

  const part = randomBytes(200_000);
  const uploaded = await waitFor('a part taken through n2 with n1 down', () =>
    s2
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
        // Until n3 has read the membership again it may refuse; a missing upload fails at once.
        if ((error as { name?: string }).name === 'NoSuchUpload') throw error;
        return undefined;
      }),
  );
  t.ok(uploaded.ETag, 'n3, which missed the create, took the part with n2');
  const done = await s2.send(
    new CompleteMultipartUploadCommand({
      Bucket,
      Key: 'mp',
      UploadId: upload.UploadId,
      MultipartUpload: { Parts: [{ PartNumber: 1, ETag: uploaded.ETag }] },
    }),
  );
  t.ok(done.ETag, 'the upload is completed through n2');
  t.ok((await bytesOf(s2, 'mp')).equals(part), 'the object reads back from n2');
  t.ok((await bytesOf(s3, 'mp', 'null')).equals(part), "and from n3's own copy");
});
