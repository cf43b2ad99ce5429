// Goal: multipart uploads through the AWS SDK for JavaScript store what was sent: a 3-part
// upload (two 5 MiB parts and a small last part) reads back byte for byte with S3's ETag
// `md5(part md5s)-3`, each part's ETag is its MD5, ListParts and ListMultipartUploads show what
// is in progress, a part under 5 MiB that is not the last is refused (`EntityTooSmall`), a
// wrong part ETag is `InvalidPart`, and an aborted upload is gone (`NoSuchUpload`). GetObject and
// HeadObject `partNumber` read one part of a completed upload (`InvalidPart` past the last), and
// GetObjectAttributes pages its parts. An
// upload created with SHA256 refuses a part that declares another algorithm (`InvalidRequest`)
// and a complete whose checksum is not the parts' composite (`BadDigest`), and keeps the composite
// and each part's checksum (GetObjectAttributes' ObjectParts). A bucket
// delete aborts the uploads in progress and gives their parts' bytes back, as AWS and RGW do,
// but still refuses a bucket that holds an object (`BucketNotEmpty`, nothing aborted).
// Method: a real `lightwell serve`, a tenant made through the admin API, @aws-sdk/client-s3.
import t from 'tap';
import { createHash } from 'node:crypto';
import {
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  UploadPartCommand,
  CompleteMultipartUploadCommand,
  AbortMultipartUploadCommand,
  ListPartsCommand,
  ListMultipartUploadsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  GetObjectAttributesCommand,
  PutObjectCommand,
  DeleteObjectCommand,
  DeleteBucketCommand,
} from '@aws-sdk/client-s3';
import { s3ClientFor, s3ErrorOf } from '../helpers/s3-sdk.js';
import { Service } from '../helpers/service.js';

const MiB = 1024 * 1024;

/** Deterministic bytes that differ by `seed` (no two parts alike, so dedup cannot hide one). */
function bytesOf(size: number, seed: number): Buffer {
  const out = Buffer.alloc(size);
  let x = seed * 2654435761 + 1;
  for (let i = 0; i < size; i += 4) {
    x = (x ^ (x << 13)) >>> 0;
    x = (x ^ (x >>> 17)) >>> 0;
    x = (x ^ (x << 5)) >>> 0;
    out.writeUInt32LE(x, i);
  }
  return out;
}

const md5 = (body: Buffer): Buffer => createHash('md5').update(body).digest();

