// Goal: the signed-URL codec and request validator behave as data-api.md §2 and §4 say: every
// constraint is carried under the HMAC, fields of the other method are refused, ttl is clamped,
// tokens made under another key (the bearer-token key included) or expired are refused, and
// checkSignedUrlCovers accepts exactly the token's method, bucket and key (or key prefix).
// Method: direct calls with fixed keys and clocks; errors are matched on their code.
import t from 'tap';
import { createHmac } from 'node:crypto';
import { deriveKey, PURPOSE_SIGNED_URL, PURPOSE_NATIVE_TOKEN } from '../../src/security/keys.js';
import {
  parseSignUrlRequest,
  clampTtlSeconds,
  signedUrlPayloadOf,
  mintSignedUrlToken,
  verifySignedUrlToken,
  checkSignedUrlCovers,
  SIGNED_URL_PREFIX,
  SIGNED_URL_TTL_SECONDS_DEFAULT,
  type SignedUrlPayload,
} from '../../src/security/signed-url.js';
import { verifyNativeToken } from '../../src/security/native-token.js';
import { errorCode } from '../../src/util/errors.js';

const master = Buffer.alloc(32, 7);
const key = deriveKey(master, PURPOSE_SIGNED_URL);
const nowMs = Date.UTC(2025, 0, 1);
const minted = { tenantId: 'acme', accessKeyId: 'LWKEY', nowMs, ttlSeconds: 600 };

function codeOf(run: () => unknown): string | undefined {
  try {
    run();
    return undefined;
  } catch (error) {
    return errorCode(error) ?? 'not a LightwellError';
  }
}

t.test('request validation: method fields, key or prefix, types', async (t) => {
  const put = parseSignUrlRequest({
    method: 'PUT',
    bucket: 'photos',
    keyPrefix: 'u/',
    contentType: 'image/png',
    contentLengthMax: 10,
    checksumAlg: 'SHA256',
    checksumVal: 'x',
    idempotencyKey: 'k1',
    reason: 'upload form',
    ttlSeconds: 60,
  });
  t.match(put, {
    method: 'PUT',
    bucket: 'photos',
    keyPrefix: 'u/',
    contentType: 'image/png',
    contentLengthMax: 10,
    idempotencyKey: 'k1',
    reason: 'upload form',
    ttlSeconds: 60,
  });
  const get = parseSignUrlRequest({
    method: 'GET',
    bucket: 'photos',
    key: 'a.png',
    responseContentType: 'image/png',
    responseContentDisposition: 'attachment; filename="a.png"',
  });
  t.match(get, {
    method: 'GET',
    key: 'a.png',
    responseContentDisposition: 'attachment; filename="a.png"',
  });
  for (const [body, why] of [
    [{ method: 'GET', bucket: 'photos', key: 'a', contentType: 'x' }, 'a PUT field on a GET'],
    [{ method: 'GET', bucket: 'photos', keyPrefix: 'a' }, 'keyPrefix on a GET'],
    [
      { method: 'GET', bucket: 'photos', key: 'a', contentLengthMax: 1 },
      'contentLengthMax on a GET',
    ],
    [
      { method: 'PUT', bucket: 'photos', key: 'a', responseContentType: 'x' },
      'a GET field on a PUT',
    ],
    [{ method: 'PUT', bucket: 'photos', key: 'a', keyPrefix: 'a' }, 'both key and keyPrefix'],
    [{ method: 'PUT', bucket: 'photos' }, 'neither key nor keyPrefix'],
    [{ method: 'DELETE', bucket: 'photos', key: 'a' }, 'another method'],
    [{ method: 'GET', bucket: 'No', key: 'a' }, 'a bad bucket name'],
    [{ method: 'GET', bucket: 'photos', key: 'a', ttlSeconds: 0 }, 'ttl 0'],
    [{ method: 'GET', bucket: 'photos', key: 'a', ttlSeconds: 1.5 }, 'fractional ttl'],
    [{ method: 'PUT', bucket: 'photos', key: 'a', checksumAlg: 'SHA256' }, 'alg without value'],
    [{ method: 'PUT', bucket: 'photos', key: 'a', contentLengthMax: -1 }, 'negative length'],
    [{ method: 'GET', bucket: 'photos', key: 'a', reason: 'x'.repeat(257) }, 'a long reason'],
    [
      { method: 'GET', bucket: 'photos', key: 'a', responseContentType: 'a\r\nb' },
      'a header-splitting override',
    ],
    [{ method: 'GET', bucket: 'photos', key: 'a', surprise: 1 }, 'an unknown field'],
    [[], 'an array'],
  ] as const) {
    t.equal(
      codeOf(() => parseSignUrlRequest(body)),
      'bad_request',
      why,
    );
  }
});

