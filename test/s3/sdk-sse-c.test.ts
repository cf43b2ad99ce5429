// Goal: SSE-C as S3 clients see it through the AWS SDK: an object PUT under a customer key is
// read back only with that key (none: 400 InvalidRequest; another: 403 AccessDenied; a key for a
// plain object: 400), ranges and HEAD included; its ETag is not the data's MD5 and its checksums
// are the data's; its chunks are not shared with the same bytes stored plainly; multipart
// uploads under a key (a part sent again keeps its ETag), copies and part copies from and to
// such objects with the copy-source key, and another tenant refused even with the key.
// Method: a real `lightwell serve` on loopback, two tenants, @aws-sdk/client-s3.
import t from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  UploadPartCommand,
  UploadPartCopyCommand,
} from '@aws-sdk/client-s3';
import { s3ClientFor, s3ErrorOf } from '../helpers/s3-sdk.js';
import { Service } from '../helpers/service.js';

/** Two customer keys as the SDK takes them (it sends them base64 with their MD5). */
const KEY_A = 'a'.repeat(16) + 'A'.repeat(16);
const KEY_B = 'b'.repeat(16) + 'B'.repeat(16);
const ssec = (key: string) => ({ SSECustomerAlgorithm: 'AES256', SSECustomerKey: key });
const sourceSsec = (key: string) => ({
  CopySourceSSECustomerAlgorithm: 'AES256',
  CopySourceSSECustomerKey: key,
});
const md5Of = (key: string) => createHash('md5').update(key).digest('base64');

