// Goal: S3 bucket logging through the AWS SDK: Put/GetBucketLogging with their refusals (no
// target, the source itself, a target whose policy does not allow the logging service, another
// tenant's source), and delivery: a logged bucket's requests arrive as log objects in the
// target, with AWS's simple and partitioned keys and 26-field records naming the request; a
// target whose policy stops allowing the source gets nothing more.
// Method: a real `lightwell serve` with `logging.flush_interval` at 200 ms, two tenants,
// @aws-sdk/client-s3; a delivery is waited for by listing the target until an object shows.
import t from 'tap';
import {
  CreateBucketCommand,
  GetBucketLoggingCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  PutBucketLoggingCommand,
  PutBucketPolicyCommand,
  PutObjectCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { s3ClientFor, s3ErrorOf } from '../helpers/s3-sdk.js';
import { Service } from '../helpers/service.js';

/** The target policy s3-tests and AWS's documentation use, for `sources` of tenant `account`. */
function loggingPolicy(target: string, prefix: string, sources: string[], account: string): string {
  return JSON.stringify({
    Version: '2012-10-17',
    Statement: sources.map((source) => ({
      Effect: 'Allow',
      Principal: { Service: 'logging.s3.amazonaws.com' },
      Action: ['s3:PutObject'],
      Resource: `arn:aws:s3:::${target}/${prefix}*`,
      Condition: {
        ArnLike: { 'aws:SourceArn': `arn:aws:s3:::${source}` },
        StringEquals: { 'aws:SourceAccount': account },
      },
    })),
  });
}

/** The keys of `bucket`, once there are more than `known` (waits up to 20 s). */
async function logKeys(s3: S3Client, bucket: string, known: number): Promise<string[]> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const page = await s3.send(new ListObjectsV2Command({ Bucket: bucket }));
    const keys = (page.Contents ?? []).map((entry) => entry.Key ?? '');
    if (keys.length > known) return keys;
    if (Date.now() > deadline)
      throw new Error(`no log object beyond ${known} arrived in ${bucket} within 20 s`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function body(s3: S3Client, bucket: string, key: string): Promise<string> {
  const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
  return (await got.Body?.transformToString()) ?? '';
}

/** A record's fields as s3-tests parses them (brackets as quotes, quoted fields whole). */
function fields(line: string): string[] {
  return [...line.replace(/[[\]]/g, '"').matchAll(/"((?:[^"\\]|\\.)*)"|(\S+)/g)].map(
    (match) => match[1] ?? match[2] ?? '',
  );
}

