// The domain side of the binary ingest transport (src/ingest/server.ts): a bearer token, a
// bucket and each object go through what the native API's PUT does: the same authentication,
// the same authorization (service/access.ts: scopes and bucket policy), the same checks of the
// key, content type, metadata and idempotency key, and the service's one object-write path
// (`ObjectService.putObject`: quota, idempotency, the upload pipeline, checksums, the audited
// commit with its conditions and object lock). An object written over the stream is one written
// by a PUT; its refusal is the PUT's refusal.

import type { AuditContext, Exchange } from '../http/exchange.js';
import { toProblem } from '../http/error-answer.js';
import type { AuditSink } from '../http/audit.js';
import type { IngestAnswer, IngestBackend, IngestCaller, IngestPut } from '../ingest/server.js';
import type { BodySource } from '../service/body.js';
import { contextOf } from '../service/context.js';
import { idempotencyOf } from '../service/idempotency.js';
import { verifyNativeToken } from '../security/native-token.js';
import { PURPOSE_NATIVE_TOKEN } from '../security/keys.js';
import { validateContentType, validateObjectKey, validateUserMetadata } from '../security/names.js';
import { PayloadTooLarge } from '../util/errors.js';
import { INLINE_CHUNK_BYTES_MAX } from '../service/upload.js';
import type { Principal } from '../service/auth.js';
import type { BatchAccess } from '../service/access.js';
import type { PutRequest, WholePut } from '../service/objects.js';
import type { BucketRecord, ObjectVersionRecord } from '../engine/index/schema.js';
import { objectJson, routeKit, type GatewayServices, type RouteKit } from '../native/routes.js';

/** The ingest backend of one listener. */
export function ingestBackend(services: GatewayServices, audit: AuditSink): IngestBackend {
  const kit = routeKit(services);
  const { auth, store, settings } = services;
  const tokenKey = auth.purposeKey(PURPOSE_NATIVE_TOKEN);
  const objectBytesMax = settings.bytes('limits.object_bytes_max');
  return {
    objectBytesMax,
    wholeBytesMax: INLINE_CHUNK_BYTES_MAX,
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
      kit.access.tenant(principal, 'write', bucket);
      kit.access.existing(principal, bucket);
    },
    put: (token, request, body) => putIngested(kit, audit, objectBytesMax, token, request, body),
    putBatch: (token, requests, bodies, answer) =>
      new IngestBatch(kit, audit, objectBytesMax, token, requests, bodies, answer).run(),
  };
}

/**
 * The principal of each token, authenticated once per turn of the event loop for all the objects
 * that arrived in it (a batch of a stream's small objects), after a snapshot renewed once for
 * them: read-your-writes, as the native API's bearer check, since a commit acknowledged before
 * the turn is in that snapshot. A key revoked or a tenant disabled later in the turn still stops
 * each write where it commits (the engine checks the caller again).
 */
class TurnPrincipals {
  private readonly byToken = new Map<
    string,
    { principal: Principal; actor: string | undefined; tenantId: string | undefined }
  >();
  private scheduled = false;

  of(kit: RouteKit, token: string, audit: AuditContext): Principal {
    const known = this.byToken.get(token);
    if (known) {
      if (known.actor !== undefined) audit.actor = known.actor;
      if (known.tenantId !== undefined) audit.tenantId = known.tenantId;
      return known.principal;
    }
    if (!this.scheduled) {
      this.scheduled = true;
      kit.services.store.refresh();
      setImmediate(() => {
        this.scheduled = false;
        this.byToken.clear();
      });
    }
    const principal = kit.services.auth.authenticate(`Bearer ${token}`, audit);
    this.byToken.set(token, { principal, actor: audit.actor, tenantId: audit.tenantId });
    return principal;
  }
}

const turnPrincipals = new TurnPrincipals();

/** One object's request as the audit row and the service's request context see it. */
class IngestRequest {
  readonly audit: AuditContext = { action: 'putObject' };
  status = 0;
  readonly path: string;
  readonly requestId: string;
  readonly remoteAddress: string;

  constructor(request: IngestPut) {
    this.path = `/api/v1/buckets/${request.bucket}/objects/${request.key}`;
    this.requestId = request.requestId;
    this.remoteAddress = request.remoteAddress;
  }
}

