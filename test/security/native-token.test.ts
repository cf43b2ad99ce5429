// Goal: bearer tokens have the documented wire format and payload, verify only under the key
// that minted them and only until they expire, and every malformed, forged or foreign input is
// unauthorized ('invalid token' or 'token expired') with nothing else thrown or echoed.
// Method: mint with a fixed clock; rebuild tokens by hand (with the real signing key where a
// test needs a correctly signed but unusual payload) and check each rejection path.
import t from 'tap';
import { createHmac } from 'node:crypto';
import { PURPOSE_NATIVE_TOKEN, PURPOSE_SIGNED_URL, deriveKey } from '../../src/security/keys.js';
import {
  NATIVE_TOKEN_CHARS_MAX,
  NATIVE_TOKEN_CLOCK_SKEW_SECONDS_MAX,
  mintNativeToken,
  verifyNativeToken,
} from '../../src/security/native-token.js';

const master = Buffer.alloc(32, 4);
const key = deriveKey(master, PURPOSE_NATIVE_TOKEN);
const nowMs = Date.UTC(2025, 0, 1, 12, 0, 0, 250);
const hourMs = 3_600_000;
const invalid = { code: 'unauthorized', status: 401, message: 'invalid token', details: {} };
const expired = { code: 'unauthorized', status: 401, message: 'token expired' };

function mint(ttlMs = hourMs): string {
  const accessKeyId = 'LWABCDEFGHIJKLMNOPQR';
  return mintNativeToken(key, { accessKeyId, tenantId: 'acme', ttlMs, nowMs }).token;
}

/** A token over an arbitrary payload string, correctly signed with `signingKey`. */
function signed(payloadB64: string, signingKey = key): string {
  const signature = createHmac('sha256', signingKey).update(payloadB64).digest('base64url');
  return `lwtk_${payloadB64}.${signature}`;
}

function signedJson(payload: unknown): string {
  return signed(Buffer.from(JSON.stringify(payload)).toString('base64url'));
}

const goodPayload = {
  v: 1,
  kid: 'LWABCDEFGHIJKLMNOPQR',
  tid: 'acme',
  iat: Math.floor(nowMs / 1000),
  exp: Math.floor(nowMs / 1000) + 3600,
  jti: 'AAAAAAAAAAAAAAAA',
};

