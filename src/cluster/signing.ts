// Authentication of the node-to-node transport (docs/cluster.md §7).
//
// Every request carries the sender's node id, a time in ms and an HMAC-SHA256 over
// `method \n path \n time \n node \n sha256(body)`, keyed with the cluster secret (or, for the
// first contact with a waiting node, the join secret). The receiver refuses a time more than
// SKEW_MS_MAX away from its own clock and compares signatures in constant time. Secrets that must
// cross the wire are sealed with AES-256-GCM under a key derived from the join secret.

import {
  createCipheriv,
  createDecipheriv,
  createHash,
  createHmac,
  hkdfSync,
  randomBytes,
  timingSafeEqual,
} from 'node:crypto';
import assert from 'node:assert';
import { Unauthorized, BadRequest } from '../util/errors.js';

export const HEADER_NODE = 'x-lightwell-node';
export const HEADER_TIME = 'x-lightwell-time';
export const HEADER_SIGNATURE = 'x-lightwell-signature';
/** How far a request's time may be from the receiver's clock. */
export const SKEW_MS_MAX = 5 * 60_000;
const SEAL_INFO = 'lightwell-join-v1';
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

export type SignedHeaders = Readonly<Record<string, string>>;

function mac(
  key: Buffer,
  parts: { method: string; path: string; time: string; node: string; body: Buffer },
): Buffer {
  const bodyHash = createHash('sha256').update(parts.body).digest('hex');
  return createHmac('sha256', key)
    .update(`${parts.method}\n${parts.path}\n${parts.time}\n${parts.node}\n${bodyHash}`)
    .digest();
}

export function signRequest(
  key: Buffer,
  request: { method: string; path: string; node: string; body: Buffer; nowMs: number },
): SignedHeaders {
  const time = String(request.nowMs);
  const signature = mac(key, { ...request, time }).toString('base64url');
  return { [HEADER_NODE]: request.node, [HEADER_TIME]: time, [HEADER_SIGNATURE]: signature };
}

/** Throws `unauthorized` unless the headers sign this request with `key`; answers the sender. */
export function verifyRequest(
  key: Buffer,
  request: {
    method: string;
    path: string;
    headers: Readonly<Record<string, string | string[] | undefined>>;
    body: Buffer;
    nowMs: number;
  },
): string {
  const node = request.headers[HEADER_NODE];
  const time = request.headers[HEADER_TIME];
  const signature = request.headers[HEADER_SIGNATURE];
  if (typeof node !== 'string' || typeof time !== 'string' || typeof signature !== 'string')
    throw Unauthorized('node-to-node request without its signature headers');
  const timeMs = /^\d{1,16}$/.test(time) ? Number(time) : NaN;
  if (!(Math.abs(request.nowMs - timeMs) <= SKEW_MS_MAX))
    throw Unauthorized("node-to-node request time is too far from this node's clock");
  const expected = mac(key, { ...request, time, node });
  const given = Buffer.from(signature, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected))
    throw Unauthorized('node-to-node request signature does not verify');
  return node;
}

function sealKey(joinSecret: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', joinSecret, 'lightwell', SEAL_INFO, 32));
}

/** AES-256-GCM under a key derived from the join secret; `aad` binds it to its purpose. */
export function sealWithJoinSecret(joinSecret: Buffer, plain: Buffer, aad: string): string {
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv('aes-256-gcm', sealKey(joinSecret), nonce);
  cipher.setAAD(Buffer.from(aad));
  const sealed = Buffer.concat([nonce, cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
  assert.equal(sealed.length, NONCE_BYTES + plain.length + TAG_BYTES);
  return sealed.toString('base64url');
}

export function openWithJoinSecret(joinSecret: Buffer, sealedText: string, aad: string): Buffer {
  const sealed = Buffer.from(sealedText, 'base64url');
  if (sealed.length < NONCE_BYTES + TAG_BYTES) throw BadRequest('sealed value is too short');
  const decipher = createDecipheriv(
    'aes-256-gcm',
    sealKey(joinSecret),
    sealed.subarray(0, NONCE_BYTES),
  );
  decipher.setAAD(Buffer.from(aad));
  decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
  try {
    return Buffer.concat([
      decipher.update(sealed.subarray(NONCE_BYTES, sealed.length - TAG_BYTES)),
      decipher.final(),
    ]);
  } catch (cause) {
    throw Unauthorized('sealed value does not open with this join secret', {}, { cause });
  }
}
