// Goal: the AWS SDK for JavaScript, in its default configuration, manages buckets on Lightwell:
// SigV4 from the Authorization header and presigned URLs, bucket operations with S3's answers,
// and global bucket names across tenants (403 on S3, invisible and 409 on the native API); a
// re-create of one's own bucket answers 200 in us-east-1, as AWS does there.
// Method: a real `lightwell serve`, two tenants made through the admin API, @aws-sdk/client-s3.
import t from 'tap';
import {
  ListBucketsCommand,
  CreateBucketCommand,
  HeadBucketCommand,
  DeleteBucketCommand,
  GetBucketLocationCommand,
  GetBucketVersioningCommand,
  PutBucketVersioningCommand,
  GetObjectCommand,
  PutObjectCommand,
  DeleteObjectCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { s3ClientFor, s3ErrorOf } from '../helpers/s3-sdk.js';
import { Service } from '../helpers/service.js';

t.test('bucket operations through the AWS SDK', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const origin = service.publicUrl.replace(/\/api\/v1$/, '');
  const alice = await service.tenant('alice');
  const bob = await service.tenant('bob');
  const s3 = s3ClientFor(origin, alice);
  const s3bob = s3ClientFor(origin, bob);
  t.teardown(() => {
    s3.destroy();
    s3bob.destroy();
  });

  const empty = await s3.send(new ListBucketsCommand({}));
  t.same(empty.Buckets ?? [], []);
  t.equal(empty.Owner?.ID, 'alice', 'the owner is the tenant');
  t.ok(empty.Owner?.DisplayName);

  await s3.send(new CreateBucketCommand({ Bucket: 'photos' }));
  await s3.send(
    new CreateBucketCommand({
      Bucket: 'locked',
      ObjectLockEnabledForBucket: true,
      CreateBucketConfiguration: { LocationConstraint: 'us-east-1' as never },
    }),
  );
  const listed = await s3.send(new ListBucketsCommand({}));
  t.same(
    listed.Buckets?.map((bucket) => bucket.Name),
    ['locked', 'photos'],
  );
  t.ok(listed.Buckets?.[0]?.CreationDate instanceof Date);
  // Paged with MaxBuckets, continued by the answer's token; a prefix narrows it.
  const first = await s3.send(new ListBucketsCommand({ MaxBuckets: 1 }));
  t.same(
    first.Buckets?.map((bucket) => bucket.Name),
    ['locked'],
  );
  t.ok(first.ContinuationToken, 'a token while more remain');
  const second = await s3.send(
    new ListBucketsCommand({ MaxBuckets: 1, ContinuationToken: first.ContinuationToken }),
  );
  t.same(
    second.Buckets?.map((bucket) => bucket.Name),
    ['photos'],
  );
  t.equal(second.ContinuationToken, undefined, 'none on the last page');
  const prefixed = await s3.send(new ListBucketsCommand({ MaxBuckets: 5, Prefix: 'ph' }));
  t.same(
    prefixed.Buckets?.map((bucket) => bucket.Name),
    ['photos'],
  );
  t.equal(prefixed.Prefix, 'ph');
  t.same(await s3ErrorOf(s3.send(new ListBucketsCommand({ MaxBuckets: 0 }))), {
    name: 'InvalidArgument',
    status: 400,
  });
  t.same(
    await s3ErrorOf(s3.send(new ListBucketsCommand({ MaxBuckets: 1, ContinuationToken: '!!' }))),
    { name: 'InvalidArgument', status: 400 },
  );

  // In us-east-1 (the default s3.region) AWS answers a re-create of one's own bucket with 200.
  t.same(await s3ErrorOf(s3.send(new CreateBucketCommand({ Bucket: 'photos' }))), {
    name: 'none',
    status: 0,
  });
  t.same(
    (await s3.send(new ListBucketsCommand({}))).Buckets?.map((bucket) => bucket.Name),
    ['locked', 'photos'],
    'a re-create changes nothing',
  );
  t.same(await s3ErrorOf(s3bob.send(new CreateBucketCommand({ Bucket: 'photos' }))), {
    name: 'BucketAlreadyExists',
    status: 409,
  });
  t.same(await s3ErrorOf(s3.send(new CreateBucketCommand({ Bucket: 'No_Such' }))), {
    name: 'InvalidBucketName',
    status: 400,
  });
  t.same(
    await s3ErrorOf(
      s3.send(
        new CreateBucketCommand({
          Bucket: 'elsewhere',
          CreateBucketConfiguration: { LocationConstraint: 'eu-west-1' },
        }),
      ),
    ),
    { name: 'IllegalLocationConstraintException', status: 400 },
  );

  // The native API: another tenant's name is a 409 conflict, its bucket invisible.
  const nativeCreate = await bob.request('POST', '/buckets', { json: { name: 'photos' } });
  t.equal(nativeCreate.status, 409);
  t.equal((await bob.request('GET', '/buckets/photos')).status, 404);

  await s3.send(new HeadBucketCommand({ Bucket: 'photos' }));
  t.equal(
    (await s3ErrorOf(s3bob.send(new HeadBucketCommand({ Bucket: 'photos' })))).status,
    403,
    "another tenant's bucket is forbidden, not missing",
  );
  t.same(await s3ErrorOf(s3.send(new HeadBucketCommand({ Bucket: 'nothing-here' }))), {
    name: 'NotFound',
    status: 404,
  });
  t.same(await s3ErrorOf(s3bob.send(new GetBucketLocationCommand({ Bucket: 'photos' }))), {
    name: 'AccessDenied',
    status: 403,
  });

  const location = await s3.send(new GetBucketLocationCommand({ Bucket: 'photos' }));
  t.notOk(location.LocationConstraint, 'us-east-1 is the empty constraint');

  t.notOk((await s3.send(new GetBucketVersioningCommand({ Bucket: 'photos' }))).Status);
  t.equal(
    (await s3.send(new GetBucketVersioningCommand({ Bucket: 'locked' }))).Status,
    'Enabled',
    'object lock turns versioning on',
  );
  await s3.send(
    new PutBucketVersioningCommand({
      Bucket: 'photos',
      VersioningConfiguration: { Status: 'Enabled' },
    }),
  );
  t.equal((await s3.send(new GetBucketVersioningCommand({ Bucket: 'photos' }))).Status, 'Enabled');
  t.same(
    await s3ErrorOf(
      s3.send(
        new PutBucketVersioningCommand({
          Bucket: 'locked',
          VersioningConfiguration: { Status: 'Suspended' },
        }),
      ),
    ),
    { name: 'InvalidBucketState', status: 409 },
  );

  // A presigned ListBuckets-like GET: the bucket location, valid then expired.
  const url = await getSignedUrl(s3, new GetBucketLocationCommand({ Bucket: 'photos' }), {
    expiresIn: 60,
  });
  t.equal((await fetch(url)).status, 200, 'a presigned URL works');
  // The SDK's default presigned GetObject URL signs `x-amz-checksum-mode=ENABLED` in its query:
  // the object comes back with its CRC32, as the header form would answer.
  const written = await s3.send(
    new PutObjectCommand({ Bucket: 'photos', Key: 'signed', Body: 'presigned' }),
  );
  const objectUrl = await getSignedUrl(
    s3,
    new GetObjectCommand({ Bucket: 'photos', Key: 'signed' }),
  );
  t.match(objectUrl, 'x-amz-checksum-mode=ENABLED');
  const object = await fetch(objectUrl);
  t.equal(object.status, 200, 'a presigned GetObject URL works');
  t.equal(await object.text(), 'presigned');
  t.ok(object.headers.get('x-amz-checksum-crc32'), 'with the checksum it asked for');
  // Its version removed for good (the bucket is versioned by now), so the bucket can go later.
  await s3.send(
    new DeleteObjectCommand({ Bucket: 'photos', Key: 'signed', VersionId: written.VersionId }),
  );
  const tampered = url.replace('location', 'versioning');
  t.equal((await fetch(tampered)).status, 403, 'a changed presigned URL does not');
  const expired = await getSignedUrl(s3, new GetBucketLocationCommand({ Bucket: 'photos' }), {
    expiresIn: 60,
    signingDate: new Date(Date.now() - 120_000),
  });
  const stale = await fetch(expired);
  t.equal(stale.status, 403);
  t.match(await stale.text(), /<Code>AccessDenied<\/Code><Message>Request has expired/);

  // Bad credentials.
  const wrong = s3ClientFor(origin, alice, 'x'.repeat(40));
  t.teardown(() => wrong.destroy());
  t.same(await s3ErrorOf(wrong.send(new ListBucketsCommand({}))), {
    name: 'SignatureDoesNotMatch',
    status: 403,
  });
  const unknown = s3ClientFor(origin, {
    accessKeyId: 'LWAAAAAAAAAAAAAAAAAA',
    secretKey: alice.secretKey,
  });
  t.teardown(() => unknown.destroy());
  t.same(await s3ErrorOf(unknown.send(new ListBucketsCommand({}))), {
    name: 'InvalidAccessKeyId',
    status: 403,
  });

  // Audit rows name the S3 operation, and a refusal is audited under the key's tenant.
  const audit = await service.admin('GET', '/audit?tenant=alice&limit=1000', service.adminToken());
  const actions = (audit.json as { events: Array<{ action: string; outcome: string }> }).events;
  t.ok(
    actions.some((event) => event.action === 's3:CreateBucket' && event.outcome === 'allowed'),
    'CreateBucket is audited as s3:CreateBucket',
  );
  t.ok(
    actions.some((event) => event.action === 's3:ListBuckets' && event.outcome === 'denied'),
    'a bad signature is audited as a denial',
  );

  await s3.send(new DeleteBucketCommand({ Bucket: 'photos' }));
  t.same(await s3ErrorOf(s3.send(new DeleteBucketCommand({ Bucket: 'photos' }))), {
    name: 'NoSuchBucket',
    status: 404,
  });
  // The name is free again, for any tenant.
  await s3bob.send(new CreateBucketCommand({ Bucket: 'photos' }));
  t.same(
    (await s3bob.send(new ListBucketsCommand({}))).Buckets?.map((bucket) => bucket.Name),
    ['photos'],
  );
});