t.test('mint produces the documented format and payload', async (t) => {
  const minted = mintNativeToken(key, {
    accessKeyId: 'LWABCDEFGHIJKLMNOPQR',
    tenantId: 'acme',
    ttlMs: hourMs,
    nowMs,
  });
  t.match(minted.token, /^lwtk_[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
  t.equal(minted.expiresAt, '2025-01-01T13:00:00.000Z');
  const [payloadB64 = '', signature = ''] = minted.token.slice(5).split('.');
  const expectedSig = createHmac('sha256', key).update(payloadB64).digest('base64url');
  t.equal(signature, expectedSig, 'HMAC-SHA256 over the base64url payload string');
  const payload = JSON.parse(Buffer.from(payloadB64, 'base64url').toString('utf8')) as Record<
    string,
    unknown
  >;
  t.same(Object.keys(payload), ['v', 'kid', 'tid', 'iat', 'exp', 'jti']);
  t.equal(payload['v'], 1);
  t.equal(payload['kid'], 'LWABCDEFGHIJKLMNOPQR');
  t.equal(payload['tid'], 'acme');
  t.equal(payload['iat'], Math.floor(nowMs / 1000));
  t.equal(payload['exp'], Math.floor(nowMs / 1000) + 3600);
  t.match(payload['jti'], /^[A-Za-z0-9_-]{16}$/, '12 random bytes');
  t.not(mint(), mint(), 'each token is unique');
});

t.test('verify returns the payload until exp, then token expired', async (t) => {
  const token = mint();
  const payload = verifyNativeToken(key, token, nowMs);
  t.equal(payload.kid, 'LWABCDEFGHIJKLMNOPQR');
  t.equal(payload.tid, 'acme');
  t.equal(payload.v, 1);
  t.equal(payload.exp - payload.iat, 3600);
  const expMs = payload.exp * 1000;
  t.ok(verifyNativeToken(key, token, expMs - 1), 'valid 1 ms before exp');
  t.throws(() => verifyNativeToken(key, token, expMs), expired);
  t.throws(() => verifyNativeToken(key, token, expMs + 86_400_000), expired);
  t.ok(verifyNativeToken(key, token, nowMs - 60_000), 'a slightly slow clock still accepts it');
});

t.test('only the minting key verifies', async (t) => {
  const token = mint();
  t.throws(() => verifyNativeToken(deriveKey(master, PURPOSE_SIGNED_URL), token, nowMs), invalid);
  const otherMaster = deriveKey(Buffer.alloc(32, 5), PURPOSE_NATIVE_TOKEN);
  t.throws(() => verifyNativeToken(otherMaster, token, nowMs), invalid);
  const payloadB64 = token.slice(5).split('.')[0] ?? '';
  t.throws(() => verifyNativeToken(key, signed(payloadB64, Buffer.alloc(32)), nowMs), invalid);
});

t.test('a forged token is invalid, not expired, even when its exp has passed', async (t) => {
  const token = mint();
  const otherKey = deriveKey(master, 'other');
  const options = { accessKeyId: 'k', tenantId: 't', ttlMs: 1000, nowMs };
  const forged = mintNativeToken(otherKey, options).token;
  t.throws(() => verifyNativeToken(key, forged, nowMs + 10 * hourMs), invalid);
  t.ok(verifyNativeToken(key, token, nowMs));
});

t.test('malformed inputs are invalid tokens', async (t) => {
  const token = mint();
  const [payloadB64 = '', signature = ''] = token.slice(5).split('.');
  const cases: [string, unknown][] = [
    ['not a string', 42],
    ['undefined', undefined],
    ['null', null],
    ['object', { token }],
    ['empty', ''],
    ['prefix only', 'lwtk_'],
    ['wrong prefix', `lwurl_${payloadB64}.${signature}`],
    ['upper-case prefix', `LWTK_${payloadB64}.${signature}`],
    ['Bearer included', `Bearer ${token}`],
    ['no dot', `lwtk_${payloadB64}${signature}`],
    ['two dots', `${token}.`],
    ['empty payload', `lwtk_.${signature}`],
    ['empty signature', `lwtk_${payloadB64}.`],
    ['padded signature', `${token}=`],
    ['standard base64 characters', `lwtk_${payloadB64}.${signature.replace(/.$/, '+')}`],
    ['short signature', `lwtk_${payloadB64}.${signature.slice(0, 42)}`],
    ['long signature', `lwtk_${payloadB64}.${signature}AA`],
    ['whitespace', ` ${token}`],
    ['trailing newline', `${token}\n`],
    ['too long', `lwtk_${'A'.repeat(NATIVE_TOKEN_CHARS_MAX)}.${signature}`],
  ];
  for (const [name, input] of cases) {
    t.throws(() => verifyNativeToken(key, input, nowMs), invalid, name);
  }
});

t.test('non-canonical base64url is refused even when the bytes are the same', async (t) => {
  const token = mint();
  const [payloadB64 = '', signature = ''] = token.slice(5).split('.');
  // 32 bytes are 43 characters; the last one carries 4 bits and 2 unused ones.
  const last = signature.slice(-1);
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  const twin = alphabet.charAt(alphabet.indexOf(last) ^ 1);
  const alias = `lwtk_${payloadB64}.${signature.slice(0, -1)}${twin}`;
  t.same(
    Buffer.from(alias.split('.')[1] ?? '', 'base64url'),
    Buffer.from(signature, 'base64url'),
    'the alias decodes to the same signature',
  );
  t.throws(() => verifyNativeToken(key, alias, nowMs), invalid);
  // A correctly signed payload string that is not canonical base64url.
  const json = Buffer.from(JSON.stringify(goodPayload)).toString('base64url');
  t.ok(verifyNativeToken(key, signedJson(goodPayload), nowMs), 'canonical form verifies');
  if (json.length % 4 !== 0) {
    const lastChar = json.slice(-1);
    const nonCanonical = json.slice(0, -1) + alphabet.charAt(alphabet.indexOf(lastChar) ^ 1);
    t.throws(() => verifyNativeToken(key, signed(nonCanonical), nowMs), invalid);
  }
  t.throws(() => verifyNativeToken(key, signed('!!!!'), nowMs), invalid, 'bad characters');
  t.throws(() => verifyNativeToken(key, signed('AB'), nowMs), invalid, 'non-zero spare bits');
  t.throws(() => verifyNativeToken(key, signed('A'), nowMs), invalid, 'impossible length');
});

t.test('correctly signed payloads of the wrong shape are invalid', async (t) => {
  const cases: [string, unknown][] = [
    ['not JSON', null],
    ['array', [1]],
    ['null', null],
    ['number', 5],
    ['version 2', { ...goodPayload, v: 2 }],
    ['version as string', { ...goodPayload, v: '1' }],
    ['no kid', { ...goodPayload, kid: undefined }],
    ['empty kid', { ...goodPayload, kid: '' }],
    ['kid not a string', { ...goodPayload, kid: 5 }],
    ['no tid', { ...goodPayload, tid: undefined }],
    ['empty tid', { ...goodPayload, tid: '' }],
    ['no jti', { ...goodPayload, jti: undefined }],
    ['empty jti', { ...goodPayload, jti: '' }],
    ['fractional iat', { ...goodPayload, iat: goodPayload.iat + 0.5 }],
    ['string exp', { ...goodPayload, exp: String(goodPayload.exp) }],
    ['negative iat', { ...goodPayload, iat: -1 }],
    ['exp equal to iat', { ...goodPayload, exp: goodPayload.iat }],
    ['exp before iat', { ...goodPayload, exp: goodPayload.iat - 1 }],
    ['huge exp', { ...goodPayload, exp: 1e300 }],
    [
      'issued in the future beyond the skew allowance',
      {
        ...goodPayload,
        iat: goodPayload.iat + NATIVE_TOKEN_CLOCK_SKEW_SECONDS_MAX + 1,
        exp: goodPayload.exp + 10_000,
      },
    ],
  ];
  for (const [name, payload] of cases) {
    const notJson = signed(Buffer.from('{not json').toString('base64url'));
    const token = name === 'not JSON' ? notJson : signedJson(payload);
    t.throws(() => verifyNativeToken(key, token, nowMs), invalid, name);
  }
  const skewed = { ...goodPayload, iat: goodPayload.iat + NATIVE_TOKEN_CLOCK_SKEW_SECONDS_MAX };
  t.ok(verifyNativeToken(key, signedJson(skewed), nowMs), 'within the skew allowance');
  const extra = signedJson({ ...goodPayload, extra: true });
  t.ok(verifyNativeToken(key, extra, nowMs), 'extra fields ignored');
});

t.test('mint and verify assert their own arguments (bugs)', async (t) => {
  const base = { accessKeyId: 'k', tenantId: 't', ttlMs: hourMs, nowMs };
  t.throws(() => mintNativeToken(Buffer.alloc(16), base), { code: 'ERR_ASSERTION' });
  t.throws(() => mintNativeToken(key, { ...base, accessKeyId: '' }), { code: 'ERR_ASSERTION' });
  t.throws(() => mintNativeToken(key, { ...base, tenantId: '' }), { code: 'ERR_ASSERTION' });
  t.throws(() => mintNativeToken(key, { ...base, ttlMs: 999 }), { code: 'ERR_ASSERTION' });
  t.throws(() => mintNativeToken(key, { ...base, ttlMs: Number.NaN }), { code: 'ERR_ASSERTION' });
  t.throws(() => mintNativeToken(key, { ...base, nowMs: 1.5 }), { code: 'ERR_ASSERTION' });
  t.throws(() => mintNativeToken(key, { ...base, accessKeyId: 'x'.repeat(4000) }), {
    code: 'ERR_ASSERTION',
  });
  t.throws(() => verifyNativeToken(key, mint(), Number.NaN), { code: 'ERR_ASSERTION' });
  t.throws(() => verifyNativeToken(Buffer.alloc(8), mint(), nowMs), { code: 'ERR_ASSERTION' });
});

t.test('errors never carry the token', async (t) => {
  const token = mint();
  for (const input of [token + 'x', token.replace('lwtk_', 'lwtk_A')]) {
    try {
      verifyNativeToken(key, input, nowMs);
      t.fail('should throw');
    } catch (error) {
      const shown = JSON.stringify({ ...(error as object), message: (error as Error).message });
      t.notMatch(shown, token.slice(5, 40));
    }
  }
});
