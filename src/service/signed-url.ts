// Signed URLs (data-api.md §4 "Signed URL rules"): minting an `lwurl_` token for one GET or PUT
// (src/security/signed-url.ts holds its format), and using one, whatever transport serves it.
//
// At every use the token is verified (HMAC under the signed-URL key, expiry), then everything it
// stands for is checked again against the live index: the access key is active and unexpired,
// its tenant active, its scope still grants the operation on this key, the bucket policy does
// not deny it, and the request's method, bucket and key are the token's. A URL therefore never
// exceeds the minting key's live scope. Failures: 401 for the token and the key's state, 403 for
// method, resource, scope and policy.
//
// Upload constraints come only from the token: contentLengthMax against the declared length
// before any byte is read, contentType pins the stored type, the checksum is verified like an
// X-Service-Checksum header, and idempotencyKey makes the upload replay-safe.

import {
  DB,
  tenantKey,
  type AccessKeyRecord,
  type BucketRecord,
  type TenantRecord,
} from '../engine/index/schema.js';
import type { IndexStore } from '../engine/index/store.js';
import {
  CHECKSUM_ALGS,
  parseChecksumAlg,
  parseChecksumHeader,
  type ChecksumAlg,
} from '../engine/checksums.js';
import type { AuditContext } from '../http/exchange.js';
import { PURPOSE_SIGNED_URL } from '../security/keys.js';
import { validateObjectKey } from '../security/names.js';
import { canMintSignedUrl, parseScopes, type Scope, type Verb } from '../security/scopes.js';
import {
  checkSignedUrlCovers,
  clampTtlSeconds,
  mintSignedUrlToken,
  parseSignUrlRequest,
  signedUrlPayloadOf,
  verifySignedUrlToken,
  type SignedUrlPayload,
} from '../security/signed-url.js';
import type { Settings } from '../util/config.js';
import { BadRequest, Forbidden, PayloadTooLarge, Unauthorized } from '../util/errors.js';
import type { Access } from './access.js';
import type { Authenticator, Principal } from './auth.js';
import type { RequestContext } from './context.js';

const SCOPE_CACHE_MAX = 10_000;

export interface SignedUrlDeps {
  readonly store: IndexStore;
  readonly auth: Authenticator;
  readonly settings: Settings;
  readonly access: Pick<Access, 'bucket'>;
}

/** A minted URL: its path (the native API's, relative to the listener) and token. */
export interface MintedUrl {
  readonly url: string;
  readonly token: string;
  readonly method: 'GET' | 'PUT';
  /** Milliseconds since the epoch. */
  readonly expiresAt: number;
}

/** What a verified token stands for, checked against the live index for this request. */
export interface SignedUse {
  readonly payload: SignedUrlPayload;
  readonly principal: Principal;
  readonly bucket: BucketRecord;
  readonly key: string;
}

export class SignedUrls {
  private readonly scopes = new Map<string, Scope>();
  /** Separate from the bearer-token key (PURPOSE_NATIVE_TOKEN). */
  private readonly urlKey: Buffer;
  private readonly objectBytesMax: number;

  constructor(private readonly deps: SignedUrlDeps) {
    this.urlKey = deps.auth.purposeKey(PURPOSE_SIGNED_URL);
    this.objectBytesMax = deps.settings.bytes('limits.object_bytes_max');
  }

