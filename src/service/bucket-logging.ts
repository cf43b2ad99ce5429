// S3 bucket logging: a source bucket's requests become server-access-log records, delivered as
// log objects into a target bucket. The rules of a configuration (which targets are allowed),
// the stream a record goes to, the log objects' keys and the deliverer.
//
// - A target must exist, be another bucket, not be logged itself, not encrypt by default with
//   SSE-KMS, and its policy must allow the logging service principal
//   (`logging.s3.amazonaws.com`) `s3:PutObject` on the target prefix with `aws:SourceArn` the
//   source bucket's ARN and `aws:SourceAccount` its tenant. The same check runs again at each
//   delivery: records of a source the target no longer allows are dropped, as AWS drops them.
//   The target may be another tenant's: its policy is then that tenant's consent.
// - Records are made where the audit row is (the S3 adapter renders them, http/audit.ts carries
//   them, the engine stores them with the row: engine/ops/access-log.ts). A stream is a target
//   bucket and key prefix; the sources that share one share its log objects.
// - The deliverer runs on each gateway's first listener. Every 100 ms it reads the streams from the read-only index; a stream whose oldest record is at least
//   `logging.flush_interval` old is delivered: up to 64 KiB of records (one inline chunk) as
//   one object, its commit removing exactly those records. Two deliverers racing for a batch
//   cannot both commit it (the engine compares the batch), so a record is delivered once.
//
// Persists: through the engine (`setBucketLogging`, `deliverAccessLog`).

import type { CommandArgs } from '../engine/commands.js';
import type { AuditInput } from '../engine/ops/audit.js';
import { randomBytes } from 'node:crypto';
import {
  DB,
  accessLogKey,
  type AccessLogRecord,
  type BucketLoggingRecord,
  type BucketRecord,
} from '../engine/index/schema.js';
import type { IndexStore } from '../engine/index/store.js';
import type { EngineClient } from '../engine/protocol.js';
import type { PutObjectArgs } from '../engine/ops/objects.js';
import { DELIVERY_RECORDS_MAX } from '../engine/ops/access-log.js';
import { evaluatePolicy, type StoredPolicy } from '../security/policy.js';
import { BadRequest, Forbidden, NotFound, errorCode } from '../util/errors.js';
import type { Logger } from '../util/log.js';
import type { Authenticator } from './auth.js';
import { bucketByName } from './bucket-access.js';
import type { RequestContext } from './context.js';
import type { ObjectService } from './objects.js';
import { INLINE_CHUNK_BYTES_MAX, storeWhole, type UploadServices } from './upload.js';

/** The service principal a delivery acts as, in target bucket policies. */
export const LOGGING_SERVICE = 'logging.s3.amazonaws.com';

/** A logging configuration as a client asks for it (engine/index/schema.ts keeps it). */
export type LoggingConfig = Omit<BucketLoggingRecord, 'updatedAt'>;

/** The failures of a delivery that retrying cannot cure (the target's), by error code. */
const UNDELIVERABLE: ReadonlySet<string> = new Set([
  'not_found',
  'forbidden',
  'quota_exceeded',
  'bad_request',
  'payload_too_large',
]);

/** Deliveries one pass makes at most; the rest wait for the next pass. */
const DELIVERIES_PER_PASS_MAX = 64;

/** True when `target`'s policy lets the logging service write `source`'s records there. */
export function deliveryAllowed(
  target: BucketRecord,
  source: { readonly bucket: string; readonly tenantId: string },
  prefix: string,
): boolean {
  const decision = evaluatePolicy(target.policy as StoredPolicy | undefined, {
    principal: undefined,
    service: LOGGING_SERVICE,
    action: 's3:PutObject',
    verb: 'write',
    bucket: target.name,
    key: prefix,
    conditionValue: (key) => {
      if (key === 'aws:sourcearn') return `arn:aws:s3:::${source.bucket}`;
      if (key === 'aws:sourceaccount') return source.tenantId;
      return undefined;
    },
  });
  return decision === 'allow';
}

