// Goal: the signed-URL rules every transport that serves one shares. A mint is refused beyond
// the key's scope or the bucket's policy, for a contentLengthMax above the object limit and a
// checksum algorithm not spelled as the enum; its lifetime is clamped to the setting and to the
// minting key's expiry. A use re-checks the live key, tenant and scope behind a valid token
// (401 revoked, expired or disabled; 403 another method or key), and a PUT's constraints come
// from the token (length, checksum, pinned type, idempotency key).
// Method: SignedUrls with a real LMDB environment holding the key and tenant records, an
// authorizer of this test's own, and an explicit clock.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IndexStore } from '../../src/engine/index/store.js';
import { DB, tenantKey, type BucketRecord } from '../../src/engine/index/schema.js';
import {
  addSignedChecksum,
  checkSignedLength,
  signedContentType,
  signedIdempotencyKey,
  SignedUrls,
} from '../../src/service/signed-url.js';
import type { RequestContext } from '../../src/service/context.js';
import type { Principal } from '../../src/service/auth.js';
import { parseScopes } from '../../src/security/scopes.js';
import { Forbidden } from '../../src/util/errors.js';
import type { ChecksumAlg } from '../../src/engine/checksums.js';

const NOW = Date.UTC(2026, 11, 7);
const bucket = { id: 1, tenantId: 'alice', name: 'b' } as BucketRecord;
const tenant = { id: 'alice', num: 1, state: 'active', createdAt: 0 };

t.test('mint and use', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'lw-service-signed-'));
  const store = IndexStore.open({ path: dir, readOnly: false });
  t.teardown(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const key = (id: string, extra: object = {}): void =>
    store.transactSync(() =>
      store.put(DB.accessKeys, Buffer.from(id), {
        accessKeyId: id,
        tenantId: 'alice',
        accountId: 'acct',
        scopes: 'read,write',
        sealedSecret: Buffer.alloc(1),
        state: 'active',
        createdAt: 0,
        ...extra,
      }),
    );
  key('AKLIVE');
  key('AKSHORT', { expiresAt: NOW + 60_000 });
  store.transactSync(() => store.put(DB.tenants, tenantKey('alice'), tenant));
  const access = {
    bucket: (
      _p: Principal,
      name: string,
      how: { verb: string; key?: string | undefined },
    ): BucketRecord => {
      if (how.key === 'policy-denied') throw Forbidden('the policy denies it');
      return { ...bucket, name };
    },
  };
  const settings = {
    bytes: () => 1000,
    duration: () => 3_600_000,
  } as never;
  const auth = { purposeKey: () => Buffer.alloc(32, 7) } as never;
  const urls = new SignedUrls({ store, auth, settings, access });
  const ctxOf = (accessKeyId: string, scopes = 'read,write'): RequestContext => ({
    principal: { accessKeyId, tenant: tenant as never, scope: parseScopes(scopes) },
    requestId: 'r',
    remoteAddress: '127.0.0.1',
    audit: { action: 'signURL' },
    path: '/sign-url',
    clock: () => NOW,
  });

  const ctx = ctxOf('AKLIVE');
  const minted = urls.mint(ctx, { method: 'GET', bucket: 'bkt', key: 'a/b c', reason: 'share' });
  t.match(minted.url, /^\/api\/v1\/signed\/bkt\/a\/b%20c\?token=lwurl_/);
  t.equal(minted.expiresAt, NOW + 3600_000, 'the default hour');
  t.equal(ctx.audit.reason, 'share', "the mint's audit row carries the reason");
  const short = urls.mint(ctxOf('AKSHORT'), { method: 'GET', bucket: 'bkt', key: 'k' });
  t.equal(short.expiresAt, NOW + 60_000, 'never past the minting key');
  const clamped = urls.mint(ctx, { method: 'GET', bucket: 'bkt', key: 'k', ttlSeconds: 99_999 });
  t.equal(clamped.expiresAt, NOW + 3600_000, 'clamped to the setting');

  t.throws(() => urls.mint(ctxOf('AKLIVE', 'read'), { method: 'PUT', bucket: 'bkt', key: 'k' }), {
    code: 'forbidden',
  });
  t.throws(() => urls.mint(ctx, { method: 'GET', bucket: 'bkt', key: 'policy-denied' }), {
    code: 'forbidden',
  });
  t.throws(
    () => urls.mint(ctx, { method: 'PUT', bucket: 'bkt', key: 'k', contentLengthMax: 1001 }),
    {
      code: 'bad_request',
      message: /object_bytes_max/,
    },
  );
  t.throws(
    () =>
      urls.mint(ctx, {
        method: 'PUT',
        bucket: 'bkt',
        key: 'k',
        checksumAlg: 'crc32',
        checksumVal: 'AAAAAA==',
      }),
    { code: 'bad_request', message: /checksumAlg/ },
  );

  const audit: RequestContext['audit'] = { action: 'getSignedObject' };
  const payload = urls.verify(minted.token, audit, NOW);
  t.same([audit.actor, audit.tenantId, audit.reason], ['AKLIVE', 'alice', 'share']);
  const use = urls.authorize(payload, { method: 'HEAD', bucket: 'bkt', key: 'a/b c' }, NOW);
  t.same([use.principal.accessKeyId, use.bucket.name, use.key], ['AKLIVE', 'bkt', 'a/b c']);
  t.throws(() => urls.authorize(payload, { method: 'PUT', bucket: 'bkt', key: 'a/b c' }, NOW), {
    code: 'forbidden',
  });
  t.throws(() => urls.authorize(payload, { method: 'GET', bucket: 'bkt', key: 'other' }, NOW), {
    code: 'forbidden',
  });
  t.throws(() => urls.verify(minted.token, audit, NOW + 3600_000), { code: 'unauthorized' });
  t.throws(() => urls.verify('lwurl_forged', audit, NOW), { code: 'unauthorized' });

  const shortPayload = urls.verify(short.token, audit, NOW);
  t.throws(
    () => urls.authorize(shortPayload, { method: 'GET', bucket: 'bkt', key: 'k' }, NOW + 60_000),
    { code: 'unauthorized', message: /expired/ },
  );
  key('AKLIVE', { state: 'revoked' });
  t.throws(() => urls.authorize(payload, { method: 'GET', bucket: 'bkt', key: 'a/b c' }, NOW), {
    code: 'unauthorized',
    message: /revoked/,
  });
  key('AKLIVE');
  store.transactSync(() =>
    store.put(DB.tenants, tenantKey('alice'), { ...tenant, state: 'disabled' }),
  );
  t.throws(() => urls.authorize(payload, { method: 'GET', bucket: 'bkt', key: 'a/b c' }, NOW), {
    code: 'unauthorized',
    message: /tenant/,
  });
});

