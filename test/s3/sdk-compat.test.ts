// Goal: the S3 behaviours clients rely on beyond the operations' happy paths hold through the AWS
// SDK: a CompleteMultipartUpload sent again after it succeeded answers the same object; an
// If-Match or If-None-Match ETag sent without its quotes compares as the quoted one; a write to a
// Suspended bucket names no version; an empty continuation token is the first page; RGW's
// `allow-unordered` is refused with a delimiter (`InvalidArgument`) and harmless without; a V1
// listing's Prefix comes back as sent, even with `encoding-type=url`.
// Method: a real `lightwell serve`, a tenant made through the admin API, @aws-sdk/client-s3 (raw
// query parameters and headers added by a build-step middleware where the SDK has no field).
import t from 'tap';
import { createHash } from 'node:crypto';
import {
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  UploadPartCommand,
  CompleteMultipartUploadCommand,
  GetObjectCommand,
  PutObjectCommand,
  PutBucketVersioningCommand,
  ListObjectsCommand,
  ListObjectsV2Command,
} from '@aws-sdk/client-s3';
import { s3ClientFor, s3ErrorOf } from '../helpers/s3-sdk.js';
import { Service } from '../helpers/service.js';

type BuildNext = (args: { request: unknown }) => Promise<unknown>;

/** `command` with `query` added to its URL and `headers` to its request. */
function withExtra<C extends { middlewareStack: unknown }>(
  command: C,
  extra: { query?: Record<string, string>; headers?: Record<string, string> },
): C {
  const stack = command.middlewareStack as {
    add(middleware: (next: BuildNext) => BuildNext, options: { step: 'build' }): void;
  };
  stack.add(
    (next) => (args) => {
      const request = args.request as {
        query: Record<string, string>;
        headers: Record<string, string>;
      };
      Object.assign(request.query, extra.query ?? {});
      Object.assign(request.headers, extra.headers ?? {});
      return next(args);
    },
    { step: 'build' },
  );
  return command;
}

t.test('S3 compatibility details through the AWS SDK', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const origin = service.publicUrl.replace(/\/api\/v1$/, '');
  const alice = await service.tenant('alice');
  const s3 = s3ClientFor(origin, alice);
  t.teardown(() => s3.destroy());
  const Bucket = 'compat';
  await s3.send(new CreateBucketCommand({ Bucket }));

  await t.test('a complete sent again answers the same object', async (t) => {
    const Key = 'twice';
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket, Key }));
    const part = await s3.send(
      new UploadPartCommand({ Bucket, Key, UploadId, PartNumber: 1, Body: 'only part' }),
    );
    const complete = () =>
      s3.send(
        new CompleteMultipartUploadCommand({
          Bucket,
          Key,
          UploadId,
          MultipartUpload: { Parts: [{ ETag: part.ETag ?? '', PartNumber: 1 }] },
        }),
      );
    const first = await complete();
    const again = await complete();
    t.equal(again.ETag, first.ETag, 'the retried complete answers the object it made');
    await s3.send(new PutObjectCommand({ Bucket, Key, Body: 'replaced' }));
    t.same(await s3ErrorOf(complete()), { name: 'NoSuchUpload', status: 404 }, 'not once replaced');
  });

  await t.test('ETags without quotes in write conditions', async (t) => {
    const put = await s3.send(new PutObjectCommand({ Bucket, Key: 'cond', Body: 'bar' }));
    const bare = (put.ETag ?? '').replace(/"/g, '');
    t.equal(bare, createHash('md5').update('bar').digest('hex'));
    await s3.send(
      withExtra(new PutObjectCommand({ Bucket, Key: 'cond', Body: 'zar' }), {
        headers: { 'if-match': bare },
      }),
    );
    const got = await s3.send(new GetObjectCommand({ Bucket, Key: 'cond' }));
    t.equal(await got.Body?.transformToString(), 'zar', 'If-Match with a bare ETag matched');
    const zar = createHash('md5').update('zar').digest('hex');
    t.same(
      await s3ErrorOf(
        s3.send(
          withExtra(new PutObjectCommand({ Bucket, Key: 'cond', Body: 'no' }), {
            headers: { 'if-none-match': zar },
          }),
        ),
      ),
      { name: 'PreconditionFailed', status: 412 },
      'If-None-Match with a bare ETag matched',
    );
    t.same(
      await s3ErrorOf(
        s3.send(new PutObjectCommand({ Bucket, Key: 'absent', Body: 'no', IfMatch: `"${zar}"` })),
      ),
      { name: 'NoSuchKey', status: 404 },
      'If-Match of a key with no object: 404, as AWS answers',
    );
    const still = await s3.send(new GetObjectCommand({ Bucket, Key: 'cond' }));
    t.equal(await still.Body?.transformToString(), 'zar', 'the refused write changed nothing');
  });

  await t.test('a Suspended bucket names no version', async (t) => {
    const Suspended = 'compat-suspended';
    await s3.send(new CreateBucketCommand({ Bucket: Suspended }));
    await s3.send(
      new PutBucketVersioningCommand({
        Bucket: Suspended,
        VersioningConfiguration: { Status: 'Suspended' },
      }),
    );
    const put = await s3.send(new PutObjectCommand({ Bucket: Suspended, Key: 'k', Body: 'x' }));
    t.equal(put.VersionId, undefined, 'the null version is not named');
    await s3.send(
      new PutBucketVersioningCommand({
        Bucket: Suspended,
        VersioningConfiguration: { Status: 'Enabled' },
      }),
    );
    const versioned = await s3.send(
      new PutObjectCommand({ Bucket: Suspended, Key: 'k', Body: 'y' }),
    );
    t.type(versioned.VersionId, 'string', 'an Enabled bucket names the version');
  });

  await t.test('listing parameters', async (t) => {
    for (const Key of ['a/1', 'a/2', 'b'])
      await s3.send(new PutObjectCommand({ Bucket, Key, Body: Key }));
    const empty = await s3.send(
      new ListObjectsV2Command({ Bucket, Prefix: 'a/', ContinuationToken: '' }),
    );
    t.same(
      empty.Contents?.map((entry) => entry.Key),
      ['a/1', 'a/2'],
      'an empty continuation token is the first page',
    );
    t.equal(empty.ContinuationToken, '', 'and is echoed');
    t.same(
      await s3ErrorOf(
        s3.send(
          withExtra(new ListObjectsCommand({ Bucket, Delimiter: '/' }), {
            query: { 'allow-unordered': 'true' },
          }),
        ),
      ),
      { name: 'InvalidArgument', status: 400 },
      'allow-unordered with a delimiter',
    );
    const unordered = await s3.send(
      withExtra(new ListObjectsCommand({ Bucket, Prefix: 'a/' }), {
        query: { 'allow-unordered': 'true' },
      }),
    );
    t.equal(unordered.Contents?.length, 2, 'allow-unordered alone lists');
    // (A prefix the SDK's XML reading keeps as is: it trims whitespace-only text.)
    const v1 = await s3.send(
      new ListObjectsCommand({ Bucket, Prefix: 'a b/%', EncodingType: 'url' }),
    );
    t.equal(v1.Prefix, 'a b/%', "V1's Prefix as sent, not encoded");
    t.same(v1.Contents ?? [], []);
  });
});
