// Authentication of S3 requests: AWS Signature Version 4 from the Authorization header or a
// presigned query, resolved to the same principal (key, tenant, scopes) as the native API's
// bearer tokens. The secret is the access key's own, kept sealed under the master key
// (src/security/keys.ts, purpose secret-seal-v1) and opened per request by the gateway's
// Authenticator, which checks the key's and tenant's state at that moment: a revoked key or a
// disabled tenant stops S3 requests at once.
//
// A request without any credentials is anonymous (handlers refuse it unless a grant allows
// it). Signature Version 2 (`Authorization: AWS id:sig`, `?AWSAccessKeyId=…&Signature=…`) is
// refused: it signs with HMAC-SHA1 over fewer parts of the request, and every current client
// signs with V4 (docs/s3.md, "Authentication").
//
// Invariants:
// - The signature is compared in constant time; the secret and the signing key are never
//   logged or put in an error.
// - After a header signature passes, the payload is checked as it streams (payload.ts): its
//   SHA-256, or its aws-chunked framing with every chunk signature.
//
// Persists: nothing.

import type { Exchange } from '../http/exchange.js';
import type { S3Credential, S3Principal, S3Services } from './api.js';
import { s3Error } from './errors.js';
import { isLightwellError } from '../util/errors.js';
import {
  amzDateMs,
  canonicalRequest,
  canonicalUri,
  EMPTY_SHA256,
  hmacHex,
  parseAuthorization,
  parsePresigned,
  signatureMatches,
  signingKey,
  stringToSign,
  STREAMING_SIGNED,
  STREAMING_SIGNED_TRAILER,
  STREAMING_UNSIGNED_TRAILER,
  UNSIGNED_PAYLOAD,
  type SignedClaim,
} from './sigv4.js';
import { PayloadCheck, payloadFilter, type PayloadMode } from './payload.js';

/** How far a request's time may be from the server's (AWS's limit). */
export const CLOCK_SKEW_MS_MAX = 15 * 60 * 1000;

const payloadChecks = new WeakMap<Exchange, PayloadCheck>();

/**
 * The payload check of an authenticated request with a body: its decoded length (for
 * aws-chunked bodies, `x-amz-decoded-content-length`), trailers, and `verify()` to call before
 * committing. Undefined for an anonymous request (its body is unsigned).
 */
export function payloadCheckOf(exchange: Exchange): PayloadCheck | undefined {
  return payloadChecks.get(exchange);
}

/** The length of the payload a handler will receive (decoded for aws-chunked bodies). */
export function payloadLength(exchange: Exchange): number | undefined {
  const mode = payloadChecks.get(exchange)?.mode;
  if (mode?.kind === 'chunked') return mode.decodedLength;
  const length = exchange.header('content-length');
  return length === undefined ? undefined : Number(length);
}

export function authenticateS3(exchange: Exchange, services: S3Services): S3Principal | undefined {
  const authorization = exchange.header('authorization');
  const presigned = exchange.queryParam('X-Amz-Credential') !== null;
  if (authorization === undefined && !presigned) {
    if (exchange.queryParam('AWSAccessKeyId') !== null || exchange.queryParam('Signature'))
      throw signatureV2();
    return undefined;
  }
  if (authorization !== undefined && presigned)
    throw s3Error('InvalidArgument', 'only one auth mechanism allowed: header or query');
  if (authorization !== undefined && /^AWS /.test(authorization)) throw signatureV2();
  const claim = presigned
    ? parsePresigned(exchange.query)
    : parseAuthorization(authorization ?? '', requestTime(exchange));
  exchange.audit.actor = claim.scope.accessKeyId.slice(0, 64);
  checkScope(claim, services);
  checkTime(claim, services);
  const credential = liveCredential(claim.scope.accessKeyId, services);
  exchange.audit.tenantId = credential.principal.tenant.id;
  const payloadHash = payloadHashOf(exchange, claim);
  const key = signingKey(credential.secretKey, claim.scope);
  if (!signatureVerifies(exchange, claim, { key, payloadHash }))
    throw s3Error('SignatureDoesNotMatch');
  const mode = payloadModeOf(exchange, payloadHash, { key, claim });
  // uWS delivers no body at all when there is none: an empty payload is checked here. A body
  // in HTTP chunked transfer coding has no Content-Length and is not empty (uWS decodes it; an
  // upload refuses it as AWS does, MissingContentLength, since its size must be known first).
  const length = exchange.header('content-length');
  const chunked = exchange.header('transfer-encoding') !== undefined;
  if (
    mode.kind === 'sha256' &&
    !chunked &&
    (length === undefined || length === '0') &&
    mode.hex !== EMPTY_SHA256
  )
    throw s3Error('XAmzContentSHA256Mismatch');
  const check = new PayloadCheck(mode);
  payloadChecks.set(exchange, check);
  exchange.filterBody(payloadFilter(check));
  return credential.principal;
}

/**
 * Whether the claim's signature is the request's: over the canonical URI, or, when the client
 * encoded its path otherwise than AWS does, over the raw path as sent.
 */
function signatureVerifies(
  exchange: Exchange,
  claim: SignedClaim,
  signing: { key: Buffer; payloadHash: string },
): boolean {
  const expectedFor = (uri: string): string => {
    const canonical = canonicalRequest({
      method: exchange.method,
      uri,
      rawQuery: exchange.rawQuery,
      headers: exchange.headers,
      signedHeaders: claim.signedHeaders,
      signedHeadersText: claim.signedHeadersText,
      payloadHash: signing.payloadHash,
    });
    return hmacHex(signing.key, stringToSign(claim.amzDate, claim.scope, canonical));
  };
  const uri = canonicalUri(exchange.path);
  if (signatureMatches(expectedFor(uri), claim.signature)) return true;
  const raw = exchange.path === '' ? '/' : exchange.path;
  return raw !== uri && signatureMatches(expectedFor(raw), claim.signature);
}