t.test('ttl: default, then clamped to the maximum', async (t) => {
  t.equal(clampTtlSeconds(undefined, 7 * 86_400_000), SIGNED_URL_TTL_SECONDS_DEFAULT);
  t.equal(clampTtlSeconds(undefined, 60_000), 60);
  t.equal(clampTtlSeconds(10, 60_000), 10);
  t.equal(clampTtlSeconds(10_000_000, 60_000), 60);
});

t.test('mint and verify round trip every constraint', async (t) => {
  const request = parseSignUrlRequest({
    method: 'PUT',
    bucket: 'photos',
    key: 'a/b.png',
    contentType: 'image/png',
    contentLengthMax: 100,
    checksumAlg: 'SHA256',
    checksumVal: 'abc=',
    idempotencyKey: 'idem',
    reason: 'why',
  });
  const payload = signedUrlPayloadOf(request, minted);
  const token = mintSignedUrlToken(key, payload);
  t.ok(token.startsWith(SIGNED_URL_PREFIX));
  t.same(verifySignedUrlToken(key, token, nowMs + 1000), payload);
  t.match(payload, {
    v: 1,
    m: 'PUT',
    tid: 'acme',
    kid: 'LWKEY',
    b: 'photos',
    k: 'a/b.png',
    ct: 'image/png',
    clm: 100,
    ca: 'SHA256',
    cv: 'abc=',
    ik: 'idem',
    r: 'why',
    exp: payload.iat + 600,
  });
});

t.test('expired, foreign-key, bearer-key and malformed tokens are unauthorized', async (t) => {
  const token = mintSignedUrlToken(
    key,
    signedUrlPayloadOf(parseSignUrlRequest({ method: 'GET', bucket: 'photos', key: 'a' }), minted),
  );
  t.equal(
    codeOf(() => verifySignedUrlToken(key, token, nowMs + 600_000)),
    'unauthorized',
    'expired at exp',
  );
  t.equal(
    codeOf(() => verifySignedUrlToken(key, token, nowMs + 599_000)),
    undefined,
    'valid just before',
  );
  t.equal(
    codeOf(() =>
      verifySignedUrlToken(deriveKey(Buffer.alloc(32, 8), PURPOSE_SIGNED_URL), token, nowMs),
    ),
    'unauthorized',
    'another deployment',
  );
  const bearerKey = deriveKey(master, PURPOSE_NATIVE_TOKEN);
  t.equal(
    codeOf(() => verifySignedUrlToken(bearerKey, token, nowMs)),
    'unauthorized',
    'the bearer key does not verify URL tokens',
  );
  t.equal(
    codeOf(() => verifyNativeToken(bearerKey, token.replace(SIGNED_URL_PREFIX, 'lwtk_'), nowMs)),
    'unauthorized',
    'a URL token is no bearer token',
  );
  for (const bad of [
    undefined,
    12,
    '',
    'lwurl_',
    'lwurl_a.b.c',
    `${token}x`,
    token.replace('lwurl_', 'lwtk_'),
    'x'.repeat(10_000),
  ]) {
    t.equal(
      codeOf(() => verifySignedUrlToken(key, bad, nowMs)),
      'unauthorized',
      String(bad).slice(0, 20),
    );
  }
});

