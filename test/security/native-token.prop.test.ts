// Goal: no change to a valid token verifies, and no input of any kind makes verifyNativeToken
// throw anything but unauthorized 'invalid token' (or 'token expired').
// Method: fast-check: replace or insert any character at any position of a minted token;
// arbitrary strings; arbitrary strings shaped like tokens (prefix, two base64url parts); and
// correctly signed arbitrary JSON. The seed is printed and FC_SEED replays it.
import t from 'tap';
import fc from 'fast-check';
import { createHmac } from 'node:crypto';
import { isLightwellError } from '../../src/util/errors.js';
import { PURPOSE_NATIVE_TOKEN, deriveKey } from '../../src/security/keys.js';
import { mintNativeToken, verifyNativeToken } from '../../src/security/native-token.js';

const seed = Number(process.env['FC_SEED'] ?? Date.now() % 2 ** 31);
t.comment(`fast-check seed ${seed} (replay with FC_SEED=${seed})`);
const key = deriveKey(Buffer.alloc(32, 4), PURPOSE_NATIVE_TOKEN);
const nowMs = Date.UTC(2025, 0, 1);
const token = mintNativeToken(key, {
  accessKeyId: 'LWABCDEFGHIJKLMNOPQR',
  tenantId: 'acme',
  ttlMs: 3_600_000,
  nowMs,
}).token;

/** True when `input` is refused with exactly one of the documented errors. */
function refusedAsDocumented(input: unknown): boolean {
  try {
    verifyNativeToken(key, input, nowMs);
    return false;
  } catch (error) {
    return (
      isLightwellError(error) &&
      error.code === 'unauthorized' &&
      (error.message === 'invalid token' || error.message === 'token expired')
    );
  }
}

t.test('replacing any one character of a token makes it invalid', async (t) => {
  const position = fc.nat({ max: token.length - 1 });
  const oneChar = fc.string({ minLength: 1, maxLength: 1 });
  fc.assert(
    fc.property(position, oneChar, (i, c) => {
      fc.pre(token.charAt(i) !== c);
      return refusedAsDocumented(token.slice(0, i) + c + token.slice(i + 1));
    }),
    { seed, numRuns: 2000 },
  );
  t.pass('tampering detected');
});

t.test('inserting or deleting characters makes it invalid', async (t) => {
  const insert = fc.string({ maxLength: 3 });
  fc.assert(
    fc.property(fc.nat({ max: token.length }), insert, fc.nat({ max: 3 }), (i, s, cut) => {
      const changed = token.slice(0, i) + s + token.slice(i + cut);
      fc.pre(changed !== token);
      return refusedAsDocumented(changed);
    }),
    { seed, numRuns: 1000 },
  );
  t.pass('tampering detected');
});

t.test('arbitrary strings and values give only the documented errors', async (t) => {
  fc.assert(fc.property(fc.anything(), refusedAsDocumented), { seed, numRuns: 500 });
  fc.assert(fc.property(fc.string({ unit: 'binary', maxLength: 300 }), refusedAsDocumented), {
    seed,
    numRuns: 1000,
  });
  const b64 = fc.stringMatching(/^[A-Za-z0-9_-]{0,80}$/);
  fc.assert(
    fc.property(b64, b64, (a, b) => refusedAsDocumented(`lwtk_${a}.${b}`)),
    { seed, numRuns: 1000 },
  );
  t.pass('only unauthorized');
});

t.test('correctly signed arbitrary JSON gives a payload or the documented errors', async (t) => {
  fc.assert(
    fc.property(fc.jsonValue(), (value) => {
      const payloadB64 = Buffer.from(JSON.stringify(value)).toString('base64url');
      const signature = createHmac('sha256', key).update(payloadB64).digest('base64url');
      return refusedAsDocumented(`lwtk_${payloadB64}.${signature}`);
    }),
    { seed, numRuns: 500 },
  );
  t.pass('only unauthorized');
});
