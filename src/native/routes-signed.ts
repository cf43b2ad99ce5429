// Signed URLs (data-api.md §4 "Signed URL rules"): `POST /sign-url` mints an `lwurl_` token
// (src/security/signed-url.ts); `/signed/{bucket}/{key...}?token=` serves GET, PUT and the
// browser's OPTIONS preflight with the token as the only credential.
//
// At every use the token is verified (HMAC under the signed-URL key, expiry), then everything
// it stands for is checked again against the live index: the access key is active and
// unexpired, its tenant active, its scope still grants the operation on this key, the bucket
// policy does not deny it, and the request's method, bucket and key are the token's. A URL
// therefore never exceeds the minting key's live scope. Failures: 401 for the token and the
// key's state, 403 for method, resource, scope and policy.
//
// Upload constraints come only from the token: contentLengthMax is checked against the
// declared Content-Length before any byte is read (and the body can never run past its
// Content-Length: the pipeline cuts it off), contentType pins the stored type, the checksum is
// verified like an X-Service-Checksum header, and idempotencyKey makes the upload replay-safe.
// The token's `reason` goes on the audit row of the use, as on the mint's.
//
// CORS: a preflight succeeds only when the token authorizes the requested method on the
// resource and a stored rule of the bucket matches origin, method and headers; CORS never
// grants access by itself, and a refused preflight carries no Access-Control-* header.

import type { Exchange } from '../http/exchange.js';
import type { Route, RouteDoc, JsonSchema } from '../http/router.js';
import type { Handler } from '../http/server.js';
import {
  DB,
  tenantKey,
  type AccessKeyRecord,
  type TenantRecord,
  type BucketRecord,
} from '../engine/index/schema.js';
import {
  CHECKSUM_ALGS,
  parseChecksumAlg,
  parseChecksumHeader,
  type ChecksumAlg,
} from '../engine/checksums.js';
import { sendObject } from '../service/download.js';
import { checkReadConditions, rangeToServe, resolveForRead } from '../service/read.js';
import type { Principal } from '../service/auth.js';
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
import { PURPOSE_SIGNED_URL } from '../security/keys.js';
import { parseScopes, canMintSignedUrl, type Scope, type Verb } from '../security/scopes.js';
import {
  validateContentType,
  validateObjectKey,
  CONTENT_TYPE_CHARS_MAX,
  OBJECT_KEY_BYTES_MAX,
} from '../security/names.js';
import {
  parseSignUrlRequest,
  clampTtlSeconds,
  signedUrlPayloadOf,
  mintSignedUrlToken,
  verifySignedUrlToken,
  checkSignedUrlCovers,
  SIGNED_URL_FIELD_CHARS_MAX,
  SIGNED_URL_IDEMPOTENCY_KEY_CHARS_MAX,
  SIGNED_URL_REASON_CHARS_MAX,
  type SignedUrlPayload,
} from '../security/signed-url.js';
import {
  matchCorsRule,
  preflightHeaders,
  corsResponseHeaders,
  parseRequestHeaderList,
  type CorsRule,
} from '../security/cors.js';
import {
  BadRequest,
  Forbidden,
  Unauthorized,
  PayloadTooLarge,
  isLightwellError,
} from '../util/errors.js';

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
const SCOPE_CACHE_MAX = 10_000;

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

