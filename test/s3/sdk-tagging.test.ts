// Goal: S3 object and bucket tagging through the AWS SDK: Put/Get/DeleteObjectTagging (with
// versionId), `x-amz-tagging` on PUT and multipart create, the copy's tagging directive,
// `x-amz-tagging-count` on GET and HEAD, bucket tagging, S3's limits answered `InvalidTag`, and
// the native API reading the same tags (one rule). Other tenants are refused.
// Method: a real `lightwell serve`, two tenants, @aws-sdk/client-s3.
import t from 'tap';
import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteBucketTaggingCommand,
  DeleteObjectTaggingCommand,
  GetBucketTaggingCommand,
  GetObjectCommand,
  GetObjectTaggingCommand,
  HeadObjectCommand,
  PutBucketTaggingCommand,
  PutBucketVersioningCommand,
  PutObjectCommand,
  PutObjectTaggingCommand,
  UploadPartCommand,
  type Tag,
} from '@aws-sdk/client-s3';
import { s3ClientFor, s3ErrorOf } from '../helpers/s3-sdk.js';
import { Service } from '../helpers/service.js';

const tagSet = (count: number): Tag[] =>
  Array.from({ length: count }, (_, i) => ({ Key: `k${i}`, Value: `v${i}` }));

t.test('tagging through the AWS SDK', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const origin = service.publicUrl.replace(/\/api\/v1$/, '');
  const aliceClient = await service.tenant('alice');
  const s3 = s3ClientFor(origin, aliceClient);
  const bob = s3ClientFor(origin, await service.tenant('bob'));
  t.teardown(() => [s3, bob].forEach((client) => client.destroy()));
  await s3.send(new CreateBucketCommand({ Bucket: 'tags' }));

  await t.test('object tags', async (t) => {
    await s3.send(new PutObjectCommand({ Bucket: 'tags', Key: 'a', Body: 'x' }));
    const none = await s3.send(new GetObjectTaggingCommand({ Bucket: 'tags', Key: 'a' }));
    t.same(none.TagSet, []);
    t.equal(
      (await s3.send(new HeadObjectCommand({ Bucket: 'tags', Key: 'a' }))).TagCount,
      undefined,
    );
    await s3.send(
      new PutObjectTaggingCommand({
        Bucket: 'tags',
        Key: 'a',
        Tagging: {
          TagSet: [
            { Key: 'b', Value: '2' },
            { Key: 'a', Value: '' },
          ],
        },
      }),
    );
    const got = await s3.send(new GetObjectTaggingCommand({ Bucket: 'tags', Key: 'a' }));
    t.same(
      got.TagSet,
      [
        { Key: 'a', Value: '' },
        { Key: 'b', Value: '2' },
      ],
      'listed by key',
    );
    t.equal((await s3.send(new HeadObjectCommand({ Bucket: 'tags', Key: 'a' }))).TagCount, 2);
    t.equal((await s3.send(new GetObjectCommand({ Bucket: 'tags', Key: 'a' }))).TagCount, 2);

    // The native API reads the same tags.
    const native = await aliceClient.request('GET', '/buckets/tags/object-tags/a');
    t.same((native.json as { tags: unknown[] }).tags.length, 2);

    await s3.send(
      new PutObjectTaggingCommand({ Bucket: 'tags', Key: 'a', Tagging: { TagSet: tagSet(10) } }),
    );
    const refuse = async (TagSet: Tag[], what: string): Promise<void> => {
      t.same(
        await s3ErrorOf(
          s3.send(new PutObjectTaggingCommand({ Bucket: 'tags', Key: 'a', Tagging: { TagSet } })),
        ),
        { name: 'InvalidTag', status: 400 },
        what,
      );
    };
    await refuse(tagSet(11), 'eleven tags');
    await refuse([{ Key: 'k'.repeat(129), Value: 'v' }], 'a key of 129 characters');
    await refuse([{ Key: 'k', Value: 'v'.repeat(257) }], 'a value of 257 characters');
    await refuse(
      [
        { Key: 'k', Value: '1' },
        { Key: 'k', Value: '2' },
      ],
      'a key twice',
    );
    await s3.send(
      new PutObjectTaggingCommand({
        Bucket: 'tags',
        Key: 'a',
        Tagging: { TagSet: [{ Key: 'k'.repeat(128), Value: 'v'.repeat(256) }] },
      }),
    );
    t.equal(
      (await s3.send(new GetObjectTaggingCommand({ Bucket: 'tags', Key: 'a' }))).TagSet?.length,
      1,
      'the refusals changed nothing',
    );

    const deleted = await s3.send(new DeleteObjectTaggingCommand({ Bucket: 'tags', Key: 'a' }));
    t.equal(deleted.$metadata.httpStatusCode, 204);
    t.same((await s3.send(new GetObjectTaggingCommand({ Bucket: 'tags', Key: 'a' }))).TagSet, []);

    t.same(await s3ErrorOf(bob.send(new GetObjectTaggingCommand({ Bucket: 'tags', Key: 'a' }))), {
      name: 'AccessDenied',
      status: 403,
    });
    t.same(
      await s3ErrorOf(
        bob.send(
          new PutObjectTaggingCommand({ Bucket: 'tags', Key: 'a', Tagging: { TagSet: tagSet(1) } }),
        ),
      ),
      { name: 'AccessDenied', status: 403 },
    );
    t.same(
      await s3ErrorOf(s3.send(new GetObjectTaggingCommand({ Bucket: 'tags', Key: 'nosuch' }))),
      {
        name: 'NoSuchKey',
        status: 404,
      },
    );
  });

  await t.test('tags on writes, copies and versions', async (t) => {
    await s3.send(
      new PutObjectCommand({ Bucket: 'tags', Key: 'w', Body: 'x', Tagging: 'foo=bar&bar' }),
    );
    t.same((await s3.send(new GetObjectTaggingCommand({ Bucket: 'tags', Key: 'w' }))).TagSet, [
      { Key: 'bar', Value: '' },
      { Key: 'foo', Value: 'bar' },
    ]);
    t.same(
      await s3ErrorOf(
        s3.send(
          new PutObjectCommand({
            Bucket: 'tags',
            Key: 'w2',
            Body: 'x',
            Tagging: Array.from({ length: 11 }, (_, i) => `k${i}=v${i}`).join('&'),
          }),
        ),
      ),
      { name: 'InvalidTag', status: 400 },
    );

    await s3.send(new CopyObjectCommand({ Bucket: 'tags', Key: 'c1', CopySource: 'tags/w' }));
    t.equal(
      (await s3.send(new GetObjectTaggingCommand({ Bucket: 'tags', Key: 'c1' }))).TagSet?.length,
      2,
      'COPY',
    );
    await s3.send(
      new CopyObjectCommand({
        Bucket: 'tags',
        Key: 'c2',
        CopySource: 'tags/w',
        TaggingDirective: 'REPLACE',
        Tagging: 'x=y',
      }),
    );
    t.same((await s3.send(new GetObjectTaggingCommand({ Bucket: 'tags', Key: 'c2' }))).TagSet, [
      { Key: 'x', Value: 'y' },
    ]);
    await s3.send(
      new CopyObjectCommand({
        Bucket: 'tags',
        Key: 'c3',
        CopySource: 'tags/w',
        TaggingDirective: 'REPLACE',
      }),
    );
    t.same(
      (await s3.send(new GetObjectTaggingCommand({ Bucket: 'tags', Key: 'c3' }))).TagSet,
      [],
      'REPLACE without tags',
    );

    const created = await s3.send(
      new CreateMultipartUploadCommand({
        Bucket: 'tags',
        Key: 'mp',
        Tagging: 'Hello=World&foo=bar',
      }),
    );
    const part = await s3.send(
      new UploadPartCommand({
        Bucket: 'tags',
        Key: 'mp',
        UploadId: created.UploadId,
        PartNumber: 1,
        Body: 'abc',
      }),
    );
    await s3.send(
      new CompleteMultipartUploadCommand({
        Bucket: 'tags',
        Key: 'mp',
        UploadId: created.UploadId,
        MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag }] },
      }),
    );
    t.same((await s3.send(new GetObjectTaggingCommand({ Bucket: 'tags', Key: 'mp' }))).TagSet, [
      { Key: 'Hello', Value: 'World' },
      { Key: 'foo', Value: 'bar' },
    ]);

    await s3.send(new CreateBucketCommand({ Bucket: 'vtags' }));
    await s3.send(
      new PutBucketVersioningCommand({
        Bucket: 'vtags',
        VersioningConfiguration: { Status: 'Enabled' },
      }),
    );
    const v1 = await s3.send(
      new PutObjectCommand({ Bucket: 'vtags', Key: 'k', Body: '1', Tagging: 'v=1' }),
    );
    await s3.send(new PutObjectCommand({ Bucket: 'vtags', Key: 'k', Body: '2', Tagging: 'v=2' }));
    const put = await s3.send(
      new PutObjectTaggingCommand({
        Bucket: 'vtags',
        Key: 'k',
        VersionId: v1.VersionId,
        Tagging: { TagSet: [{ Key: 'v', Value: 'one' }] },
      }),
    );
    t.equal(put.VersionId, v1.VersionId);
    const first = await s3.send(
      new GetObjectTaggingCommand({ Bucket: 'vtags', Key: 'k', VersionId: v1.VersionId }),
    );
    t.same(first.TagSet, [{ Key: 'v', Value: 'one' }]);
    t.equal(first.VersionId, v1.VersionId);
    t.same((await s3.send(new GetObjectTaggingCommand({ Bucket: 'vtags', Key: 'k' }))).TagSet, [
      { Key: 'v', Value: '2' },
    ]);
  });

  await t.test('bucket tags', async (t) => {
    t.same(await s3ErrorOf(s3.send(new GetBucketTaggingCommand({ Bucket: 'tags' }))), {
      name: 'NoSuchTagSet',
      status: 404,
    });
    await s3.send(new PutBucketTaggingCommand({ Bucket: 'tags', Tagging: { TagSet: tagSet(50) } }));
    t.equal((await s3.send(new GetBucketTaggingCommand({ Bucket: 'tags' }))).TagSet?.length, 50);
    t.same(
      await s3ErrorOf(
        s3.send(new PutBucketTaggingCommand({ Bucket: 'tags', Tagging: { TagSet: tagSet(51) } })),
      ),
      { name: 'InvalidTag', status: 400 },
    );
    t.same(
      await s3ErrorOf(
        bob.send(new PutBucketTaggingCommand({ Bucket: 'tags', Tagging: { TagSet: tagSet(1) } })),
      ),
      { name: 'AccessDenied', status: 403 },
    );
    t.same(await s3ErrorOf(bob.send(new GetBucketTaggingCommand({ Bucket: 'tags' }))), {
      name: 'AccessDenied',
      status: 403,
    });
    await s3.send(new DeleteBucketTaggingCommand({ Bucket: 'tags' }));
    t.same(await s3ErrorOf(s3.send(new GetBucketTaggingCommand({ Bucket: 'tags' }))), {
      name: 'NoSuchTagSet',
      status: 404,
    });
  });
});
