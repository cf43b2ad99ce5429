// Signed URLs (data-api.md §4 "Signed URL rules"): `POST /sign-url` mints an `lwurl_` token;
// `/signed/{bucket}/{key...}?token=` serves GET, PUT and the browser's OPTIONS preflight with the
// token as the only credential. The rules of minting and use (the token verified and everything
// it stands for checked again against the live index, its upload constraints) are the service's
// (service/signed-url.ts), CORS evaluation too (service/cors.ts); this is HTTP and JSON. The
// token's `reason` goes on the audit row of the use, as on the mint's.
//
// CORS: a preflight succeeds only when the token authorizes the requested method on the
// resource and a stored rule of the bucket matches origin, method and headers; CORS never
// grants access by itself, and a refused preflight carries no Access-Control-* header.

import type { Exchange } from '../http/exchange.js';
import type { Route, RouteDoc, JsonSchema } from '../http/router.js';
import type { Handler } from '../http/server.js';
import type { BucketRecord } from '../engine/index/schema.js';
import { sendObject } from '../service/download.js';
import { checkReadConditions, rangeToServe, resolveForRead } from '../service/read.js';
import {
  objectJson,
  writtenHeaders,
  objectHeaders,
  parseContentLength,
  parseChecksumHeaders,
  parseMetadata,
  storeObject,
  readConditionsOf,
  type RouteKit,
} from './routes.js';
import { idempotencyOf } from '../service/idempotency.js';
import {
  ANY_CONTENT_TYPE,
  bucketNameSchema,
  objectReadResponses,
  objectSchema,
  readHeaders,
  writeHeaders,
} from './route-docs.js';
import { contextOf } from '../service/context.js';
import { corsHeadersFor, preflightCors } from '../service/cors.js';
import {
  addSignedChecksum,
  checkSignedLength,
  signedContentType,
  signedIdempotencyKey,
  SignedUrls,
  type SignedUse,
} from '../service/signed-url.js';
import {
  validateContentType,
  CONTENT_TYPE_CHARS_MAX,
  OBJECT_KEY_BYTES_MAX,
} from '../security/names.js';
import {
  SIGNED_URL_FIELD_CHARS_MAX,
  SIGNED_URL_IDEMPOTENCY_KEY_CHARS_MAX,
  SIGNED_URL_REASON_CHARS_MAX,
} from '../security/signed-url.js';
import { parseRequestHeaderList } from '../security/cors.js';
import { BadRequest, Unauthorized, isLightwellError } from '../util/errors.js';

const str = { type: 'string' } as const;
/** A text field of 1 to `max` printable ASCII characters, as the request's parser holds it to. */
const bounded = (max: number): JsonSchema => ({
  type: 'string',
  minLength: 1,
  maxLength: max,
  pattern: '^[\\x20-\\x7e]*$',
});
/** An object key or key prefix: its limit is in bytes of UTF-8, which a schema cannot say. */
const keySchema = (minLength: number, description: string): JsonSchema => ({
  type: 'string',
  minLength,
  maxLength: OBJECT_KEY_BYTES_MAX,
  description: `${description}at most ${OBJECT_KEY_BYTES_MAX} bytes of UTF-8`,
});
const count = (minimum: number): JsonSchema => ({
  type: 'integer',
  minimum,
  maximum: Number.MAX_SAFE_INTEGER,
});

const signUrlSchema: JsonSchema = {
  type: 'object',
  required: ['method', 'bucket'],
  properties: {
    method: { type: 'string', enum: ['GET', 'PUT'] },
    bucket: bucketNameSchema,
    key: keySchema(1, ''),
    keyPrefix: keySchema(0, 'PUT only; the browser chooses the rest of the key; '),
    ttlSeconds: {
      ...count(1),
      description: 'clamped to security.max_presign_ttl; default 3600',
    },
    contentType: bounded(CONTENT_TYPE_CHARS_MAX),
    contentLengthMax: count(0),
    checksumAlg: { type: 'string', enum: ['CRC32', 'CRC32C', 'CRC64NVME', 'SHA1', 'SHA256'] },
    checksumVal: bounded(128),
    idempotencyKey: {
      ...bounded(SIGNED_URL_IDEMPOTENCY_KEY_CHARS_MAX),
      pattern: '^[\\x21-\\x7e]+$',
    },
    responseContentType: bounded(SIGNED_URL_FIELD_CHARS_MAX),
    responseContentDisposition: bounded(SIGNED_URL_FIELD_CHARS_MAX),
    reason: bounded(SIGNED_URL_REASON_CHARS_MAX),
  },
};
const signedSchema: JsonSchema = {
  type: 'object',
  required: ['url', 'token', 'method', 'expiresAt'],
  properties: {
    url: {
      ...str,
      description:
        'relative to the public listener; for a keyPrefix URL append the rest of the key to the path',
    },
    token: str,
    method: str,
    expiresAt: { type: 'string', format: 'date-time' },
  },
};
const tokenQuery = { token: { ...str, description: 'the lwurl_ token' } };
const signedDoc = (
  summary: string,
  responses: RouteDoc['responses'],
  extra: Partial<RouteDoc> = {},
): RouteDoc => ({
  summary,
  auth: 'signed-url',
  tags: ['signed-url'],
  query: tokenQuery,
  requiredQuery: ['token'],
  responses,
  ...extra,
});