interface SignedAccess {
  readonly payload: SignedUrlPayload;
  readonly principal: Principal;
  readonly bucket: BucketRecord;
  readonly key: string;
}

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
  const buckets = kit.access;
  const { store, settings, auth } = services;
  const objectBytesMax = settings.bytes('limits.object_bytes_max');
  const scopes = new Map<string, Scope>();
  // Separate from the bearer-token key (PURPOSE_NATIVE_TOKEN).
  const urlKey = auth.purposeKey(PURPOSE_SIGNED_URL);

  const scopeOf = (text: string): Scope => {
    let scope = scopes.get(text);
    if (!scope) {
      scope = parseScopes(text);
      if (scopes.size >= SCOPE_CACHE_MAX) scopes.clear();
      scopes.set(text, scope);
    }
    return scope;
  };

  /** The live key and tenant behind a verified token; 401 when either no longer is. */
  const principalOf = (payload: SignedUrlPayload): Principal => {
    const key = store.get<AccessKeyRecord>(DB.accessKeys, Buffer.from(payload.kid));
    if (!key || key.state !== 'active')
      throw Unauthorized('the access key of this signed URL is revoked or unknown');
    if (key.expiresAt !== undefined && key.expiresAt <= Date.now())
      throw Unauthorized('the access key of this signed URL has expired');
    if (key.tenantId !== payload.tid) throw Unauthorized('invalid token');
    const tenant = store.get<TenantRecord>(DB.tenants, tenantKey(key.tenantId));
    if (!tenant || tenant.state !== 'active')
      throw Unauthorized('the tenant is disabled or unknown');
    return { accessKeyId: key.accessKeyId, tenant, scope: scopeOf(key.scopes) };
  };

  /**
   * Verifies the token and re-checks everything it stands for, for `method` on this path; a 401
   * names the signed URL's challenge.
   */
  const access = (
    exchange: Exchange,
    params: Readonly<Record<string, string>>,
    method: string,
  ): SignedAccess => {
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
  ): SignedAccess => {
    store.refresh();
    const payload = verifySignedUrlToken(urlKey, exchange.query.get('token'), Date.now());
    exchange.audit.actor = payload.kid;
    exchange.audit.tenantId = payload.tid;
    if (payload.r !== undefined) exchange.audit.reason = payload.r;
    exchange.refuseUnclearQuery();
    const key = params['key'] ?? '';
    validateObjectKey(key);
    checkSignedUrlCovers(payload, { method, bucket: params['bucket'] ?? '', key });
    const principal = principalOf(payload);
    const verb: Verb = payload.m === 'GET' ? 'read' : 'write';
    const bucket = buckets.bucket(principal, payload.b, { verb, key });
    return { payload, principal, bucket, key };
  };

  /** Access-Control-* headers for an actual cross-origin response that a rule allows. */
  const corsHeaders = (
    exchange: Exchange,
    bucket: BucketRecord,
    method: string,
  ): Record<string, string> => {
    const rules = bucket.cors as CorsRule[] | undefined;
    // The answer depends on Origin wherever the bucket has rules, matched or not: a cache must
    // not give one origin's answer (with or without Allow-Origin) to another (Fetch §3.2.5).
    const vary = rules !== undefined && rules.length > 0 ? { Vary: 'Origin' } : {};
    const origin = exchange.header('origin');
    if (origin === undefined) return vary;
    const rule = matchCorsRule(rules, { origin, method, headers: [] });
    return rule ? corsResponseHeaders(rule, origin) : vary;
  };

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
        const request = parseSignUrlRequest(await exchange.readJson());
        if (request.reason !== undefined) exchange.audit.reason = request.reason;
        let checksumAlg: ChecksumAlg | undefined;
        if (request.checksumAlg !== undefined) {
          // As the schema's enum spells them: a header name is case-insensitive, a JSON value not.
          checksumAlg = (CHECKSUM_ALGS as readonly string[]).includes(request.checksumAlg)
            ? (request.checksumAlg as ChecksumAlg)
            : undefined;
          if (!checksumAlg)
            throw BadRequest('checksumAlg must be one of CRC32, CRC32C, CRC64NVME, SHA1, SHA256');
          parseChecksumHeader(checksumAlg, request.checksumVal ?? '');
        }
        if (request.contentLengthMax !== undefined && request.contentLengthMax > objectBytesMax) {
          throw BadRequest(
            `contentLengthMax may not exceed limits.object_bytes_max (${objectBytesMax})`,
          );
        }
        const resource =
          request.key !== undefined
            ? { bucket: request.bucket, key: request.key }
            : { bucket: request.bucket, keyPrefix: request.keyPrefix ?? '' };
        if (!canMintSignedUrl(principal.scope, request.method, resource)) {
          throw Forbidden(
            `the access key may not mint a ${request.method} URL for this ${request.key !== undefined ? 'key' : 'key prefix'}`,
          );
        }
        const verb: Verb = request.method === 'GET' ? 'read' : 'write';
        buckets.bucket(principal, request.bucket, {
          verb,
          key: request.key ?? request.keyPrefix ?? '',
        });
        const now = Date.now();
        let ttlSeconds = clampTtlSeconds(
          request.ttlSeconds,
          settings.duration('security.max_presign_ttl'),
        );
        const keyRecord = store.get<AccessKeyRecord>(
          DB.accessKeys,
          Buffer.from(principal.accessKeyId),
        );
        // A URL never outlives the key that minted it.
        if (keyRecord?.expiresAt !== undefined)
          ttlSeconds = Math.max(
            1,
            Math.min(ttlSeconds, Math.floor((keyRecord.expiresAt - now) / 1000)),
          );
        const payload = signedUrlPayloadOf(checksumAlg ? { ...request, checksumAlg } : request, {
          tenantId: principal.tenant.id,
          accessKeyId: principal.accessKeyId,
          nowMs: now,
          ttlSeconds,
        });
        const token = mintSignedUrlToken(urlKey, payload);
        const path = `/api/v1/signed/${encodeURIComponent(request.bucket)}/${encodeKey(request.key ?? request.keyPrefix ?? '')}`;
        exchange.sendJson(200, {
          url: `${path}?token=${token}`,
          token,
          method: request.method,
          expiresAt: new Date(payload.exp * 1000).toISOString(),
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
        const rule = matchCorsRule(bucket.cors as CorsRule[] | undefined, request);
        if (!rule)
          throw Forbidden('no CORS rule of this bucket allows this origin, method and headers');
        exchange.send(204, preflightHeaders(rule, request));
      },
    },
  ];

  async function putSigned(exchange: Exchange, signed: SignedAccess): Promise<void> {
    const { payload, principal, bucket, key } = signed;
    const cors = corsHeaders(exchange, bucket, 'PUT');
    exchange.problemHeaders = cors;
    const contentLength = parseContentLength(exchange, objectBytesMax);
    // Refused before a byte is read; the pipeline also cuts off a body longer than declared.
    if (payload.clm !== undefined && contentLength > payload.clm)
      throw PayloadTooLarge(`this signed URL accepts at most ${payload.clm} bytes`);
    const expected = parseChecksumHeaders(exchange);
    if (payload.ca !== undefined && payload.cv !== undefined) {
      const alg = parseChecksumAlg(payload.ca);
      if (!alg) throw Unauthorized('invalid token', { challenge: SIGNED_URL_CHALLENGE });
      const digest = parseChecksumHeader(alg, payload.cv);
      const sent = expected.get(alg);
      if (sent && !sent.equals(digest))
        throw BadRequest(`X-Service-Checksum-${alg} contradicts the checksum of this signed URL`);
      expected.set(alg, digest);
    }
    const metadata = parseMetadata(exchange);
    const sentHeader = exchange.header('content-type');
    const sentType =
      sentHeader === undefined ? undefined : validateContentType(sentHeader, 'Content-Type');
    if (payload.ct !== undefined && sentType !== undefined && sentType !== payload.ct)
      throw Forbidden(`this signed URL requires Content-Type ${payload.ct}`);
    const contentType = payload.ct ?? sentType ?? 'application/octet-stream';
    const sentKey = exchange.header('idempotency-key');
    if (payload.ik !== undefined && sentKey !== undefined && sentKey !== payload.ik)
      throw BadRequest('Idempotency-Key contradicts the idempotencyKey of this signed URL');
    const idempotency = idempotencyOf(
      exchange,
      { objectKey: key, expected, contentLength, metadata, contentType },
      payload.ik ?? sentKey,
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

function encodeKey(key: string): string {
  return key.split('/').map(encodeURIComponent).join('/');
}