t.test('a correctly signed payload with fields of the other method is refused', async (t) => {
  const forged = (payload: Record<string, unknown>): string => {
    const b64 = Buffer.from(JSON.stringify(payload)).toString('base64url');
    return `${SIGNED_URL_PREFIX}${b64}.${createHmac('sha256', key).update(b64).digest('base64url')}`;
  };
  const base = {
    v: 1,
    tid: 'acme',
    kid: 'LWKEY',
    b: 'photos',
    iat: nowMs / 1000,
    exp: nowMs / 1000 + 60,
  };
  t.equal(
    codeOf(() => verifySignedUrlToken(key, forged({ ...base, m: 'GET', k: 'a' }), nowMs)),
    undefined,
    'control',
  );
  t.equal(
    codeOf(() => verifySignedUrlToken(key, forged({ ...base, m: 'GET', k: 'a', clm: 5 }), nowMs)),
    'unauthorized',
  );
  t.equal(
    codeOf(() => verifySignedUrlToken(key, forged({ ...base, m: 'GET', kp: 'a' }), nowMs)),
    'unauthorized',
  );
  t.equal(
    codeOf(() => verifySignedUrlToken(key, forged({ ...base, m: 'PUT', k: 'a', rct: 'x' }), nowMs)),
    'unauthorized',
  );
  t.equal(
    codeOf(() => verifySignedUrlToken(key, forged({ ...base, m: 'PUT', k: 'a', extra: 1 }), nowMs)),
    'unauthorized',
  );
  t.equal(
    codeOf(() => verifySignedUrlToken(key, forged({ ...base, m: 'PUT', k: 'a', kp: 'a' }), nowMs)),
    'unauthorized',
  );
});

t.test('covers exactly the method, bucket and key or prefix', async (t) => {
  const exact = {
    v: 1,
    m: 'GET',
    tid: 'acme',
    kid: 'K',
    b: 'photos',
    k: 'a/b',
    iat: 1,
    exp: 2,
  } as SignedUrlPayload;
  t.equal(
    codeOf(() => checkSignedUrlCovers(exact, { method: 'GET', bucket: 'photos', key: 'a/b' })),
    undefined,
  );
  t.equal(
    codeOf(() => checkSignedUrlCovers(exact, { method: 'HEAD', bucket: 'photos', key: 'a/b' })),
    undefined,
    'a GET URL serves HEAD',
  );
  t.equal(
    codeOf(() => checkSignedUrlCovers(exact, { method: 'PUT', bucket: 'photos', key: 'a/b' })),
    'forbidden',
    'wrong method',
  );
  t.equal(
    codeOf(() => checkSignedUrlCovers(exact, { method: 'GET', bucket: 'other', key: 'a/b' })),
    'forbidden',
    'wrong bucket',
  );
  t.equal(
    codeOf(() => checkSignedUrlCovers(exact, { method: 'GET', bucket: 'photos', key: 'a/b/c' })),
    'forbidden',
    'wrong key',
  );
  const prefix = {
    v: 1,
    m: 'PUT',
    tid: 'acme',
    kid: 'K',
    b: 'photos',
    kp: 'in/',
    iat: 1,
    exp: 2,
  } as SignedUrlPayload;
  t.equal(
    codeOf(() =>
      checkSignedUrlCovers(prefix, { method: 'PUT', bucket: 'photos', key: 'in/anything.jpg' }),
    ),
    undefined,
  );
  t.equal(
    codeOf(() => checkSignedUrlCovers(prefix, { method: 'PUT', bucket: 'photos', key: 'out/x' })),
    'forbidden',
  );
  t.equal(
    codeOf(() => checkSignedUrlCovers(prefix, { method: 'GET', bucket: 'photos', key: 'in/x' })),
    'forbidden',
  );
});
