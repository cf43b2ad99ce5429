// Goal: sealed secrets round-trip for any plaintext and aad, and arbitrary bytes given to
// openSecret or unwrapTenantKey only ever produce corrupt_data.
// Method: fast-check properties; the seed is printed and FC_SEED replays it.
import t from 'tap';
import fc from 'fast-check';
import { errorCode } from '../../src/util/errors.js';
import {
  PURPOSE_SECRET_SEAL,
  deriveKey,
  openSecret,
  sealSecret,
  unwrapTenantKey,
  wrapTenantKey,
} from '../../src/security/keys.js';

const seed = Number(process.env['FC_SEED'] ?? Date.now() % 2 ** 31);
t.comment(`fast-check seed ${seed} (replay with FC_SEED=${seed})`);
const master = Buffer.alloc(32, 7);
const key = deriveKey(master, PURPOSE_SECRET_SEAL);

function corruptOnly(run: () => unknown): boolean {
  try {
    run();
    return false;
  } catch (error) {
    return errorCode(error) === 'corrupt_data';
  }
}

t.test('seal then open returns the plaintext', async (t) => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 512 }), fc.string(), (bytes, aad) => {
      const plaintext = Buffer.from(bytes);
      return openSecret(key, sealSecret(key, plaintext, aad), aad).equals(plaintext);
    }),
    { seed, numRuns: 300 },
  );
  t.pass('round trip holds');
});

t.test('arbitrary bytes never open and only give corrupt_data', async (t) => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 200 }), fc.string(), (bytes, aad) =>
      corruptOnly(() => openSecret(key, Buffer.from(bytes), aad)),
    ),
    { seed, numRuns: 500 },
  );
  t.pass('only corrupt_data');
});

t.test('any change to a wrapped tenant key is corrupt_data', async (t) => {
  const wrapped = wrapTenantKey(master, 'tenant-a', Buffer.alloc(32, 5));
  fc.assert(
    fc.property(
      fc.nat({ max: wrapped.length - 1 }),
      fc.integer({ min: 1, max: 255 }),
      (index, xor) => {
        const damaged = Buffer.from(wrapped);
        damaged.writeUInt8(damaged.readUInt8(index) ^ xor, index);
        return corruptOnly(() => unwrapTenantKey(master, 'tenant-a', damaged));
      },
    ),
    { seed, numRuns: 500 },
  );
  t.pass('tampering detected');
});
