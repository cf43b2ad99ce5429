// Goal: S3 access control through the AWS SDK: canned ACLs and grants on buckets and objects,
// bucket policies in AWS's language (Allow, Deny, principals, prefixes, conditions) evaluated
// the same way on the native API, the public access block, anonymous access (served only where
// granted, always audited), and CORS (configuration, preflight, actual responses).
// Method: a real `lightwell serve`, three tenants, @aws-sdk/client-s3 and plain fetch for
// anonymous and browser-style requests.
import t from 'tap';
import {
  CreateBucketCommand,
  DeleteBucketCorsCommand,
  DeletePublicAccessBlockCommand,
  GetBucketAclCommand,
  GetBucketCorsCommand,
  GetBucketPolicyCommand,
  GetBucketPolicyStatusCommand,
  GetObjectAclCommand,
  GetObjectCommand,
  GetPublicAccessBlockCommand,
  ListObjectsV2Command,
  PutBucketAclCommand,
  PutBucketCorsCommand,
  PutBucketPolicyCommand,
  DeleteBucketPolicyCommand,
  PutObjectAclCommand,
  PutObjectCommand,
  PutPublicAccessBlockCommand,
} from '@aws-sdk/client-s3';
import { s3ClientFor, s3ErrorOf } from '../helpers/s3-sdk.js';
import { Service } from '../helpers/service.js';

const denied = { name: 'AccessDenied', status: 403 };