t.test('multipart uploads through the AWS SDK', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const origin = service.publicUrl.replace(/\/api\/v1$/, '');
  const alice = await service.tenant('alice');
  const s3 = s3ClientFor(origin, alice);
  t.teardown(() => s3.destroy());
  await s3.send(new CreateBucketCommand({ Bucket: 'multi' }));
  const Bucket = 'multi';

  await t.test('three parts read back with the multipart ETag', async (t) => {
    const Key = 'big/object.bin';
    const bodies = [bytesOf(5 * MiB, 1), bytesOf(5 * MiB, 2), bytesOf(1000, 3)];
    const { UploadId } = await s3.send(
      new CreateMultipartUploadCommand({
        Bucket,
        Key,
        ContentType: 'application/x-test',
        ContentDisposition: 'attachment',
        Metadata: { shade: 'green' },
      }),
    );
    t.type(UploadId, 'string');
    const listed = await s3.send(new ListMultipartUploadsCommand({ Bucket }));
    t.same(
      listed.Uploads?.map((upload) => [upload.Key, upload.UploadId]),
      [[Key, UploadId]],
      'the upload is in progress',
    );
    const etags: string[] = [];
    for (const [index, Body] of bodies.entries()) {
      const part = await s3.send(
        new UploadPartCommand({ Bucket, Key, UploadId, PartNumber: index + 1, Body }),
      );
      t.equal(part.ETag, `"${md5(Body).toString('hex')}"`, `part ${index + 1}'s ETag is its MD5`);
      etags.push(part.ETag ?? '');
    }
    const parts = await s3.send(new ListPartsCommand({ Bucket, Key, UploadId }));
    t.same(
      parts.Parts?.map((part) => [part.PartNumber, part.ETag, part.Size]),
      bodies.map((body, index) => [index + 1, etags[index], body.length]),
      'ListParts shows the parts',
    );
    const paged = await s3.send(new ListPartsCommand({ Bucket, Key, UploadId, MaxParts: 2 }));
    t.equal(paged.IsTruncated, true);
    t.equal(paged.Parts?.length, 2);
    const done = await s3.send(
      new CompleteMultipartUploadCommand({
        Bucket,
        Key,
        UploadId,
        MultipartUpload: { Parts: etags.map((ETag, index) => ({ ETag, PartNumber: index + 1 })) },
      }),
    );
    const expected = createHash('md5')
      .update(Buffer.concat(bodies.map(md5)))
      .digest('hex');
    t.equal(done.ETag, `"${expected}-3"`, "the ETag is S3's md5(part md5s)-N");
    const got = await s3.send(new GetObjectCommand({ Bucket, Key }));
    const back = Buffer.from((await got.Body?.transformToByteArray()) ?? []);
    t.equal(back.length, 10 * MiB + 1000);
    t.ok(back.equals(Buffer.concat(bodies)), 'the object is the parts byte for byte');
    t.equal(got.ETag, done.ETag);
    t.equal(got.ContentType, 'application/x-test');
    t.equal(got.ContentDisposition, 'attachment', 'representation headers given at create');
    t.same(got.Metadata, { shade: 'green' });
    const after = await s3.send(new ListMultipartUploadsCommand({ Bucket }));
    t.same(after.Uploads ?? [], [], 'a completed upload is no longer in progress');
    for (const [index, body] of bodies.entries()) {
      const part = await s3.send(new GetObjectCommand({ Bucket, Key, PartNumber: index + 1 }));
      const bytes = Buffer.from((await part.Body?.transformToByteArray()) ?? []);
      t.ok(bytes.equals(body), `partNumber ${index + 1} reads that part's bytes`);
      t.equal(part.PartsCount, 3);
      t.equal(part.ETag, done.ETag, "a part read has the object's ETag");
    }
    const attributes = await s3.send(
      new GetObjectAttributesCommand({
        Bucket,
        Key,
        ObjectAttributes: ['ObjectParts', 'ObjectSize'],
        MaxParts: 2,
      }),
    );
    t.equal(attributes.ObjectParts?.TotalPartsCount, 3, 'GetObjectAttributes: the part count');
    t.same(
      attributes.ObjectParts?.Parts?.map((part) => [part.PartNumber, part.Size]),
      [
        [1, 5 * MiB],
        [2, 5 * MiB],
      ],
    );
    t.equal(attributes.ObjectParts?.IsTruncated, true);
    const rest = await s3.send(
      new GetObjectAttributesCommand({
        Bucket,
        Key,
        ObjectAttributes: ['ObjectParts'],
        PartNumberMarker: attributes.ObjectParts?.NextPartNumberMarker,
      }),
    );
    t.same(
      rest.ObjectParts?.Parts?.map((part) => [part.PartNumber, part.Size]),
      [[3, 1000]],
      'the next page of parts',
    );
    const head = await s3.send(new HeadObjectCommand({ Bucket, Key, PartNumber: 3 }));
    t.equal(head.ContentLength, 1000, 'HeadObject partNumber: the part length');
    t.same(await s3ErrorOf(s3.send(new GetObjectCommand({ Bucket, Key, PartNumber: 4 }))), {
      name: 'InvalidPart',
      status: 400,
    });
    t.same(
      await s3ErrorOf(
        s3.send(new GetObjectCommand({ Bucket, Key, PartNumber: 1, Range: 'bytes=0-1' })),
      ),
      { name: 'InvalidRequest', status: 400 },
      'a range and a part number',
    );
    await s3.send(new PutObjectCommand({ Bucket, Key: 'single', Body: 'one part' }));
    const whole = await s3.send(new GetObjectCommand({ Bucket, Key: 'single', PartNumber: 1 }));
    t.equal(await whole.Body?.transformToString(), 'one part', 'a single-part object is part 1');
    t.equal(whole.PartsCount, undefined);
    t.same(
      await s3ErrorOf(s3.send(new GetObjectCommand({ Bucket, Key: 'single', PartNumber: 2 }))),
      { name: 'InvalidPart', status: 400 },
    );
  });

  await t.test('a small part that is not the last is refused', async (t) => {
    const Key = 'small';
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket, Key }));
    const bodies = [bytesOf(1024, 4), bytesOf(1024, 5)];
    const etags: string[] = [];
    for (const [index, Body] of bodies.entries()) {
      const part = await s3.send(
        new UploadPartCommand({ Bucket, Key, UploadId, PartNumber: index + 1, Body }),
      );
      etags.push(part.ETag ?? '');
    }
    const complete = (Parts: { ETag: string; PartNumber: number }[]): Promise<unknown> =>
      s3.send(
        new CompleteMultipartUploadCommand({ Bucket, Key, UploadId, MultipartUpload: { Parts } }),
      );
    t.same(
      await s3ErrorOf(complete(etags.map((ETag, index) => ({ ETag, PartNumber: index + 1 })))),
      {
        name: 'EntityTooSmall',
        status: 400,
      },
    );
    t.same(
      await s3ErrorOf(complete([{ ETag: `"${'0'.repeat(32)}"`, PartNumber: 1 }])),
      { name: 'InvalidPart', status: 400 },
      'a part ETag that is not the uploaded one',
    );
    t.same(
      await s3ErrorOf(complete([{ ETag: etags[0] ?? '', PartNumber: 7 }])),
      { name: 'InvalidPart', status: 400 },
      'a part never uploaded',
    );
    t.same(await s3ErrorOf(s3.send(new GetObjectCommand({ Bucket, Key }))), {
      name: 'NoSuchKey',
      status: 404,
    });
    // The last part alone may be small.
    const one = await s3.send(
      new CompleteMultipartUploadCommand({
        Bucket,
        Key,
        UploadId,
        MultipartUpload: { Parts: [{ ETag: etags[0] ?? '', PartNumber: 1 }] },
      }),
    );
    t.match(one.ETag, /^"[0-9a-f]{32}-1"$/);
    const got = await s3.send(new GetObjectCommand({ Bucket, Key }));
    t.ok(
      Buffer.from((await got.Body?.transformToByteArray()) ?? []).equals(
        bodies[0] ?? Buffer.alloc(0),
      ),
    );
  });

  await t.test('abort', async (t) => {
    const Key = 'aborted';
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket, Key }));
    await s3.send(
      new UploadPartCommand({ Bucket, Key, UploadId, PartNumber: 1, Body: bytesOf(4096, 6) }),
    );
    await s3.send(new AbortMultipartUploadCommand({ Bucket, Key, UploadId }));
    t.same(await s3ErrorOf(s3.send(new ListPartsCommand({ Bucket, Key, UploadId }))), {
      name: 'NoSuchUpload',
      status: 404,
    });
    t.same(
      await s3ErrorOf(
        s3.send(new UploadPartCommand({ Bucket, Key, UploadId, PartNumber: 2, Body: 'x' })),
      ),
      { name: 'NoSuchUpload', status: 404 },
    );
    t.same(await s3ErrorOf(s3.send(new AbortMultipartUploadCommand({ Bucket, Key, UploadId }))), {
      name: 'NoSuchUpload',
      status: 404,
    });
    t.same(
      await s3ErrorOf(
        s3.send(
          new CompleteMultipartUploadCommand({
            Bucket,
            Key,
            UploadId,
            MultipartUpload: { Parts: [{ ETag: '1234', PartNumber: 1 }] },
          }),
        ),
      ),
      { name: 'NoSuchUpload', status: 404 },
      'a complete of no upload is NoSuchUpload, whatever its part list',
    );
    const listed = await s3.send(new ListMultipartUploadsCommand({ Bucket }));
    t.same(listed.Uploads ?? [], []);
  });

  await t.test('a bucket delete aborts the uploads in progress', async (t) => {
    const admin = service.adminToken();
    const usedBytes = async (): Promise<number> =>
      ((await service.admin('GET', '/tenants/alice/quota', admin)).json as { usedBytes: number })
        .usedBytes;
    const before = await usedBytes();
    const doomed = 'doomed';
    await s3.send(new CreateBucketCommand({ Bucket: doomed }));
    const uploads: string[] = [];
    for (const Key of ['a', 'b/c']) {
      const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: doomed, Key }));
      for (const PartNumber of [1, 2])
        await s3.send(
          new UploadPartCommand({
            Bucket: doomed,
            Key,
            UploadId,
            PartNumber,
            Body: bytesOf(64 * 1024, 10 + PartNumber + uploads.length * 2),
          }),
        );
      uploads.push(UploadId ?? '');
    }
    t.equal(await usedBytes(), before + 4 * 64 * 1024, 'the parts count while in progress');
    await s3.send(new PutObjectCommand({ Bucket: doomed, Key: 'kept', Body: 'x' }));
    t.same(await s3ErrorOf(s3.send(new DeleteBucketCommand({ Bucket: doomed }))), {
      name: 'BucketNotEmpty',
      status: 409,
    });
    const listed = await s3.send(new ListMultipartUploadsCommand({ Bucket: doomed }));
    t.equal(listed.Uploads?.length, 2, 'a refused delete aborts nothing');
    await s3.send(new DeleteObjectCommand({ Bucket: doomed, Key: 'kept' }));
    await s3.send(new DeleteBucketCommand({ Bucket: doomed }));
    t.equal(await usedBytes(), before, "the aborted parts' bytes are given back");
    await s3.send(new CreateBucketCommand({ Bucket: doomed }));
    const again = await s3.send(new ListMultipartUploadsCommand({ Bucket: doomed }));
    t.same(again.Uploads ?? [], [], 'a bucket made again under the name has no uploads');
    t.same(
      await s3ErrorOf(
        s3.send(
          new UploadPartCommand({
            Bucket: doomed,
            Key: 'a',
            UploadId: uploads[0],
            PartNumber: 3,
            Body: 'x',
          }),
        ),
      ),
      { name: 'NoSuchUpload', status: 404 },
      'an aborted upload takes no more parts',
    );
  });

  await t.test('an upload created with SHA256: parts, composite checksum, refusals', async (t) => {
    const Key = 'summed';
    const { UploadId, ChecksumAlgorithm } = await s3.send(
      new CreateMultipartUploadCommand({ Bucket, Key, ChecksumAlgorithm: 'SHA256' }),
    );
    t.equal(ChecksumAlgorithm, 'SHA256');
    const bodies = [bytesOf(5 * MiB, 21), bytesOf(776, 22)];
    const parts: { ETag: string; PartNumber: number; ChecksumSHA256: string }[] = [];
    for (const [index, Body] of bodies.entries()) {
      const part = await s3.send(
        new UploadPartCommand({
          Bucket,
          Key,
          UploadId,
          PartNumber: index + 1,
          Body,
          ChecksumAlgorithm: 'SHA256',
        }),
      );
      const sha = createHash('sha256').update(Body).digest('base64');
      t.equal(part.ChecksumSHA256, sha, `part ${index + 1}: its SHA-256`);
      parts.push({ ETag: part.ETag ?? '', PartNumber: index + 1, ChecksumSHA256: sha });
    }
    t.same(
      await s3ErrorOf(
        s3.send(
          new UploadPartCommand({
            Bucket,
            Key,
            UploadId,
            PartNumber: 3,
            Body: 'x',
            ChecksumAlgorithm: 'CRC32',
          }),
        ),
      ),
      { name: 'InvalidRequest', status: 400 },
      'a part that declares another algorithm',
    );
    const composite =
      createHash('sha256')
        .update(Buffer.concat(parts.map((part) => Buffer.from(part.ChecksumSHA256, 'base64'))))
        .digest('base64') + '-2';
    const complete = (ChecksumSHA256: string) =>
      s3.send(
        new CompleteMultipartUploadCommand({
          Bucket,
          Key,
          UploadId,
          ChecksumSHA256,
          MultipartUpload: { Parts: parts },
        }),
      );
    t.same(
      await s3ErrorOf(complete(Buffer.alloc(32).toString('base64') + '-2')),
      { name: 'BadDigest', status: 400 },
      'a complete whose checksum is not the composite',
    );
    t.same(await s3ErrorOf(s3.send(new GetObjectCommand({ Bucket, Key }))), {
      name: 'NoSuchKey',
      status: 404,
    });
    const done = await complete(composite);
    t.equal(done.ChecksumSHA256, composite, 'the composite of the parts');
    t.equal(done.ChecksumType, 'COMPOSITE');
    const head = await s3.send(new HeadObjectCommand({ Bucket, Key, ChecksumMode: 'ENABLED' }));
    t.equal(head.ChecksumSHA256, composite, 'HeadObject with checksum mode');
    t.equal(head.ChecksumType, 'COMPOSITE');
    const attributes = await s3.send(
      new GetObjectAttributesCommand({ Bucket, Key, ObjectAttributes: ['ObjectParts'] }),
    );
    t.same(
      attributes.ObjectParts?.Parts?.map((part) => [part.PartNumber, part.ChecksumSHA256]),
      parts.map((part) => [part.PartNumber, part.ChecksumSHA256]),
      "GetObjectAttributes: each part's checksum",
    );
  });
});
