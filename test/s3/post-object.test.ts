// Goal: browser form uploads (S3 POST object): a SigV4-signed POST policy with its conditions
// stores the file through the upload pipeline; an expired, mismatched, unsigned or over-long
// form is refused and stores nothing; an unsigned form is anonymous and needs a public grant.
// Method: a real `lightwell serve`, forms built with fetch's FormData, the AWS SDK to read back.
import t from 'tap';
import { createHash, createHmac } from 'node:crypto';
import {
  CreateBucketCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutBucketAclCommand,
} from '@aws-sdk/client-s3';
import { s3ClientFor, s3ErrorOf } from '../helpers/s3-sdk.js';
import { Service } from '../helpers/service.js';

function hmac(key: string | Buffer, text: string): Buffer {
  return createHmac('sha256', key).update(text).digest();
}

/** The fields of a SigV4 POST form signed with `key` for `conditions`. */
function signedFields(
  key: { accessKeyId: string; secretKey: string },
  conditions: unknown[],
  expiresInMs = 600_000,
): Record<string, string> {
  const now = new Date();
  const date = now.toISOString().slice(0, 10).replace(/-/g, '');
  const amzDate = `${date}T000000Z`;
  const credential = `${key.accessKeyId}/${date}/us-east-1/s3/aws4_request`;
  const policy = Buffer.from(
    JSON.stringify({
      expiration: new Date(now.getTime() + expiresInMs).toISOString(),
      conditions: [
        ...conditions,
        { 'x-amz-algorithm': 'AWS4-HMAC-SHA256' },
        { 'x-amz-credential': credential },
        { 'x-amz-date': amzDate },
      ],
    }),
  ).toString('base64');
  let signing = hmac(`AWS4${key.secretKey}`, date);
  for (const part of ['us-east-1', 's3', 'aws4_request']) signing = hmac(signing, part);
  return {
    policy,
    'x-amz-algorithm': 'AWS4-HMAC-SHA256',
    'x-amz-credential': credential,
    'x-amz-date': amzDate,
    'x-amz-signature': createHmac('sha256', signing).update(policy).digest('hex'),
  };
}

function form(fields: Record<string, string>, file: string, filename = 'upload.txt'): FormData {
  const data = new FormData();
  for (const [name, value] of Object.entries(fields)) data.append(name, value);
  data.append('file', new Blob([file]), filename);
  return data;
}