function signatureV2(): Error {
  return s3Error(
    'InvalidRequest',
    'Signature Version 2 is not supported; sign requests with AWS4-HMAC-SHA256',
  );
}

/** `x-amz-date`, else the `Date` header in the SigV4 form; undefined when neither parses. */
function requestTime(exchange: Exchange): string | undefined {
  const amz = exchange.header('x-amz-date');
  if (amz !== undefined) return amz;
  const date = exchange.header('date');
  if (date === undefined) return undefined;
  const ms = Date.parse(date);
  if (Number.isNaN(ms)) return undefined;
  return new Date(ms)
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');
}

function checkScope(claim: SignedClaim, services: S3Services): void {
  const { scope } = claim;
  const region = services.settings.string('s3.region');
  const kind = claim.presigned
    ? 'AuthorizationQueryParametersError'
    : 'AuthorizationHeaderMalformed';
  if (scope.service !== 's3') throw s3Error(kind, `the credential's service must be s3`);
  if (scope.region !== region)
    throw s3Error(
      kind,
      `the region '${scope.region.slice(0, 32)}' is wrong; expecting '${region}'`,
      {
        region,
      },
    );
  if (scope.date !== claim.amzDate.slice(0, 8))
    throw s3Error(kind, `the credential's date must be the day of the request time`);
}

function checkTime(claim: SignedClaim, services: S3Services): void {
  const now = Date.now();
  const signedAt = amzDateMs(claim.amzDate);
  if (Number.isNaN(signedAt)) throw s3Error('AccessDenied', 'the request time is not a date');
  if (!claim.presigned) {
    if (Math.abs(now - signedAt) > CLOCK_SKEW_MS_MAX) throw s3Error('RequestTimeTooSkewed');
    return;
  }
  const lifetimeMs = (claim.expiresSeconds ?? 0) * 1000;
  if (lifetimeMs > services.settings.duration('security.max_presign_ttl'))
    throw s3Error(
      'AuthorizationQueryParametersError',
      'X-Amz-Expires is longer than this service allows (security.max_presign_ttl)',
    );
  if (signedAt - now > CLOCK_SKEW_MS_MAX) throw s3Error('AccessDenied', 'Request is not valid yet');
  if (now > signedAt + lifetimeMs) throw s3Error('AccessDenied', 'Request has expired');
}

/** The key and its principal, its state checked now; every refusal is S3's. */
export function liveCredential(accessKeyId: string, services: S3Services): S3Credential {
  let credential: S3Credential | undefined;
  try {
    // Read-your-writes: a key made or revoked just before this request is seen.
    services.store.refresh();
    credential = services.auth.credential(accessKeyId);
  } catch (error) {
    if (isLightwellError(error) && error.code === 'unauthorized') {
      if (/tenant/.test(error.message)) throw s3Error('AccountProblem', error.message);
      throw s3Error('InvalidAccessKeyId', error.message);
    }
    throw error;
  }
  if (!credential) throw s3Error('InvalidAccessKeyId');
  return credential;
}

const KNOWN_PAYLOAD_HASHES = new Set([
  UNSIGNED_PAYLOAD,
  STREAMING_SIGNED,
  STREAMING_SIGNED_TRAILER,
  STREAMING_UNSIGNED_TRAILER,
]);

/** The payload hash the signature covers: `x-amz-content-sha256`, or UNSIGNED for presigned. */
function payloadHashOf(exchange: Exchange, claim: SignedClaim): string {
  const header = exchange.header('x-amz-content-sha256');
  if (header === undefined) {
    if (claim.presigned) return UNSIGNED_PAYLOAD;
    throw s3Error(
      'InvalidRequest',
      'Missing required header for this request: x-amz-content-sha256',
    );
  }
  if (!KNOWN_PAYLOAD_HASHES.has(header) && !/^[0-9a-f]{64}$/.test(header))
    throw s3Error('InvalidArgument', 'x-amz-content-sha256 must be a SHA-256 in hex or a mode');
  return header;
}

function payloadModeOf(
  exchange: Exchange,
  payloadHash: string,
  signing: { key: Buffer; claim: SignedClaim },
): PayloadMode {
  if (payloadHash === UNSIGNED_PAYLOAD) return { kind: 'unsigned' };
  if (/^[0-9a-f]{64}$/.test(payloadHash)) return { kind: 'sha256', hex: payloadHash };
  const decoded = exchange.header('x-amz-decoded-content-length');
  if (decoded === undefined || !/^\d{1,16}$/.test(decoded))
    throw s3Error('MissingContentLength', 'aws-chunked bodies need x-amz-decoded-content-length');
  const signed = payloadHash !== STREAMING_UNSIGNED_TRAILER;
  const trailer = payloadHash !== STREAMING_SIGNED;
  if (trailer && exchange.header('x-amz-trailer') === undefined)
    throw s3Error('InvalidRequest', 'a trailer mode needs the x-amz-trailer header');
  const { claim } = signing;
  return {
    kind: 'chunked',
    signed,
    trailer,
    decodedLength: Number(decoded),
    ...(signed
      ? {
          signing: {
            key: signing.key,
            scope: claim.scope,
            amzDate: claim.amzDate,
            seed: claim.signature,
          },
        }
      : {}),
  };
}
