// Native bearer tokens for the data-plane API (data-api.md §5).
//
// Format: `lwtk_<payloadB64>.<sigB64>` where payloadB64 = base64url(JSON payload) and
// sigB64 = base64url(HMAC-SHA256(key = signing key, message = payloadB64 as ASCII)). The signing
// key is `deriveKey(master, PURPOSE_NATIVE_TOKEN)`.
//
// Invariants:
// - Tokens are stateless; revocation of the access key and disabling of the tenant are
//   re-checked by the caller on every request (data-api.md §5.4). This module only proves that
//   we minted the token and that it has not expired.
// - The signature is checked, in constant time, before the payload is decoded or parsed, so
//   nothing an attacker sends reaches JSON.parse unless we signed it.
// - Every failure is `unauthorized` with message 'invalid token' or 'token expired' and no
//   details: a caller learns nothing about which check failed, and no input is echoed back.
// - Only canonical base64url is accepted, so each token has exactly one spelling.
//
// Persists: nothing.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Unauthorized } from '../util/errors.js';
import {
  sealHmacToken,
  openHmacToken,
  invalidToken,
  HMAC_TOKEN_SIGNATURE_BYTES,
} from './hmac-token.js';

export const NATIVE_TOKEN_PREFIX = 'lwtk_';
export const NATIVE_TOKEN_VERSION = 1;
/** Longer inputs are refused before any work is done. Real tokens are about 250 characters. */
export const NATIVE_TOKEN_CHARS_MAX = 4096;
export const NATIVE_TOKEN_JTI_BYTES = 12;
export const NATIVE_TOKEN_SIGNATURE_BYTES = HMAC_TOKEN_SIGNATURE_BYTES;
/** A token whose `iat` lies further in the future than this is refused (clock skew allowance). */
export const NATIVE_TOKEN_CLOCK_SKEW_SECONDS_MAX = 300;

export interface NativeTokenPayload {
  readonly v: 1;
  /** Access key id. */
  readonly kid: string;
  /** Tenant id. */
  readonly tid: string;
  /** Issued at, unix seconds. */
  readonly iat: number;
  /** Expires at, unix seconds; the token is valid while now < exp. */
  readonly exp: number;
  /** Random token id (12 bytes, base64url), for audit correlation. */
  readonly jti: string;
}

export interface MintNativeTokenOptions {
  readonly accessKeyId: string;
  readonly tenantId: string;
  readonly ttlMs: number;
  readonly nowMs: number;
}

export interface MintedNativeToken {
  readonly token: string;
  /** RFC 3339, UTC, e.g. 2025-01-01T12:00:00.000Z. */
  readonly expiresAt: string;
}

export function mintNativeToken(key: Buffer, options: MintNativeTokenOptions): MintedNativeToken {
  assert.equal(key.length, 32, 'token signing key must be 32 bytes');
  assert.ok(options.accessKeyId.length > 0, 'accessKeyId must not be empty');
  assert.ok(options.tenantId.length > 0, 'tenantId must not be empty');
  assert.ok(Number.isSafeInteger(options.nowMs) && options.nowMs >= 0, 'nowMs must be a time');
  assert.ok(Number.isFinite(options.ttlMs) && options.ttlMs >= 1000, 'ttlMs must be at least 1s');
  const iat = Math.floor(options.nowMs / 1000);
  const exp = Math.floor((options.nowMs + options.ttlMs) / 1000);
  assert.ok(exp > iat);
  const payload: NativeTokenPayload = {
    v: NATIVE_TOKEN_VERSION,
    kid: options.accessKeyId,
    tid: options.tenantId,
    iat,
    exp,
    jti: randomBytes(NATIVE_TOKEN_JTI_BYTES).toString('base64url'),
  };
  const token = sealHmacToken(key, NATIVE_TOKEN_PREFIX, payload);
  assert.ok(token.length <= NATIVE_TOKEN_CHARS_MAX, 'minted token exceeds the length limit');
  return { token, expiresAt: new Date(exp * 1000).toISOString() };
}

const invalid = invalidToken;

/**
 * Verifies a bearer token and returns its payload. Any input at all that is not a live token we
 * minted under `key` gives `unauthorized` ('invalid token' or, for a genuine but expired token,
 * 'token expired'); no other exception escapes.
 */
export function verifyNativeToken(key: Buffer, token: unknown, nowMs: number): NativeTokenPayload {
  assert.equal(key.length, 32, 'token signing key must be 32 bytes');
  // A NaN clock would make every expiry comparison false, that is, fail open.
  assert.ok(Number.isFinite(nowMs), 'nowMs must be a finite time');
  const payload = parsePayload(
    openHmacToken(key, NATIVE_TOKEN_PREFIX, token, NATIVE_TOKEN_CHARS_MAX),
  );
  const nowSeconds = Math.floor(nowMs / 1000);
  if (payload.iat > nowSeconds + NATIVE_TOKEN_CLOCK_SKEW_SECONDS_MAX) throw invalid();
  if (nowMs >= payload.exp * 1000) throw Unauthorized('token expired');
  return payload;
}

function parsePayload(fields: Record<string, unknown>): NativeTokenPayload {
  const { v, kid, tid, iat, exp, jti } = fields;
  if (v !== NATIVE_TOKEN_VERSION) throw invalid();
  if (typeof kid !== 'string' || kid.length === 0) throw invalid();
  if (typeof tid !== 'string' || tid.length === 0) throw invalid();
  if (typeof jti !== 'string' || jti.length === 0) throw invalid();
  if (!Number.isSafeInteger(iat) || !Number.isSafeInteger(exp)) throw invalid();
  const issuedAt = iat as number;
  const expiresAt = exp as number;
  if (issuedAt < 0 || expiresAt <= issuedAt) throw invalid();
  return { v: NATIVE_TOKEN_VERSION, kid, tid, iat: issuedAt, exp: expiresAt, jti };
}
