// Goal: ListObjectVersions with a delimiter rolls keys up into CommonPrefixes as S3 does: each
// prefix once, counted against max-keys, and a page that ends on a prefix resumes past it.
// Method: a real `lightwell serve`, @aws-sdk/client-s3, a versioned bucket.
import t from 'tap';
import {
  CreateBucketCommand,
  ListObjectVersionsCommand,
  PutBucketVersioningCommand,
  PutObjectCommand,
} from '@aws-sdk/client-s3';
import { s3ClientFor } from '../helpers/s3-sdk.js';
import { Service } from '../helpers/service.js';

t.test('ListObjectVersions with a delimiter', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const origin = service.publicUrl.replace(/\/api\/v1$/, '');
  const s3 = s3ClientFor(origin, await service.tenant('alice'));
  t.teardown(() => s3.destroy());
  await s3.send(new CreateBucketCommand({ Bucket: 'vers' }));
  await s3.send(
    new PutBucketVersioningCommand({
      Bucket: 'vers',
      VersioningConfiguration: { Status: 'Enabled' },
    }),
  );
  for (const key of ['a/1', 'a/2', 'a/2', 'b', 'c/x/1', 'c/y', 'd'])
    await s3.send(new PutObjectCommand({ Bucket: 'vers', Key: key, Body: key }));

  const all = await s3.send(new ListObjectVersionsCommand({ Bucket: 'vers', Delimiter: '/' }));
  t.same(
    (all.CommonPrefixes ?? []).map((p) => p.Prefix),
    ['a/', 'c/'],
  );
  t.same(
    (all.Versions ?? []).map((v) => v.Key),
    ['b', 'd'],
  );
  t.equal(all.IsTruncated, false);

  const under = await s3.send(
    new ListObjectVersionsCommand({ Bucket: 'vers', Delimiter: '/', Prefix: 'c/' }),
  );
  t.same(
    (under.CommonPrefixes ?? []).map((p) => p.Prefix),
    ['c/x/'],
  );
  t.same(
    (under.Versions ?? []).map((v) => v.Key),
    ['c/y'],
  );

  // Pages of two: a/ and b, then c/ and d.
  const first = await s3.send(
    new ListObjectVersionsCommand({ Bucket: 'vers', Delimiter: '/', MaxKeys: 2 }),
  );
  t.equal(first.IsTruncated, true);
  t.same(
    (first.CommonPrefixes ?? []).map((p) => p.Prefix),
    ['a/'],
  );
  t.same(
    (first.Versions ?? []).map((v) => v.Key),
    ['b'],
  );
  const page1 = await s3.send(
    new ListObjectVersionsCommand({ Bucket: 'vers', Delimiter: '/', MaxKeys: 1 }),
  );
  t.equal(page1.NextKeyMarker, 'a/', 'a page ending on a prefix names it as the marker');
  const page2 = await s3.send(
    new ListObjectVersionsCommand({
      Bucket: 'vers',
      Delimiter: '/',
      MaxKeys: 1,
      KeyMarker: page1.NextKeyMarker,
    }),
  );
  t.same(
    (page2.Versions ?? []).map((v) => v.Key),
    ['b'],
    'the next page resumes past the prefix',
  );
});
