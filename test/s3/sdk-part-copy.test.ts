// Goal: UploadPartCopy through the AWS SDK copies what it names: ranges of a source object (and
// the whole object without a range) become parts whose ETag is the MD5 of their bytes, and the
// completed object is those bytes in order; a source version is copied by its id, and the answer
// names it (`x-amz-copy-source-version-id`). Refusals store no part: a range outside the source
// (`InvalidRange`), a malformed range (`InvalidArgument`), a failed x-amz-copy-source-if-match
// (`PreconditionFailed`), a missing source (`NoSuchKey`) and a missing upload (`NoSuchUpload`).
// Method: a real `lightwell serve`, a tenant made through the admin API, @aws-sdk/client-s3.
import t from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import {
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  UploadPartCopyCommand,
  CompleteMultipartUploadCommand,
  ListPartsCommand,
  GetObjectCommand,
  PutObjectCommand,
  PutBucketVersioningCommand,
} from '@aws-sdk/client-s3';
import { s3ClientFor, s3ErrorOf } from '../helpers/s3-sdk.js';
import { Service } from '../helpers/service.js';

const MiB = 1024 * 1024;
const md5Tag = (body: Buffer): string => `"${createHash('md5').update(body).digest('hex')}"`;

t.test('UploadPartCopy through the AWS SDK', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const origin = service.publicUrl.replace(/\/api\/v1$/, '');
  const alice = await service.tenant('alice');
  const s3 = s3ClientFor(origin, alice);
  t.teardown(() => s3.destroy());
  const Bucket = 'copies';
  await s3.send(new CreateBucketCommand({ Bucket }));
  const source = randomBytes(11 * MiB + 123);
  await s3.send(new PutObjectCommand({ Bucket, Key: 'src/big', Body: source }));
  const small = randomBytes(1000);
  await s3.send(new PutObjectCommand({ Bucket: 'copies', Key: 'src/small', Body: small }));
  const read = async (Key: string): Promise<Buffer> => {
    const got = await s3.send(new GetObjectCommand({ Bucket, Key }));
    return Buffer.from((await got.Body?.transformToByteArray()) ?? []);
  };

  await t.test('ranges and a whole object become the parts', async (t) => {
    const Key = 'dest/assembled';
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket, Key }));
    const ranges: Array<[number, number]> = [
      [0, 5 * MiB - 1],
      [5 * MiB, source.length - 1],
    ];
    const parts: { ETag: string; PartNumber: number }[] = [];
    for (const [index, [start, end]] of ranges.entries()) {
      const copied = await s3.send(
        new UploadPartCopyCommand({
          Bucket,
          Key,
          UploadId,
          PartNumber: index + 1,
          CopySource: `${Bucket}/src/big`,
          CopySourceRange: `bytes=${start}-${end}`,
        }),
      );
      const ETag = copied.CopyPartResult?.ETag ?? '';
      t.equal(ETag, md5Tag(source.subarray(start, end + 1)), `part ${index + 1}: its bytes' MD5`);
      t.type(copied.CopyPartResult?.LastModified, Date);
      t.equal(copied.CopySourceVersionId, undefined, 'an unversioned source names no version');
      parts.push({ ETag, PartNumber: index + 1 });
    }
    const whole = await s3.send(
      new UploadPartCopyCommand({
        Bucket,
        Key,
        UploadId,
        PartNumber: 3,
        CopySource: `${Bucket}/src/small`,
      }),
    );
    t.equal(whole.CopyPartResult?.ETag, md5Tag(small), 'without a range: the whole object');
    parts.push({ ETag: whole.CopyPartResult?.ETag ?? '', PartNumber: 3 });
    await s3.send(
      new CompleteMultipartUploadCommand({
        Bucket,
        Key,
        UploadId,
        MultipartUpload: { Parts: parts },
      }),
    );
    t.ok(
      (await read(Key)).equals(Buffer.concat([source, small])),
      'the object is the copied bytes',
    );
  });

  await t.test('a source version by its id', async (t) => {
    const Versioned = 'versioned-src';
    await s3.send(new CreateBucketCommand({ Bucket: Versioned }));
    await s3.send(
      new PutBucketVersioningCommand({
        Bucket: Versioned,
        VersioningConfiguration: { Status: 'Enabled' },
      }),
    );
    const first = Buffer.from('the first version');
    const put = await s3.send(new PutObjectCommand({ Bucket: Versioned, Key: 'v', Body: first }));
    await s3.send(new PutObjectCommand({ Bucket: Versioned, Key: 'v', Body: 'the second' }));
    const Key = 'dest/versioned';
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket, Key }));
    const copied = await s3.send(
      new UploadPartCopyCommand({
        Bucket,
        Key,
        UploadId,
        PartNumber: 1,
        CopySource: `${Versioned}/v?versionId=${put.VersionId ?? ''}`,
      }),
    );
    t.equal(copied.CopySourceVersionId, put.VersionId, 'the answer names the source version');
    t.equal(copied.CopyPartResult?.ETag, md5Tag(first));
    const latest = await s3.send(
      new UploadPartCopyCommand({
        Bucket,
        Key,
        UploadId,
        PartNumber: 2,
        CopySource: `${Versioned}/v`,
      }),
    );
    t.not(latest.CopySourceVersionId, put.VersionId, 'without an id: the current version');
    await s3.send(
      new CompleteMultipartUploadCommand({
        Bucket,
        Key,
        UploadId,
        MultipartUpload: { Parts: [{ ETag: copied.CopyPartResult?.ETag ?? '', PartNumber: 1 }] },
      }),
    );
    t.ok((await read(Key)).equals(first));
  });

  await t.test('refusals store no part', async (t) => {
    const Key = 'dest/refused';
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket, Key }));
    const copy = (input: {
      CopySource?: string;
      CopySourceRange?: string;
      CopySourceIfMatch?: string;
      UploadId?: string;
    }) =>
      s3ErrorOf(
        s3.send(
          new UploadPartCopyCommand({
            Bucket,
            Key,
            UploadId,
            PartNumber: 1,
            CopySource: `${Bucket}/src/small`,
            ...input,
          }),
        ),
      );
    t.same(await copy({ CopySourceRange: 'bytes=0-1000' }), { name: 'InvalidRange', status: 416 });
    t.same(await copy({ CopySourceRange: 'bytes=0-2,3-5' }), {
      name: 'InvalidArgument',
      status: 400,
    });
    t.same(await copy({ CopySourceRange: 'bytes=5-2' }), { name: 'InvalidRange', status: 416 });
    t.same(await copy({ CopySourceIfMatch: '"0123456789abcdef0123456789abcdef"' }), {
      name: 'PreconditionFailed',
      status: 412,
    });
    t.same(await copy({ CopySource: `${Bucket}/src/none` }), { name: 'NoSuchKey', status: 404 });
    t.same(await copy({ UploadId: 'f'.repeat(32) }), { name: 'NoSuchUpload', status: 404 });
    const listed = await s3.send(new ListPartsCommand({ Bucket, Key, UploadId }));
    t.same(listed.Parts ?? [], [], 'no part was stored');
    const matched = await s3.send(
      new UploadPartCopyCommand({
        Bucket,
        Key,
        UploadId,
        PartNumber: 1,
        CopySource: `${Bucket}/src/small`,
        CopySourceIfMatch: md5Tag(small),
        CopySourceRange: 'bytes=10-19',
      }),
    );
    t.equal(matched.CopyPartResult?.ETag, md5Tag(small.subarray(10, 20)), 'a met condition');
  });
});
