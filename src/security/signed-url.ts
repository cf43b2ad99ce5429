// Signed-URL tokens (data-api.md §2 "Signed-URL request", §4 "Signed URL rules").
//
// Format: `lwurl_<payloadB64>.<sigB64>` where payloadB64 = base64url(JSON payload) and
// sigB64 = base64url(HMAC-SHA256(key = signing key, message = payloadB64 as ASCII)). The signing
// key is `deriveKey(master, PURPOSE_SIGNED_URL)`, never the bearer-token key, so neither kind of
// token can stand in for the other.
//
// Invariants:
// - The payload carries everything the URL allows: method, tenant, access key id, bucket, key
//   or keyPrefix, expiry, and every constraint (contentType, contentLengthMax, checksum,
//   idempotencyKey, the GET response overrides, reason). All of it is under the HMAC; nothing
//   that limits the URL is ever read from the query string.
// - A payload holds only the fields of its own method: PUT never carries response overrides
//   and GET never carries keyPrefix or upload constraints, both at mint (`bad_request`) and at
//   verification (`unauthorized`).
// - The signature is checked, in constant time, before the payload is decoded, so nothing an
//   attacker sends reaches JSON.parse unless we signed it. Every failure is `unauthorized`
//   ('invalid token' or 'token expired'), and no input is echoed back.
// - Tokens are stateless: revocation, tenant state, scope and bucket policy are re-checked by
//   the caller on every use. This module proves only that we minted the token, that it has not
//   expired, and (signedUrlCovers) that it names the request's method and resource.
//
// Persists: nothing.

import assert from 'node:assert/strict';
import { BadRequest, Unauthorized, Forbidden } from '../util/errors.js';
import {
  sealHmacToken,
  openHmacToken,
  invalidToken,
  HMAC_TOKEN_SIGNATURE_BYTES,
} from './hmac-token.js';
import {
  validateBucketName,
  validateContentType,
  validateObjectKey,
  CONTENT_TYPE_CHARS_MAX,
} from './names.js';

export const SIGNED_URL_PREFIX = 'lwurl_';
export const SIGNED_URL_VERSION = 1;
/** Longer inputs are refused before any work is done (a 1024-byte key and every field fit). */
export const SIGNED_URL_CHARS_MAX = 8192;
export const SIGNED_URL_SIGNATURE_BYTES = HMAC_TOKEN_SIGNATURE_BYTES;
/** A token whose `iat` lies further in the future than this is refused (clock skew). */
export const SIGNED_URL_CLOCK_SKEW_SECONDS_MAX = 300;
/** Lifetime when the request names none (then clamped like any other). */
export const SIGNED_URL_TTL_SECONDS_DEFAULT = 3600;
export const SIGNED_URL_REASON_CHARS_MAX = 256;
export const SIGNED_URL_FIELD_CHARS_MAX = 1024;
export const SIGNED_URL_IDEMPOTENCY_KEY_CHARS_MAX = 255;

export type SignedUrlMethod = 'GET' | 'PUT';

export interface SignedUrlPayload {
  readonly v: 1;
  readonly m: SignedUrlMethod;
  /** Tenant id. */
  readonly tid: string;
  /** Access key id of the minting key. */
  readonly kid: string;
  /** Bucket. */
  readonly b: string;
  /** Exact key; exactly one of k and kp. */
  readonly k?: string;
  /** PUT only: key prefix; the browser chooses the rest of the key. */
  readonly kp?: string;
  /** Issued at and expires at, unix seconds; valid while now < exp. */
  readonly iat: number;
  readonly exp: number;
  /** PUT: pinned Content-Type. */
  readonly ct?: string;
  /** PUT: largest body, bytes. */
  readonly clm?: number;
  /** PUT: checksum algorithm name and base64 digest the body must match. */
  readonly ca?: string;
  readonly cv?: string;
  /** PUT: Idempotency-Key the upload runs under. */
  readonly ik?: string;
  /** GET: response Content-Type and Content-Disposition overrides. */
  readonly rct?: string;
  readonly rcd?: string;
  /** Audit context, stored on the mint and use audit rows. */
  readonly r?: string;
}

/** A validated `POST /sign-url` body (ttl still unclamped). */
export interface SignUrlRequest {
  readonly method: SignedUrlMethod;
  readonly bucket: string;
  readonly key?: string;
  readonly keyPrefix?: string;
  readonly ttlSeconds?: number;
  readonly contentType?: string;
  readonly contentLengthMax?: number;
  readonly checksumAlg?: string;
  readonly checksumVal?: string;
  readonly idempotencyKey?: string;
  readonly responseContentType?: string;
  readonly responseContentDisposition?: string;
  readonly reason?: string;
}