/** The request headers `idempotencyOf` reads: none (one object for every object). */
const NO_HEADERS = { header: () => undefined } as unknown as Exchange;

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
  body: BodySource | Buffer,
): Promise<Record<string, unknown>> {
  const audited = new IngestRequest(request);
  try {
    const principal = turnPrincipals.of(kit, token, audited.audit);
    const write = checkedPut(kit.access, objectBytesMax, principal, audited, request);
    const version = await kit.objects.putObject(contextOf(audited, principal), write, body);
    audited.status = 200;
    // Read again: the versioning state may have changed while the body came in.
    return objectJson(version, kit.access.current(principal, request.bucket));
  } catch (error) {
    audited.status = toProblem(error).status;
    audit.record(audited as unknown as Exchange);
    throw error;
  }
}

/**
 * What the native PUT handler checks of one object before its body, in the same order (the
 * bucket through `access`: the scope, the bucket, its policy); answers the service's request.
 */
function checkedPut(
  access: Pick<BatchAccess, 'bucket'>,
  objectBytesMax: number,
  principal: Principal,
  audited: IngestRequest,
  request: IngestPut,
): PutRequest {
  audited.audit.resource = audited.path;
  validateObjectKey(request.key);
  const bucket = access.bucket(principal, request.bucket, { verb: 'write', key: request.key });
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
  // The key comes from the frame, not from a header.
  const idempotency = idempotencyOf(NO_HEADERS, bound, request.idempotencyKey);
  return {
    bucket,
    key: request.key,
    contentLength: request.size,
    expected: request.checksums,
    metadata: request.metadata,
    contentType,
    idempotency,
    conditions: {
      ifMatch: request.ifMatch,
      ifNoneMatch: request.ifNoneMatch ? '*' : undefined,
    },
  };
}

/**
 * The whole small objects of one turn of a stream (`IngestBackend.putBatch`): each checked as
 * `putIngested` checks it, written by the service's `putWholeBatch`, answered and (refused)
 * audited on its own. Shared: the principal, each bucket's record, and after the commits each
 * bucket's versioning state for the answers.
 */
class IngestBatch {
  private readonly audited: IngestRequest[] = [];
  private readonly principals: Principal[] = [];
  /** Batch index of each object handed to the service, by its index there. */
  private readonly at: number[] = [];
  /** The buckets as they are once the commits are answered (for the answers' version ids). */
  private readonly after = new Map<string, BucketRecord | undefined>();

  constructor(
    private readonly kit: RouteKit,
    private readonly audit: AuditSink,
    private readonly objectBytesMax: number,
    private readonly token: string,
    private readonly requests: readonly IngestPut[],
    private readonly bodies: readonly Buffer[],
    private readonly answer: IngestAnswer,
  ) {}

  run(): void {
    const { kit, requests } = this;
    const access = kit.access.batch();
    const writes: WholePut[] = [];
    for (let i = 0; i < requests.length; i += 1) {
      const request = requests[i] as IngestPut;
      const audited = new IngestRequest(request);
      this.audited.push(audited);
      try {
        const principal = turnPrincipals.of(kit, this.token, audited.audit);
        this.principals[i] = principal;
        const input = checkedPut(access, this.objectBytesMax, principal, audited, request);
        writes.push({ ctx: contextOf(audited, principal), input, bytes: this.bodies[i] as Buffer });
        this.at.push(i);
      } catch (error) {
        this.refused(i, error);
      }
    }
    if (writes.length > 0) kit.objects.putWholeBatch(writes, this.settled);
  }

  private readonly settled = (
    n: number,
    version: ObjectVersionRecord | undefined,
    error?: unknown,
  ): void => {
    const i = this.at[n] as number;
    if (version === undefined) {
      this.refused(i, error);
      return;
    }
    const audited = this.audited[i] as IngestRequest;
    audited.status = 200;
    const name = (this.requests[i] as IngestPut).bucket;
    let bucket = this.after.get(name);
    if (bucket === undefined && !this.after.has(name)) {
      bucket = this.kit.access.current(this.principals[i] as Principal, name);
      this.after.set(name, bucket);
    }
    this.answer(i, objectJson(version, bucket));
  };

  private refused(i: number, error: unknown): void {
    const audited = this.audited[i] as IngestRequest;
    audited.status = toProblem(error).status;
    this.audit.record(audited as unknown as Exchange);
    this.answer(i, undefined, error);
  }
}
