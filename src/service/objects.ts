// Object writes: put (a write request and a body source) and delete, and the audited commit
// every mutation goes through. Every transport's object write is this one path, so each is
// quota-checked, idempotent, checksum-verified, conditional and audited alike.

import assert from 'node:assert';
import type { EngineClient } from '../engine/protocol.js';
import type {
  CommandArgs,
  CommandExtras,
  CommandResult,
  TransactionalName,
} from '../engine/commands.js';
import type { IndexStore } from '../engine/index/store.js';
import type { BucketRecord, ObjectVersionRecord } from '../engine/index/schema.js';
import { checkPutQuotaIn } from '../engine/ops/objects.js';
import type { HeldKey } from '../engine/ops/idempotency.js';
import type { ChecksumAlg, DigestAlg } from '../engine/checksums.js';
import { auditRowOf, type AuditedRequest } from '../http/audit.js';
import { ChecksumMismatch } from '../util/errors.js';
import type { Authenticator } from './auth.js';
import type { BodySource } from './body.js';
import type { RequestContext } from './context.js';
import { ReplayBody, type IdempotencyClaim } from './idempotency.js';
import { parseHttpDate } from './read.js';
import { sealedUpload, type CustomerKey } from './customer-key.js';
import { PutGroup, type GroupSink } from './put-group.js';
import { addNewVersionAttributes, type NewVersionAttributes } from './object-lock.js';
import {
  Divert,
  receiveBody,
  storeWhole,
  storeWholeBatch,
  type ReceivedBody,
  type UploadServices,
  type WholeInput,
} from './upload.js';
import { Failed } from '../workers/chunk-store.js';

/** The preconditions of a write, as the client sent them (absent: not sent). */
export interface WriteConditions {
  readonly ifMatch?: string | undefined;
  readonly ifNoneMatch?: string | undefined;
  /** An HTTP-date; one that is not is ignored, as on a read (RFC 9110 §13.1.4). */
  readonly ifUnmodifiedSince?: string | undefined;
}

/** A write's own preconditions, as a write command takes them (engine ops). */
export interface ConditionArgs {
  ifMatch?: string;
  ifNoneMatch?: string;
  ifUnmodifiedSince?: number;
}

/** A copy's destination's preconditions, as `copyObject` takes them. */
export interface DestinationConditionArgs {
  destinationIfMatch?: string;
  destinationIfNoneMatch?: string;
  destinationIfUnmodifiedSince?: number;
}

/**
 * Adds to `args` the preconditions of a write (PUT, DELETE, a multipart completion), for the
 * engine to check in the transaction that writes (`checkWriteConditions`). If-Modified-Since
 * applies to reads only.
 */
export function addWriteConditions(conditions: WriteConditions, args: ConditionArgs): void {
  if (conditions.ifMatch !== undefined) args.ifMatch = conditions.ifMatch;
  if (conditions.ifNoneMatch !== undefined) args.ifNoneMatch = conditions.ifNoneMatch;
  const date = unmodifiedSince(conditions);
  if (date !== undefined) args.ifUnmodifiedSince = date;
}

/** `addWriteConditions` of a copy's destination (its own names in `copyObject`). */
export function addDestinationConditions(
  conditions: WriteConditions,
  args: DestinationConditionArgs,
): void {
  if (conditions.ifMatch !== undefined) args.destinationIfMatch = conditions.ifMatch;
  if (conditions.ifNoneMatch !== undefined) args.destinationIfNoneMatch = conditions.ifNoneMatch;
  const date = unmodifiedSince(conditions);
  if (date !== undefined) args.destinationIfUnmodifiedSince = date;
}

/** If-Unmodified-Since as epoch milliseconds; absent, or not an HTTP-date: undefined. */
function unmodifiedSince(conditions: WriteConditions): number | undefined {
  if (conditions.ifUnmodifiedSince === undefined) return undefined;
  const date = parseHttpDate(conditions.ifUnmodifiedSince);
  return Number.isNaN(date) ? undefined : date;
}

