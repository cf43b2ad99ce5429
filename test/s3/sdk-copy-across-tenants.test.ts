// Goal: a copy whose source is another tenant's object, readable by a bucket policy, works: the
// bytes are sealed under the source tenant's keys, so CopyObject and UploadPartCopy read them
// with those and store them anew under the destination tenant's (before, UploadPartCopy failed
// with "chunk not found" and CopyObject looked for the source bucket in the destination's
// tenant). COPY keeps the source's type and metadata; the policy still decides: a key it does
// not grant is refused, and nothing is written.
// Method: a real `lightwell serve`, two tenants made through the admin API, @aws-sdk/client-s3.
import t from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutBucketPolicyCommand,
  PutObjectCommand,
  UploadPartCopyCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { s3ClientFor, s3ErrorOf } from '../helpers/s3-sdk.js';
import { Service } from '../helpers/service.js';

const MiB = 1024 * 1024;
const md5Tag = (body: Buffer): string => `"${createHash('md5').update(body).digest('hex')}"`;

async function read(s3: S3Client, Bucket: string, Key: string): Promise<Buffer> {
  const got = await s3.send(new GetObjectCommand({ Bucket, Key }));
  return Buffer.from((await got.Body?.transformToByteArray()) ?? []);
}

t.test('copies from another tenant’s bucket shared by a policy', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const origin = service.publicUrl.replace(/\/api\/v1$/, '');
  const alice = s3ClientFor(origin, await service.tenant('alice'));
  const bob = s3ClientFor(origin, await service.tenant('bob'));
  t.teardown(() => {
    alice.destroy();
    bob.destroy();
  });
  await alice.send(new CreateBucketCommand({ Bucket: 'alice-shares' }));
  await bob.send(new CreateBucketCommand({ Bucket: 'bob-keeps' }));
  const big = randomBytes(6 * MiB + 17);
  const small = Buffer.from('a small shared object');
  await alice.send(new PutObjectCommand({ Bucket: 'alice-shares', Key: 'pub/big', Body: big }));
  await alice.send(
    new PutObjectCommand({
      Bucket: 'alice-shares',
      Key: 'pub/small',
      Body: small,
      ContentType: 'text/plain',
      Metadata: { origin: 'alice' },
    }),
  );
  await alice.send(new PutObjectCommand({ Bucket: 'alice-shares', Key: 'private', Body: 'no' }));
  const policy = {
    Version: '2012-10-17',
    Statement: [
      {
        Effect: 'Allow',
        Principal: { AWS: ['bob'] },
        Action: 's3:GetObject',
        Resource: 'arn:aws:s3:::alice-shares/pub/*',
      },
    ],
  };
  await alice.send(
    new PutBucketPolicyCommand({ Bucket: 'alice-shares', Policy: JSON.stringify(policy) }),
  );

  await t.test('CopyObject keeps the bytes, type and metadata', async (t) => {
    const copied = await bob.send(
      new CopyObjectCommand({
        Bucket: 'bob-keeps',
        Key: 'copy-of-small',
        CopySource: 'alice-shares/pub/small',
      }),
    );
    t.equal(copied.CopyObjectResult?.ETag, md5Tag(small), "the copy's ETag: its bytes' MD5");
    t.same(await read(bob, 'bob-keeps', 'copy-of-small'), small);
    const head = await bob.send(
      new HeadObjectCommand({ Bucket: 'bob-keeps', Key: 'copy-of-small' }),
    );
    t.equal(head.ContentType, 'text/plain');
    t.same(head.Metadata, { origin: 'alice' });
    const replaced = await bob.send(
      new CopyObjectCommand({
        Bucket: 'bob-keeps',
        Key: 'copy-replaced',
        CopySource: 'alice-shares/pub/big',
        MetadataDirective: 'REPLACE',
        Metadata: { owner: 'bob' },
      }),
    );
    t.equal(replaced.CopyObjectResult?.ETag, md5Tag(big));
    t.ok((await read(bob, 'bob-keeps', 'copy-replaced')).equals(big), '6 MiB read back');
    const replacedHead = await bob.send(
      new HeadObjectCommand({ Bucket: 'bob-keeps', Key: 'copy-replaced' }),
    );
    t.same(replacedHead.Metadata, { owner: 'bob' });
  });

  await t.test('UploadPartCopy reads the source with its own tenant’s keys', async (t) => {
    const Key = 'assembled';
    const { UploadId } = await bob.send(
      new CreateMultipartUploadCommand({ Bucket: 'bob-keeps', Key }),
    );
    const first = await bob.send(
      new UploadPartCopyCommand({
        Bucket: 'bob-keeps',
        Key,
        UploadId,
        PartNumber: 1,
        CopySource: 'alice-shares/pub/big',
        CopySourceRange: `bytes=0-${5 * MiB - 1}`,
      }),
    );
    t.equal(first.CopyPartResult?.ETag, md5Tag(big.subarray(0, 5 * MiB)));
    const second = await bob.send(
      new UploadPartCopyCommand({
        Bucket: 'bob-keeps',
        Key,
        UploadId,
        PartNumber: 2,
        CopySource: 'alice-shares/pub/small',
      }),
    );
    await bob.send(
      new CompleteMultipartUploadCommand({
        Bucket: 'bob-keeps',
        Key,
        UploadId,
        MultipartUpload: {
          Parts: [
            { PartNumber: 1, ETag: first.CopyPartResult?.ETag ?? '' },
            { PartNumber: 2, ETag: second.CopyPartResult?.ETag ?? '' },
          ],
        },
      }),
    );
    const expected = Buffer.concat([big.subarray(0, 5 * MiB), small]);
    t.ok((await read(bob, 'bob-keeps', Key)).equals(expected), 'the parts, in order');
  });

  await t.test('what the policy does not grant is refused, and nothing is written', async (t) => {
    t.same(
      await s3ErrorOf(
        bob.send(
          new CopyObjectCommand({
            Bucket: 'bob-keeps',
            Key: 'stolen',
            CopySource: 'alice-shares/private',
          }),
        ),
      ),
      { name: 'AccessDenied', status: 403 },
    );
    t.same(
      await s3ErrorOf(bob.send(new HeadObjectCommand({ Bucket: 'bob-keeps', Key: 'stolen' }))),
      { name: 'NotFound', status: 404 },
    );
  });
});
