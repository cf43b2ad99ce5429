// Goal: the AWS SDK for JavaScript in its default configuration (CRC32 request checksums,
// aws-chunked bodies where it streams, response checksum validation) stores, reads, lists and
// deletes objects on Lightwell through S3: the ETag is the body's MD5, representation headers
// and metadata come back, Range and conditional reads answer as S3 does, and a wrong
// Content-MD5 or a failed precondition commits nothing. CopyObject copies the bytes with the
// source's representation (COPY) or the request's (REPLACE), and refuses a copy onto itself
// that changes nothing or from a missing source, and one whose destination conditions
// (If-Match, If-None-Match) fail, writing nothing.
// Method: a real `lightwell serve`, a tenant made through the admin API, @aws-sdk/client-s3.
import t from 'tap';
import { createHash } from 'node:crypto';
import {
  CreateBucketCommand,
  PutObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  DeleteObjectCommand,
  ListObjectsV2Command,
  ListObjectVersionsCommand,
  CopyObjectCommand,
} from '@aws-sdk/client-s3';
import { s3ClientFor, s3ErrorOf } from '../helpers/s3-sdk.js';
import { Service } from '../helpers/service.js';

t.test('objects through the AWS SDK', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const origin = service.publicUrl.replace(/\/api\/v1$/, '');
  const alice = await service.tenant('alice');
  const s3 = s3ClientFor(origin, alice);
  t.teardown(() => s3.destroy());
  await s3.send(new CreateBucketCommand({ Bucket: 'objs' }));

  const body = Buffer.from('hello, lightwell over s3');
  const md5 = createHash('md5').update(body).digest();
  const put = await s3.send(
    new PutObjectCommand({
      Bucket: 'objs',
      Key: 'dir/a b.txt',
      Body: body,
      ContentType: 'text/plain',
      ContentDisposition: 'attachment',
      CacheControl: 'no-cache',
      Metadata: { color: 'blue' },
    }),
  );
  t.equal(put.ETag, `"${md5.toString('hex')}"`, 'the ETag is the MD5');

  const got = await s3.send(new GetObjectCommand({ Bucket: 'objs', Key: 'dir/a b.txt' }));
  t.equal(Buffer.from((await got.Body?.transformToByteArray()) ?? []).toString(), body.toString());
  t.equal(got.ContentType, 'text/plain');
  t.equal(got.ContentDisposition, 'attachment');
  t.equal(got.CacheControl, 'no-cache');
  t.same(got.Metadata, { color: 'blue' });
  t.equal(got.ETag, put.ETag);

  const range = await s3.send(
    new GetObjectCommand({ Bucket: 'objs', Key: 'dir/a b.txt', Range: 'bytes=0-4' }),
  );
  t.equal(Buffer.from((await range.Body?.transformToByteArray()) ?? []).toString(), 'hello');
  t.equal(range.ContentRange, `bytes 0-4/${body.length}`);

  const head = await s3.send(
    new HeadObjectCommand({ Bucket: 'objs', Key: 'dir/a b.txt', ChecksumMode: 'ENABLED' }),
  );
  t.equal(head.ContentLength, body.length);
  t.ok(head.ChecksumCRC32 ?? head.ChecksumCRC32C, 'a checksum in checksum mode');

  const notModified = await s3ErrorOf(
    s3.send(new GetObjectCommand({ Bucket: 'objs', Key: 'dir/a b.txt', IfNoneMatch: put.ETag })),
  );
  t.equal(notModified.status, 304);
  const failed = await s3ErrorOf(
    s3.send(new GetObjectCommand({ Bucket: 'objs', Key: 'dir/a b.txt', IfMatch: '"nope"' })),
  );
  t.equal(failed.status, 412);

  const badMd5 = await s3ErrorOf(
    s3.send(
      new PutObjectCommand({
        Bucket: 'objs',
        Key: 'bad',
        Body: body,
        ContentMD5: createHash('md5').update('other').digest('base64'),
      }),
    ),
  );
  t.same(badMd5, { name: 'BadDigest', status: 400 });
  const absent = await s3ErrorOf(
    s3.send(
      new PutObjectCommand({ Bucket: 'objs', Key: 'dir/a b.txt', Body: body, IfNoneMatch: '*' }),
    ),
  );
  t.equal(absent.status, 412, 'If-None-Match: * on an existing key');

  const listed = await s3.send(new ListObjectsV2Command({ Bucket: 'objs' }));
  t.same(
    (listed.Contents ?? []).map((entry) => entry.Key),
    ['dir/a b.txt'],
    'the refused PUTs stored nothing',
  );
  const folders = await s3.send(new ListObjectsV2Command({ Bucket: 'objs', Delimiter: '/' }));
  t.same(
    (folders.CommonPrefixes ?? []).map((p) => p.Prefix),
    ['dir/'],
  );

  const versions = await s3.send(new ListObjectVersionsCommand({ Bucket: 'objs' }));
  t.same(
    (versions.Versions ?? []).map((v) => [v.Key, v.VersionId, v.IsLatest]),
    [['dir/a b.txt', 'null', true]],
    'ListObjectVersions',
  );

  await t.test('CopyObject', async (t) => {
    const copied = await s3.send(
      new CopyObjectCommand({ Bucket: 'objs', Key: 'copy', CopySource: 'objs/dir/a%20b.txt' }),
    );
    t.equal(copied.CopyObjectResult?.ETag, put.ETag, "the copy's ETag is the source's MD5");
    const back = await s3.send(new GetObjectCommand({ Bucket: 'objs', Key: 'copy' }));
    t.equal(
      Buffer.from((await back.Body?.transformToByteArray()) ?? []).toString(),
      body.toString(),
    );
    t.equal(back.ContentType, 'text/plain', 'COPY keeps the representation');
    t.equal(back.ContentDisposition, 'attachment');
    t.same(back.Metadata, { color: 'blue' });
    await s3.send(
      new CopyObjectCommand({
        Bucket: 'objs',
        Key: 'copy',
        CopySource: 'objs/copy',
        MetadataDirective: 'REPLACE',
        ContentType: 'text/x-copy',
        Metadata: { color: 'red' },
      }),
    );
    const replaced = await s3.send(new HeadObjectCommand({ Bucket: 'objs', Key: 'copy' }));
    t.equal(replaced.ContentType, 'text/x-copy', "REPLACE takes the request's representation");
    t.same(replaced.Metadata, { color: 'red' });
    t.equal(replaced.ContentDisposition, undefined);
    t.same(
      await s3ErrorOf(
        s3.send(new CopyObjectCommand({ Bucket: 'objs', Key: 'copy', CopySource: 'objs/copy' })),
      ),
      { name: 'InvalidRequest', status: 400 },
      'a copy onto itself that changes nothing',
    );
    t.same(
      await s3ErrorOf(
        s3.send(new CopyObjectCommand({ Bucket: 'objs', Key: 'c2', CopySource: 'objs/absent' })),
      ),
      { name: 'NoSuchKey', status: 404 },
    );
    t.same(
      await s3ErrorOf(
        s3.send(
          new CopyObjectCommand({
            Bucket: 'objs',
            Key: 'c3',
            CopySource: 'objs/copy',
            CopySourceIfMatch: '"0123"',
          }),
        ),
      ),
      { name: 'PreconditionFailed', status: 412 },
    );
    // The destination's conditions, as a PutObject's: nothing is written when they fail.
    const destination = { Bucket: 'objs', CopySource: 'objs/copy' };
    t.same(
      await s3ErrorOf(
        s3.send(
          new CopyObjectCommand({
            ...destination,
            Key: 'copy',
            MetadataDirective: 'REPLACE',
            IfNoneMatch: '*',
          }),
        ),
      ),
      { name: 'PreconditionFailed', status: 412 },
      'If-None-Match: * and the destination exists',
    );
    t.same(
      await s3ErrorOf(
        s3.send(new CopyObjectCommand({ ...destination, Key: 'c4', IfMatch: '"0123"' })),
      ),
      { name: 'NoSuchKey', status: 404 },
      'If-Match and no destination: 404, as on a PutObject',
    );
    t.same(
      await s3ErrorOf(
        s3.send(
          new CopyObjectCommand({
            ...destination,
            Key: 'copy',
            MetadataDirective: 'REPLACE',
            IfMatch: '"0123"',
          }),
        ),
      ),
      { name: 'PreconditionFailed', status: 412 },
      'If-Match that is not the destination',
    );
    t.same(
      (await s3.send(new HeadObjectCommand({ Bucket: 'objs', Key: 'copy' }))).Metadata,
      { color: 'red' },
      'a refused copy changed nothing',
    );
    t.same(await s3ErrorOf(s3.send(new HeadObjectCommand({ Bucket: 'objs', Key: 'c4' }))), {
      name: 'NotFound',
      status: 404,
    });
    const met = await s3.send(
      new CopyObjectCommand({ ...destination, Key: 'c5', IfNoneMatch: '*' }),
    );
    t.equal(met.CopyObjectResult?.ETag, put.ETag, 'If-None-Match: * and no destination');
    await s3.send(
      new CopyObjectCommand({ ...destination, Key: 'c5', IfMatch: met.CopyObjectResult?.ETag }),
    );
    await s3.send(new DeleteObjectCommand({ Bucket: 'objs', Key: 'c5' }));
    await s3.send(new DeleteObjectCommand({ Bucket: 'objs', Key: 'copy' }));
  });

  await s3.send(new DeleteObjectCommand({ Bucket: 'objs', Key: 'dir/a b.txt' }));
  const gone = await s3ErrorOf(
    s3.send(new HeadObjectCommand({ Bucket: 'objs', Key: 'dir/a b.txt' })),
  );
  t.equal(gone.status, 404);

  await t.test('what Lightwell does not offer is refused, not dropped', async (t) => {
    t.same(
      await s3ErrorOf(
        s3.send(
          new PutObjectCommand({ Bucket: 'objs', Key: 'cold', Body: 'x', StorageClass: 'GLACIER' }),
        ),
      ),
      { name: 'InvalidStorageClass', status: 400 },
    );
    t.same(
      await s3ErrorOf(
        s3.send(
          new PutObjectCommand({
            Bucket: 'objs',
            Key: 'cold',
            Body: 'x',
            WebsiteRedirectLocation: '/elsewhere',
          }),
        ),
      ),
      { name: 'NotImplemented', status: 501 },
    );
    t.equal(
      (await s3ErrorOf(s3.send(new HeadObjectCommand({ Bucket: 'objs', Key: 'cold' })))).status,
      404,
      'nothing was written',
    );
    await s3.send(
      new PutObjectCommand({ Bucket: 'objs', Key: 'cold', Body: 'x', StorageClass: 'STANDARD' }),
    );
    const head = await s3.send(new HeadObjectCommand({ Bucket: 'objs', Key: 'cold' }));
    t.equal(head.ContentLength, 1, 'STANDARD, the one class there is, is taken');
  });
});