t.test('POST object through browser forms', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const origin = service.publicUrl.replace(/\/api\/v1$/, '');
  const alice = await service.tenant('alice');
  const s3 = s3ClientFor(origin, alice);
  t.teardown(() => s3.destroy());
  await s3.send(new CreateBucketCommand({ Bucket: 'forms' }));
  const post = (data: FormData): Promise<Response> =>
    fetch(`${origin}/forms`, { method: 'POST', body: data, redirect: 'manual' });

  const conditions = [
    { bucket: 'forms' },
    ['starts-with', '$key', 'uploads/'],
    ['starts-with', '$Content-Type', 'text/'],
    ['content-length-range', 1, 1024],
  ];
  const fields = (extra: Record<string, string> = {}): Record<string, string> => ({
    key: 'uploads/${filename}',
    'Content-Type': 'text/plain',
    ...signedFields(alice, conditions),
    ...extra,
  });

  const stored = await post(form(fields(), 'hello form', 'note.txt'));
  t.equal(stored.status, 204, await stored.clone().text());
  t.ok(stored.headers.get('etag'));
  const got = await s3.send(new GetObjectCommand({ Bucket: 'forms', Key: 'uploads/note.txt' }));
  t.equal(await got.Body?.transformToString(), 'hello form', '${filename} names the key');
  t.equal(got.ContentType, 'text/plain');

  const created = await post(
    form(
      {
        key: 'uploads/${filename}',
        'Content-Type': 'text/plain',
        success_action_status: '201',
        ...signedFields(alice, [...conditions, { success_action_status: '201' }]),
      },
      'again',
      'b.txt',
    ),
  );
  t.equal(created.status, 201);
  t.match(await created.text(), /<Key>uploads\/b.txt<\/Key>/);

  const redirect = 'https://app.example/done';
  const redirected = await post(
    form(
      {
        key: 'uploads/${filename}',
        'Content-Type': 'text/plain',
        success_action_redirect: redirect,
        ...signedFields(alice, [...conditions, ['eq', '$success_action_redirect', redirect]]),
      },
      'x',
      'c.txt',
    ),
  );
  t.equal(redirected.status, 303);
  t.match(redirected.headers.get('location') ?? '', /^https:\/\/app\.example\/done\?bucket=forms/);

  await t.test('encryption fields, and starts-with "" on a field left out', async (t) => {
    const key = Buffer.alloc(32, 9);
    const sseC = {
      'x-amz-server-side-encryption-customer-algorithm': 'AES256',
      'x-amz-server-side-encryption-customer-key': key.toString('base64'),
      'x-amz-server-side-encryption-customer-key-md5': createHash('md5')
        .update(key)
        .digest('base64'),
    };
    const open = [
      ...conditions,
      ['starts-with', '$x-amz-server-side-encryption-customer-algorithm', ''],
      ['starts-with', '$x-amz-server-side-encryption-customer-key', ''],
      ['starts-with', '$x-amz-server-side-encryption-customer-key-md5', ''],
    ];
    const base = { key: 'uploads/${filename}', 'Content-Type': 'text/plain' };
    const sealed = await post(
      form({ ...base, ...sseC, ...signedFields(alice, open) }, 'k', 's.txt'),
    );
    t.equal(sealed.status, 204, await sealed.clone().text());
    const read = (extra: Record<string, unknown> = {}) =>
      s3.send(new GetObjectCommand({ Bucket: 'forms', Key: 'uploads/s.txt', ...extra }));
    t.same(await s3ErrorOf(read()), { name: 'InvalidRequest', status: 400 }, 'needs the key');
    const got = await read({
      SSECustomerAlgorithm: 'AES256',
      SSECustomerKey: key.toString('latin1'),
    });
    t.equal(await got.Body?.transformToString(), 'k', 'stored under the form key');
    const plain = await post(form({ ...base, ...signedFields(alice, open) }, 'p', 'p.txt'));
    t.equal(plain.status, 204, 'the same policy with the fields left out');
  });

  await t.test('refusals store nothing', async (t) => {
    const refused = async (data: FormData, status: number, code: RegExp, key: string) => {
      const answer = await post(data);
      t.equal(answer.status, status, key);
      t.match(await answer.text(), code);
      t.same(await s3ErrorOf(s3.send(new HeadObjectCommand({ Bucket: 'forms', Key: key }))), {
        name: 'NotFound',
        status: 404,
      });
    };
    await refused(form(fields({ key: 'other/x' }), 'x'), 403, /AccessDenied/, 'other/x');
    await refused(
      form(fields({ key: 'uploads/big' }), 'x'.repeat(2000)),
      400,
      /EntityTooLarge/,
      'uploads/big',
    );
    await refused(
      form({ ...fields({ key: 'uploads/sig' }), 'x-amz-signature': '0'.repeat(64) }, 'x'),
      403,
      /SignatureDoesNotMatch/,
      'uploads/sig',
    );
    await refused(
      form(fields({ key: 'uploads/extra', 'x-amz-meta-extra': 'not in the policy' }), 'x'),
      403,
      /Extra input fields/,
      'uploads/extra',
    );
    await refused(
      form(
        {
          key: 'uploads/old',
          'Content-Type': 'text/plain',
          ...signedFields(alice, conditions, -60_000),
        },
        'x',
      ),
      403,
      /expired/,
      'uploads/old',
    );
    await refused(form({ key: 'uploads/anon' }, 'x'), 403, /AccessDenied/, 'uploads/anon');
  });

  await t.test('an unsigned form needs a public write grant', async (t) => {
    await s3.send(new PutBucketAclCommand({ Bucket: 'forms', ACL: 'public-read-write' }));
    const answer = await post(form({ key: 'anon.txt' }, 'from anyone'));
    t.equal(answer.status, 204);
    const got = await s3.send(new GetObjectCommand({ Bucket: 'forms', Key: 'anon.txt' }));
    t.equal(await got.Body?.transformToString(), 'from anyone');
  });
});
