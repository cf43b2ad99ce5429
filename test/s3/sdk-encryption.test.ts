// Goal: server-side encryption as S3 clients see it through the AWS SDK: SSE-S3 accepted and
// reported on every object, SSE-KMS with the tenant's own key or a named key an operator created
// through the admin API (stored and reported, a bucket default applied, an unknown id
// KMS.NotFoundException), Put/Get/DeleteBucketEncryption, and the refusals: SSE
// headers on reads, an unknown algorithm, another tenant's key, malformed SSE-C keys, and other
// tenants' buckets.
// Method: a real `lightwell serve`, two tenants, @aws-sdk/client-s3.
import t from 'tap';
import {
  CopyObjectCommand,
  CreateBucketCommand,
  DeleteBucketEncryptionCommand,
  GetBucketEncryptionCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutBucketEncryptionCommand,
  PutObjectCommand,
} from '@aws-sdk/client-s3';
import { execFileSync } from 'node:child_process';
import { s3ClientFor, s3ErrorOf } from '../helpers/s3-sdk.js';
import { CLI, Service } from '../helpers/service.js';

t.test('server-side encryption through the AWS SDK', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const origin = service.publicUrl.replace(/\/api\/v1$/, '');
  const s3 = s3ClientFor(origin, await service.tenant('alice'));
  const bob = s3ClientFor(origin, await service.tenant('bob'));
  t.teardown(() => [s3, bob].forEach((client) => client.destroy()));
  await s3.send(new CreateBucketCommand({ Bucket: 'enc' }));

  await t.test('SSE-S3 and SSE-KMS on objects', async (t) => {
    const plain = await s3.send(new PutObjectCommand({ Bucket: 'enc', Key: 'p', Body: 'x' }));
    t.equal(plain.ServerSideEncryption, 'AES256', 'every object is encrypted at rest');
    const s3Put = await s3.send(
      new PutObjectCommand({ Bucket: 'enc', Key: 's', Body: 'x', ServerSideEncryption: 'AES256' }),
    );
    t.equal(s3Put.ServerSideEncryption, 'AES256');
    t.equal(
      (await s3.send(new HeadObjectCommand({ Bucket: 'enc', Key: 's' }))).ServerSideEncryption,
      'AES256',
    );

    const kms = await s3.send(
      new PutObjectCommand({
        Bucket: 'enc',
        Key: 'k',
        Body: 'secret',
        ServerSideEncryption: 'aws:kms',
      }),
    );
    t.equal(kms.ServerSideEncryption, 'aws:kms');
    t.equal(kms.SSEKMSKeyId, 'alice', "the tenant's own key by default");
    const got = await s3.send(new GetObjectCommand({ Bucket: 'enc', Key: 'k' }));
    t.equal(got.ServerSideEncryption, 'aws:kms');
    t.equal(got.SSEKMSKeyId, 'alice');
    t.equal(await got.Body?.transformToString(), 'secret');
    const named = await s3.send(
      new PutObjectCommand({
        Bucket: 'enc',
        Key: 'k2',
        Body: 'x',
        ServerSideEncryption: 'aws:kms',
        SSEKMSKeyId: 'alice',
      }),
    );
    t.equal(named.SSEKMSKeyId, 'alice');
    const copied = await s3.send(
      new CopyObjectCommand({ Bucket: 'enc', Key: 'k3', CopySource: 'enc/k' }),
    );
    t.equal(copied.ServerSideEncryption, 'AES256', "a copy does not take the source's encryption");

    const refused = async (
      input: Record<string, unknown>,
      name: string,
      status: number,
      what: string,
    ) =>
      t.same(
        await s3ErrorOf(
          s3.send(new PutObjectCommand({ Bucket: 'enc', Key: 'r', Body: 'x', ...input })),
        ),
        { name, status },
        what,
      );
    await refused(
      { ServerSideEncryption: 'aws:kms', SSEKMSKeyId: 'bob' },
      'KMS.NotFoundException',
      400,
      "another tenant's key",
    );
    await refused({ SSEKMSKeyId: 'alice' }, 'InvalidArgument', 400, 'a key id without aws:kms');
    await refused(
      { ServerSideEncryption: 'aes:kms' },
      'InvalidArgument',
      400,
      'an unknown algorithm',
    );
    const key = Buffer.alloc(32, 7).toString('base64');
    await refused(
      { SSECustomerAlgorithm: 'AES256', SSECustomerKey: key, ServerSideEncryption: 'AES256' },
      'InvalidArgument',
      400,
      'SSE-C with SSE-S3',
    );
    await refused(
      { SSECustomerAlgorithm: 'AES256', SSECustomerKey: Buffer.alloc(16).toString('base64') },
      'InvalidArgument',
      400,
      'an SSE-C key of 128 bits',
    );
    t.same(
      await s3ErrorOf(
        s3.send(
          new GetObjectCommand({
            Bucket: 'enc',
            Key: 'k',
            SSECustomerAlgorithm: 'AES256',
            SSECustomerKey: Buffer.alloc(32, 7).toString('base64'),
          }),
        ),
      ),
      { name: 'InvalidRequest', status: 400 },
      'an SSE-C key for an object not under one (test/s3/sdk-sse-c.test.ts has the rest)',
    );
  });

  await t.test('named KMS keys an operator creates', async (t) => {
    const owner = service.adminToken();
    const put = (key: string, kmsKeyId: string) =>
      s3.send(
        new PutObjectCommand({
          Bucket: 'enc',
          Key: key,
          Body: `under ${kmsKeyId}`,
          ServerSideEncryption: 'aws:kms',
          SSEKMSKeyId: kmsKeyId,
        }),
      );
    t.same(await s3ErrorOf(put('n1', 'testkey-1')), {
      name: 'KMS.NotFoundException',
      status: 400,
    });
    const created = await service.admin('POST', '/tenants/alice/kms-keys', owner, {
      id: 'testkey-1',
      description: 'for the tests',
    });
    t.equal(created.status, 201);
    t.match(created.json, { id: 'testkey-1', tenantId: 'alice', description: 'for the tests' });
    t.equal(
      (await service.admin('POST', '/tenants/alice/kms-keys', owner, { id: 'testkey-1' })).status,
      409,
      'one key per id',
    );
    t.equal(
      (await service.admin('POST', '/tenants/alice/kms-keys', owner, { id: 'bad key' })).status,
      400,
    );
    const listed = await service.admin('GET', '/tenants/alice/kms-keys', owner);
    t.same(
      (listed.json as { keys: Array<{ id: string }> }).keys.map((key) => key.id),
      ['testkey-1'],
    );
    t.equal((await put('n1', 'testkey-1')).SSEKMSKeyId, 'testkey-1');
    const head = await s3.send(new HeadObjectCommand({ Bucket: 'enc', Key: 'n1' }));
    t.equal(head.SSEKMSKeyId, 'testkey-1', 'reported on reads');
    t.same(
      await s3ErrorOf(
        bob.send(
          new PutObjectCommand({
            Bucket: 'enc',
            Key: 'n2',
            Body: 'x',
            ServerSideEncryption: 'aws:kms',
            SSEKMSKeyId: 'testkey-1',
          }),
        ),
      ),
      { name: 'AccessDenied', status: 403 },
      "another tenant's bucket stays refused",
    );
    const deleted = await service.admin('DELETE', '/tenants/alice/kms-keys/testkey-1', owner);
    t.equal(deleted.status, 204);
    t.same(await s3ErrorOf(put('n3', 'testkey-1')), {
      name: 'KMS.NotFoundException',
      status: 400,
    });
    const old = await s3.send(new GetObjectCommand({ Bucket: 'enc', Key: 'n1' }));
    t.equal(await old.Body?.transformToString(), 'under testkey-1', 'old versions stay readable');
    t.equal(
      (await service.admin('DELETE', '/tenants/alice/kms-keys/testkey-1', owner)).status,
      404,
    );
    // The CLI over the same admin API.
    const cli = (...args: string[]) =>
      execFileSync(process.execPath, [CLI, 'kms-key', ...args], {
        encoding: 'utf8',
        env: { ...process.env, LIGHTWELL_ADMIN_TOKEN: owner },
      });
    const endpoint = service.adminUrl.replace(/\/admin\/api\/v1$/, '');
    t.match(JSON.parse(cli('create', 'alice', 'alias/cli', '--endpoint', endpoint)), {
      id: 'alias/cli',
    });
    t.same(
      (
        JSON.parse(cli('list', 'alice', '--endpoint', endpoint)) as { keys: Array<{ id: string }> }
      ).keys.map((key) => key.id),
      ['alias/cli'],
    );
    t.equal((await put('n4', 'alias/cli')).SSEKMSKeyId, 'alias/cli');
    t.equal(cli('delete', 'alice', 'alias/cli', '--endpoint', endpoint), 'deleted alias/cli\n');
  });

  await t.test('bucket default encryption', async (t) => {
    t.same(await s3ErrorOf(s3.send(new GetBucketEncryptionCommand({ Bucket: 'enc' }))), {
      name: 'ServerSideEncryptionConfigurationNotFoundError',
      status: 404,
    });
    await s3.send(
      new PutBucketEncryptionCommand({
        Bucket: 'enc',
        ServerSideEncryptionConfiguration: {
          Rules: [{ ApplyServerSideEncryptionByDefault: { SSEAlgorithm: 'aws:kms' } }],
        },
      }),
    );
    const got = await s3.send(new GetBucketEncryptionCommand({ Bucket: 'enc' }));
    t.same(got.ServerSideEncryptionConfiguration?.Rules?.[0]?.ApplyServerSideEncryptionByDefault, {
      SSEAlgorithm: 'aws:kms',
      KMSMasterKeyID: 'alice',
    });
    const defaulted = await s3.send(new PutObjectCommand({ Bucket: 'enc', Key: 'd', Body: 'x' }));
    t.equal(defaulted.ServerSideEncryption, 'aws:kms', 'the default applies');
    const overridden = await s3.send(
      new PutObjectCommand({ Bucket: 'enc', Key: 'o', Body: 'x', ServerSideEncryption: 'AES256' }),
    );
    t.equal(overridden.ServerSideEncryption, 'AES256', 'the request overrides it');
    t.same(
      await s3ErrorOf(
        s3.send(
          new PutBucketEncryptionCommand({
            Bucket: 'enc',
            ServerSideEncryptionConfiguration: {
              Rules: [
                {
                  ApplyServerSideEncryptionByDefault: {
                    SSEAlgorithm: 'aws:kms',
                    KMSMasterKeyID: 'bob',
                  },
                },
              ],
            },
          }),
        ),
      ),
      { name: 'KMS.NotFoundException', status: 400 },
    );
    t.same(
      await s3ErrorOf(
        bob.send(
          new PutBucketEncryptionCommand({
            Bucket: 'enc',
            ServerSideEncryptionConfiguration: {
              Rules: [{ ApplyServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }],
            },
          }),
        ),
      ),
      { name: 'AccessDenied', status: 403 },
    );
    t.same(await s3ErrorOf(bob.send(new GetBucketEncryptionCommand({ Bucket: 'enc' }))), {
      name: 'AccessDenied',
      status: 403,
    });
    await s3.send(new DeleteBucketEncryptionCommand({ Bucket: 'enc' }));
    t.same(await s3ErrorOf(s3.send(new GetBucketEncryptionCommand({ Bucket: 'enc' }))), {
      name: 'ServerSideEncryptionConfigurationNotFoundError',
      status: 404,
    });
    const after = await s3.send(new PutObjectCommand({ Bucket: 'enc', Key: 'a', Body: 'x' }));
    t.equal(after.ServerSideEncryption, 'AES256');
  });
});
