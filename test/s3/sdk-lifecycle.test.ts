// Goal: bucket lifecycle over S3 as the AWS SDK uses it: Put/Get/DeleteBucketLifecycle-
// Configuration with every rule element, S3's refusals (MalformedXML, InvalidArgument,
// InvalidRequest, NotImplemented, NoSuchLifecycleConfiguration), `x-amz-expiration` on PUT,
// HEAD and GET of covered objects, another tenant refused, and rules executed by the running
// service: current expiry, a versioned bucket's delete marker and noncurrent expiry, an
// incomplete upload aborted.
// Method: a real `lightwell serve` whose lifecycle day is one second (`lifecycle.day`, as RGW's
// rgw_lc_debug_interval) and whose executor looks every 200 ms; the executions are awaited by
// polling the listing with a deadline that names what it waited for.
/* eslint-disable @typescript-eslint/no-deprecated -- S3's legacy top-level Prefix of a rule is
   one of the forms under test (ceph/s3-tests and older clients send it) */
import t from 'tap';
import {
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteBucketLifecycleCommand,
  DeleteObjectCommand,
  GetBucketLifecycleConfigurationCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectVersionsCommand,
  ListObjectsV2Command,
  PutBucketLifecycleConfigurationCommand,
  PutBucketVersioningCommand,
  PutObjectCommand,
  type LifecycleRule,
  type S3Client,
} from '@aws-sdk/client-s3';
import { s3ClientFor, s3ErrorOf } from '../helpers/s3-sdk.js';
import { Service } from '../helpers/service.js';

/** How long an execution may take on a loaded machine before the test gives up. */
const EXECUTION_LIMIT_MS = 60_000;