t.test("a signed PUT's constraints", async (t) => {
  const base = { v: 1, m: 'PUT', tid: 'alice', kid: 'AK', b: 'b', k: 'k', iat: 0, exp: 1 } as const;
  t.doesNotThrow(() => checkSignedLength(base, 10 ** 9), 'no limit');
  t.doesNotThrow(() => checkSignedLength({ ...base, clm: 10 }, 10));
  t.throws(() => checkSignedLength({ ...base, clm: 10 }, 11), { code: 'payload_too_large' });

  const digest = Buffer.alloc(4, 1);
  const withSum = { ...base, ca: 'CRC32', cv: digest.toString('base64') };
  const expected = new Map<ChecksumAlg, Buffer>();
  addSignedChecksum(withSum, expected);
  t.same([...expected.keys()], ['CRC32'], "the token's checksum is verified");
  const contradicting = new Map([['CRC32', Buffer.alloc(4, 2)]]);
  t.throws(() => addSignedChecksum(withSum, contradicting as never), { code: 'bad_request' });
  t.throws(() => addSignedChecksum({ ...withSum, ca: 'MD5' }, new Map()), {
    code: 'unauthorized',
  });

  t.equal(signedContentType(base, undefined), 'application/octet-stream');
  t.equal(signedContentType(base, 'text/plain'), 'text/plain');
  t.equal(signedContentType({ ...base, ct: 'image/png' }, undefined), 'image/png');
  t.throws(() => signedContentType({ ...base, ct: 'image/png' }, 'text/plain'), {
    code: 'forbidden',
  });
  t.equal(signedIdempotencyKey({ ...base, ik: 'i1' }, undefined), 'i1');
  t.equal(signedIdempotencyKey(base, 'sent'), 'sent');
  t.throws(() => signedIdempotencyKey({ ...base, ik: 'i1' }, 'i2'), { code: 'bad_request' });
});