/**
 * Refuses a target `source` may not log into: `not_found` (details.loggingTarget) for a missing
 * target, `bad_request` for an unfit one, `forbidden` when its policy does not allow delivery.
 */
export function checkLoggingTarget(
  store: IndexStore,
  source: BucketRecord,
  config: LoggingConfig,
): void {
  let target: BucketRecord;
  try {
    target = bucketByName(store, config.targetBucket).bucket;
  } catch {
    throw NotFound(`the logging target bucket ${config.targetBucket} does not exist`, {
      loggingTarget: config.targetBucket,
    });
  }
  if (target.name === source.name) throw BadRequest('a bucket cannot log into itself');
  if (target.logging !== undefined)
    throw BadRequest('the target bucket has bucket logging enabled itself');
  if (target.encryption?.algorithm === 'aws:kms')
    throw BadRequest('a target bucket with SSE-KMS default encryption is not supported');
  const from = { bucket: source.name, tenantId: source.tenantId };
  if (!deliveryAllowed(target, from, config.targetPrefix))
    throw Forbidden(
      `the policy of bucket ${target.name} does not allow ${LOGGING_SERVICE} to write there`,
    );
}

/** Sets (or, with `config` undefined, removes) `bucket`'s logging, after the target checks. */
export function putBucketLogging(
  objects: ObjectService,
  store: IndexStore,
  ctx: RequestContext,
  bucket: BucketRecord,
  config: LoggingConfig | undefined,
): Promise<BucketRecord> {
  const args: CommandArgs<'setBucketLogging'> = { tenantId: bucket.tenantId, bucket: bucket.name };
  if (config !== undefined) {
    checkLoggingTarget(store, bucket, config);
    args.logging = { ...config };
  }
  return objects.commit(ctx, 'setBucketLogging', args, 200);
}

/**
 * The stream a logged bucket's records go to: `target/mode/keyPrefix`, mode `s` (simple), `d`
 * or `e` (partitioned by delivery or event time); a partitioned key prefix already names the
 * source account, region and bucket.
 */
export function streamOf(
  bucket: BucketRecord,
  logging: BucketLoggingRecord,
  region: string,
): string {
  if (logging.keyFormat === 'simple') return `${logging.targetBucket}/s/${logging.targetPrefix}`;
  const mode = logging.dateSource === 'EventTime' ? 'e' : 'd';
  const partition = `${bucket.tenantId}/${region}/${bucket.name}/`;
  return `${logging.targetBucket}/${mode}/${logging.targetPrefix}${partition}`;
}

function parseStream(stream: string): { target: string; mode: string; prefix: string } {
  const slash = stream.indexOf('/');
  return {
    target: stream.slice(0, slash),
    mode: stream.slice(slash + 1, slash + 2),
    prefix: stream.slice(slash + 3),
  };
}

const pad = (n: number): string => String(n).padStart(2, '0');

/**
 * A log object's key: `[prefix][YYYY/MM/DD/]YYYY-MM-DD-hh-mm-ss-UNIQUE` (AWS's simple and
 * partitioned forms), in UTC; the partition date is `partitionTime`'s.
 */
export function logObjectKey(
  stream: string,
  deliveryTime: number,
  eventTime: number,
  unique: string,
): string {
  const { mode, prefix } = parseStream(stream);
  const at = new Date(deliveryTime);
  const stamp =
    `${at.getUTCFullYear()}-${pad(at.getUTCMonth() + 1)}-${pad(at.getUTCDate())}-` +
    `${pad(at.getUTCHours())}-${pad(at.getUTCMinutes())}-${pad(at.getUTCSeconds())}`;
  if (mode === 's') return `${prefix}${stamp}-${unique}`;
  const day = new Date(mode === 'e' ? eventTime : deliveryTime);
  const partition = `${day.getUTCFullYear()}/${pad(day.getUTCMonth() + 1)}/${pad(day.getUTCDate())}/`;
  return `${prefix}${partition}${stamp}-${unique}`;
}

