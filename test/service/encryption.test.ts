// Goal: the service's reading of what S3 clients send about encryption: AES256 and aws:kms with
// the tenant's own key or a named key of it, a key id never without aws:kms, SSE-C fields
// checked as S3 checks them (400 for a malformed key, its MD5 or a conflict), no SSE on reads.
// Method: the pure functions of service/encryption.ts.
import t from 'tap';
import { createHash } from 'node:crypto';
import { checkReadSse, reportedSse, requestedSse } from '../../src/service/encryption.js';
import { isLightwellError } from '../../src/util/errors.js';

function codeOf(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    return isLightwellError(error) ? error.code : 'not lightwell';
  }
  return 'none';
}

const alice = { id: 'alice', kmsKeys: [{ id: 'testkey-1', createdAt: 0 }] };

t.test('what a write asks for', async (t) => {
  t.equal(requestedSse({}, alice), undefined);
  t.same(requestedSse({ algorithm: 'AES256' }, alice), { algorithm: 'AES256' });
  t.same(requestedSse({ algorithm: 'aws:kms' }, alice), {
    algorithm: 'aws:kms',
    kmsKeyId: 'alice',
  });
  t.same(requestedSse({ algorithm: 'aws:kms', kmsKeyId: 'alice' }, alice), {
    algorithm: 'aws:kms',
    kmsKeyId: 'alice',
  });
  t.same(
    requestedSse({ algorithm: 'aws:kms', kmsKeyId: 'testkey-1' }, alice),
    { algorithm: 'aws:kms', kmsKeyId: 'testkey-1' },
    'a named key of the tenant',
  );
  try {
    requestedSse({ algorithm: 'aws:kms', kmsKeyId: 'testkey-2' }, alice);
    t.fail('an unknown key id is refused');
  } catch (error) {
    t.ok(isLightwellError(error) && error.details['s3Code'] === 'KMS.NotFoundException');
  }
  for (const bad of [
    { algorithm: 'aws:kms', kmsKeyId: 'bob' },
    { kmsKeyId: 'alice' },
    { algorithm: 'AES256', kmsKeyId: 'alice' },
    { algorithm: 'aes:kms' },
  ])
    t.equal(
      codeOf(() => requestedSse(bad, alice)),
      'bad_request',
      JSON.stringify(bad),
    );
});

t.test('SSE-C fields are checked beside the other encryption headers', async (t) => {
  const key = Buffer.alloc(32, 7);
  const good = {
    algorithm: 'AES256',
    key: key.toString('base64'),
    keyMd5: createHash('md5').update(key).digest('base64'),
  };
  const ask = (customer: Record<string, string | undefined>, algorithm?: string) =>
    codeOf(() => requestedSse({ customer, algorithm }, alice));
  t.equal(ask(good), 'none', 'a well-formed key: the write takes it (customer-key.ts)');
  t.equal(ask({ ...good, keyMd5: 'AAAAAAAAAAAAAAAAAAAAAA==' }), 'bad_request', 'MD5 mismatch');
  t.equal(ask({ ...good, keyMd5: undefined }), 'bad_request', 'no MD5');
  t.equal(ask({ ...good, algorithm: undefined }), 'bad_request', 'no algorithm');
  t.equal(ask({ algorithm: 'AES256' }), 'bad_request', 'no key');
  t.equal(ask({ ...good, key: Buffer.alloc(16).toString('base64') }), 'bad_request', '128 bits');
  t.equal(ask(good, 'AES256'), 'bad_request', 'with SSE-S3');
  t.equal(
    codeOf(() => checkReadSse({ customer: good })),
    'none',
  );
  t.equal(
    codeOf(() => checkReadSse({ algorithm: 'AES256' })),
    'bad_request',
    'SSE on a read',
  );
  t.equal(
    codeOf(() => checkReadSse({})),
    'none',
  );
  t.same(reportedSse({}), { algorithm: 'AES256' }, 'every object reports SSE-S3');
});
