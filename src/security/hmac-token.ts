// The signed-token envelope shared by bearer tokens (`lwtk_`) and signed URLs (`lwurl_`):
// `<prefix><base64url(JSON payload)>.<base64url(HMAC-SHA256(payload part, key))>`.
//
// Sealing and opening live here once; each token kind keeps its own prefix, key (derived for
// its purpose) and payload rules. Opening checks the signature in constant time before it
// parses anything, and any malformed input at all answers `unauthorized` ('invalid token').

import { createHmac, timingSafeEqual } from 'node:crypto';
import { Unauthorized, type LightwellError } from '../util/errors.js';

export const HMAC_TOKEN_SIGNATURE_BYTES = 32;
const base64urlPattern = /^[A-Za-z0-9_-]+$/;

function sign(key: Buffer, payloadB64: string): Buffer {
  return createHmac('sha256', key).update(payloadB64, 'ascii').digest();
}

export function invalidToken(): LightwellError {
  return Unauthorized('invalid token');
}

/** Decodes canonical, non-empty base64url; anything else gives undefined. */
function decodeBase64url(text: string): Buffer | undefined {
  if (!base64urlPattern.test(text)) return undefined;
  const bytes = Buffer.from(text, 'base64url');
  return bytes.toString('base64url') === text ? bytes : undefined;
}

export function sealHmacToken(key: Buffer, prefix: string, payload: object): string {
  const payloadB64 = Buffer.from(JSON.stringify(payload), 'utf8').toString('base64url');
  return `${prefix}${payloadB64}.${sign(key, payloadB64).toString('base64url')}`;
}

/** The payload object of a token we sealed under `key`; `invalid token` for anything else. */
export function openHmacToken(
  key: Buffer,
  prefix: string,
  token: unknown,
  charsMax: number,
): Record<string, unknown> {
  if (typeof token !== 'string' || token.length > charsMax || !token.startsWith(prefix))
    throw invalidToken();
  const parts = token.slice(prefix.length).split('.');
  if (parts.length !== 2) throw invalidToken();
  const [payloadB64 = '', signatureB64 = ''] = parts;
  const signature = decodeBase64url(signatureB64);
  if (signature?.length !== HMAC_TOKEN_SIGNATURE_BYTES || !base64urlPattern.test(payloadB64))
    throw invalidToken();
  if (!timingSafeEqual(sign(key, payloadB64), signature)) throw invalidToken();
  // From here on the payload is ours; a failure below means a bug or a key shared with
  // something else, and it is still answered as an invalid token.
  const bytes = decodeBase64url(payloadB64);
  if (bytes === undefined) throw invalidToken();
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw invalidToken();
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw invalidToken();
  return parsed as Record<string, unknown>;
}
