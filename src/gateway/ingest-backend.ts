// The domain side of the binary ingest transport (src/ingest/server.ts): a bearer token, a
// bucket and each object go through what the native API's PUT does (`storeObject`: scopes,
// bucket policy, quota, idempotency, the upload pipeline, checksums, the audited commit with its
// conditions and object lock), so an object written over the stream is one written by a PUT.
//
// `putIngested` is the one place that maps an ingest object onto that pipeline: the PUT's
// pieces take an Exchange, so each object gets a stand-in that answers what they read of one
// (headers, the audit row, the body) and nothing else. When the data-plane service layer takes
// over the write path, this function calls its put instead.

import type { Exchange, AuditContext } from '../http/exchange.js';
import { toProblem } from '../http/error-answer.js';
import type { AuditSink } from '../http/audit.js';
import type { BodySource, IngestBackend, IngestCaller, IngestPut } from '../ingest/server.js';
import { verifyNativeToken } from '../security/native-token.js';
import { PURPOSE_NATIVE_TOKEN } from '../security/keys.js';
import { validateContentType, validateObjectKey, validateUserMetadata } from '../security/names.js';
import { DB, tenantChildKey, type BucketRecord } from '../engine/index/schema.js';
import { PayloadTooLarge } from '../util/errors.js';
import { idempotencyOf } from '../service/idempotency.js';
import { authorize } from '../service/auth.js';
import {
  objectJson,
  routeKit,
  storeObject,
  type GatewayServices,
  type RouteKit,
} from './routes.js';

/** The ingest backend of one listener. */
export function ingestBackend(services: GatewayServices, audit: AuditSink): IngestBackend {
  const kit = routeKit(services);
  const { auth, store, settings } = services;
  const tokenKey = auth.purposeKey(PURPOSE_NATIVE_TOKEN);
  const objectBytesMax = settings.bytes('limits.object_bytes_max');
  return {
    objectBytesMax,
    authenticate(token: string): IngestCaller {
      store.refresh();
      const principal = auth.authenticate(`Bearer ${token}`, {});
      const payload = verifyNativeToken(tokenKey, token, Date.now());
      return {
        accessKeyId: principal.accessKeyId,
        tenantId: principal.tenant.id,
        tokenExpiresAt: payload.exp * 1000,
      };
    },
    checkBucket(token: string, bucket: string): void {
      const principal = auth.authenticate(`Bearer ${token}`, {});
      authorize(principal, { verb: 'write', bucket });
      kit.bucketOf(principal, bucket);
    },
    put: (token, request, body) => putIngested(kit, audit, objectBytesMax, token, request, body),
  };
}

/** What the PUT's pieces read of an Exchange, for one object of the stream. */
class IngestExchange {
  readonly audit: AuditContext = { action: 'putObject' };
  status = 0;
  readonly path: string;
  private readonly headers: Record<string, string>;

  constructor(
    token: string,
    readonly request: IngestPut,
    private readonly body: BodySource,
  ) {
    this.path = `/api/v1/buckets/${request.bucket}/objects/${request.key}`;
    this.headers = { authorization: `Bearer ${token}` };
    if (request.ifMatch !== undefined) this.headers['if-match'] = request.ifMatch;
    if (request.ifNoneMatch) this.headers['if-none-match'] = '*';
  }

  get requestId(): string {
    return this.request.requestId;
  }

  get remoteAddress(): string {
    return this.request.remoteAddress;
  }

  get aborted(): boolean {
    return this.body.aborted;
  }

  header(name: string): string | undefined {
    return this.headers[name];
  }

  /** An ingest object has no query string. */
  refuseUnclearQuery(): void {}

  onAbort(handler: () => void): void {
    this.body.onAbort(handler);
  }

  onBody(handler: (chunk: ArrayBuffer, isLast: boolean) => void): void {
    this.body.onBody(handler);
  }

  pauseReading(): void {
    this.body.pauseReading();
  }

  resumeReading(): void {
    this.body.resumeReading();
  }
}

/**
 * Writes one object of the stream as the native PUT handler does, checked in the same order;
 * resolves with the PUT's 200 body. A refusal is audited here (a commit carries its own row).
 */
export async function putIngested(
  kit: RouteKit,
  audit: AuditSink,
  objectBytesMax: number,
  token: string,
  request: IngestPut,
  body: BodySource,
): Promise<Record<string, unknown>> {
  const stand = new IngestExchange(token, request, body);
  const exchange = stand as unknown as Exchange;
  try {
    const principal = kit.bearer(exchange);
    stand.audit.resource = stand.path;
    validateObjectKey(request.key);
    authorize(principal, { verb: 'write', bucket: request.bucket, key: request.key });
    const bucket = kit.bucketOf(principal, request.bucket, { verb: 'write', key: request.key });
    if (request.size > objectBytesMax)
      throw PayloadTooLarge(`objects are limited to ${objectBytesMax} bytes`);
    validateUserMetadata(request.metadata);
    const contentType = validateContentType(
      request.contentType ?? 'application/octet-stream',
      'Content-Type',
    );
    const bound = {
      objectKey: request.key,
      expected: request.checksums,
      contentLength: request.size,
      metadata: request.metadata,
      contentType,
    };
    const idempotency = idempotencyOf(exchange, bound, request.idempotencyKey);
    const version = await storeObject(kit, exchange, {
      principal,
      bucket,
      key: request.key,
      contentLength: request.size,
      expected: request.checksums,
      metadata: request.metadata,
      contentType,
      idempotency,
    });
    stand.status = 200;
    // Read again: the versioning state may have changed while the body came in.
    const now = kit.services.store.getShared<BucketRecord>(
      DB.buckets,
      tenantChildKey(principal.tenant.id, request.bucket),
    );
    return objectJson(version, now);
  } catch (error) {
    stand.status = toProblem(error).status;
    audit.record(exchange);
    throw error;
  }
}