const bothFields = ['method', 'bucket', 'key', 'ttlSeconds', 'reason'] as const;
const putFields = [
  'keyPrefix',
  'contentType',
  'contentLengthMax',
  'checksumAlg',
  'checksumVal',
  'idempotencyKey',
] as const;
const getFields = ['responseContentType', 'responseContentDisposition'] as const;
const payloadPutFields = ['kp', 'ct', 'clm', 'ca', 'cv', 'ik'] as const;
const payloadGetFields = ['rct', 'rcd'] as const;
const payloadFields = new Set([
  'v',
  'm',
  'tid',
  'kid',
  'b',
  'k',
  'iat',
  'exp',
  'r',
  ...payloadPutFields,
  ...payloadGetFields,
]);
/** Visible ASCII and spaces: header-safe values (no CR, LF or other controls). */
const headerValuePattern = /^[\x20-\x7e]*$/;

/** Validates a sign-url request body; every failure is `bad_request` naming the field. */
export function parseSignUrlRequest(body: unknown): SignUrlRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw BadRequest('the body must be a JSON object');
  const fields = body as Record<string, unknown>;
  const method = fields['method'];
  if (method !== 'GET' && method !== 'PUT')
    throw BadRequest('method must be "GET" (download) or "PUT" (upload)');
  const allowed = new Set<string>([...bothFields, ...(method === 'PUT' ? putFields : getFields)]);
  for (const name of Object.keys(fields)) {
    if (allowed.has(name)) continue;
    const other =
      method === 'PUT'
        ? (getFields as readonly string[]).includes(name)
        : (putFields as readonly string[]).includes(name);
    throw BadRequest(
      other
        ? `${name} does not apply to a ${method} URL`
        : `unknown field ${JSON.stringify(name.slice(0, 64))}`,
    );
  }
  validateBucketName(fields['bucket']);
  const request: { -readonly [K in keyof SignUrlRequest]: SignUrlRequest[K] } = {
    method,
    bucket: fields['bucket'],
  };
  const key = fields['key'];
  const keyPrefix = fields['keyPrefix'];
  if ((key === undefined) === (keyPrefix === undefined)) {
    throw BadRequest(
      method === 'PUT' ? 'give exactly one of key and keyPrefix' : 'key is required',
    );
  }
  if (key !== undefined) {
    validateObjectKey(key);
    request.key = key as string;
  } else {
    validateObjectKey(keyPrefix, { allowEmpty: true });
    request.keyPrefix = keyPrefix as string;
  }
  const ttl = fields['ttlSeconds'];
  if (ttl !== undefined) {
    if (!Number.isSafeInteger(ttl) || (ttl as number) < 1)
      throw BadRequest('ttlSeconds must be a positive integer');
    request.ttlSeconds = ttl as number;
  }
  const text = (
    name: keyof SignUrlRequest,
    max = SIGNED_URL_FIELD_CHARS_MAX,
  ): string | undefined => {
    const value = fields[name];
    if (value === undefined) return undefined;
    if (
      typeof value !== 'string' ||
      value.length === 0 ||
      value.length > max ||
      !headerValuePattern.test(value)
    ) {
      throw BadRequest(`${name} must be 1 to ${max} visible ASCII characters`);
    }
    return value;
  };
  const assign = (
    name:
      | 'contentType'
      | 'checksumAlg'
      | 'checksumVal'
      | 'responseContentType'
      | 'responseContentDisposition'
      | 'reason'
      | 'idempotencyKey',
    max?: number,
  ): void => {
    const value = text(name, max);
    if (value !== undefined) request[name] = value;
  };
  assign('contentType', CONTENT_TYPE_CHARS_MAX);
  // Pinned, it must be a Content-Type that an upload can send and that is stored as it is.
  if (request.contentType !== undefined) validateContentType(request.contentType);
  assign('checksumAlg', 16);
  assign('checksumVal', 128);
  assign('responseContentType');
  assign('responseContentDisposition');
  assign('reason', SIGNED_URL_REASON_CHARS_MAX);
  assign('idempotencyKey', SIGNED_URL_IDEMPOTENCY_KEY_CHARS_MAX);
  if (request.idempotencyKey !== undefined && !/^[\x21-\x7e]+$/.test(request.idempotencyKey)) {
    throw BadRequest('idempotencyKey must be visible ASCII characters without spaces');
  }
  if ((request.checksumAlg === undefined) !== (request.checksumVal === undefined)) {
    throw BadRequest('checksumAlg and checksumVal go together');
  }
  const lengthMax = fields['contentLengthMax'];
  if (lengthMax !== undefined) {
    if (!Number.isSafeInteger(lengthMax) || (lengthMax as number) < 0)
      throw BadRequest('contentLengthMax must be a non-negative integer');
    request.contentLengthMax = lengthMax as number;
  }
  return request;
}

/** The lifetime in seconds: the request's (or the default), never more than `maxMs`. */
export function clampTtlSeconds(requested: number | undefined, maxMs: number): number {
  const maxSeconds = Math.max(1, Math.floor(maxMs / 1000));
  return Math.min(requested ?? SIGNED_URL_TTL_SECONDS_DEFAULT, maxSeconds);
}

