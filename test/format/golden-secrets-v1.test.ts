// Goal: the key-wrapping scheme of docs/on-disk-format.md §3 ("Keys derived from the master
// key") is what the code does, byte for byte, and stays so: current code opens the golden sealed
// values made once (test/golden/v1/sealed-secrets.json, by test/golden/make-secrets-v1.ts); a
// re-implementation written from the document with node:crypto alone opens them too, and seals
// values that current code opens; each value is bound to its record by its AAD.
// Method: the fixed public golden master key; HKDF-SHA256 and AES-256-GCM from node:crypto as
// the document states them (salt, info, layout, AAD), compared with src/security/keys.ts.
import t from 'tap';
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as keys from '../../src/security/keys.js';
import {
  deriveKey,
  openSecret,
  PURPOSE_SECRET_SEAL,
  unwrapTenantKey,
} from '../../src/security/keys.js';
import { goldenDir } from '../golden/golden-dir.js';
import {
  GOLDEN_ACCESS_KEY,
  GOLDEN_ACCESS_SECRET,
  GOLDEN_DATA_KEY,
  GOLDEN_MASTER_KEY,
  GOLDEN_TENANT,
  GOLDEN_WEBHOOK,
  GOLDEN_WEBHOOK_SECRET,
} from '../golden/make-secrets-v1.js';

const golden = JSON.parse(
  readFileSync(join(goldenDir(1), 'sealed-secrets.json'), 'utf8'),
) as Record<'tenantWrappedKey' | 'accessKeySealedSecret' | 'webhookSealedSecret', string>;
const bytes = (name: keyof typeof golden): Buffer => Buffer.from(golden[name], 'hex');

/** The document's derivation: HKDF-SHA256, salt "lightwell", info = purpose, 32 bytes. */
function documentedKey(purpose: string): Buffer {
  return Buffer.from(hkdfSync('sha256', GOLDEN_MASTER_KEY, 'lightwell', purpose, 32));
}

/** The document's sealed layout: version 1 | nonce[12] | ciphertext | tag[16]. */
function documentedOpen(key: Buffer, sealed: Buffer, aad: string): Buffer {
  if (sealed[0] !== 1) throw new Error('not version 1');
  const decipher = createDecipheriv('aes-256-gcm', key, sealed.subarray(1, 13), {
    authTagLength: 16,
  });
  decipher.setAAD(Buffer.from(aad, 'utf8'));
  decipher.setAuthTag(sealed.subarray(sealed.length - 16));
  return Buffer.concat([
    decipher.update(sealed.subarray(13, sealed.length - 16)),
    decipher.final(),
  ]);
}

function documentedSeal(key: Buffer, plaintext: Buffer, aad: string): Buffer {
  const nonce = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, nonce, { authTagLength: 16 });
  cipher.setAAD(Buffer.from(aad, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([Buffer.of(1), nonce, ciphertext, cipher.getAuthTag()]);
}

const wrapAad = `tenant:${GOLDEN_TENANT}`;
const accessAad = `access-key:${GOLDEN_ACCESS_KEY}`;
const { tenantId, bucketId, configId } = GOLDEN_WEBHOOK;
const webhookAad = `webhook:${tenantId}:${bucketId}:${configId}`;

t.test('the derivation is the documented one', async (t) => {
  for (const purpose of ['tenant-key-wrap-v1', 'secret-seal-v1'])
    t.same(deriveKey(GOLDEN_MASTER_KEY, purpose), documentedKey(purpose), purpose);
  t.equal(PURPOSE_SECRET_SEAL, 'secret-seal-v1');
});

t.test("the sealed layout's constants are the document's table", async (t) => {
  t.same(
    [
      keys.SEALED_VERSION,
      keys.OFFSET_SEALED_VERSION,
      keys.SIZE_SEALED_VERSION,
      keys.OFFSET_SEALED_NONCE,
      keys.SIZE_SEALED_NONCE,
      keys.OFFSET_SEALED_CIPHERTEXT,
      keys.SIZE_SEALED_TAG,
      keys.PURPOSE_TENANT_KEY_WRAP,
      keys.KEY_DERIVATION_SALT,
    ],
    [1, 0, 1, 1, 12, 13, 16, 'tenant-key-wrap-v1', 'lightwell'],
  );
});

t.test('a wrapped tenant data key: 61 bytes that both open', async (t) => {
  const wrapped = bytes('tenantWrappedKey');
  t.equal(wrapped.length, 13 + 32 + 16, 'version, nonce, 32-byte key, tag');
  t.same(unwrapTenantKey(GOLDEN_MASTER_KEY, GOLDEN_TENANT, wrapped), GOLDEN_DATA_KEY, 'code');
  t.same(
    documentedOpen(documentedKey('tenant-key-wrap-v1'), wrapped, wrapAad),
    GOLDEN_DATA_KEY,
    'the document',
  );
  const resealed = documentedSeal(documentedKey('tenant-key-wrap-v1'), GOLDEN_DATA_KEY, wrapAad);
  t.same(unwrapTenantKey(GOLDEN_MASTER_KEY, GOLDEN_TENANT, resealed), GOLDEN_DATA_KEY, 'back');
  t.throws(
    () => unwrapTenantKey(GOLDEN_MASTER_KEY, 'another-tenant', wrapped),
    { code: 'corrupt_data' },
    'bound to its tenant id',
  );
  t.throws(
    () => unwrapTenantKey(randomBytes(32), GOLDEN_TENANT, wrapped),
    { code: 'corrupt_data' },
    'and to the master key',
  );
});

t.test('sealed access-key and webhook secrets open as documented', async (t) => {
  const seal = deriveKey(GOLDEN_MASTER_KEY, PURPOSE_SECRET_SEAL);
  const cases = [
    ['accessKeySealedSecret', accessAad, GOLDEN_ACCESS_SECRET],
    ['webhookSealedSecret', webhookAad, GOLDEN_WEBHOOK_SECRET],
  ] as const;
  for (const [name, aad, secret] of cases) {
    const sealed = bytes(name);
    t.equal(sealed.length, 13 + Buffer.byteLength(secret) + 16, `${name}: its length`);
    t.equal(openSecret(seal, sealed, aad).toString(), secret, `${name}: code`);
    t.equal(documentedOpen(documentedKey('secret-seal-v1'), sealed, aad).toString(), secret);
    const resealed = documentedSeal(documentedKey('secret-seal-v1'), Buffer.from(secret), aad);
    t.equal(openSecret(seal, resealed, aad).toString(), secret, `${name}: sealed from the doc`);
    t.throws(() => openSecret(seal, sealed, `${aad}x`), { code: 'corrupt_data' }, 'bound by AAD');
  }
});