t.test('ACLs, policies, public access block and CORS through the AWS SDK', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const origin = service.publicUrl.replace(/\/api\/v1$/, '');
  const alice = await service.tenant('alice');
  const bob = await service.tenant('bob');
  const carol = await service.tenant('carol');
  const s3 = s3ClientFor(origin, alice);
  const s3bob = s3ClientFor(origin, bob);
  const s3carol = s3ClientFor(origin, carol);
  t.teardown(() => {
    s3.destroy();
    s3bob.destroy();
    s3carol.destroy();
  });
  const anonymous = (path: string, init: RequestInit = {}): Promise<Response> =>
    fetch(`${origin}${path}`, init);

  await s3.send(new CreateBucketCommand({ Bucket: 'shared' }));
  await s3.send(new PutObjectCommand({ Bucket: 'shared', Key: 'private.txt', Body: 'secret' }));

  await t.test('a private bucket refuses other tenants and anyone', async (t) => {
    t.same(
      await s3ErrorOf(s3bob.send(new GetObjectCommand({ Bucket: 'shared', Key: 'private.txt' }))),
      denied,
    );
    t.same(await s3ErrorOf(s3bob.send(new ListObjectsV2Command({ Bucket: 'shared' }))), denied);
    t.same(
      await s3ErrorOf(s3bob.send(new PutObjectCommand({ Bucket: 'shared', Key: 'x', Body: 'x' }))),
      denied,
    );
    t.equal((await anonymous('/shared/private.txt')).status, 403);
    t.equal((await anonymous('/shared/x', { method: 'PUT', body: 'x' })).status, 403);
    t.equal((await anonymous('/shared?acl')).status, 403);
    // A bucket that does not exist is NoSuchBucket to anyone, as on AWS.
    const nowhere = await anonymous('/no-such-bucket-here/k', { method: 'DELETE' });
    t.equal(nowhere.status, 404);
    t.match(await nowhere.text(), /<Code>NoSuchBucket<\/Code>/);
    const acl = await s3.send(new GetBucketAclCommand({ Bucket: 'shared' }));
    t.same(
      acl.Grants?.map((g) => [g.Grantee?.ID, g.Grantee?.Type, g.Permission]),
      [['alice', 'CanonicalUser', 'FULL_CONTROL']],
    );
  });

  await t.test('a public-read object is readable by anyone, and only it', async (t) => {
    await s3.send(
      new PutObjectCommand({
        Bucket: 'shared',
        Key: 'open.txt',
        Body: 'hello',
        ACL: 'public-read',
      }),
    );
    const got = await anonymous('/shared/open.txt');
    t.equal(got.status, 200);
    t.equal(await got.text(), 'hello');
    t.equal((await anonymous('/shared/open.txt', { method: 'PUT', body: 'x' })).status, 403);
    t.equal((await anonymous('/shared/open.txt', { method: 'DELETE' })).status, 403);
    t.equal((await anonymous('/shared?list-type=2')).status, 403, 'the bucket stays private');
    const acl = await s3.send(new GetObjectAclCommand({ Bucket: 'shared', Key: 'open.txt' }));
    t.same(
      acl.Grants?.map((g) => [g.Grantee?.URI ?? g.Grantee?.ID, g.Permission]),
      [
        ['http://acs.amazonaws.com/groups/global/AllUsers', 'READ'],
        ['alice', 'FULL_CONTROL'],
      ],
    );
    const bobRead = await s3bob.send(new GetObjectCommand({ Bucket: 'shared', Key: 'open.txt' }));
    t.equal(await bobRead.Body?.transformToString(), 'hello');
    await s3.send(new PutObjectAclCommand({ Bucket: 'shared', Key: 'open.txt', ACL: 'private' }));
    t.equal((await anonymous('/shared/open.txt')).status, 403, 'made private again');
  });

  await t.test('grants to a tenant allow it and nobody else', async (t) => {
    await s3.send(new PutBucketAclCommand({ Bucket: 'shared', GrantRead: 'id="bob"' }));
    const listed = await s3bob.send(new ListObjectsV2Command({ Bucket: 'shared' }));
    t.ok((listed.Contents ?? []).length >= 1, 'bob lists the bucket');
    t.same(await s3ErrorOf(s3carol.send(new ListObjectsV2Command({ Bucket: 'shared' }))), denied);
    t.same(
      await s3ErrorOf(s3bob.send(new PutObjectCommand({ Bucket: 'shared', Key: 'b', Body: 'b' }))),
      denied,
      'READ does not allow writes',
    );
    t.same(
      await s3ErrorOf(
        s3bob.send(new PutBucketAclCommand({ Bucket: 'shared', ACL: 'public-read' })),
      ),
      denied,
      'nor changing the ACL',
    );
    t.same(
      await s3ErrorOf(
        s3.send(new PutBucketAclCommand({ Bucket: 'shared', GrantRead: 'id="nobody"' })),
      ),
      { name: 'InvalidArgument', status: 400 },
    );
    t.same(
      await s3ErrorOf(
        s3.send(new PutBucketAclCommand({ Bucket: 'shared', GrantRead: 'emailAddress="a@b.c"' })),
      ),
      { name: 'UnresolvableGrantByEmailAddress', status: 400 },
    );
    await s3.send(new PutBucketAclCommand({ Bucket: 'shared', GrantWrite: 'id="bob"' }));
    await s3bob.send(new PutObjectCommand({ Bucket: 'shared', Key: 'from-bob', Body: 'b' }));
    const back = await s3bob.send(new GetObjectCommand({ Bucket: 'shared', Key: 'from-bob' }));
    t.equal(await back.Body?.transformToString(), 'b', 'the writer owns its object');
    const owned = await s3.send(new GetObjectAclCommand({ Bucket: 'shared', Key: 'from-bob' }));
    t.equal(owned.Owner?.ID, 'bob');
    await s3.send(new PutBucketAclCommand({ Bucket: 'shared', ACL: 'private' }));
    t.same(await s3ErrorOf(s3bob.send(new ListObjectsV2Command({ Bucket: 'shared' }))), denied);
  });

  await t.test('bucket policies: Allow, Deny, prefixes and conditions', async (t) => {
    t.same(await s3ErrorOf(s3.send(new GetBucketPolicyCommand({ Bucket: 'shared' }))), {
      name: 'NoSuchBucketPolicy',
      status: 404,
    });
    await s3.send(new PutObjectCommand({ Bucket: 'shared', Key: 'pub/a.txt', Body: 'A' }));
    const policy = {
      Version: '2012-10-17',
      Statement: [
        {
          Effect: 'Allow',
          Principal: '*',
          Action: 's3:GetObject',
          Resource: 'arn:aws:s3:::shared/pub/*',
        },
        {
          Effect: 'Allow',
          Principal: { AWS: 'arn:aws:iam::bob:root' },
          Action: ['s3:ListBucket', 's3:Get*'],
          Resource: ['arn:aws:s3:::shared', 'arn:aws:s3:::shared/*'],
        },
        {
          Effect: 'Deny',
          Principal: { AWS: ['bob'] },
          Action: 's3:GetObject',
          Resource: 'arn:aws:s3:::shared/private.txt',
        },
        {
          Effect: 'Deny',
          Principal: '*',
          Action: 's3:ListBucket',
          Resource: 'arn:aws:s3:::shared',
          Condition: { StringLike: { 's3:prefix': 'hidden/*' } },
        },
      ],
    };
    await s3.send(new PutBucketPolicyCommand({ Bucket: 'shared', Policy: JSON.stringify(policy) }));
    const stored = await s3.send(new GetBucketPolicyCommand({ Bucket: 'shared' }));
    t.same(JSON.parse(stored.Policy ?? '{}'), policy);
    const status = await s3.send(new GetBucketPolicyStatusCommand({ Bucket: 'shared' }));
    t.equal(status.PolicyStatus?.IsPublic, true);

    t.equal((await anonymous('/shared/pub/a.txt')).status, 200, 'anyone reads under pub/');
    t.equal((await anonymous('/shared/private.txt')).status, 403, 'and nothing else');
    t.equal((await anonymous('/shared/pub/a.txt', { method: 'PUT', body: 'x' })).status, 403);
    const listed = await s3bob.send(new ListObjectsV2Command({ Bucket: 'shared' }));
    t.ok((listed.Contents ?? []).length >= 2, 'bob lists by the policy');
    t.same(
      await s3ErrorOf(s3bob.send(new GetObjectCommand({ Bucket: 'shared', Key: 'private.txt' }))),
      denied,
      'an explicit Deny wins over the Allow',
    );
    t.same(
      await s3ErrorOf(
        s3bob.send(new ListObjectsV2Command({ Bucket: 'shared', Prefix: 'hidden/' })),
      ),
      denied,
      'the s3:prefix condition',
    );
    t.same(
      await s3ErrorOf(s3.send(new ListObjectsV2Command({ Bucket: 'shared', Prefix: 'hidden/' }))),
      denied,
      'a Deny binds the owner too',
    );
    t.same(await s3ErrorOf(s3carol.send(new ListObjectsV2Command({ Bucket: 'shared' }))), denied);
    t.same(
      await s3ErrorOf(s3bob.send(new PutBucketPolicyCommand({ Bucket: 'shared', Policy: '{}' }))),
      denied,
      'only the owner sets the policy',
    );

    for (const bad of [
      '{',
      JSON.stringify({ Statement: [{ Effect: 'Allow', Principal: '*', Action: 's3:GetObject' }] }),
      JSON.stringify({
        Statement: [
          {
            Effect: 'Allow',
            Principal: '*',
            Action: 's3:GetObject',
            Resource: 'arn:aws:s3:::other/*',
          },
        ],
      }),
      JSON.stringify({
        Statement: [
          {
            Effect: 'Allow',
            Principal: '*',
            Action: 's3:GetObject',
            Resource: 'arn:aws:s3:::shared/*',
            Condition: { NoSuchOperator: { 'aws:SourceIp': '1.2.3.4' } },
          },
        ],
      }),
    ])
      t.same(
        await s3ErrorOf(s3.send(new PutBucketPolicyCommand({ Bucket: 'shared', Policy: bad }))),
        { name: 'MalformedPolicy', status: 400 },
      );

    // An IP condition: only the loopback may read.
    await s3.send(
      new PutBucketPolicyCommand({
        Bucket: 'shared',
        Policy: JSON.stringify({
          Version: '2012-10-17',
          Statement: [
            {
              Effect: 'Deny',
              Principal: '*',
              Action: 's3:GetObject',
              Resource: 'arn:aws:s3:::shared/*',
              Condition: { NotIpAddress: { 'aws:SourceIp': ['10.0.0.0/8'] } },
            },
          ],
        }),
      }),
    );
    t.same(
      await s3ErrorOf(s3.send(new GetObjectCommand({ Bucket: 'shared', Key: 'pub/a.txt' }))),
      denied,
      'the loopback is not in 10/8',
    );
    // The native API evaluates the same stored policy (its conditions unknown there: a Deny
    // with a condition applies).
    const native = await alice.request('GET', '/buckets/shared/objects/pub/a.txt');
    t.equal(native.status, 403, 'the native API obeys the S3 policy');
    await s3.send(new DeleteBucketPolicyCommand({ Bucket: 'shared' }));
    t.equal((await alice.request('GET', '/buckets/shared/objects/pub/a.txt')).status, 200);
    t.equal((await anonymous('/shared/pub/a.txt')).status, 403, 'no policy: private again');
  });

  await t.test('the public access block', async (t) => {
    t.same(await s3ErrorOf(s3.send(new GetPublicAccessBlockCommand({ Bucket: 'shared' }))), {
      name: 'NoSuchPublicAccessBlockConfiguration',
      status: 404,
    });
    await s3.send(
      new PutObjectCommand({ Bucket: 'shared', Key: 'pub/b.txt', Body: 'B', ACL: 'public-read' }),
    );
    t.equal((await anonymous('/shared/pub/b.txt')).status, 200);
    await s3.send(
      new PutPublicAccessBlockCommand({
        Bucket: 'shared',
        PublicAccessBlockConfiguration: { IgnorePublicAcls: true, BlockPublicAcls: true },
      }),
    );
    const block = await s3.send(new GetPublicAccessBlockCommand({ Bucket: 'shared' }));
    t.same(block.PublicAccessBlockConfiguration, {
      BlockPublicAcls: true,
      IgnorePublicAcls: true,
      BlockPublicPolicy: false,
      RestrictPublicBuckets: false,
    });
    t.equal((await anonymous('/shared/pub/b.txt')).status, 403, 'public ACLs ignored');
    t.same(
      await s3ErrorOf(
        s3.send(
          new PutObjectAclCommand({ Bucket: 'shared', Key: 'pub/b.txt', ACL: 'public-read' }),
        ),
      ),
      denied,
      'public ACLs refused',
    );
    await s3.send(
      new PutPublicAccessBlockCommand({
        Bucket: 'shared',
        PublicAccessBlockConfiguration: { BlockPublicPolicy: true, RestrictPublicBuckets: true },
      }),
    );
    const open = JSON.stringify({
      Version: '2012-10-17',
      Statement: [
        {
          Effect: 'Allow',
          Principal: '*',
          Action: 's3:GetObject',
          Resource: 'arn:aws:s3:::shared/*',
        },
      ],
    });
    t.same(
      await s3ErrorOf(s3.send(new PutBucketPolicyCommand({ Bucket: 'shared', Policy: open }))),
      denied,
      'public policies refused',
    );
    await s3.send(new DeletePublicAccessBlockCommand({ Bucket: 'shared' }));
    await s3.send(new PutBucketPolicyCommand({ Bucket: 'shared', Policy: open }));
    t.equal((await anonymous('/shared/pub/a.txt')).status, 200, 'a public policy opens');
    await s3.send(
      new PutPublicAccessBlockCommand({
        Bucket: 'shared',
        PublicAccessBlockConfiguration: { RestrictPublicBuckets: true },
      }),
    );
    t.equal((await anonymous('/shared/pub/a.txt')).status, 403, 'a public policy restricted');
    t.equal((await anonymous('/shared/pub/b.txt')).status, 200, 'a public ACL still counts');
    await s3.send(new DeletePublicAccessBlockCommand({ Bucket: 'shared' }));
    await s3.send(new DeleteBucketPolicyCommand({ Bucket: 'shared' }));
  });

  await t.test('every anonymous request is audited under the bucket owner', async (t) => {
    t.equal((await anonymous('/shared/private.txt')).status, 403);
    const audit = await service.admin('GET', '/audit?tenant=alice&limit=50', service.adminToken());
    const rows = (audit.json as { events: { action: string; outcome: string; actor: string }[] })
      .events;
    t.ok(
      rows.some((row) => row.action === 's3:GetObject' && row.outcome === 'denied'),
      'the refused anonymous read is in the owner tenant audit log',
    );
  });

  await t.test('CORS: configuration, preflight and actual responses', async (t) => {
    t.same(await s3ErrorOf(s3.send(new GetBucketCorsCommand({ Bucket: 'shared' }))), {
      name: 'NoSuchCORSConfiguration',
      status: 404,
    });
    const preflight = (headers: Record<string, string>): Promise<Response> =>
      anonymous('/shared/pub/a.txt', { method: 'OPTIONS', headers });
    t.equal(
      (await preflight({ Origin: 'https://app.example', 'Access-Control-Request-Method': 'GET' }))
        .status,
      403,
      'no rules: refused',
    );
    await s3.send(
      new PutBucketCorsCommand({
        Bucket: 'shared',
        CORSConfiguration: {
          CORSRules: [
            {
              AllowedOrigins: ['https://*.example'],
              AllowedMethods: ['GET', 'PUT'],
              AllowedHeaders: ['x-amz-*'],
              ExposeHeaders: ['ETag'],
              MaxAgeSeconds: 60,
            },
          ],
        },
      }),
    );
    const rules = await s3.send(new GetBucketCorsCommand({ Bucket: 'shared' }));
    t.same(rules.CORSRules?.[0]?.AllowedMethods, ['GET', 'PUT']);
    t.same(rules.CORSRules?.[0]?.AllowedOrigins, ['https://*.example']);
    const ok = await preflight({
      Origin: 'https://app.example',
      'Access-Control-Request-Method': 'PUT',
      'Access-Control-Request-Headers': 'x-amz-meta-a',
    });
    t.equal(ok.status, 200);
    t.equal(ok.headers.get('access-control-allow-origin'), 'https://app.example');
    t.equal(ok.headers.get('access-control-max-age'), '60');
    t.equal(
      (await preflight({ Origin: 'https://evil.test', 'Access-Control-Request-Method': 'GET' }))
        .status,
      403,
    );
    t.equal(
      (
        await preflight({
          Origin: 'https://app.example',
          'Access-Control-Request-Method': 'DELETE',
        })
      ).status,
      403,
    );
    t.equal((await preflight({ Origin: 'https://app.example' })).status, 400);
    const actual = await anonymous('/shared/private.txt', {
      headers: { Origin: 'https://app.example' },
    });
    t.equal(actual.status, 403, 'CORS grants no access');
    t.equal(actual.headers.get('access-control-allow-origin'), 'https://app.example');
    const signed = await s3.send(new GetObjectCommand({ Bucket: 'shared', Key: 'private.txt' }));
    t.equal(await signed.Body?.transformToString(), 'secret');
    t.same(
      await s3ErrorOf(
        s3.send(
          new PutBucketCorsCommand({
            Bucket: 'shared',
            CORSConfiguration: {
              CORSRules: [{ AllowedOrigins: ['*'], AllowedMethods: ['PATCH'] }],
            },
          }),
        ),
      ),
      { name: 'MalformedXML', status: 400 },
      'the native validator refuses what it refuses there',
    );
    await s3.send(new DeleteBucketCorsCommand({ Bucket: 'shared' }));
    t.same(await s3ErrorOf(s3.send(new GetBucketCorsCommand({ Bucket: 'shared' }))), {
      name: 'NoSuchCORSConfiguration',
      status: 404,
    });
  });
});