  /** Mints a URL for the request `body` (a sign-url request) on behalf of `ctx.principal`. */
  mint(ctx: RequestContext, body: unknown): MintedUrl {
    const { principal } = ctx;
    const request = parseSignUrlRequest(body);
    if (request.reason !== undefined) ctx.audit.reason = request.reason;
    const checksumAlg = this.mintChecksumAlg(request.checksumAlg, request.checksumVal);
    if (request.contentLengthMax !== undefined && request.contentLengthMax > this.objectBytesMax) {
      throw BadRequest(
        `contentLengthMax may not exceed limits.object_bytes_max (${this.objectBytesMax})`,
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
    this.deps.access.bucket(principal, request.bucket, {
      verb,
      key: request.key ?? request.keyPrefix ?? '',
    });
    const now = ctx.clock();
    const payload = signedUrlPayloadOf(checksumAlg ? { ...request, checksumAlg } : request, {
      tenantId: principal.tenant.id,
      accessKeyId: principal.accessKeyId,
      nowMs: now,
      ttlSeconds: this.ttlSeconds(principal, request.ttlSeconds, now),
    });
    const token = mintSignedUrlToken(this.urlKey, payload);
    const path = `/api/v1/signed/${encodeURIComponent(request.bucket)}/${encodeKey(request.key ?? request.keyPrefix ?? '')}`;
    return {
      url: `${path}?token=${token}`,
      token,
      method: request.method,
      expiresAt: payload.exp * 1000,
    };
  }

  /** The token's checksum algorithm, spelled as the schema's enum (a JSON value is exact). */
  private mintChecksumAlg(
    alg: string | undefined,
    value: string | undefined,
  ): ChecksumAlg | undefined {
    if (alg === undefined) return undefined;
    const checksumAlg = (CHECKSUM_ALGS as readonly string[]).includes(alg)
      ? (alg as ChecksumAlg)
      : undefined;
    if (!checksumAlg)
      throw BadRequest('checksumAlg must be one of CRC32, CRC32C, CRC64NVME, SHA1, SHA256');
    parseChecksumHeader(checksumAlg, value ?? '');
    return checksumAlg;
  }

  /** The asked lifetime, clamped to the setting; a URL never outlives the key that minted it. */
  private ttlSeconds(principal: Principal, asked: number | undefined, now: number): number {
    const ttl = clampTtlSeconds(asked, this.deps.settings.duration('security.max_presign_ttl'));
    const keyRecord = this.deps.store.get<AccessKeyRecord>(
      DB.accessKeys,
      Buffer.from(principal.accessKeyId),
    );
    if (keyRecord?.expiresAt === undefined) return ttl;
    return Math.max(1, Math.min(ttl, Math.floor((keyRecord.expiresAt - now) / 1000)));
  }

  /**
   * Verifies a token (401 when it is not valid or has expired) and names its key, tenant and
   * reason on the audit row, before any other check can refuse the request.
   */
  verify(token: string | null, audit: AuditContext, now: number): SignedUrlPayload {
    const payload = verifySignedUrlToken(this.urlKey, token, now);
    audit.actor = payload.kid;
    audit.tenantId = payload.tid;
    if (payload.r !== undefined) audit.reason = payload.r;
    return payload;
  }

  /** Checks that a verified token covers `method` on `bucket`/`key` now (see the header). */
  authorize(
    payload: SignedUrlPayload,
    target: { method: string; bucket: string; key: string },
    now: number,
  ): SignedUse {
    const { key } = target;
    validateObjectKey(key);
    checkSignedUrlCovers(payload, target);
    const principal = this.principalOf(payload, now);
    const verb: Verb = payload.m === 'GET' ? 'read' : 'write';
    const bucket = this.deps.access.bucket(principal, payload.b, { verb, key });
    return { payload, principal, bucket, key };
  }

  /** The live key and tenant behind a verified token; 401 when either no longer is. */
  private principalOf(payload: SignedUrlPayload, now: number): Principal {
    const { store } = this.deps;
    const key = store.get<AccessKeyRecord>(DB.accessKeys, Buffer.from(payload.kid));
    if (!key || key.state !== 'active')
      throw Unauthorized('the access key of this signed URL is revoked or unknown');
    if (key.expiresAt !== undefined && key.expiresAt <= now)
      throw Unauthorized('the access key of this signed URL has expired');
    if (key.tenantId !== payload.tid) throw Unauthorized('invalid token');
    const tenant = store.get<TenantRecord>(DB.tenants, tenantKey(key.tenantId));
    if (!tenant || tenant.state !== 'active')
      throw Unauthorized('the tenant is disabled or unknown');
    return { accessKeyId: key.accessKeyId, tenant, scope: this.scopeOf(key.scopes) };
  }

  private scopeOf(text: string): Scope {
    let scope = this.scopes.get(text);
    if (!scope) {
      scope = parseScopes(text);
      if (this.scopes.size >= SCOPE_CACHE_MAX) this.scopes.clear();
      this.scopes.set(text, scope);
    }
    return scope;
  }
}

/** A signed upload's declared length against the token's limit, before a byte is read. */
export function checkSignedLength(payload: SignedUrlPayload, contentLength: number): void {
  if (payload.clm !== undefined && contentLength > payload.clm)
    throw PayloadTooLarge(`this signed URL accepts at most ${payload.clm} bytes`);
}

/**
 * Adds the token's checksum to those the request sent (`expected`, changed in place): a sent
 * digest of the same algorithm must agree. 401 for a token whose algorithm is not one.
 */
export function addSignedChecksum(
  payload: SignedUrlPayload,
  expected: Map<ChecksumAlg, Buffer>,
): void {
  if (payload.ca === undefined || payload.cv === undefined) return;
  const alg = parseChecksumAlg(payload.ca);
  if (!alg) throw Unauthorized('invalid token');
  const digest = parseChecksumHeader(alg, payload.cv);
  const sent = expected.get(alg);
  if (sent && !sent.equals(digest))
    throw BadRequest(`X-Service-Checksum-${alg} contradicts the checksum of this signed URL`);
  expected.set(alg, digest);
}

/** The stored content type: the token's pin (which a sent one must equal), or the sent one. */
export function signedContentType(payload: SignedUrlPayload, sentType: string | undefined): string {
  if (payload.ct !== undefined && sentType !== undefined && sentType !== payload.ct)
    throw Forbidden(`this signed URL requires Content-Type ${payload.ct}`);
  return payload.ct ?? sentType ?? 'application/octet-stream';
}

/** The upload's idempotency key: the token's (which a sent one must equal), or the sent one. */
export function signedIdempotencyKey(
  payload: SignedUrlPayload,
  sentKey: string | undefined,
): string | undefined {
  if (payload.ik !== undefined && sentKey !== undefined && sentKey !== payload.ik)
    throw BadRequest('Idempotency-Key contradicts the idempotencyKey of this signed URL');
  return payload.ik ?? sentKey;
}

function encodeKey(key: string): string {
  return key.split('/').map(encodeURIComponent).join('/');
}