async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + EXECUTION_LIMIT_MS;
  while (!(await check())) {
    if (Date.now() > deadline) throw new TypeError(`waited ${EXECUTION_LIMIT_MS} ms for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function put(s3: S3Client, bucket: string, rules: LifecycleRule[]): Promise<unknown> {
  return s3.send(
    new PutBucketLifecycleConfigurationCommand({
      Bucket: bucket,
      LifecycleConfiguration: { Rules: rules },
    }),
  );
}

t.test('lifecycle configuration and execution through the AWS SDK', async (t) => {
  const service = await Service.start({
    env: { LIGHTWELL_LIFECYCLE_DAY: '1s', LIGHTWELL_LIFECYCLE_INTERVAL: '200ms' },
  });
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
  await s3.send(new CreateBucketCommand({ Bucket: 'rules' }));

  t.test('none yet: 404 NoSuchLifecycleConfiguration, and a delete answers 204', async (t) => {
    t.same(
      await s3ErrorOf(s3.send(new GetBucketLifecycleConfigurationCommand({ Bucket: 'rules' }))),
      { name: 'NoSuchLifecycleConfiguration', status: 404 },
    );
    const deleted = await s3.send(new DeleteBucketLifecycleCommand({ Bucket: 'rules' }));
    t.equal(deleted.$metadata.httpStatusCode, 204);
  });

  t.test('every element comes back as it was put', async (t) => {
    const rules: LifecycleRule[] = [
      { ID: 'legacy', Prefix: 'old/', Status: 'Enabled', Expiration: { Days: 31 } },
      {
        ID: 'tagged',
        Filter: { Tag: { Key: 'class', Value: 'temp' } },
        Status: 'Enabled',
        Expiration: { Days: 2 },
      },
      {
        ID: 'and',
        Filter: {
          And: {
            Prefix: 'logs/',
            Tags: [{ Key: 'tier', Value: 'hot' }],
            ObjectSizeGreaterThan: 100,
            ObjectSizeLessThan: 10_000,
          },
        },
        Status: 'Disabled',
        NoncurrentVersionExpiration: { NoncurrentDays: 7, NewerNoncurrentVersions: 3 },
      },
      {
        ID: 'dated',
        Filter: { ObjectSizeGreaterThan: 1024 },
        Status: 'Enabled',
        Expiration: { Date: new Date('2030-01-01T00:00:00Z') },
      },
      {
        ID: 'markers',
        Filter: {},
        Status: 'Enabled',
        Expiration: { ExpiredObjectDeleteMarker: true },
        AbortIncompleteMultipartUpload: { DaysAfterInitiation: 2 },
      },
    ];
    await put(s3, 'rules', rules);
    const got = await s3.send(new GetBucketLifecycleConfigurationCommand({ Bucket: 'rules' }));
    t.same(got.Rules, rules);
  });

  t.test('a rule without an ID gets one', async (t) => {
    await put(s3, 'rules', [{ Prefix: 'x/', Status: 'Enabled', Expiration: { Days: 1 } }]);
    const got = await s3.send(new GetBucketLifecycleConfigurationCommand({ Bucket: 'rules' }));
    t.match(got.Rules?.[0]?.ID, /^[A-Z2-7]{20}$/);
  });

  t.test("S3's refusals", async (t) => {
    const expire = { Expiration: { Days: 1 } };
    const cases: Array<[string, LifecycleRule[], string]> = [
      [
        'duplicate IDs',
        [
          { ID: 'a', Prefix: 'x', Status: 'Enabled', ...expire },
          { ID: 'a', Prefix: 'y', Status: 'Enabled', ...expire },
        ],
        'InvalidArgument',
      ],
      [
        'an ID over 255',
        [{ ID: 'a'.repeat(256), Prefix: '', Status: 'Enabled', ...expire }],
        'InvalidArgument',
      ],
      [
        'status in lower case',
        [{ ID: 'a', Prefix: '', Status: 'enabled' as never, ...expire }],
        'MalformedXML',
      ],
      [
        'zero days',
        [{ ID: 'a', Prefix: '', Status: 'Enabled', Expiration: { Days: 0 } }],
        'InvalidArgument',
      ],
      [
        'a date not at midnight',
        [
          {
            ID: 'a',
            Prefix: '',
            Status: 'Enabled',
            Expiration: { Date: new Date('2030-01-01T12:00:00Z') },
          },
        ],
        'InvalidArgument',
      ],
      [
        'days and date',
        [
          {
            ID: 'a',
            Prefix: '',
            Status: 'Enabled',
            Expiration: { Days: 1, Date: new Date('2030-01-01T00:00:00Z') },
          },
        ],
        'MalformedXML',
      ],
      [
        'the marker with days',
        [
          {
            ID: 'a',
            Prefix: '',
            Status: 'Enabled',
            Expiration: { Days: 1, ExpiredObjectDeleteMarker: true },
          },
        ],
        'MalformedXML',
      ],
      ['no action', [{ ID: 'a', Prefix: '', Status: 'Enabled' }], 'InvalidRequest'],
      [
        'both Filter and Prefix',
        [{ ID: 'a', Prefix: 'p', Filter: { Prefix: 'q' }, Status: 'Enabled', ...expire }],
        'MalformedXML',
      ],
      ['neither Filter nor Prefix', [{ ID: 'a', Status: 'Enabled', ...expire }], 'MalformedXML'],
      [
        'abort with a tag filter',
        [
          {
            ID: 'a',
            Filter: { Tag: { Key: 'k', Value: 'v' } },
            Status: 'Enabled',
            AbortIncompleteMultipartUpload: { DaysAfterInitiation: 1 },
          },
        ],
        'InvalidRequest',
      ],
      [
        'sizes that exclude everything',
        [
          {
            ID: 'a',
            Filter: { And: { ObjectSizeGreaterThan: 10, ObjectSizeLessThan: 10 } },
            Status: 'Enabled',
            ...expire,
          },
        ],
        'InvalidRequest',
      ],
      [
        '101 newer noncurrent versions',
        [
          {
            ID: 'a',
            Prefix: '',
            Status: 'Enabled',
            NoncurrentVersionExpiration: { NoncurrentDays: 1, NewerNoncurrentVersions: 101 },
          },
        ],
        'InvalidArgument',
      ],
      [
        'a transition',
        [
          {
            ID: 'a',
            Prefix: '',
            Status: 'Enabled',
            Transitions: [{ Days: 30, StorageClass: 'GLACIER' }],
          },
        ],
        'NotImplemented',
      ],
    ];
    for (const [what, rules, code] of cases) {
      const refused = await s3ErrorOf(put(s3, 'rules', rules));
      t.equal(refused.name, code, what);
    }
    const got = await s3.send(new GetBucketLifecycleConfigurationCommand({ Bucket: 'rules' }));
    t.equal(got.Rules?.[0]?.Prefix, 'x/', 'no refused configuration replaced the stored one');
  });

  t.test('another tenant is refused', async (t) => {
    t.same(
      await s3ErrorOf(s3bob.send(new GetBucketLifecycleConfigurationCommand({ Bucket: 'rules' }))),
      { name: 'AccessDenied', status: 403 },
    );
    t.same(
      await s3ErrorOf(
        put(s3bob, 'rules', [{ ID: 'a', Prefix: '', Status: 'Enabled', Expiration: { Days: 1 } }]),
      ),
      { name: 'AccessDenied', status: 403 },
    );
    t.same(await s3ErrorOf(s3bob.send(new DeleteBucketLifecycleCommand({ Bucket: 'rules' }))), {
      name: 'AccessDenied',
      status: 403,
    });
  });

  t.test('x-amz-expiration on PUT, HEAD and GET of a covered object', async (t) => {
    await s3.send(new CreateBucketCommand({ Bucket: 'dated' }));
    await put(s3, 'dated', [
      {
        ID: 'far',
        Filter: { Prefix: 'covered/' },
        Status: 'Enabled',
        Expiration: { Date: new Date('2099-01-01T00:00:00Z') },
      },
    ]);
    const expected = 'expiry-date="Thu, 01 Jan 2099 00:00:00 GMT", rule-id="far"';
    const stored = await s3.send(
      new PutObjectCommand({ Bucket: 'dated', Key: 'covered/a', Body: 'x' }),
    );
    t.equal(stored.Expiration, expected, 'PUT');
    const head = await s3.send(new HeadObjectCommand({ Bucket: 'dated', Key: 'covered/a' }));
    t.equal(head.Expiration, expected, 'HEAD');
    const got = await s3.send(new GetObjectCommand({ Bucket: 'dated', Key: 'covered/a' }));
    await got.Body?.transformToString();
    t.equal(got.Expiration, expected, 'GET');
    const other = await s3.send(new PutObjectCommand({ Bucket: 'dated', Key: 'other', Body: 'x' }));
    t.equal(other.Expiration, undefined, 'no header for an object no rule covers');
  });

  t.test('the running service expires what the rules make due', async (t) => {
    await s3.send(new CreateBucketCommand({ Bucket: 'expiring' }));
    await put(s3, 'expiring', [
      { ID: 'tmp', Filter: { Prefix: 'tmp/' }, Status: 'Enabled', Expiration: { Days: 1 } },
      {
        ID: 'large',
        Filter: { And: { Prefix: 'sized/', ObjectSizeGreaterThan: 5 } },
        Status: 'Enabled',
        Expiration: { Days: 1 },
      },
      {
        ID: 'uploads',
        Filter: { Prefix: 'up/' },
        Status: 'Enabled',
        AbortIncompleteMultipartUpload: { DaysAfterInitiation: 1 },
      },
    ]);
    await s3.send(new PutObjectCommand({ Bucket: 'expiring', Key: 'tmp/a', Body: 'a' }));
    await s3.send(new PutObjectCommand({ Bucket: 'expiring', Key: 'keep/b', Body: 'b' }));
    await s3.send(new PutObjectCommand({ Bucket: 'expiring', Key: 'sized/small', Body: 's' }));
    await s3.send(
      new PutObjectCommand({ Bucket: 'expiring', Key: 'sized/large', Body: 'large body' }),
    );
    await s3.send(new CreateMultipartUploadCommand({ Bucket: 'expiring', Key: 'up/big' }));
    const keys = async (): Promise<string[]> =>
      ((await s3.send(new ListObjectsV2Command({ Bucket: 'expiring' }))).Contents ?? []).map(
        (entry) => entry.Key ?? '',
      );
    await until('tmp/a and sized/large to expire', async () => {
      const left = await keys();
      return !left.includes('tmp/a') && !left.includes('sized/large');
    });
    t.same(await keys(), ['keep/b', 'sized/small'], 'the objects no rule covers stay');
    await until('the upload to be aborted', async () => {
      const uploads = await s3.send(new ListMultipartUploadsCommand({ Bucket: 'expiring' }));
      return (uploads.Uploads ?? []).length === 0;
    });
  });

  t.test(
    'versioned: noncurrent expiry, NewerNoncurrentVersions, the lone delete marker',
    async (t) => {
      await s3.send(new CreateBucketCommand({ Bucket: 'history' }));
      await s3.send(
        new PutBucketVersioningCommand({
          Bucket: 'history',
          VersioningConfiguration: { Status: 'Enabled' },
        }),
      );
      await s3.send(new PutObjectCommand({ Bucket: 'history', Key: 'doc', Body: 'v1' }));
      await s3.send(new PutObjectCommand({ Bucket: 'history', Key: 'gone', Body: 'v1' }));
      await s3.send(new DeleteObjectCommand({ Bucket: 'history', Key: 'gone' }));
      await put(s3, 'history', [
        {
          ID: 'old',
          Filter: { Prefix: 'doc' },
          Status: 'Enabled',
          NoncurrentVersionExpiration: { NoncurrentDays: 2 },
        },
        {
          ID: 'markers',
          Filter: { Prefix: 'gone' },
          Status: 'Enabled',
          Expiration: { ExpiredObjectDeleteMarker: true },
          NoncurrentVersionExpiration: { NoncurrentDays: 1 },
        },
        {
          ID: 'keep2',
          Filter: { Prefix: 'many' },
          Status: 'Enabled',
          NoncurrentVersionExpiration: { NoncurrentDays: 1, NewerNoncurrentVersions: 2 },
        },
      ]);
      await s3.send(new PutObjectCommand({ Bucket: 'history', Key: 'doc', Body: 'v2' }));
      for (let index = 0; index < 5; index += 1)
        await s3.send(new PutObjectCommand({ Bucket: 'history', Key: 'many', Body: `${index}` }));
      const versions = async (): Promise<string[]> => {
        const listed = await s3.send(new ListObjectVersionsCommand({ Bucket: 'history' }));
        return [
          ...(listed.Versions ?? []).map((entry) => `${entry.Key ?? ''}:v`),
          ...(listed.DeleteMarkers ?? []).map((entry) => `${entry.Key ?? ''}:m`),
        ].sort();
      };
      const wanted = ['doc:v', 'many:v', 'many:v', 'many:v'];
      await until(`the versions left to be ${wanted.join(' ')}`, async () => {
        const left = await versions();
        return left.join(' ') === wanted.join(' ');
      });
      t.pass('doc keeps its current version, many two noncurrent ones, gone nothing');
      await s3.send(new DeleteBucketLifecycleCommand({ Bucket: 'history' }));
      t.same(
        await s3ErrorOf(s3.send(new GetBucketLifecycleConfigurationCommand({ Bucket: 'history' }))),
        { name: 'NoSuchLifecycleConfiguration', status: 404 },
      );
    },
  );
});
