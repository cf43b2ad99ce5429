// Goal: a multipart upload names its Initiator (the tenant that created it) and its Owner (the
// tenant that will own the completed object) in ListMultipartUploads and ListParts, as S3 does:
// another tenant's upload is its own, unless BucketOwnerPreferred and bucket-owner-full-control
// make the bucket's tenant the owner; the upload's parties are the same whoever lists them.
// Method: a real `lightwell serve`, two tenants, @aws-sdk/client-s3.
import t from 'tap';
import {
  AbortMultipartUploadCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  ListMultipartUploadsCommand,
  ListPartsCommand,
  PutBucketPolicyCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { s3ClientFor } from '../helpers/s3-sdk.js';
import { Service } from '../helpers/service.js';

t.test('upload initiator and owner through the AWS SDK', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const origin = service.publicUrl.replace(/\/api\/v1$/, '');
  const alice = s3ClientFor(origin, await service.tenant('alice'));
  const bob = s3ClientFor(origin, await service.tenant('bob'));
  t.teardown(() => [alice, bob].forEach((client) => client.destroy()));

  await alice.send(
    new CreateBucketCommand({ Bucket: 'shared', ObjectOwnership: 'BucketOwnerPreferred' }),
  );
  await alice.send(
    new PutBucketPolicyCommand({
      Bucket: 'shared',
      Policy: JSON.stringify({
        Version: '2012-10-17',
        Statement: [
          {
            Effect: 'Allow',
            Principal: { AWS: 'bob' },
            Action: 's3:*',
            Resource: ['arn:aws:s3:::shared', 'arn:aws:s3:::shared/*'],
          },
        ],
      }),
    }),
  );
  const create = async (client: S3Client, key: string, full = false): Promise<string> => {
    const acl = full ? { ACL: 'bucket-owner-full-control' as const } : {};
    const out = await client.send(
      new CreateMultipartUploadCommand({ Bucket: 'shared', Key: key, ...acl }),
    );
    return out.UploadId ?? '';
  };
  const uploads = {
    a: await create(alice, 'a-by-alice'),
    b: await create(bob, 'b-by-bob'),
    c: await create(bob, 'c-by-bob-for-alice', true),
  };

  const parties = async (client: S3Client, key: string, uploadId: string) => {
    const page = await client.send(
      new ListPartsCommand({ Bucket: 'shared', Key: key, UploadId: uploadId }),
    );
    return [page.Initiator?.ID, page.Owner?.ID, page.Owner?.DisplayName];
  };
  for (const client of [alice, bob]) {
    t.same(await parties(client, 'a-by-alice', uploads.a), ['alice', 'alice', 'alice']);
    t.same(await parties(client, 'b-by-bob', uploads.b), ['bob', 'bob', 'bob'], "bob's own");
    t.same(
      await parties(client, 'c-by-bob-for-alice', uploads.c),
      ['bob', 'alice', 'alice'],
      'bucket-owner-full-control under BucketOwnerPreferred: the bucket tenant owns it',
    );
    const listed = await client.send(new ListMultipartUploadsCommand({ Bucket: 'shared' }));
    t.same(
      listed.Uploads?.map((u) => [u.Key, u.Initiator?.ID, u.Initiator?.DisplayName, u.Owner?.ID]),
      [
        ['a-by-alice', 'alice', 'alice', 'alice'],
        ['b-by-bob', 'bob', 'bob', 'bob'],
        ['c-by-bob-for-alice', 'bob', 'bob', 'alice'],
      ],
      'every upload with its own parties, whoever lists',
    );
  }
  for (const [key, id] of [
    ['a-by-alice', uploads.a],
    ['b-by-bob', uploads.b],
    ['c-by-bob-for-alice', uploads.c],
  ] as const)
    await alice.send(new AbortMultipartUploadCommand({ Bucket: 'shared', Key: key, UploadId: id }));
});