t.test('bucket logging through the AWS SDK', async (t) => {
  const service = await Service.start({ env: { LIGHTWELL_LOGGING_FLUSH_INTERVAL: '200ms' } });
  t.teardown(() => service.close());
  const origin = service.publicUrl.replace(/\/api\/v1$/, '');
  const s3 = s3ClientFor(origin, await service.tenant('alice'));
  const bob = s3ClientFor(origin, await service.tenant('bob'));
  t.teardown(() => [s3, bob].forEach((client) => client.destroy()));
  for (const bucket of ['src', 'logs', 'plogs'])
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  const enable = (bucket: string, target: string, prefix: string, partitioned = false) =>
    new PutBucketLoggingCommand({
      Bucket: bucket,
      BucketLoggingStatus: {
        LoggingEnabled: {
          TargetBucket: target,
          TargetPrefix: prefix,
          ...(partitioned
            ? {
                TargetObjectKeyFormat: {
                  PartitionedPrefix: { PartitionDateSource: 'DeliveryTime' },
                },
              }
            : {}),
        },
      },
    });

  await t.test('configurations refused', async (t) => {
    t.same(
      await s3ErrorOf(s3.send(enable('src', 'logs', 'log/'))),
      {
        name: 'AccessDenied',
        status: 403,
      },
      'the target policy does not allow the logging service',
    );
    t.same(await s3ErrorOf(s3.send(enable('src', 'nosuch', 'log/'))), {
      name: 'InvalidTargetBucketForLogging',
      status: 400,
    });
    t.same(
      await s3ErrorOf(s3.send(enable('src', 'src', 'log/'))),
      {
        name: 'InvalidArgument',
        status: 400,
      },
      'a bucket does not log into itself',
    );
    t.same(
      await s3ErrorOf(bob.send(enable('src', 'logs', 'log/'))),
      {
        name: 'AccessDenied',
        status: 403,
      },
      "another tenant's source",
    );
    t.same(await s3ErrorOf(bob.send(new GetBucketLoggingCommand({ Bucket: 'src' }))), {
      name: 'AccessDenied',
      status: 403,
    });
    const none = await s3.send(new GetBucketLoggingCommand({ Bucket: 'src' }));
    t.equal(none.LoggingEnabled, undefined, 'not logged by default');
  });

  await t.test('simple keys and the records of requests', async (t) => {
    await s3.send(
      new PutBucketPolicyCommand({
        Bucket: 'logs',
        Policy: loggingPolicy('logs', 'log/', ['src'], 'alice'),
      }),
    );
    await s3.send(enable('src', 'logs', 'log/'));
    const got = await s3.send(new GetBucketLoggingCommand({ Bucket: 'src' }));
    t.same(got.LoggingEnabled, {
      TargetBucket: 'logs',
      TargetPrefix: 'log/',
      TargetObjectKeyFormat: { SimplePrefix: {} },
    });
    const put = await s3.send(new PutObjectCommand({ Bucket: 'src', Key: 'a b.txt', Body: 'hi' }));
    await s3.send(new GetObjectCommand({ Bucket: 'src', Key: 'a b.txt' }));
    t.equal(
      (await s3ErrorOf(s3.send(new GetObjectCommand({ Bucket: 'src', Key: 'missing' })))).name,
      'NoSuchKey',
    );
    const keys = await logKeys(s3, 'logs', 0);
    t.match(keys[0], /^log\/\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}-[0-9A-F]{16}$/);
    let lines: string[] = [];
    const deadline = Date.now() + 20_000;
    // The three records may span more than one log object.
    while (lines.length < 3 && Date.now() < deadline) {
      const all = await logKeys(s3, 'logs', 0);
      lines = (await Promise.all(all.map((key) => body(s3, 'logs', key))))
        .join('')
        .split('\n')
        .filter((line) => line !== '');
      if (lines.length < 3) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const records = lines.map(fields);
    for (const record of records) t.equal(record.length, 26, 'AWS has 26 fields');
    const putRecord = records.find((record) => record[6] === 'REST.PUT.OBJECT');
    t.ok(putRecord, 'the PUT is logged');
    t.equal(putRecord?.[0], 'alice', 'bucket owner');
    t.equal(putRecord?.[1], 'src');
    t.equal(putRecord?.[4], 'alice', 'requester');
    t.equal(putRecord?.[5], put.$metadata.requestId, 'the request id the client got');
    t.equal(putRecord?.[7], 'a%20b.txt', 'the key, URL-encoded');
    t.equal(putRecord?.[9], '200');
    t.equal(putRecord?.[19], 'SigV4');
    t.equal(putRecord?.[21], 'AuthHeader');
    const missing = records.find((record) => record[7] === 'missing');
    t.equal(missing?.[6], 'REST.GET.OBJECT');
    t.equal(missing?.[9], '404');
    t.equal(missing?.[10], 'NoSuchKey');
  });

  await t.test('partitioned keys; a policy that stops allowing drops records', async (t) => {
    await s3.send(
      new PutBucketPolicyCommand({
        Bucket: 'plogs',
        Policy: loggingPolicy('plogs', 'p/', ['src'], 'alice'),
      }),
    );
    await s3.send(enable('src', 'plogs', 'p/', true));
    await s3.send(new PutObjectCommand({ Bucket: 'src', Key: 'k', Body: 'x' }));
    const keys = await logKeys(s3, 'plogs', 0);
    t.match(
      keys[0],
      /^p\/alice\/us-east-1\/src\/\d{4}\/\d{2}\/\d{2}\/\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}-[0-9A-F]{16}$/,
    );
    await s3.send(
      new PutBucketPolicyCommand({
        Bucket: 'plogs',
        Policy: loggingPolicy('plogs', 'p/', ['elsewhere'], 'alice'),
      }),
    );
    const before = (await s3.send(new ListObjectsV2Command({ Bucket: 'plogs' }))).KeyCount ?? 0;
    await s3.send(new PutObjectCommand({ Bucket: 'src', Key: 'k2', Body: 'x' }));
    // A negative needs a window: five flush intervals, in which an allowed record arrives.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const after = (await s3.send(new ListObjectsV2Command({ Bucket: 'plogs' }))).KeyCount ?? 0;
    t.equal(after, before, 'the record of a source the target refuses is not delivered');
  });

  await t.test('logging off', async (t) => {
    await s3.send(new PutBucketLoggingCommand({ Bucket: 'src', BucketLoggingStatus: {} }));
    const got = await s3.send(new GetBucketLoggingCommand({ Bucket: 'src' }));
    t.equal(got.LoggingEnabled, undefined);
  });
});