t.test('SSE-C through the AWS SDK', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const origin = service.publicUrl.replace(/\/api\/v1$/, '');
  const s3 = s3ClientFor(origin, await service.tenant('alice'));
  const bob = s3ClientFor(origin, await service.tenant('bob'));
  t.teardown(() => [s3, bob].forEach((client) => client.destroy()));
  await s3.send(new CreateBucketCommand({ Bucket: 'sec' }));
  const data = randomBytes(300_000);
  const read = async (key: string, extra: Record<string, unknown> = {}) => {
    const got = await s3.send(new GetObjectCommand({ Bucket: 'sec', Key: key, ...extra }));
    return Buffer.from((await got.Body?.transformToByteArray()) ?? []);
  };

  await t.test('PUT, GET, HEAD and ranges with the key only', async (t) => {
    const put = await s3.send(
      new PutObjectCommand({ Bucket: 'sec', Key: 'o', Body: data, ...ssec(KEY_A) }),
    );
    t.equal(put.SSECustomerAlgorithm, 'AES256');
    t.equal(put.SSECustomerKeyMD5, md5Of(KEY_A));
    t.not(put.ETag, `"${createHash('md5').update(data).digest('hex')}"`, 'not the data MD5');
    t.same(await read('o', ssec(KEY_A)), data);
    t.same(
      await read('o', { ...ssec(KEY_A), Range: 'bytes=70000-170004' }),
      data.subarray(70_000, 170_005),
    );
    const head = await s3.send(new HeadObjectCommand({ Bucket: 'sec', Key: 'o', ...ssec(KEY_A) }));
    t.equal(head.ContentLength, data.length);
    t.equal(head.SSECustomerKeyMD5, md5Of(KEY_A));
    const refused = (command: GetObjectCommand | HeadObjectCommand) => s3ErrorOf(s3.send(command));
    t.same(await refused(new GetObjectCommand({ Bucket: 'sec', Key: 'o' })), {
      name: 'InvalidRequest',
      status: 400,
    });
    t.same(
      await refused(new GetObjectCommand({ Bucket: 'sec', Key: 'o', ...ssec(KEY_B) })),
      { name: 'AccessDenied', status: 403 },
      'another key',
    );
    t.equal((await refused(new HeadObjectCommand({ Bucket: 'sec', Key: 'o' }))).status, 400);
    t.same(
      await s3ErrorOf(bob.send(new GetObjectCommand({ Bucket: 'sec', Key: 'o', ...ssec(KEY_A) }))),
      { name: 'AccessDenied', status: 403 },
      'another tenant, even with the key',
    );
    await s3.send(new PutObjectCommand({ Bucket: 'sec', Key: 'plain', Body: data }));
    t.same(
      await refused(new GetObjectCommand({ Bucket: 'sec', Key: 'plain', ...ssec(KEY_A) })),
      { name: 'InvalidRequest', status: 400 },
      'a key for a plain object',
    );
    t.same(await read('plain'), data);
  });

  await t.test('the same bytes under a key share no chunk', async (t) => {
    const owner = service.adminToken();
    const physical = async () =>
      (
        (await service.admin('GET', '/tenants/alice/usage', owner)).json as {
          physicalBytes: number;
        }
      ).physicalBytes;
    const before = await physical();
    await s3.send(new PutObjectCommand({ Bucket: 'sec', Key: 'plain2', Body: data }));
    t.equal(await physical(), before, 'plain bytes stored again are deduplicated');
    await s3.send(new PutObjectCommand({ Bucket: 'sec', Key: 'o2', Body: data, ...ssec(KEY_A) }));
    t.ok((await physical()) >= before + data.length * 0.99, 'under a key they are stored anew');
  });

  await t.test('multipart under a key', async (t) => {
    const created = await s3.send(
      new CreateMultipartUploadCommand({ Bucket: 'sec', Key: 'mp', ...ssec(KEY_A) }),
    );
    t.equal(created.SSECustomerKeyMD5, md5Of(KEY_A));
    const UploadId = created.UploadId as string;
    const part1 = randomBytes(5 * 1024 * 1024);
    const part2 = randomBytes(1000);
    const upload = (PartNumber: number, Body: Buffer, key = KEY_A) =>
      s3.send(
        new UploadPartCommand({
          Bucket: 'sec',
          Key: 'mp',
          UploadId,
          PartNumber,
          Body,
          ...ssec(key),
        }),
      );
    const first = await upload(1, part1);
    t.equal((await upload(1, part1)).ETag, first.ETag, 'a part sent again keeps its ETag');
    const second = await upload(2, part2);
    t.equal(
      (await s3ErrorOf(upload(2, part2, KEY_B))).status,
      400,
      "a part under another key than the upload's",
    );
    t.equal(
      (
        await s3ErrorOf(
          s3.send(
            new UploadPartCommand({ Bucket: 'sec', Key: 'mp', UploadId, PartNumber: 3, Body: 'x' }),
          ),
        )
      ).status,
      400,
      'a part without the key',
    );
    await s3.send(
      new CompleteMultipartUploadCommand({
        Bucket: 'sec',
        Key: 'mp',
        UploadId,
        MultipartUpload: {
          Parts: [
            { PartNumber: 1, ETag: first.ETag },
            { PartNumber: 2, ETag: second.ETag },
          ],
        },
        ...ssec(KEY_A),
      }),
    );
    const whole = Buffer.concat([part1, part2]);
    t.same(await read('mp', ssec(KEY_A)), whole);
    const from = part1.length - 10;
    t.same(
      await read('mp', { ...ssec(KEY_A), Range: `bytes=${from}-${from + 19}` }),
      whole.subarray(from, from + 20),
      'a range across the parts',
    );
    t.equal(
      (await s3ErrorOf(s3.send(new GetObjectCommand({ Bucket: 'sec', Key: 'mp' })))).status,
      400,
    );
  });

  await t.test('copies from and to keys', async (t) => {
    const copy = (Key: string, extra: Record<string, unknown>) =>
      s3.send(new CopyObjectCommand({ Bucket: 'sec', Key, CopySource: 'sec/o', ...extra }));
    t.same(
      await s3ErrorOf(copy('c0', {})),
      { name: 'InvalidRequest', status: 400 },
      'a copy without the source key',
    );
    t.equal((await s3ErrorOf(copy('c0', sourceSsec(KEY_B)))).status, 403, 'with another key');
    await copy('c1', sourceSsec(KEY_A));
    t.same(await read('c1'), data, 'to a plain object');
    const rekeyed = await copy('c2', { ...sourceSsec(KEY_A), ...ssec(KEY_B) });
    t.equal(rekeyed.SSECustomerKeyMD5, md5Of(KEY_B));
    t.same(await read('c2', ssec(KEY_B)), data, 'under another key');
    t.equal(
      (await s3ErrorOf(s3.send(new GetObjectCommand({ Bucket: 'sec', Key: 'c2', ...ssec(KEY_A) }))))
        .status,
      403,
    );
    await s3.send(
      new CopyObjectCommand({ Bucket: 'sec', Key: 'c3', CopySource: 'sec/plain', ...ssec(KEY_A) }),
    );
    t.same(await read('c3', ssec(KEY_A)), data, 'a plain object copied under a key');
    await s3.send(
      new CopyObjectCommand({
        Bucket: 'sec',
        Key: 'c3',
        CopySource: 'sec/c3',
        ...sourceSsec(KEY_A),
        ...ssec(KEY_B),
      }),
    );
    t.same(await read('c3', ssec(KEY_B)), data, 'copied onto itself under another key');

    const created = await s3.send(
      new CreateMultipartUploadCommand({ Bucket: 'sec', Key: 'pc', ...ssec(KEY_B) }),
    );
    const UploadId = created.UploadId as string;
    const part = await s3.send(
      new UploadPartCopyCommand({
        Bucket: 'sec',
        Key: 'pc',
        UploadId,
        PartNumber: 1,
        CopySource: 'sec/o',
        CopySourceRange: 'bytes=1000-200999',
        ...sourceSsec(KEY_A),
        ...ssec(KEY_B),
      }),
    );
    await s3.send(
      new CompleteMultipartUploadCommand({
        Bucket: 'sec',
        Key: 'pc',
        UploadId,
        MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.CopyPartResult?.ETag }] },
        ...ssec(KEY_B),
      }),
    );
    t.same(await read('pc', ssec(KEY_B)), data.subarray(1000, 201_000), 'a part copy re-keyed');
  });
});
