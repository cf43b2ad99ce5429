// Goal: every payload the mint accepts round-trips, no change to a minted token verifies, and
// no input of any kind makes verifySignedUrlToken throw anything but unauthorized.
// Method: fast-check over arbitrary valid requests (both methods, every optional constraint),
// single-character edits of a minted token, and arbitrary strings shaped like tokens. The seed
// is printed and FC_SEED replays it.
import t from 'tap';
import fc from 'fast-check';
import { deriveKey, PURPOSE_SIGNED_URL } from '../../src/security/keys.js';
import {
  parseSignUrlRequest,
  signedUrlPayloadOf,
  mintSignedUrlToken,
  verifySignedUrlToken,
} from '../../src/security/signed-url.js';
import { isLightwellError } from '../../src/util/errors.js';

const seed = Number(process.env['FC_SEED'] ?? Date.now() % 2 ** 31);
t.comment(`fast-check seed ${seed} (replay with FC_SEED=${seed})`);
const key = deriveKey(Buffer.alloc(32, 9), PURPOSE_SIGNED_URL);
const nowMs = Date.UTC(2025, 0, 1);
const minted = { tenantId: 'acme', accessKeyId: 'LWKEY', nowMs, ttlSeconds: 600 };

const headerText = fc
  .string({
    minLength: 1,
    maxLength: 40,
    unit: fc.constantFrom(...' abcdefghijklmnopqrstuvwxyz0123456789/;="-_.'.split('')),
  })
  .filter((text) => text.trim().length > 0);
/** A Content-Type an upload can send: no space at either end (a header value loses it). */
const contentTypeText = headerText.filter((text) => text === text.trim());
const objectKey = fc
  .string({ minLength: 1, maxLength: 60, unit: 'grapheme' })
  .filter((text) => !text.includes('\u0000') && Buffer.byteLength(text) <= 1024);
const putRequest = fc.record(
  {
    method: fc.constant('PUT'),
    bucket: fc.constantFrom('photos', 'a-b.c', 'x12'),
    key: objectKey,
    ttlSeconds: fc.integer({ min: 1, max: 10_000 }),
    contentType: contentTypeText,
    contentLengthMax: fc.nat(),
    idempotencyKey: fc.string({
      minLength: 1,
      maxLength: 30,
      unit: fc.constantFrom(...'abcXYZ019-_'.split('')),
    }),
    reason: headerText,
  },
  { requiredKeys: ['method', 'bucket', 'key'] },
);
const getRequest = fc.record(
  {
    method: fc.constant('GET'),
    bucket: fc.constantFrom('photos', 'x12'),
    key: objectKey,
    responseContentType: headerText,
    responseContentDisposition: headerText,
    reason: headerText,
  },
  { requiredKeys: ['method', 'bucket', 'key'] },
);

function refused(input: unknown): boolean {
  try {
    verifySignedUrlToken(key, input, nowMs);
    return false;
  } catch (error) {
    return isLightwellError(error) && error.code === 'unauthorized';
  }
}

t.test('every valid request round-trips through a token', async (t) => {
  fc.assert(
    fc.property(fc.oneof(putRequest, getRequest), (body) => {
      const payload = signedUrlPayloadOf(parseSignUrlRequest(body), minted);
      const decoded = verifySignedUrlToken(key, mintSignedUrlToken(key, payload), nowMs);
      return JSON.stringify(decoded) === JSON.stringify(payload) && decoded.k === body.key;
    }),
    { seed, numRuns: 500 },
  );
  t.pass('round trip');
});

t.test('no single-character change of a token verifies', async (t) => {
  fc.assert(
    fc.property(
      fc.oneof(putRequest, getRequest),
      fc.nat(),
      fc.string({ minLength: 1, maxLength: 1 }),
      (body, at, char) => {
        const token = mintSignedUrlToken(
          key,
          signedUrlPayloadOf(parseSignUrlRequest(body), minted),
        );
        const i = at % token.length;
        fc.pre(token.charAt(i) !== char);
        return refused(token.slice(0, i) + char + token.slice(i + 1));
      },
    ),
    { seed, numRuns: 1000 },
  );
  t.pass('tampering detected');
});

t.test('arbitrary input is refused as unauthorized and nothing else', async (t) => {
  const b64 = fc.string({ maxLength: 80, unit: fc.constantFrom(...'ABCabc019-_='.split('')) });
  fc.assert(
    fc.property(
      fc.oneof(
        fc.string(),
        fc.anything(),
        fc.tuple(b64, b64).map(([a, b]) => `lwurl_${a}.${b}`),
      ),
      (input) => refused(input),
    ),
    { seed, numRuns: 2000 },
  );
  t.pass('refused');
});