export interface DeliveryDeps {
  readonly store: IndexStore;
  readonly engine: EngineClient;
  readonly auth: Authenticator;
  readonly upload: UploadServices;
  readonly log: Logger;
  /** `logging.flush_interval`: a stream is delivered once its oldest record is this old. */
  readonly flushMs: number;
  readonly now?: () => number;
}

/** A run of a stream's records read for one delivery. */
interface Batch {
  readonly keys: Buffer[];
  readonly records: AccessLogRecord[];
  /** False: the target no longer allows these records' source; they are dropped. */
  readonly allowed: boolean;
}

/** Delivers due access-log streams into their target buckets (see the header). */
export class AccessLogDelivery {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private readonly now: () => number;

  constructor(private readonly deps: DeliveryDeps) {
    this.now = deps.now ?? Date.now;
  }

  start(): this {
    // Often, so that a log object is there soon after its interval: a pass with nothing due is
    // one range read per stream.
    const interval = Math.max(20, Math.min(100, Math.floor(this.deps.flushMs / 10)));
    this.timer = setInterval(() => void this.pass(), interval);
    this.timer.unref();
    return this;
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /** One pass over the streams (at most one at a time); failures are logged, never thrown. */
  pass(): Promise<void> {
    this.running ??= this.deliverDue()
      .catch((error: unknown) => this.deps.log.warn({ err: error }, 'access-log delivery failed'))
      .finally(() => {
        this.running = undefined;
      });
    return this.running;
  }

  private async deliverDue(): Promise<void> {
    let deliveries = 0;
    let start: Buffer | undefined;
    for (;;) {
      const first = this.firstFrom(start);
      if (!first) return;
      const { stream } = first;
      start = accessLogKey(stream, Buffer.from([0xff]));
      let head: AccessLogRecord | undefined = first.record;
      while (head && this.now() - head.time >= this.deps.flushMs) {
        if (deliveries++ >= DELIVERIES_PER_PASS_MAX) return;
        if (!(await this.deliverOne(stream))) return;
        head = this.headOf(stream);
      }
    }
  }

  /** The oldest record of `stream`. */
  private headOf(stream: string): AccessLogRecord | undefined {
    const found = this.firstFrom(accessLogKey(stream, Buffer.alloc(0)));
    return found?.stream === stream ? found.record : undefined;
  }

  /** The first record at or after `start`, with its stream. */
  private firstFrom(
    start: Buffer | undefined,
  ): { stream: string; record: AccessLogRecord } | undefined {
    for (const { key, value } of this.deps.store.range<AccessLogRecord>(DB.accessLog, {
      ...(start ? { start } : {}),
      limit: 1,
    })) {
      const bytes = Buffer.from(key);
      const end = bytes.indexOf(0);
      return { stream: bytes.subarray(0, end).toString('utf8'), record: value };
    }
    return undefined;
  }

  /** Reads the next batch of `stream`: records of one verdict, at most one inline chunk. */
  private batchOf(stream: string, target: BucketRecord | undefined): Batch {
    const keys: Buffer[] = [];
    const records: AccessLogRecord[] = [];
    const verdicts = new Map<string, boolean>();
    let bytes = 0;
    let allowed: boolean | undefined;
    for (const { key, value } of this.deps.store.range<AccessLogRecord>(DB.accessLog, {
      start: accessLogKey(stream, Buffer.alloc(0)),
      end: accessLogKey(stream, Buffer.from([0xff])),
      limit: DELIVERY_RECORDS_MAX,
    })) {
      const source = `${value.sourceTenant}/${value.sourceBucket}`;
      let verdict = verdicts.get(source);
      if (verdict === undefined) {
        verdict =
          target !== undefined &&
          deliveryAllowed(
            target,
            { bucket: value.sourceBucket, tenantId: value.sourceTenant },
            targetPrefixOf(stream, value),
          );
        verdicts.set(source, verdict);
      }
      allowed ??= verdict;
      const size = Buffer.byteLength(value.line) + 1;
      if (verdict !== allowed || (records.length > 0 && bytes + size > INLINE_CHUNK_BYTES_MAX))
        break;
      bytes += size;
      keys.push(Buffer.from(key));
      records.push(value);
    }
    return { keys, records, allowed: allowed === true };
  }

  /** Delivers (or drops) one batch of `stream`; false when nothing could be done now. */
  private async deliverOne(stream: string): Promise<boolean> {
    const { store, engine, log } = this.deps;
    const { target: targetName } = parseStream(stream);
    let target: ReturnType<typeof bucketByName> | undefined;
    try {
      target = bucketByName(store, targetName);
    } catch {
      target = undefined;
    }
    const batch = this.batchOf(stream, target?.bucket);
    const first = batch.keys[0];
    const last = batch.keys.at(-1);
    if (!first || !last) return false;
    const args = {
      stream,
      first: first.toString('hex'),
      last: last.toString('hex'),
      count: batch.keys.length,
    };
    try {
      if (batch.allowed && target) {
        const put = await this.storeLogObject(stream, target, batch.records);
        try {
          await engine.call('deliverAccessLog', {
            ...args,
            put: put.args,
            audit: deliveryAudit(target.owner.id, `${targetName}/${put.args.key}`),
          });
        } finally {
          put.release();
        }
      } else {
        log.warn({ stream, records: batch.keys.length }, 'access-log records not deliverable');
        await engine.call('deliverAccessLog', args);
      }
      return true;
    } catch (error) {
      const code = errorCode(error) ?? 'internal';
      if (code === 'conflict') return true;
      // Anything but a target that cannot take the object is retried on a later pass.
      if (!UNDELIVERABLE.has(code)) {
        log.warn({ err: error, stream }, 'access-log delivery failed; retried');
        return false;
      }
      // A target gone, full or refusing: the records are dropped so the stream stays bounded.
      log.warn({ err: error, stream, records: batch.keys.length }, 'access-log records dropped');
      await engine.call('deliverAccessLog', args).catch(() => undefined);
      return true;
    }
  }

  /** Stores the records as one object's body; the `putObject` arguments of its commit. */
  private async storeLogObject(
    stream: string,
    target: ReturnType<typeof bucketByName>,
    records: readonly AccessLogRecord[],
  ): Promise<{ args: PutObjectArgs; release: () => void }> {
    const body = Buffer.from(records.map((record) => `${record.line}\n`).join(''), 'utf8');
    const received = await storeWhole(this.deps.upload, {
      bytes: body,
      keys: this.deps.auth.keysOf(target.owner),
      algs: ['CRC32C', 'MD5'],
    });
    const unique = randomBytes(8).toString('hex').toUpperCase();
    const key = logObjectKey(stream, this.now(), records[0]?.time ?? this.now(), unique);
    const args = {
      tenantId: target.owner.id,
      bucket: target.bucket.name,
      bucketId: target.bucket.id,
      key,
      size: body.length,
      etag: received.etag,
      contentType: 'text/plain',
      metadata: {},
      checksums: received.checksums,
      compressed: received.compressed,
      chunks: received.chunks,
    } as unknown as PutObjectArgs;
    return { args, release: () => received.release() };
  }
}

/** The target prefix of a record's stream: a partitioned one without `account/region/bucket/`. */
function targetPrefixOf(stream: string, record: AccessLogRecord): string {
  const { mode, prefix } = parseStream(stream);
  if (mode === 's') return prefix;
  let rest = prefix.slice(0, -1);
  rest = rest.slice(0, Math.max(0, rest.lastIndexOf('/')));
  rest = rest.slice(0, Math.max(0, rest.lastIndexOf('/')));
  return rest.endsWith(record.sourceTenant)
    ? rest.slice(0, rest.length - record.sourceTenant.length)
    : rest;
}

/** The audit row of a delivery: the logging service wrote a log object. */
function deliveryAudit(tenantId: string, resource: string): AuditInput {
  return {
    requestId: randomBytes(8).toString('hex'),
    actor: LOGGING_SERVICE,
    action: 'logging:DeliverAccessLog',
    resource,
    outcome: 'allowed',
    status: 200,
    remoteAddr: '-',
    tenantId,
  };
}
