// Goal: bucket logging's pure rules: the stream a logged bucket's records go to, the log
// objects' simple and partitioned keys (UTC, delivery or event date), and the target policy
// check of a delivery (the logging service principal, aws:SourceArn, aws:SourceAccount, the
// target prefix), including a wildcard principal that must not grant the service.
// Method: direct calls with hand-made bucket records.
import t from 'tap';
import type { BucketLoggingRecord, BucketRecord } from '../../src/engine/index/schema.js';
import { deliveryAllowed, logObjectKey, streamOf } from '../../src/service/bucket-logging.js';

function bucket(name: string, over: Partial<BucketRecord> = {}): BucketRecord {
  return {
    id: 1,
    tenantId: 'alice',
    name,
    createdAt: 0,
    versioning: 'Unversioned',
    objectLock: false,
    ...over,
  };
}

const logging = (over: Partial<BucketLoggingRecord> = {}): BucketLoggingRecord => ({
  targetBucket: 'logs',
  targetPrefix: 'log/',
  keyFormat: 'simple',
  updatedAt: 0,
  ...over,
});

t.test('streams and keys', async (t) => {
  const src = bucket('src');
  const simple = streamOf(src, logging(), 'us-east-1');
  t.equal(simple, 'logs/s/log/');
  const delivery = streamOf(
    src,
    logging({ keyFormat: 'partitioned', dateSource: 'DeliveryTime' }),
    'eu-1',
  );
  t.equal(delivery, 'logs/d/log/alice/eu-1/src/');
  const event = streamOf(src, logging({ keyFormat: 'partitioned', dateSource: 'EventTime' }), 'r');
  t.equal(event, 'logs/e/log/alice/r/src/');
  const at = Date.UTC(2026, 11, 7, 1, 2, 3);
  const dayBefore = Date.UTC(2026, 11, 6, 23, 59, 59);
  t.equal(logObjectKey(simple, at, dayBefore, 'ABC'), 'log/2026-12-07-01-02-03-ABC');
  t.equal(
    logObjectKey(delivery, at, dayBefore, 'ABC'),
    'log/alice/eu-1/src/2026/12/07/2026-12-07-01-02-03-ABC',
  );
  t.equal(
    logObjectKey(event, at, dayBefore, 'ABC'),
    'log/alice/r/src/2026/12/06/2026-12-07-01-02-03-ABC',
    'partitioned by the oldest record',
  );
  t.equal(logObjectKey('logs/s/', at, at, 'X'), '2026-12-07-01-02-03-X', 'no prefix');
});

t.test('a delivery needs the target policy to allow the logging service', async (t) => {
  const policy = (statement: Record<string, unknown>) => ({
    document: JSON.stringify({ Version: '2012-10-17', Statement: [statement] }),
  });
  const grant = {
    Effect: 'Allow',
    Principal: { Service: 'logging.s3.amazonaws.com' },
    Action: 's3:PutObject',
    Resource: 'arn:aws:s3:::logs/log/*',
    Condition: {
      ArnLike: { 'aws:SourceArn': 'arn:aws:s3:::src' },
      StringEquals: { 'aws:SourceAccount': 'alice' },
    },
  };
  const source = { bucket: 'src', tenantId: 'alice' };
  t.notOk(deliveryAllowed(bucket('logs'), source, 'log/'), 'no policy');
  t.ok(deliveryAllowed(bucket('logs', { policy: policy(grant) }), source, 'log/'));
  t.notOk(
    deliveryAllowed(bucket('logs', { policy: policy(grant) }), { ...source, bucket: 'x' }, 'log/'),
    'another source bucket',
  );
  t.notOk(
    deliveryAllowed(
      bucket('logs', { policy: policy(grant) }),
      { ...source, tenantId: 'bob' },
      'log/',
    ),
    'another source account',
  );
  t.notOk(deliveryAllowed(bucket('logs', { policy: policy(grant) }), source, 'other/'));
  t.notOk(
    deliveryAllowed(
      bucket('logs', { policy: policy({ ...grant, Principal: { AWS: '*' } }) }),
      source,
      'log/',
    ),
    'a wildcard principal is not the service',
  );
  t.notOk(
    deliveryAllowed(
      bucket('logs', {
        policy: {
          document: JSON.stringify({
            Version: '2012-10-17',
            Statement: [
              grant,
              { ...grant, Effect: 'Deny', Condition: undefined, Resource: 'arn:aws:s3:::logs/*' },
            ],
          }),
        },
      }),
      source,
      'log/',
    ),
    'a Deny wins',
  );
});
