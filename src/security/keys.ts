// Key material: derivation of purpose-bound subkeys from the master key, sealing of secrets at
// rest, and wrapping of per-tenant data keys.
//
// Invariants:
// - The master key is 32 bytes and is never used directly for anything: every use goes through
//   `deriveKey` with its own purpose string, so a key for one purpose can never verify or open
//   data made for another (bearer tokens and signed URLs in particular use separate keys).
// - Purpose strings carry a version suffix (`-v1`). Changing how a derived key is used means a
//   new purpose string, never a new meaning for an old one.
// - A sealed secret is `version u8 = 1 | nonce [12] | ciphertext | tag [16]` (AES-256-GCM). The
//   additional authenticated data binds it to where it belongs (for tenant keys `tenant:<id>`),
//   so a sealed value copied to another record does not open there.
// - Any failure to open a sealed value is `corrupt_data`; the reason goes in `details`, never
//   any key or plaintext bytes.
//
// Persists: the sealed layout above (sealed secrets, wrapped tenant keys). It is part of the
// on-disk format: the version byte and sizes below never change meaning once shipped.

import assert from 'node:assert/strict';
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { CorruptData } from '../util/errors.js';

export const MASTER_KEY_BYTES = 32;
export const DERIVED_KEY_BYTES = 32;
export const TENANT_DATA_KEY_BYTES = 32;

/** HKDF salt for every derivation. Fixed forever: changing it changes every derived key. */
export const KEY_DERIVATION_SALT = 'lightwell';

/** Signs native bearer tokens (`lwtk_…`). */
export const PURPOSE_NATIVE_TOKEN = 'native-token-v1';
/** Signs signed-URL tokens (`lwurl_…`); deliberately separate from the bearer-token key. */
export const PURPOSE_SIGNED_URL = 'signed-url-v1';
/** Signs object listings' continuation tokens (`src/service/list-token.ts`). */
export const PURPOSE_LIST_TOKEN = 'list-token-v1';
/** Seals secrets at rest (access-key secrets, webhook signing secrets). */
export const PURPOSE_SECRET_SEAL = 'secret-seal-v1';
/** Wraps per-tenant data keys. */
export const PURPOSE_TENANT_KEY_WRAP = 'tenant-key-wrap-v1';
/** The master key's check value, recorded in the index (src/engine/master-key-check.ts). */
export const PURPOSE_KEY_CHECK = 'key-check-v1';
/** Derives the chunk-id (deduplication) key from a tenant data key. */
export const PURPOSE_CHUNK_ID = 'chunk-id-v1';

export const SEALED_VERSION = 1;
export const OFFSET_SEALED_VERSION = 0;
export const SIZE_SEALED_VERSION = 1;
export const OFFSET_SEALED_NONCE = 1;
export const SIZE_SEALED_NONCE = 12;
export const OFFSET_SEALED_CIPHERTEXT = 13;
export const SIZE_SEALED_TAG = 16;
/** Bytes a sealed value adds to its plaintext. */
export const SEALED_OVERHEAD_BYTES = SIZE_SEALED_VERSION + SIZE_SEALED_NONCE + SIZE_SEALED_TAG;

const cipherName = 'aes-256-gcm';

/** HKDF-SHA256(ikm = master, salt = 'lightwell', info = purpose) → 32 bytes. */
export function deriveKey(master: Buffer, purpose: string): Buffer {
  assert.ok(Buffer.isBuffer(master), 'master key must be a Buffer');
  assert.equal(master.length, MASTER_KEY_BYTES, 'master key must be 32 bytes');
  assert.ok(purpose.length > 0, 'key purpose must not be empty');
  const derived = Buffer.from(
    hkdfSync('sha256', master, KEY_DERIVATION_SALT, purpose, DERIVED_KEY_BYTES),
  );
  assert.equal(derived.length, DERIVED_KEY_BYTES);
  return derived;
}