/** A PUT of a whole object, parsed and checked by its transport. */
export interface PutRequest {
  /** The bucket, as `Access.bucket` resolved it for a write of `key`. */
  readonly bucket: BucketRecord;
  readonly key: string;
  readonly contentLength: number;
  /** The digests the client declared; the body must match each. */
  readonly expected: Map<ChecksumAlg, Buffer>;
  readonly metadata: Record<string, string>;
  readonly contentType: string;
  readonly idempotency: IdempotencyClaim | undefined;
  readonly conditions: WriteConditions;
  /** Digests to compute beside the checksums (MD5: the body's ETag is then its hex MD5). */
  readonly digests?: readonly DigestAlg[];
  /** The transport's own checks of what was received (Content-MD5), before the commit. */
  readonly check?: (received: ReceivedBody) => void;
  /** Representation headers the version keeps (S3's; ObjectVersionRecord.headers). */
  readonly headers?: Readonly<Record<string, string>>;
  /** The new version's lock and tags (object-lock.ts). */
  readonly attributes?: NewVersionAttributes | undefined;
  /** SSE-C: the body is stored under this customer key (customer-key.ts). */
  readonly customerKey?: CustomerKey | undefined;
}

export interface DeleteRequest {
  readonly bucket: BucketRecord;
  readonly key: string;
  readonly versionId: string | null;
  readonly conditions: WriteConditions;
  /** GOVERNANCE retention is bypassed (decided by object-lock.ts `governanceBypass`). */
  readonly bypassGovernance?: boolean;
}

export interface DeleteResult {
  readonly versionId?: string;
  readonly deleteMarker?: boolean;
}

export interface ObjectServiceDeps {
  readonly store: IndexStore;
  readonly engine: EngineClient;
  readonly auth: Authenticator;
  readonly upload: UploadServices;
}

/** The `putObject` command's arguments for a received body (the idempotency key apart). */
function putArgsOf(
  tenantId: string,
  input: PutRequest,
  received: ReceivedBody,
): CommandArgs<'putObject'> {
  // Named field by field: a spread here sent V8 to its runtime for a new hidden class on every
  // PUT (3% of the gateway's thread under 4 KiB PUTs).
  const args: CommandArgs<'putObject'> = {
    tenantId,
    bucket: input.bucket.name,
    bucketId: input.bucket.id,
    key: input.key,
    size: input.contentLength,
    etag: received.etag,
    contentType: input.contentType,
    metadata: input.metadata,
    checksums: received.checksums,
    compressed: received.compressed,
    chunks: received.chunks,
  };
  if (input.headers !== undefined && Object.keys(input.headers).length > 0)
    args.headers = input.headers;
  addNewVersionAttributes(input.attributes, args);
  addWriteConditions(input.conditions, args);
  return args;
}

/** The arguments of a bucket-configuration command besides `{tenantId, bucket}`. */
type BucketChangeFields<K extends TransactionalName> = Omit<
  CommandArgs<K>,
  'tenantId' | 'bucket' | keyof CommandExtras
>;

/**
 * A change of a bucket's configuration (`{tenantId, bucket, ...fields}` for command `op`), sent
 * with its audit row by `objects.commit`.
 */
export function commitBucketChange<K extends TransactionalName>(
  objects: Pick<ObjectService, 'commit'>,
  ctx: RequestContext,
  bucket: BucketRecord,
  op: K,
  fields: BucketChangeFields<K>,
  status: number,
): Promise<CommandResult<K>> {
  const args = { tenantId: ctx.principal.tenant.id, bucket: bucket.name, ...fields };
  return objects.commit(ctx, op, args, status);
}

export class ObjectService {
  /** Object commits, sent to the engine a turn's worth at a time. */
  private readonly group: PutGroup;

  constructor(private readonly deps: ObjectServiceDeps) {
    this.group = new PutGroup(deps.engine);
  }

