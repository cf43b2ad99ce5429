// Goal: a tenant's public access block through the console API. The routes keep the admin gates
// (401 without a token, a viewer reads and sets nothing, a tenant-scoped operator sets only its
// own tenant's); a bad body is 400 naming the field; a dry run answers the blocks as they would
// be and stores nothing. A saved block is in force on every bucket of the tenant, shown per
// bucket as the OR of the bucket's own block and the tenant's, and enforced on the data plane:
// an S3 bucket policy that allows anyone is refused while BlockPublicPolicy is on, and accepted
// once the block is removed. Every change leaves an audit row.
// Method: the real service on loopback, S3 through the AWS SDK.
import t from 'tap';
import { PutBucketPolicyCommand, PutPublicAccessBlockCommand } from '@aws-sdk/client-s3';
import { s3ClientFor, s3ErrorOf } from '../helpers/s3-sdk.js';
import { Service } from '../helpers/service.js';
import { consoleCaller } from './console-call.js';

const publicPolicy = (bucket: string): string =>
  JSON.stringify({
    Version: '2012-10-17',
    Statement: [
      {
        Effect: 'Allow',
        Principal: '*',
        Action: 's3:GetObject',
        Resource: `arn:aws:s3:::${bucket}/*`,
      },
    ],
  });

t.test("a tenant's public access block through the console API", async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const call = consoleCaller(service);
  const owner = service.adminToken('owner');
  const viewer = service.adminToken('viewer');
  const scoped = service.adminToken('operator', ['--tenant', 'acme']);
  const origin = service.publicUrl.replace(/\/api\/v1$/, '');
  const acme = await service.tenant('acme', 'read,write,delete,admin', owner);
  await service.tenant('globex', 'read,write,delete,admin', owner);
  const s3 = s3ClientFor(origin, acme);
  t.teardown(() => s3.destroy());
  t.equal((await acme.request('POST', '/buckets', { json: { name: 'site' } })).status, 201);
  t.equal((await acme.request('POST', '/buckets', { json: { name: 'vault' } })).status, 201);
  await s3.send(
    new PutPublicAccessBlockCommand({
      Bucket: 'vault',
      PublicAccessBlockConfiguration: { IgnorePublicAcls: true },
    }),
  );

  const path = '/tenants/acme/public-access-block';
  const on = { blockPublicPolicy: true, blockPublicAcls: true };
  t.match(await call('GET', path), { status: 401 });
  t.match(await call('GET', '/tenants/globex/public-access-block', scoped), { status: 403 });
  t.match(await call('PUT', path, viewer, { block: on }), { status: 403 });
  t.match(await call('PUT', '/tenants/globex/public-access-block', scoped, { block: on }), {
    status: 403,
  });
  t.match(await call('PUT', path, scoped, {}), { status: 400, json: { message: /block/ } });
  t.match(await call('PUT', path, scoped, { block: null, blocked: true }), {
    status: 400,
    json: { message: /unknown field "blocked"/ },
  });
  t.match(await call('PUT', path, scoped, { block: { blockEverything: true } }), {
    status: 400,
    json: { message: /blockEverything/ },
  });
  t.match(await call('PUT', path, scoped, { block: { blockPublicAcls: 'yes' } }), {
    status: 400,
  });
  t.match(await call('GET', path, viewer), {
    status: 200,
    json: {
      tenantId: 'acme',
      block: null,
      buckets: [
        { name: 'site', block: null, effective: { blockPublicPolicy: false } },
        { name: 'vault', block: { ignorePublicAcls: true }, effective: { ignorePublicAcls: true } },
      ],
    },
  });

  const plan = await call('PUT', `${path}?dryRun=true`, scoped, { block: on });
  t.match(plan, {
    status: 200,
    json: { dryRun: true, applied: false, counts: { buckets: 2 }, result: { block: on } },
  });
  t.match(await call('GET', path, viewer), { json: { block: null } }, 'the dry run stored nothing');

  t.match(await call('PUT', path, scoped, { block: on, reason: 'no public buckets' }), {
    status: 200,
    json: {
      block: { ...on, ignorePublicAcls: false, restrictPublicBuckets: false },
      buckets: [
        { name: 'site', effective: on },
        { name: 'vault', effective: { ...on, ignorePublicAcls: true } },
      ],
    },
  });
  const refused = await s3ErrorOf(
    s3.send(new PutBucketPolicyCommand({ Bucket: 'site', Policy: publicPolicy('site') })),
  );
  t.match(refused, { status: 403 }, 'a public policy is refused under the block');

  t.match(await call('PUT', path, scoped, { block: null }), {
    status: 200,
    json: { block: null },
  });
  await s3.send(new PutBucketPolicyCommand({ Bucket: 'site', Policy: publicPolicy('site') }));
  t.pass('the same policy is accepted once the block is removed');

  const audit = await service.admin('GET', '/audit?limit=1000', owner);
  const rows = (audit.json as { events: Array<Record<string, unknown>> }).events;
  const has = (extra: Record<string, unknown>): boolean =>
    rows.some(
      (row) =>
        row['action'] === 'putConsolePublicAccessBlock' &&
        Object.entries(extra).every(([k, v]) => row[k] === v),
    );
  t.ok(has({ reason: 'no public buckets', tenantId: 'acme', outcome: 'allowed' }));
  t.ok(has({ dryRun: true }), 'the dry run is audited as one');
  t.ok(has({ outcome: 'denied' }), 'a refusal is audited');
});
