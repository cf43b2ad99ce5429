// Goal: S3 Object Ownership through the AWS SDK: Put/Get/DeleteBucketOwnershipControls and
// CreateBucket's ObjectOwnership; BucketOwnerEnforced makes another tenant's writes the bucket
// tenant's, refuses every ACL but bucket-owner-full-control and every ACL change, is refused
// while the bucket ACL grants others, and stops object ACLs granting anyone (anonymous refused).
// Method: a real `lightwell serve`, two tenants, @aws-sdk/client-s3, fetch for anonymous reads.
import t from 'tap';
import {
  CreateBucketCommand,
  DeleteBucketOwnershipControlsCommand,
  GetBucketOwnershipControlsCommand,
  GetObjectAclCommand,
  PutBucketAclCommand,
  PutBucketOwnershipControlsCommand,
  PutBucketPolicyCommand,
  PutObjectAclCommand,
  PutObjectCommand,
} from '@aws-sdk/client-s3';
import { s3ClientFor, s3ErrorOf } from '../helpers/s3-sdk.js';
import { Service } from '../helpers/service.js';

t.test('Object Ownership through the AWS SDK', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const origin = service.publicUrl.replace(/\/api\/v1$/, '');
  const s3 = s3ClientFor(origin, await service.tenant('alice'));
  const bob = s3ClientFor(origin, await service.tenant('bob'));
  t.teardown(() => [s3, bob].forEach((client) => client.destroy()));
  const enforced = { Rules: [{ ObjectOwnership: 'BucketOwnerEnforced' as const }] };

  await s3.send(new CreateBucketCommand({ Bucket: 'plain' }));
  t.same(
    await s3ErrorOf(s3.send(new GetBucketOwnershipControlsCommand({ Bucket: 'plain' }))),
    { name: 'OwnershipControlsNotFoundError', status: 404 },
    'no rule by default',
  );

  await s3.send(
    new CreateBucketCommand({ Bucket: 'owned', ObjectOwnership: 'BucketOwnerEnforced' }),
  );
  const got = await s3.send(new GetBucketOwnershipControlsCommand({ Bucket: 'owned' }));
  t.same(got.OwnershipControls?.Rules, [{ ObjectOwnership: 'BucketOwnerEnforced' }]);
  await s3.send(
    new PutBucketPolicyCommand({
      Bucket: 'owned',
      Policy: JSON.stringify({
        Version: '2012-10-17',
        Statement: [
          {
            Effect: 'Allow',
            Principal: { AWS: 'bob' },
            Action: 's3:PutObject',
            Resource: 'arn:aws:s3:::owned/*',
          },
        ],
      }),
    }),
  );
  await bob.send(new PutObjectCommand({ Bucket: 'owned', Key: 'by-bob', Body: 'x' }));
  const acl = await s3.send(new GetObjectAclCommand({ Bucket: 'owned', Key: 'by-bob' }));
  t.equal(acl.Owner?.ID, 'alice', "another tenant's write is the bucket tenant's");
  await bob.send(
    new PutObjectCommand({
      Bucket: 'owned',
      Key: 'full',
      Body: 'x',
      ACL: 'bucket-owner-full-control',
    }),
  );
  t.same(
    await s3ErrorOf(
      bob.send(new PutObjectCommand({ Bucket: 'owned', Key: 'p', Body: 'x', ACL: 'private' })),
    ),
    { name: 'AccessControlListNotSupported', status: 400 },
  );
  t.same(await s3ErrorOf(s3.send(new PutBucketAclCommand({ Bucket: 'owned', ACL: 'private' }))), {
    name: 'AccessControlListNotSupported',
    status: 400,
  });
  t.same(
    await s3ErrorOf(
      s3.send(new PutObjectAclCommand({ Bucket: 'owned', Key: 'by-bob', ACL: 'public-read' })),
    ),
    { name: 'AccessControlListNotSupported', status: 400 },
  );

  // A public object ACL stops granting once ACLs are off.
  await s3.send(new CreateBucketCommand({ Bucket: 'public' }));
  await s3.send(
    new PutObjectCommand({ Bucket: 'public', Key: 'o', Body: 'x', ACL: 'public-read' }),
  );
  t.equal((await fetch(`${origin}/public/o`)).status, 200, 'public while ACLs apply');
  await s3.send(new PutBucketAclCommand({ Bucket: 'public', ACL: 'public-read' }));
  t.same(
    await s3ErrorOf(
      s3.send(
        new PutBucketOwnershipControlsCommand({ Bucket: 'public', OwnershipControls: enforced }),
      ),
    ),
    { name: 'InvalidBucketAclWithObjectOwnership', status: 400 },
    'not while the bucket ACL grants others',
  );
  await s3.send(new PutBucketAclCommand({ Bucket: 'public', ACL: 'private' }));
  await s3.send(
    new PutBucketOwnershipControlsCommand({ Bucket: 'public', OwnershipControls: enforced }),
  );
  t.equal((await fetch(`${origin}/public/o`)).status, 403, 'the object ACL no longer grants');

  await s3.send(new DeleteBucketOwnershipControlsCommand({ Bucket: 'public' }));
  t.same(await s3ErrorOf(s3.send(new GetBucketOwnershipControlsCommand({ Bucket: 'public' }))), {
    name: 'OwnershipControlsNotFoundError',
    status: 404,
  });
  t.equal((await fetch(`${origin}/public/o`)).status, 200, 'ACLs apply again');
  t.same(
    await s3ErrorOf(
      bob.send(
        new PutBucketOwnershipControlsCommand({ Bucket: 'public', OwnershipControls: enforced }),
      ),
    ),
    { name: 'AccessDenied', status: 403 },
    "another tenant's bucket",
  );
});