/**
 * What a signed URL's 401 asks for (RFC 9110 §11.6.1, RFC 6750 §3.1): the token in the URL is
 * the credential and it is not valid, so an Authorization header would not help; a new URL will.
 */
const SIGNED_URL_CHALLENGE = 'Bearer realm="lightwell", error="invalid_token"';

/** `error`, carrying the signed URL's challenge when it is a 401. */
function withSignedUrlChallenge(error: unknown): unknown {
  if (!isLightwellError(error) || error.status !== 401) return error;
  return Unauthorized(
    error.message,
    { ...error.details, challenge: SIGNED_URL_CHALLENGE },
    { cause: error },
  );
}

export function signedUrlRoutes(kit: RouteKit): Route<Handler>[] {
  const { services, bearer } = kit;
  const { store, settings, auth } = services;
  const objectBytesMax = settings.bytes('limits.object_bytes_max');
  const signed = new SignedUrls({ store, auth, settings, access: kit.access });

  /**
   * Verifies the token and re-checks everything it stands for, for `method` on this path; a 401
   * names the signed URL's challenge.
   */
  const access = (
    exchange: Exchange,
    params: Readonly<Record<string, string>>,
    method: string,
  ): SignedUse => {
    try {
      return checkedAccess(exchange, params, method);
    } catch (error) {
      throw withSignedUrlChallenge(error);
    }
  };

  /** `access` without the challenge. */
  const checkedAccess = (
    exchange: Exchange,
    params: Readonly<Record<string, string>>,
    method: string,
  ): SignedUse => {
    store.refresh();
    const payload = signed.verify(exchange.query.get('token'), exchange.audit, Date.now());
    exchange.refuseUnclearQuery();
    const target = { method, bucket: params['bucket'] ?? '', key: params['key'] ?? '' };
    return signed.authorize(payload, target, Date.now());
  };

  /** Access-Control-* headers for an actual cross-origin response that a rule allows. */
  const corsHeaders = (
    exchange: Exchange,
    bucket: BucketRecord,
    method: string,
  ): Record<string, string> => corsHeadersFor(bucket, exchange.header('origin'), method);

  return [
    {
      method: 'POST',
      path: '/sign-url',
      operationId: 'signURL',
      doc: {
        summary: 'Mint a signed URL for one GET or PUT',
        auth: 'bearer',
        tags: ['signed-url'],
        requestBody: { contentType: 'application/json', schema: signUrlSchema },
        responses: { 200: { description: 'the signed URL', schema: signedSchema } },
      },
      handler: async (exchange) => {
        const principal = bearer(exchange);
        const minted = signed.mint(contextOf(exchange, principal), await exchange.readJson());
        exchange.sendJson(200, {
          url: minted.url,
          token: minted.token,
          method: minted.method,
          expiresAt: new Date(minted.expiresAt).toISOString(),
        });
      },
    },
    {
      method: 'GET',
      path: '/signed/{bucket}/{key...}',
      operationId: 'getSignedObject',
      doc: signedDoc('Download with a signed URL; single Range supported', objectReadResponses, {
        headers: {
          ...readHeaders,
          Origin: 'CORS: a matching bucket rule adds Access-Control-Allow-Origin',
        },
      }),
      handler: async (exchange, params) => {
        const { payload, principal, bucket, key } = access(exchange, params, exchange.method);
        const cors = corsHeaders(exchange, bucket, exchange.method);
        exchange.problemHeaders = cors;
        const version = resolveForRead(store, bucket, key, null);
        const headers = { ...objectHeaders(version, bucket), ...cors };
        if (payload.rct !== undefined) headers['Content-Type'] = payload.rct;
        if (payload.rcd !== undefined) headers['Content-Disposition'] = payload.rcd;
        const conditions = readConditionsOf(exchange);
        const notModified = checkReadConditions(conditions, version);
        if (notModified) {
          exchange.send(notModified, headers);
          return;
        }
        const range = rangeToServe(conditions, version);
        await sendObject(services.download, exchange, {
          keys: auth.keysOf(principal.tenant),
          version,
          range,
          headers,
        });
      },
    },
    {
      method: 'PUT',
      path: '/signed/{bucket}/{key...}',
      operationId: 'putSignedObject',
      doc: signedDoc(
        "Upload with a signed URL; the token's constraints apply (a pinned contentType must equal the request's Content-Type)",
        {
          200: {
            description: 'stored durably',
            schema: objectSchema,
            headers: writeHeaders,
          },
        },
        {
          headers: {
            'X-Service-Checksum-*': 'base64 digest to verify',
            'X-Service-Meta-*': 'user metadata',
            'If-Match': 'write only if the current ETag matches',
            'If-None-Match': 'write only if absent (*) or not matching',
            'If-Unmodified-Since': 'write only if the current object is not newer (HTTP-date)',
            'Idempotency-Key':
              "makes the PUT replay-safe (needs a checksum: the URL's or an X-Service-Checksum-* header); must equal the URL's idempotencyKey if it has one",
          },
          requestBody: {
            contentType: ANY_CONTENT_TYPE,
            schema: { type: 'string', format: 'binary' },
          },
        },
      ),
      handler: (exchange, params) => putSigned(exchange, access(exchange, params, 'PUT')),
    },
    {
      method: 'OPTIONS',
      path: '/signed/{bucket}/{key...}',
      operationId: 'preflightSignedObject',
      doc: signedDoc(
        'Browser CORS preflight for a signed URL',
        { 204: { description: 'allowed: Access-Control-* headers' } },
        {
          headers: {
            Origin: 'required',
            'Access-Control-Request-Method': 'required',
            'Access-Control-Request-Headers': 'optional',
          },
        },
      ),
      handler: (exchange, params) => {
        const origin = exchange.header('origin');
        const requested = exchange.header('access-control-request-method');
        if (origin === undefined || requested === undefined)
          throw BadRequest('a preflight needs Origin and Access-Control-Request-Method');
        const { bucket } = access(exchange, params, requested.trim().toUpperCase());
        const request = {
          origin,
          method: requested.trim().toUpperCase(),
          headers: parseRequestHeaderList(exchange.header('access-control-request-headers')),
        };
        exchange.send(204, preflightCors(bucket, request));
      },
    },
  ];

  async function putSigned(exchange: Exchange, use: SignedUse): Promise<void> {
    const { payload, principal, bucket, key } = use;
    const cors = corsHeaders(exchange, bucket, 'PUT');
    exchange.problemHeaders = cors;
    const contentLength = parseContentLength(exchange, objectBytesMax);
    // Refused before a byte is read; the pipeline also cuts off a body longer than declared.
    checkSignedLength(payload, contentLength);
    const expected = parseChecksumHeaders(exchange);
    try {
      addSignedChecksum(payload, expected);
    } catch (error) {
      throw withSignedUrlChallenge(error);
    }
    const metadata = parseMetadata(exchange);
    const sentHeader = exchange.header('content-type');
    const sentType =
      sentHeader === undefined ? undefined : validateContentType(sentHeader, 'Content-Type');
    const contentType = signedContentType(payload, sentType);
    const idempotencyKey = signedIdempotencyKey(payload, exchange.header('idempotency-key'));
    const idempotency = idempotencyOf(
      exchange,
      { objectKey: key, expected, contentLength, metadata, contentType },
      idempotencyKey,
    );
    const version = await storeObject(kit, exchange, {
      principal,
      bucket,
      key,
      contentLength,
      expected,
      metadata,
      contentType,
      idempotency,
    });
    exchange.sendJson(200, objectJson(version, bucket), {
      ...writtenHeaders(version, bucket),
      ...cors,
    });
  }
}
