// Goal: a bucket's lifecycle rules through the console API are the S3 lifecycle configuration.
// The routes keep the admin gates (401 without a token, a viewer changes nothing, a scoped
// operator only its tenant); a bad rule is 400 with the service's message (the same checks as
// PutBucketLifecycleConfiguration), an unknown field is named. A dry run lists exactly the
// versions the proposed rules would expire now (by prefix, here through a past Date) and stores
// nothing. A saved rule is what the S3 API's GetBucketLifecycleConfiguration answers, the
// executor then expires the listed objects (and only them), and rules put through S3 come back
// as JSON. `rules: null` removes them. Every change is audited.
// Method: the real service on loopback (lifecycle pass every 200 ms), S3 through the AWS SDK.
import t from 'tap';
import {
  GetBucketLifecycleConfigurationCommand,
  PutBucketLifecycleConfigurationCommand,
} from '@aws-sdk/client-s3';
import { s3ClientFor, s3ErrorOf } from '../helpers/s3-sdk.js';
import { Service, type DataClient } from '../helpers/service.js';
import { consoleCaller } from './console-call.js';

const WAIT_MS = 30_000;

/** Polls the native listing until `want` holds; a time-out names what it waited for. */
async function waitKeys(data: DataClient, bucket: string, want: string[]): Promise<void> {
  const deadline = Date.now() + WAIT_MS;
  let keys: string[] = [];
  while (Date.now() < deadline) {
    const listing = await data.request('GET', `/buckets/${bucket}/objects`);
    keys = (listing.json as { objects: Array<{ key: string }> }).objects.map((o) => o.key);
    if (JSON.stringify(keys) === JSON.stringify(want)) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(
    `the lifecycle executor left ${JSON.stringify(keys)}, not ${JSON.stringify(want)}`,
  );
}

t.test("a bucket's lifecycle rules through the console API", async (t) => {
  const service = await Service.start({ env: { LIGHTWELL_LIFECYCLE_INTERVAL: '200ms' } });
  t.teardown(() => service.close());
  const call = consoleCaller(service);
  const owner = service.adminToken('owner');
  const viewer = service.adminToken('viewer');
  const scoped = service.adminToken('operator', ['--tenant', 'acme']);
  const acme = await service.tenant('acme', 'read,write,delete,admin', owner);
  await service.tenant('globex', 'read,write,delete,admin', owner);
  const s3 = s3ClientFor(service.publicUrl.replace(/\/api\/v1$/, ''), acme);
  t.teardown(() => s3.destroy());
  t.equal((await acme.request('POST', '/buckets', { json: { name: 'logs' } })).status, 201);
  for (const key of ['tmp/a', 'tmp/b', 'keep/c'])
    t.equal((await acme.put('logs', key, `bytes of ${key}`)).status, 200);

  const path = '/tenants/acme/buckets/logs/lifecycle';
  const rule = { id: 'drop-tmp', status: 'Enabled', filter: { prefix: 'tmp/' } };
  const past = { ...rule, expiration: { date: '2020-01-01' } };
  t.match(await call('GET', path), { status: 401 });
  t.match(await call('GET', path, viewer), {
    status: 200,
    json: { tenantId: 'acme', bucket: 'logs', rules: [], reindexing: false },
  });
  t.match(await call('GET', '/tenants/acme/buckets/nope/lifecycle', viewer), { status: 404 });
  t.match(await call('PUT', path, viewer, { rules: [past] }), { status: 403 });
  t.match(await call('PUT', '/tenants/globex/buckets/logs/lifecycle', scoped, { rules: [] }), {
    status: 403,
  });

  const refusals: Array<[unknown, RegExp]> = [
    [{}, /rules/],
    [{ rules: [past], extra: 1 }, /unknown field \W?extra/],
    [{ rules: [{ ...past, transitions: [] }] }, /unknown field \W?transitions/],
    [{ rules: [{ ...past, expiration: { days: '3' } }] }, /days must be a number/],
    [{ rules: [rule] }, /At least one action/],
    [{ rules: [{ ...rule, status: 'On', expiration: { days: 1 } }] }, /Enabled or Disabled/],
    [{ rules: [{ ...rule, expiration: { days: 0 } }] }, /Days/],
    [{ rules: [{ ...rule, expiration: { date: '2020-02-30' } }] }, /calendar date/],
    [{ rules: [past, past] }, /unique/],
    [{ rules: [] }, /needs a Rule/],
  ];
  for (const [body, message] of refusals)
    t.match(await call('PUT', `${path}?dryRun=true`, scoped, body), {
      status: 400,
      json: { code: 'bad_request', message },
    });

  const plan = await call('PUT', `${path}?dryRun=true`, scoped, { rules: [past] });
  t.match(plan, {
    status: 200,
    json: {
      dryRun: true,
      applied: false,
      counts: { rules: 1, versions: 2, deleteMarkers: 0, uploads: 0, logicalBytes: 28 },
      result: { rules: [past], preview: { scanned: 3, truncated: false } },
    },
  });
  const due = (plan.json as { result: { preview: { due: Array<Record<string, unknown>> } } }).result
    .preview.due;
  t.same(
    due.map((entry) => [entry['key'], entry['action'], entry['ruleId'], entry['dueAt']]),
    [
      ['tmp/a', 'expire-current', 'drop-tmp', '2020-01-01T00:00:00.000Z'],
      ['tmp/b', 'expire-current', 'drop-tmp', '2020-01-01T00:00:00.000Z'],
    ],
    'the dry run lists what the rule would expire now, and nothing else',
  );
  const future = { ...rule, expiration: { days: 30 } };
  t.match(await call('PUT', `${path}?dryRun=true`, scoped, { rules: [future] }), {
    json: { counts: { versions: 0 }, result: { preview: { due: [] } } },
  });
  t.match(await call('GET', path, viewer), { json: { rules: [] } }, 'a dry run stores nothing');
  await waitKeys(acme, 'logs', ['keep/c', 'tmp/a', 'tmp/b']);

  t.match(await call('PUT', path, scoped, { rules: [past], reason: 'tmp is scratch' }), {
    status: 200,
    json: { rules: [past] },
  });
  const got = await s3.send(new GetBucketLifecycleConfigurationCommand({ Bucket: 'logs' }));
  t.same(
    got.Rules,
    [
      {
        ID: 'drop-tmp',
        Status: 'Enabled',
        Filter: { Prefix: 'tmp/' },
        Expiration: { Date: new Date('2020-01-01T00:00:00Z') },
      },
    ],
    'the S3 API answers the rule saved from the console',
  );
  await waitKeys(acme, 'logs', ['keep/c']);
  t.pass('the executor expired what the dry run listed');

  await s3.send(
    new PutBucketLifecycleConfigurationCommand({
      Bucket: 'logs',
      LifecycleConfiguration: {
        Rules: [
          {
            ID: 'from-s3',
            Filter: { And: { Prefix: 'keep/', ObjectSizeGreaterThan: 1_000_000 } },
            Status: 'Disabled',
            NoncurrentVersionExpiration: { NoncurrentDays: 7, NewerNoncurrentVersions: 2 },
            AbortIncompleteMultipartUpload: undefined,
          },
        ],
      },
    }),
  );
  t.match(await call('GET', path, viewer), {
    json: {
      rules: [
        {
          id: 'from-s3',
          status: 'Disabled',
          filter: { prefix: 'keep/', sizeGreaterThan: 1_000_000 },
          noncurrentExpiration: { noncurrentDays: 7, newerNoncurrentVersions: 2 },
        },
      ],
    },
  });

  t.match(await call('PUT', path, scoped, { rules: null }), { status: 200, json: { rules: [] } });
  t.match(
    await s3ErrorOf(s3.send(new GetBucketLifecycleConfigurationCommand({ Bucket: 'logs' }))),
    { name: 'NoSuchLifecycleConfiguration' },
  );

  const audit = await service.admin('GET', '/audit?limit=1000', owner);
  const rows = (audit.json as { events: Array<Record<string, unknown>> }).events.filter(
    (row) => row['action'] === 'putConsoleBucketLifecycle',
  );
  t.ok(rows.some((row) => row['reason'] === 'tmp is scratch' && row['tenantId'] === 'acme'));
  t.ok(rows.some((row) => row['dryRun'] === true));
  t.ok(rows.some((row) => row['outcome'] === 'denied'));
});