  /**
   * Sends a mutation with its audit row, which then commits in the same transaction. Adds to
   * `args` (built for this call) the row and the caller: the access key the request was
   * authenticated with (what the row names as its actor), whose state the engine checks again
   * when the write commits, so that a revoke or a tenant disable stops writes in flight.
   */
  async commit<K extends TransactionalName>(
    request: AuditedRequest,
    op: K,
    args: CommandArgs<K>,
    status: number,
  ): Promise<CommandResult<K>> {
    const extras: CommandExtras = args;
    if (request.audit.actor !== undefined) extras.caller = request.audit.actor;
    extras.audit = auditRowOf(request, status);
    const result = await this.deps.engine.call(op, args);
    request.audit.written = true;
    return result;
  }

  /**
   * `commit` of a `putObject`, sent with the other object commits of this turn as one
   * `putObjects` command (put-group.ts): the same caller check and audit row, the same answer.
   */
  private async commitPut(
    request: AuditedRequest,
    args: CommandArgs<'putObject'>,
  ): Promise<ObjectVersionRecord> {
    if (request.audit.actor !== undefined) args.caller = request.audit.actor;
    args.audit = auditRowOf(request, 200);
    const version = await this.group.commit(args);
    request.audit.written = true;
    return version;
  }

  /**
   * The one object-write path: check the quota before a byte is read, claim the idempotency key
   * (the body waits, paused, until the claim is decided), receive and store the body, verify the
   * client's checksums, commit the manifest with the conditions. Attaches to the body source at
   * once, so it must be called before the operation's first await.
   *
   * With an idempotency key the quota is checked only once the claim is new: the retry of a
   * write that filled the quota replays its first result, as the retry of any write does.
   */
  async putObject(
    ctx: RequestContext,
    input: PutRequest,
    source: BodySource | Buffer,
  ): Promise<ObjectVersionRecord> {
    if (Buffer.isBuffer(source)) return this.putWhole(ctx, input, source);
    const { engine, auth } = this.deps;
    const { idempotency, expected } = input;
    const target = { tenantId: ctx.principal.tenant.id, bucket: input.bucket.name };
    const checkQuota = (): void =>
      checkPutQuotaIn(this.deps.store, {
        tenantId: target.tenantId,
        bucket: input.bucket,
        key: input.key,
        size: input.contentLength,
      });
    if (!idempotency) checkQuota();
    // A replay stores nothing: its body is diverted to a check against the declared digests,
    // and the first request's result is the answer.
    let replay: { result: ObjectVersionRecord; body: ReplayBody } | undefined;
    /** The key as this request holds it once begun: with the claim id its commit must carry. */
    let held: HeldKey | undefined;
    const gate = idempotency
      ? engine
          .call('beginIdempotent', {
            ...target,
            ...idempotency,
            ownerPid: process.pid,
          })
          .then(async (begun) => {
            if (!('replay' in begun)) {
              held = { ...idempotency, claim: begun.claim };
              checkQuota();
              return;
            }
            replay = { result: begun.replay, body: await ReplayBody.of(expected) };
            // eslint-disable-next-line @typescript-eslint/only-throw-error -- caught below
            throw new Divert(replay.body);
          })
      : undefined;
    const algs: DigestAlg[] = [
      ...new Set<DigestAlg>(['CRC32C', ...expected.keys(), ...(input.digests ?? [])]),
    ];
    const sealed =
      input.customerKey === undefined
        ? undefined
        : sealedUpload(source, input.customerKey, input.contentLength, algs);
    const body = receiveBody(this.deps.upload, {
      source: sealed?.source ?? source,
      keys: auth.keysOf(ctx.principal.tenant),
      contentLength: input.contentLength,
      algs,
      ...(gate ? { gate } : {}),
    });
    let received: ReceivedBody | undefined;
    try {
      received = await body;
      if (sealed) received = await sealed.plaintext(received);
      for (const [alg, digest] of expected) {
        if (received.checksums[alg] !== digest.toString('base64'))
          throw ChecksumMismatch(`the body does not match its ${alg} checksum`);
      }
      input.check?.(received);
      const args = putArgsOf(target.tenantId, input, received);
      if (sealed) args.sseCustomer = sealed.record;
      if (idempotency) args.idempotency = held ?? idempotency;
      return await this.commitPut(ctx, args);
    } catch (error) {
      if (error instanceof Divert && replay) {
        await replay.body.checked;
        return replay.result;
      }
      // Only a request that began the key frees it (a replay or a refused begin holds none),
      // and only while its claim is current: the engine checks the claim id. Freed before the
      // failure is answered: a retry sent at once may reach the engine through another
      // listener's connection, ahead of a free still waiting to be sent (409 or 422 instead of
      // a new try).
      if (held)
        await engine.call('abandonIdempotent', { ...target, ...held }).catch(() => undefined);
      throw error;
    } finally {
      received?.release();
    }
  }