/** The payload of a request minted by `kid` of tenant `tid` at `nowMs`. */
export function signedUrlPayloadOf(
  request: SignUrlRequest,
  minted: { tenantId: string; accessKeyId: string; nowMs: number; ttlSeconds: number },
): SignedUrlPayload {
  const iat = Math.floor(minted.nowMs / 1000);
  const payload: Record<string, unknown> = {
    v: SIGNED_URL_VERSION,
    m: request.method,
    tid: minted.tenantId,
    kid: minted.accessKeyId,
    b: request.bucket,
    iat,
    exp: iat + minted.ttlSeconds,
  };
  const optional: Array<[string, unknown]> = [
    ['k', request.key],
    ['kp', request.keyPrefix],
    ['ct', request.contentType],
    ['clm', request.contentLengthMax],
    ['ca', request.checksumAlg],
    ['cv', request.checksumVal],
    ['ik', request.idempotencyKey],
    ['rct', request.responseContentType],
    ['rcd', request.responseContentDisposition],
    ['r', request.reason],
  ];
  for (const [name, value] of optional) if (value !== undefined) payload[name] = value;
  return payload as unknown as SignedUrlPayload;
}

export function mintSignedUrlToken(key: Buffer, payload: SignedUrlPayload): string {
  assert.equal(key.length, 32, 'signed-URL key must be 32 bytes');
  assert.ok(
    checkPayload(payload as unknown as Record<string, unknown>),
    'signed-URL payload is malformed',
  );
  const token = sealHmacToken(key, SIGNED_URL_PREFIX, payload);
  assert.ok(
    token.length <= SIGNED_URL_CHARS_MAX,
    'minted signed-URL token exceeds the length limit',
  );
  return token;
}

const invalid = invalidToken;

/**
 * Verifies a signed-URL token and returns its payload. Any input that is not a live token we
 * minted under `key` gives `unauthorized`; no other exception escapes.
 */
export function verifySignedUrlToken(key: Buffer, token: unknown, nowMs: number): SignedUrlPayload {
  assert.equal(key.length, 32, 'signed-URL key must be 32 bytes');
  assert.ok(Number.isFinite(nowMs), 'nowMs must be a finite time');
  const parsed = openHmacToken(key, SIGNED_URL_PREFIX, token, SIGNED_URL_CHARS_MAX);
  if (!checkPayload(parsed)) throw invalid();
  const payload = parsed as unknown as SignedUrlPayload;
  if (payload.iat > Math.floor(nowMs / 1000) + SIGNED_URL_CLOCK_SKEW_SECONDS_MAX) throw invalid();
  if (nowMs >= payload.exp * 1000) throw Unauthorized('token expired');
  return payload;
}

/** Structural check of a payload: known fields only, right types, fields of its method only. */
function checkPayload(fields: Record<string, unknown>): boolean {
  if (Object.keys(fields).some((name) => !payloadFields.has(name))) return false;
  const { v, m, tid, kid, b, k, kp, iat, exp } = fields;
  if (v !== SIGNED_URL_VERSION || (m !== 'GET' && m !== 'PUT')) return false;
  if (!nonEmpty(tid) || !nonEmpty(kid) || !nonEmpty(b)) return false;
  if (
    !Number.isSafeInteger(iat) ||
    !Number.isSafeInteger(exp) ||
    (iat as number) < 0 ||
    (exp as number) <= (iat as number)
  )
    return false;
  if ((k === undefined) === (kp === undefined)) return false;
  if (k !== undefined && !nonEmpty(k)) return false;
  if (kp !== undefined && typeof kp !== 'string') return false;
  const others = m === 'PUT' ? payloadGetFields : payloadPutFields;
  if (others.some((name) => fields[name] !== undefined)) return false;
  for (const name of ['ct', 'ca', 'cv', 'ik', 'rct', 'rcd', 'r']) {
    if (fields[name] !== undefined && !nonEmpty(fields[name])) return false;
  }
  const clm = fields['clm'];
  return clm === undefined || (Number.isSafeInteger(clm) && (clm as number) >= 0);
}

function nonEmpty(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0;
}

/**
 * Throws `forbidden` unless the token names this request: its method (a GET URL also serves
 * HEAD), its bucket, and its key (exactly, or for a keyPrefix URL any key starting with it).
 */
export function checkSignedUrlCovers(
  payload: SignedUrlPayload,
  request: { method: string; bucket: string; key: string },
): void {
  const method = request.method === 'HEAD' ? 'GET' : request.method;
  if (method !== payload.m)
    throw Forbidden(`this signed URL is for ${payload.m}, not ${request.method}`);
  if (request.bucket !== payload.b) throw Forbidden('this signed URL is for another bucket');
  const covered =
    payload.k !== undefined
      ? request.key === payload.k
      : request.key.startsWith(payload.kp ?? '\u0000');
  if (!covered) throw Forbidden('this signed URL is for another key');
}
