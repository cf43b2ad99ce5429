// Goal: key derivation is HKDF-SHA256 with the documented salt and purposes and never changes;
// sealed secrets round-trip, have the documented layout, and every kind of damage (wrong key,
// wrong aad, truncation, unknown version, any flipped bit) is corrupt_data.
// Method: pinned vectors plus an independent RFC 5869 implementation built from createHmac;
// exhaustive single-bit flips over a small sealed value.
import t from 'tap';
import { createHmac } from 'node:crypto';
import {
  DERIVED_KEY_BYTES,
  MASTER_KEY_BYTES,
  OFFSET_SEALED_CIPHERTEXT,
  OFFSET_SEALED_NONCE,
  PURPOSE_CHUNK_ID,
  PURPOSE_NATIVE_TOKEN,
  PURPOSE_SECRET_SEAL,
  PURPOSE_SIGNED_URL,
  PURPOSE_TENANT_KEY_WRAP,
  SEALED_OVERHEAD_BYTES,
  SEALED_VERSION,
  SIZE_SEALED_NONCE,
  SIZE_SEALED_TAG,
  dedupKey,
  deriveKey,
  newTenantDataKey,
  openSecret,
  sealSecret,
  unwrapTenantKey,
  wrapTenantKey,
} from '../../src/security/keys.js';

const master = Buffer.alloc(MASTER_KEY_BYTES, 1);

/** RFC 5869 HKDF-SHA256, written out, for one output block. */
function hkdfReference(ikm: Buffer, salt: string, info: string): Buffer {
  const prk = createHmac('sha256', salt).update(ikm).digest();
  const block = Buffer.concat([Buffer.from(info), Buffer.of(1)]);
  return createHmac('sha256', prk).update(block).digest();
}

t.test('purpose strings are the documented ones', async (t) => {
  t.equal(PURPOSE_NATIVE_TOKEN, 'native-token-v1');
  t.equal(PURPOSE_SIGNED_URL, 'signed-url-v1');
  t.equal(PURPOSE_SECRET_SEAL, 'secret-seal-v1');
  t.equal(PURPOSE_TENANT_KEY_WRAP, 'tenant-key-wrap-v1');
  t.equal(PURPOSE_CHUNK_ID, 'chunk-id-v1');
});

t.test('deriveKey matches RFC 5869 and pinned vectors', async (t) => {
  const pinned: Record<string, string> = {
    'native-token-v1': '73ce11caec8c1c1fe440e06f7091018038daeb05d15e0b6f27fbb877ea611f1b',
    'signed-url-v1': 'fd39403c00549036307e1183341d98648f55b1019a4c5d25e715e7fd50f32769',
    'secret-seal-v1': 'dfbe71dbbb001c5e83522fe88edbb0d3a0168a1fa3c303a925522da976be5afe',
    'tenant-key-wrap-v1': 'a7467c09ae13d4debf164f9c5ea452462f5608fce45d6f22d32011e394307d06',
  };
  for (const [purpose, hex] of Object.entries(pinned)) {
    const key = deriveKey(master, purpose);
    t.equal(key.length, DERIVED_KEY_BYTES);
    t.equal(key.toString('hex'), hex, `${purpose} is stable`);
    t.same(key, hkdfReference(master, 'lightwell', purpose), `${purpose} is HKDF-SHA256`);
  }
  t.notSame(deriveKey(master, PURPOSE_NATIVE_TOKEN), deriveKey(master, PURPOSE_SIGNED_URL));
  t.notSame(deriveKey(master, 'x'), deriveKey(Buffer.alloc(32, 2), 'x'), 'depends on master');
});

t.test('deriveKey refuses a master key of the wrong size or an empty purpose (bugs)', async (t) => {
  t.throws(() => deriveKey(Buffer.alloc(31), 'x'), { code: 'ERR_ASSERTION' });
  t.throws(() => deriveKey(Buffer.alloc(33), 'x'), { code: 'ERR_ASSERTION' });
  t.throws(() => deriveKey(master, ''), { code: 'ERR_ASSERTION' });
});

t.test('sealSecret layout and round trip', async (t) => {
  const key = deriveKey(master, PURPOSE_SECRET_SEAL);
  const plaintext = Buffer.from('the webhook signing secret');
  const sealed = sealSecret(key, plaintext, 'webhook:b1:cfg1');
  t.equal(sealed.length, plaintext.length + SEALED_OVERHEAD_BYTES);
  t.equal(SEALED_OVERHEAD_BYTES, 1 + 12 + 16);
  t.equal(sealed.readUInt8(0), SEALED_VERSION);
  t.equal(OFFSET_SEALED_NONCE, 1);
  t.equal(SIZE_SEALED_NONCE, 12);
  t.equal(OFFSET_SEALED_CIPHERTEXT, 13);
  t.equal(SIZE_SEALED_TAG, 16);
  t.notOk(sealed.includes(plaintext), 'plaintext does not appear in the sealed value');
  t.same(openSecret(key, sealed, 'webhook:b1:cfg1'), plaintext);
  const again = sealSecret(key, plaintext, 'webhook:b1:cfg1');
  t.notSame(
    again.subarray(OFFSET_SEALED_NONCE, OFFSET_SEALED_CIPHERTEXT),
    sealed.subarray(OFFSET_SEALED_NONCE, OFFSET_SEALED_CIPHERTEXT),
    'a fresh nonce each time',
  );
  t.same(openSecret(key, sealSecret(key, Buffer.alloc(0), ''), ''), Buffer.alloc(0), 'empty');
});

