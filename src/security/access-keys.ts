// Credentials: access key ids and secrets for the data plane, admin tokens for the control
// plane, and the constant-time comparison every secret check goes through.
//
// Invariants:
// - Every random value comes from the CSPRNG (`crypto.randomBytes`) and is drawn without
//   modulo bias.
// - Access key id: 'LW' + 18 RFC 4648 base32 characters (90 random bits), 20 characters in all.
// - Secret key: base64url of 30 random bytes (240 bits), 40 characters. Because the
//   S3-compatible API signs with SigV4, the server needs the secret itself: callers store it
//   sealed (`sealSecret`, purpose secret-seal-v1), never in the clear, never hashed.
// - Admin token: 'lwadm_' + base64url of 32 random bytes. It is stored only as the SHA-256 hex
//   of the whole token string (admin-api.md §5.3); its `tokenId` is a separate, non-secret
//   handle for listing and revoking.
// - `constantTimeEqual` hashes both sides first, so neither content nor length leaks through
//   timing.
//
// Persists: nothing itself; the shapes above are what callers persist.

import assert from 'node:assert/strict';
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

export const ACCESS_KEY_ID_PREFIX = 'LW';
export const ACCESS_KEY_ID_RANDOM_CHARS = 18;
export const ACCESS_KEY_ID_CHARS = ACCESS_KEY_ID_PREFIX.length + ACCESS_KEY_ID_RANDOM_CHARS;
export const SECRET_KEY_BYTES = 30;
export const SECRET_KEY_CHARS = 40;
export const ADMIN_TOKEN_PREFIX = 'lwadm_';
export const ADMIN_TOKEN_BYTES = 32;
export const ADMIN_TOKEN_ID_PREFIX = 'adm_';
export const ADMIN_TOKEN_ID_BYTES = 8;

const base32Alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** The exact shape of an access key id; check it before any lookup or rate-limit bucket. */
export const ACCESS_KEY_ID_PATTERN = /^LW[A-Z2-7]{18}$/;
/** The exact shape of a secret key. */
export const SECRET_KEY_PATTERN = /^[A-Za-z0-9_-]{40}$/;
/** The exact shape of an admin token (32 bytes in canonical base64url is 43 characters). */
export const ADMIN_TOKEN_PATTERN = /^lwadm_[A-Za-z0-9_-]{43}$/;
/** The exact shape of an admin token id. */
export const ADMIN_TOKEN_ID_PATTERN = /^adm_[0-9a-f]{16}$/;

export interface NewAdminToken {
  /** The secret; shown once, never stored. */
  readonly token: string;
  /** Non-secret handle used by `admin-token list` and `revoke`. */
  readonly tokenId: string;
  /** SHA-256 hex of `token`: the only form that is stored. */
  readonly hash: string;
}

export function newAccessKeyId(): string {
  const bytes = randomBytes(ACCESS_KEY_ID_RANDOM_CHARS);
  let id = ACCESS_KEY_ID_PREFIX;
  // 256 is a multiple of 32, so the low five bits of a uniform byte are uniform.
  for (const byte of bytes) id += base32Alphabet.charAt(byte & 31);
  assert.match(id, ACCESS_KEY_ID_PATTERN);
  return id;
}

export function newSecretKey(): string {
  const secret = randomBytes(SECRET_KEY_BYTES).toString('base64url');
  assert.equal(secret.length, SECRET_KEY_CHARS);
  return secret;
}

export function newAdminToken(): NewAdminToken {
  const token = ADMIN_TOKEN_PREFIX + randomBytes(ADMIN_TOKEN_BYTES).toString('base64url');
  const tokenId = ADMIN_TOKEN_ID_PREFIX + randomBytes(ADMIN_TOKEN_ID_BYTES).toString('hex');
  assert.match(token, ADMIN_TOKEN_PATTERN);
  assert.match(tokenId, ADMIN_TOKEN_ID_PATTERN);
  return { token, tokenId, hash: hashAdminToken(token) };
}

/** SHA-256 hex of the full token string (prefix included), as stored. */
export function hashAdminToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/**
 * Compares two secrets without leaking, through timing, where they differ or how long either
 * is: both are hashed with SHA-256 and the equal-length digests compared with timingSafeEqual.
 * Strings are compared by their UTF-8 bytes.
 */
export function constantTimeEqual(a: string | Buffer, b: string | Buffer): boolean {
  const digestA = createHash('sha256').update(a).digest();
  const digestB = createHash('sha256').update(b).digest();
  return timingSafeEqual(digestA, digestB);
}