/** Encrypts and authenticates `plaintext`, bound to `aad`. A fresh random nonce every call. */
export function sealSecret(key: Buffer, plaintext: Buffer, aad: string): Buffer {
  assert.equal(key.length, DERIVED_KEY_BYTES, 'seal key must be 32 bytes');
  const nonce = randomBytes(SIZE_SEALED_NONCE);
  const cipher = createCipheriv(cipherName, key, nonce, { authTagLength: SIZE_SEALED_TAG });
  cipher.setAAD(Buffer.from(aad, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  const tag = cipher.getAuthTag();
  assert.equal(tag.length, SIZE_SEALED_TAG);
  const sealed = Buffer.concat([Buffer.of(SEALED_VERSION), nonce, ciphertext, tag]);
  assert.equal(sealed.length, plaintext.length + SEALED_OVERHEAD_BYTES);
  return sealed;
}

/** Opens a value made by `sealSecret` with the same key and aad; anything else: corrupt_data. */
export function openSecret(key: Buffer, sealed: Buffer, aad: string): Buffer {
  assert.equal(key.length, DERIVED_KEY_BYTES, 'seal key must be 32 bytes');
  if (sealed.length < SEALED_OVERHEAD_BYTES) {
    throw CorruptData('sealed secret is truncated', { reason: 'truncated', length: sealed.length });
  }
  const version = sealed.readUInt8(OFFSET_SEALED_VERSION);
  if (version !== SEALED_VERSION) {
    throw CorruptData('sealed secret has an unknown version', { reason: 'version', version });
  }
  const nonce = sealed.subarray(OFFSET_SEALED_NONCE, OFFSET_SEALED_NONCE + SIZE_SEALED_NONCE);
  const tagOffset = sealed.length - SIZE_SEALED_TAG;
  const ciphertext = sealed.subarray(OFFSET_SEALED_CIPHERTEXT, tagOffset);
  const tag = sealed.subarray(tagOffset);
  const decipher = createDecipheriv(cipherName, key, nonce, { authTagLength: SIZE_SEALED_TAG });
  decipher.setAAD(Buffer.from(aad, 'utf8'));
  decipher.setAuthTag(tag);
  const head = decipher.update(ciphertext);
  let tail: Buffer;
  try {
    // Nothing decrypted is released before `final()` has checked the tag.
    tail = decipher.final();
  } catch {
    head.fill(0);
    throw CorruptData('sealed secret failed authentication', { reason: 'authentication' });
  }
  // A secret gets an allocation of its own, not a slice of Node's shared buffer pool (which other
  // small Buffers share, and which lives as long as any of them); the pieces are zeroed.
  const plaintext = Buffer.allocUnsafeSlow(head.length + tail.length);
  head.copy(plaintext, 0);
  tail.copy(plaintext, head.length);
  head.fill(0);
  tail.fill(0);
  assert.equal(plaintext.length, sealed.length - SEALED_OVERHEAD_BYTES);
  return plaintext;
}

/** A fresh random 32-byte tenant data key. */
export function newTenantDataKey(): Buffer {
  return randomBytes(TENANT_DATA_KEY_BYTES);
}

function tenantWrapAad(tenantId: string): string {
  assert.ok(tenantId.length > 0, 'tenant id must not be empty');
  return `tenant:${tenantId}`;
}

/** Seals a tenant data key under the master-derived wrap key, bound to the tenant id. */
export function wrapTenantKey(master: Buffer, tenantId: string, dataKey: Buffer): Buffer {
  assert.equal(dataKey.length, TENANT_DATA_KEY_BYTES, 'tenant data key must be 32 bytes');
  const wrapKey = deriveKey(master, PURPOSE_TENANT_KEY_WRAP);
  return sealSecret(wrapKey, dataKey, tenantWrapAad(tenantId));
}

/** Opens a wrapped tenant key; another tenant's wrapped key gives corrupt_data. */
export function unwrapTenantKey(master: Buffer, tenantId: string, wrapped: Buffer): Buffer {
  const wrapKey = deriveKey(master, PURPOSE_TENANT_KEY_WRAP);
  const dataKey = openSecret(wrapKey, wrapped, tenantWrapAad(tenantId));
  if (dataKey.length !== TENANT_DATA_KEY_BYTES) {
    throw CorruptData('wrapped tenant key has the wrong length', {
      reason: 'length',
      length: dataKey.length,
    });
  }
  return dataKey;
}

/**
 * The per-tenant key for content-addressed chunk ids: HKDF(tenantDataKey, 'chunk-id-v1').
 * Keying chunk ids per tenant stops one tenant from probing whether another stores some content.
 */
export function dedupKey(tenantDataKey: Buffer): Buffer {
  assert.equal(tenantDataKey.length, TENANT_DATA_KEY_BYTES, 'tenant data key must be 32 bytes');
  const derived = Buffer.from(
    hkdfSync('sha256', tenantDataKey, KEY_DERIVATION_SALT, PURPOSE_CHUNK_ID, DERIVED_KEY_BYTES),
  );
  assert.equal(derived.length, DERIVED_KEY_BYTES);
  return derived;
}
