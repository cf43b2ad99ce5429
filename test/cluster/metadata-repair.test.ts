// Goal: a replica that was down while an object's tags, retention and legal hold changed gets
// those changes from a repair (docs/cluster.md §8a, "Rebalance and anti-entropy"): such changes
// keep the version's sequence, so repair compares their own sequences too, not only the
// versions'. A replica that holds the newer metadata is never sent an older one.
// Method: the cluster kit, three nodes on real etcd (replication factor 3). Two objects written
// through n1's S3 API into a bucket with object lock; n3 SIGKILLed; their tags changed through
// n1, a retention and legal holds set through n2; n3 started again. A HEAD of one on n3 shows
// its new tags and hold at once (a read of the current version catches up on a missed metadata
// change); then a rebalance runs on n1, and n3's S3 API answers the other's new tags, retention
// and legal hold (those reads are served from the node's own copy, so only the repair could have
// brought them). Skips, with the reason, where etcd cannot be had.
import t from 'tap';
import {
  CreateBucketCommand,
  GetObjectLegalHoldCommand,
  GetObjectRetentionCommand,
  GetObjectTaggingCommand,
  HeadObjectCommand,
  HeadBucketCommand,
  PutObjectCommand,
  PutObjectLegalHoldCommand,
  PutObjectRetentionCommand,
  PutObjectTaggingCommand,
} from '@aws-sdk/client-s3';
import { clusterEnvironment, waitFor } from './kit.js';
import { threeNodesWithS3 } from './data-client.js';

const env = await clusterEnvironment();
const OBJECT = { Bucket: 'locked', Key: 'held' };
/** Read with a HEAD on n3 before the repair; `held` is not read before it. */
const PEEKED = { Bucket: 'locked', Key: 'peeked' };

t.test('missed metadata changes are repaired', { skip: env.skip ?? false }, async (t) => {
  const cluster = await threeNodesWithS3((fn) => t.teardown(fn));
  const [n1, n2, n3] = cluster.nodes;
  const [s1, s2, s3] = cluster.s3;
  await waitFor('the key on n1', () =>
    s1
      .send(new CreateBucketCommand({ Bucket: 'locked', ObjectLockEnabledForBucket: true }))
      .then(() => true),
  );
  for (const s of [s2, s3])
    await waitFor('bucket locked on every node', () =>
      s.send(new HeadBucketCommand({ Bucket: 'locked' })).then(() => true),
    );
  await s1.send(new PutObjectCommand({ ...OBJECT, Body: 'kept', Tagging: 'colour=red' }));
  await s1.send(new PutObjectCommand({ ...PEEKED, Body: 'seen' }));
  // The write is acknowledged by a majority; n3 takes it moments later.
  const before = await waitFor('the object on n3', () =>
    s3.send(new GetObjectTaggingCommand(OBJECT)).catch(() => undefined),
  );
  t.same(before.TagSet, [{ Key: 'colour', Value: 'red' }], 'n3 holds the first tags');

  await n3.kill9();
  const tags = [
    { Key: 'colour', Value: 'teal' },
    { Key: 'size', Value: 'small' },
  ];
  await s1.send(new PutObjectTaggingCommand({ ...OBJECT, Tagging: { TagSet: tags } }));
  const until = new Date(Date.now() + 86_400_000);
  until.setMilliseconds(0);
  await s2.send(
    new PutObjectRetentionCommand({
      ...OBJECT,
      Retention: { Mode: 'GOVERNANCE', RetainUntilDate: until },
    }),
  );
  await s2.send(new PutObjectLegalHoldCommand({ ...OBJECT, LegalHold: { Status: 'ON' } }));
  await s1.send(new PutObjectTaggingCommand({ ...PEEKED, Tagging: { TagSet: tags } }));
  await s2.send(new PutObjectLegalHoldCommand({ ...PEEKED, LegalHold: { Status: 'ON' } }));

  await n3.start();
  // A HEAD on n3 (a read of the current version) catches up on the change before it answers.
  const head = await s3.send(new HeadObjectCommand(PEEKED));
  t.equal(head.TagCount, 2, 'a HEAD on n3 counts the new tags');
  t.equal(head.ObjectLockLegalHoldStatus, 'ON', 'and shows the legal hold');

  const answer = await n1.rebalance({ tenantId: 'acme', reason: 'test', confirmTenant: 'acme' });
  t.equal(answer.status, 200, JSON.stringify(answer.json));
  t.match(answer.json, { replication: { counts: { replicasUnreachable: 0 } } }, 'n3 answered');

  const got = await s3.send(new GetObjectTaggingCommand(OBJECT));
  t.same(got.TagSet, tags, 'n3 answers the tags set while it was down');
  const retention = await s3.send(new GetObjectRetentionCommand(OBJECT));
  t.equal(retention.Retention?.Mode, 'GOVERNANCE', 'n3 answers the retention mode');
  t.equal(retention.Retention?.RetainUntilDate?.getTime(), until.getTime(), 'and its date');
  const hold = await s3.send(new GetObjectLegalHoldCommand(OBJECT));
  t.equal(hold.LegalHold?.Status, 'ON', 'n3 answers the legal hold');
  const peeked = await s3.send(new GetObjectTaggingCommand(PEEKED));
  t.same(peeked.TagSet, tags, "the HEAD's catch-up kept the new tags");

  // A second repair finds nothing to send: every replica holds the newest metadata.
  const again = await n2.rebalance({ tenantId: 'acme', reason: 'test', confirmTenant: 'acme' });
  t.equal(again.status, 200, JSON.stringify(again.json));
  t.match(again.json, { replication: { counts: { metadataSent: 0, copiesSent: 0 } } });
});