  /**
   * `putObject` of a body already whole in memory, of at most one inline chunk (the ingest
   * stream's small objects): stored at once, then one engine command, whose transaction also
   * decides the idempotency key (`replayInCommit`) instead of a `beginIdempotent` before the
   * body. The same rules in the same order as a streamed body: a replay answers the first
   * result (its body, matching the declared digests, is the first one) and, as there, skips
   * the quota, which the commit checks for a new key.
   */
  private async putWhole(
    ctx: RequestContext,
    input: PutRequest,
    bytes: Buffer,
  ): Promise<ObjectVersionRecord> {
    assert(bytes.length === input.contentLength, 'a whole body is its declared length');
    assert(input.customerKey === undefined, 'an SSE-C body is streamed (putObject)');
    const { idempotency, expected } = input;
    const tenantId = ctx.principal.tenant.id;
    if (!idempotency)
      checkPutQuotaIn(this.deps.store, {
        tenantId,
        bucket: input.bucket,
        key: input.key,
        size: input.contentLength,
      });
    const algs: DigestAlg[] = [
      ...new Set<DigestAlg>(['CRC32C', ...expected.keys(), ...(input.digests ?? [])]),
    ];
    const received = await storeWhole(this.deps.upload, {
      bytes,
      keys: this.deps.auth.keysOf(ctx.principal.tenant),
      algs,
    });
    try {
      for (const [alg, digest] of expected) {
        if (received.checksums[alg] !== digest.toString('base64'))
          throw ChecksumMismatch(`the body does not match its ${alg} checksum`);
      }
      input.check?.(received);
      const args = putArgsOf(tenantId, input, received);
      if (idempotency) args.idempotency = { ...idempotency, inCommit: true };
      return await this.commitPut(ctx, args);
    } finally {
      received.release();
    }
  }

  /**
   * `putObject` of many bodies whole in memory at once (an ingest stream's small objects of one
   * turn), each answered on its own through `answer`, exactly as its own `putObject` would be:
   * the same checks in the same order, its own audit row and idempotency key, its own refusal.
   * What is shared is the work around them: the bodies stored in one pass with one wait for
   * their records, the commits sent in the turn's one `putObjects` group, one object (not a
   * promise chain) following them all.
   */
  putWholeBatch(items: readonly WholePut[], answer: BatchAnswer): void {
    new WholeBatch(this.deps, this.group, items, answer).run();
  }

  /** Deletes a key (a delete marker where versioned) or one version of it. */
  deleteObject(ctx: RequestContext, input: DeleteRequest, status: number): Promise<DeleteResult> {
    const args: CommandArgs<'deleteObject'> = {
      tenantId: ctx.principal.tenant.id,
      bucket: input.bucket.name,
      key: input.key,
    };
    if (input.versionId !== null) args.versionId = input.versionId;
    if (input.bypassGovernance === true) args.bypassGovernance = true;
    addWriteConditions(input.conditions, args);
    return this.commit(ctx, 'deleteObject', args, status);
  }
}

/** One object of `ObjectService.putWholeBatch`. */
export interface WholePut {
  readonly ctx: RequestContext;
  readonly input: PutRequest;
  /** The whole body, at most one inline chunk, not changed until the object is answered. */
  readonly bytes: Buffer;
}

/**
 * Where `putWholeBatch` answers object `index`: its committed version, or `undefined` and the
 * refusal. Called once per object; must not throw.
 */
export type BatchAnswer = (
  index: number,
  version: ObjectVersionRecord | undefined,
  error?: unknown,
) => void;

