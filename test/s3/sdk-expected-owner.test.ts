// Goal: `x-amz-expected-bucket-owner` (and `x-amz-source-expected-bucket-owner` on a copy) guards
// a request against a bucket name held by someone else: when it names another owner than the
// bucket's tenant (the id S3 shows as `<Owner><ID>`), the request is refused 403 `AccessDenied`
// and nothing is written; the right owner, or no header, lets it through.
// Method: a real `lightwell serve`, one tenant, @aws-sdk/client-s3's ExpectedBucketOwner fields.
import t from 'tap';
import {
  CopyObjectCommand,
  CreateBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
} from '@aws-sdk/client-s3';
import { s3ClientFor, s3ErrorOf } from '../helpers/s3-sdk.js';
import { Service } from '../helpers/service.js';

t.test('the expected bucket owner is checked', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const origin = service.publicUrl.replace(/\/api\/v1$/, '');
  const s3 = s3ClientFor(origin, await service.tenant('acme'));
  t.teardown(() => s3.destroy());
  await s3.send(new CreateBucketCommand({ Bucket: 'owned' }));

  const wrong = 'acme-not';
  t.same(
    await s3ErrorOf(
      s3.send(
        new PutObjectCommand({ Bucket: 'owned', Key: 'k', Body: 'x', ExpectedBucketOwner: wrong }),
      ),
    ),
    { name: 'AccessDenied', status: 403 },
    'a PUT expecting another owner',
  );
  t.same(
    await s3ErrorOf(s3.send(new HeadObjectCommand({ Bucket: 'owned', Key: 'k' }))),
    { name: 'NotFound', status: 404 },
    'nothing was written',
  );
  t.same(
    await s3ErrorOf(
      s3.send(new ListObjectsV2Command({ Bucket: 'owned', ExpectedBucketOwner: wrong })),
    ),
    { name: 'AccessDenied', status: 403 },
    'a listing expecting another owner',
  );
  await s3.send(
    new PutObjectCommand({ Bucket: 'owned', Key: 'k', Body: 'x', ExpectedBucketOwner: 'acme' }),
  );
  const listed = await s3.send(
    new ListObjectsV2Command({ Bucket: 'owned', ExpectedBucketOwner: 'acme' }),
  );
  t.equal(listed.KeyCount, 1, 'the right owner is let through');
  t.same(
    await s3ErrorOf(
      s3.send(
        new CopyObjectCommand({
          Bucket: 'owned',
          Key: 'copy',
          CopySource: 'owned/k',
          ExpectedSourceBucketOwner: wrong,
        }),
      ),
    ),
    { name: 'AccessDenied', status: 403 },
    'a copy whose source has another owner',
  );
  await s3.send(
    new CopyObjectCommand({
      Bucket: 'owned',
      Key: 'copy',
      CopySource: 'owned/k',
      ExpectedSourceBucketOwner: 'acme',
    }),
  );
  t.pass('a copy from the expected source owner');
});
