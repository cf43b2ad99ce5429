// Goal: bucket policies that condition writes on their encryption headers, as AWS's
// s3:x-amz-server-side-encryption and s3:x-amz-server-side-encryption-customer-algorithm keys:
// a Deny on a Null customer algorithm refuses a plain PUT and lets an SSE-C one through, and a
// Deny on StringNotEquals AES256 answers AccessDenied (403) to a PUT asking for AES192, before
// the header's own error (400) would, while an AES256 PUT succeeds.
// Method: a real `lightwell serve` on loopback, @aws-sdk/client-s3.
import t from 'tap';
import {
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  PutBucketPolicyCommand,
  PutObjectCommand,
  type ServerSideEncryption,
} from '@aws-sdk/client-s3';
import { s3ClientFor, s3ErrorOf } from '../helpers/s3-sdk.js';
import { Service } from '../helpers/service.js';

const ssec = { SSECustomerAlgorithm: 'AES256', SSECustomerKey: 'k'.repeat(32) };

function denyPut(bucket: string, condition: Record<string, Record<string, string>>): string {
  return JSON.stringify({
    Version: '2012-10-17',
    Statement: [
      {
        Effect: 'Deny',
        Principal: '*',
        Action: 's3:PutObject',
        Resource: `arn:aws:s3:::${bucket}/*`,
        Condition: condition,
      },
    ],
  });
}

t.test('bucket policy conditions on encryption headers', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const origin = service.publicUrl.replace(/\/api\/v1$/, '');
  const s3 = s3ClientFor(origin, await service.tenant('alice'));
  t.teardown(() => s3.destroy());

  await t.test('SSE-C required through a Null condition', async (t) => {
    await s3.send(new CreateBucketCommand({ Bucket: 'need-ssec' }));
    await s3.send(
      new PutBucketPolicyCommand({
        Bucket: 'need-ssec',
        Policy: denyPut('need-ssec', {
          Null: { 's3:x-amz-server-side-encryption-customer-algorithm': 'true' },
        }),
      }),
    );
    t.same(
      await s3ErrorOf(s3.send(new PutObjectCommand({ Bucket: 'need-ssec', Key: 'k', Body: 'x' }))),
      { name: 'AccessDenied', status: 403 },
      'a PUT without a customer key is denied',
    );
    const put = await s3.send(
      new PutObjectCommand({ Bucket: 'need-ssec', Key: 'k', Body: 'x', ...ssec }),
    );
    t.equal(put.SSECustomerAlgorithm, 'AES256', 'a PUT under a customer key is allowed');
  });

  await t.test('the policy answers before a bad algorithm does', async (t) => {
    await s3.send(new CreateBucketCommand({ Bucket: 'need-aes' }));
    await s3.send(
      new PutBucketPolicyCommand({
        Bucket: 'need-aes',
        Policy: denyPut('need-aes', {
          StringNotEquals: { 's3:x-amz-server-side-encryption': 'AES256' },
        }),
      }),
    );
    const bad = { ServerSideEncryption: 'AES192' as ServerSideEncryption };
    t.same(
      await s3ErrorOf(
        s3.send(new PutObjectCommand({ Bucket: 'need-aes', Key: 'k', Body: 'x', ...bad })),
      ),
      { name: 'AccessDenied', status: 403 },
    );
    t.same(
      await s3ErrorOf(
        s3.send(new CreateMultipartUploadCommand({ Bucket: 'need-aes', Key: 'k', ...bad })),
      ),
      { name: 'AccessDenied', status: 403 },
      'a multipart create too',
    );
    const put = await s3.send(
      new PutObjectCommand({
        Bucket: 'need-aes',
        Key: 'k',
        Body: 'x',
        ServerSideEncryption: 'AES256',
      }),
    );
    t.equal(put.ServerSideEncryption, 'AES256');
  });

  await t.test('without a policy, the bad algorithm is the answer', async (t) => {
    await s3.send(new CreateBucketCommand({ Bucket: 'open' }));
    t.same(
      await s3ErrorOf(
        s3.send(
          new PutObjectCommand({
            Bucket: 'open',
            Key: 'k',
            Body: 'x',
            ServerSideEncryption: 'AES192' as ServerSideEncryption,
          }),
        ),
      ),
      { name: 'InvalidArgument', status: 400 },
    );
  });
});