/** The digests of a write: CRC32C (every object's), the declared ones, the transport's. */
function digestAlgsOf(input: PutRequest): DigestAlg[] {
  const { expected, digests } = input;
  // The common case without a Set and two spreads: nothing declared but CRC32C.
  if ((digests === undefined || digests.length === 0) && expected.size <= 1) {
    const declared = expected.keys().next().value;
    if (declared === undefined || declared === 'CRC32C') return CRC32C_ONLY;
  }
  return [...new Set<DigestAlg>(['CRC32C', ...expected.keys(), ...(digests ?? [])])];
}
const CRC32C_ONLY: DigestAlg[] = ['CRC32C'];

/** One `putWholeBatch`: its objects' state from the store of their bodies to their answers. */
class WholeBatch implements GroupSink {
  private readonly received: Array<ReceivedBody | undefined>;
  private readonly answered: Uint8Array;

  constructor(
    private readonly deps: ObjectServiceDeps,
    private readonly group: PutGroup,
    private readonly items: readonly WholePut[],
    private readonly answer: BatchAnswer,
  ) {
    this.received = new Array<ReceivedBody | undefined>(items.length);
    this.answered = new Uint8Array(items.length);
  }

  run(): void {
    this.store().catch((error: unknown) => {
      for (let i = 0; i < this.items.length; i += 1)
        if (this.answered[i] === 0) this.settle(i, undefined, error);
    });
  }

  /** Checks each object as `putWhole` does before its body is stored, then stores them all. */
  private async store(): Promise<void> {
    const { items } = this;
    const inputs: WholeInput[] = [];
    const at: number[] = [];
    for (let i = 0; i < items.length; i += 1) {
      const { ctx, input, bytes } = items[i] as WholePut;
      try {
        assert(bytes.length === input.contentLength, 'a whole body is its declared length');
        assert(input.customerKey === undefined, 'an SSE-C body is streamed (putObject)');
        if (!input.idempotency)
          checkPutQuotaIn(this.deps.store, {
            tenantId: ctx.principal.tenant.id,
            bucket: input.bucket,
            key: input.key,
            size: input.contentLength,
          });
        inputs.push({
          bytes,
          keys: this.deps.auth.keysOf(ctx.principal.tenant),
          algs: digestAlgsOf(input),
        });
        at.push(i);
      } catch (error) {
        this.settle(i, undefined, error);
      }
    }
    const stored = await storeWholeBatch(this.deps.upload, inputs);
    for (let n = 0; n < stored.length; n += 1) this.commit(at[n] as number, stored[n]);
  }

  /** Verifies object `i`'s stored body and hands its commit to the turn's group. */
  private commit(i: number, stored: ReceivedBody | Failed | undefined): void {
    if (stored instanceof Failed || stored === undefined) {
      this.settle(i, undefined, stored?.error);
      return;
    }
    this.received[i] = stored;
    const { ctx, input } = this.items[i] as WholePut;
    try {
      for (const [alg, digest] of input.expected) {
        if (stored.checksums[alg] !== digest.toString('base64'))
          throw ChecksumMismatch(`the body does not match its ${alg} checksum`);
      }
      input.check?.(stored);
      const args = putArgsOf(ctx.principal.tenant.id, input, stored);
      if (input.idempotency) args.idempotency = { ...input.idempotency, inCommit: true };
      if (ctx.audit.actor !== undefined) args.caller = ctx.audit.actor;
      args.audit = auditRowOf(ctx, 200);
      this.group.add(args, this, i);
    } catch (error) {
      this.settle(i, undefined, error);
    }
  }

  /** Object `index` is answered: its segment is let go, and a commit marks its audit row. */
  settle(index: number, version: ObjectVersionRecord | undefined, error?: unknown): void {
    if (this.answered[index] !== 0) return;
    this.answered[index] = 1;
    const received = this.received[index];
    if (received) {
      this.received[index] = undefined;
      received.release();
    }
    if (version !== undefined) (this.items[index] as WholePut).ctx.audit.written = true;
    this.answer(index, version, error);
  }
}