t.test(
  'openSecret and dedupKey: keys have allocations of their own, not pool slices',
  async (t) => {
    const key = deriveKey(Buffer.alloc(MASTER_KEY_BYTES, 3), PURPOSE_SECRET_SEAL);
    const opened = openSecret(key, sealSecret(key, Buffer.alloc(32, 9), 'aad'), 'aad');
    t.same(opened, Buffer.alloc(32, 9));
    t.equal(opened.byteOffset, 0);
    t.equal(opened.buffer.byteLength, 32, 'no other bytes share its memory');
    t.equal(dedupKey(opened).buffer.byteLength, 32, 'nor the dedup key derived from it');
  },
);

t.test('openSecret: every kind of damage is corrupt_data without secrets in it', async (t) => {
  const key = deriveKey(master, PURPOSE_SECRET_SEAL);
  const sealed = sealSecret(key, Buffer.from('s3cr3t'), 'aad');
  const corrupt = { code: 'corrupt_data', status: 500 };
  t.throws(() => openSecret(key, sealed, 'other aad'), {
    ...corrupt,
    details: { reason: 'authentication' },
  });
  t.throws(() => openSecret(deriveKey(master, 'other'), sealed, 'aad'), corrupt);
  t.throws(() => openSecret(key, sealed.subarray(0, 28), 'aad'), {
    ...corrupt,
    details: { reason: 'truncated' },
  });
  t.throws(() => openSecret(key, Buffer.alloc(0), 'aad'), corrupt);
  t.throws(() => openSecret(key, sealed.subarray(0, sealed.length - 1), 'aad'), corrupt);
  const versioned = Buffer.from(sealed);
  versioned.writeUInt8(2, 0);
  t.throws(() => openSecret(key, versioned, 'aad'), { ...corrupt, details: { reason: 'version' } });
  let failures = 0;
  for (let bit = 0; bit < sealed.length * 8; bit += 1) {
    const damaged = Buffer.from(sealed);
    damaged.writeUInt8(damaged.readUInt8(bit >> 3) ^ (1 << (bit & 7)), bit >> 3);
    try {
      openSecret(key, damaged, 'aad');
    } catch (error) {
      const message = (error as Error).message;
      if ((error as { code?: string }).code === 'corrupt_data' && !message.includes('s3cr3t')) {
        failures += 1;
      }
    }
  }
  t.equal(failures, sealed.length * 8, 'every single-bit flip is detected');
});

t.test('seal and open assert the key size (bugs)', async (t) => {
  t.throws(() => sealSecret(Buffer.alloc(16), Buffer.alloc(1), ''), { code: 'ERR_ASSERTION' });
  t.throws(() => openSecret(Buffer.alloc(16), Buffer.alloc(40), ''), { code: 'ERR_ASSERTION' });
});

t.test('tenant data keys: fresh, wrapped per tenant, unwrapped only for that tenant', async (t) => {
  const dataKey = newTenantDataKey();
  t.equal(dataKey.length, 32);
  t.notSame(newTenantDataKey(), dataKey);
  const wrapped = wrapTenantKey(master, 'acme', dataKey);
  t.equal(wrapped.length, 32 + SEALED_OVERHEAD_BYTES);
  t.same(unwrapTenantKey(master, 'acme', wrapped), dataKey);
  t.throws(() => unwrapTenantKey(master, 'acme2', wrapped), { code: 'corrupt_data' });
  t.throws(() => unwrapTenantKey(Buffer.alloc(32, 9), 'acme', wrapped), { code: 'corrupt_data' });
  // The wrap key is the tenant-key-wrap-v1 derivation and the aad is `tenant:<id>`.
  const wrapKey = deriveKey(master, PURPOSE_TENANT_KEY_WRAP);
  t.same(openSecret(wrapKey, wrapped, 'tenant:acme'), dataKey);
  t.throws(() => openSecret(deriveKey(master, PURPOSE_SECRET_SEAL), wrapped, 'tenant:acme'), {
    code: 'corrupt_data',
  });
  // A value sealed with the wrap key for this tenant but of the wrong size is refused.
  const short = sealSecret(wrapKey, Buffer.alloc(16), 'tenant:acme');
  t.throws(() => unwrapTenantKey(master, 'acme', short), {
    code: 'corrupt_data',
    details: { reason: 'length' },
  });
  t.throws(() => wrapTenantKey(master, 'acme', Buffer.alloc(16)), { code: 'ERR_ASSERTION' });
  t.throws(() => wrapTenantKey(master, '', dataKey), { code: 'ERR_ASSERTION' });
});

t.test('dedupKey is HKDF(tenant data key, chunk-id-v1)', async (t) => {
  const tenantKey = Buffer.alloc(32, 2);
  const key = dedupKey(tenantKey);
  t.equal(key.toString('hex'), 'a7b4cbd1e6f4d05821b1acf1200a2ff9c2859939ebb28307cf6d78dbcf0e168c');
  t.same(key, hkdfReference(tenantKey, 'lightwell', 'chunk-id-v1'));
  t.notSame(dedupKey(Buffer.alloc(32, 3)), key, 'differs per tenant');
  t.throws(() => dedupKey(Buffer.alloc(31)), { code: 'ERR_ASSERTION' });
});
