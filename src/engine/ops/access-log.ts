// S3 bucket logging as the engine stores it: a source bucket's logging configuration, the
// access-log records waiting for delivery, and the delivery itself, which writes a log object
// and removes the records it holds in one transaction (so each record is delivered once, in
// order, and none is lost between the two).
//
// Records arrive with the audit rows they describe (`writeAudit` passes `accessLog` on): the
// row of a mutation commits with the mutation, the rows of reads in the listeners' batches. The
// deliverer (service/bucket-logging.ts) reads the records from its read-only view and sends
// `deliverAccessLog` with the first and last record's keys and their count; a batch another
// deliverer took first no longer matches and is refused, and that deliverer's stored chunks are
// left as garbage for compaction.
//
// Persists: BucketRecord.logging; `access-log` records (schema.ts accessLogKey).

import {
  DB,
  accessLogKey,
  tenantChildKey,
  type AccessLogRecord,
  type BucketLoggingRecord,
  type BucketRecord,
  type ObjectVersionRecord,
} from '../index/schema.js';
import type { EngineContext } from './context.js';
import { requireActiveTenant } from './control.js';
import { putObject, requireBucket, type PutObjectArgs } from './objects.js';
import { BadRequest, Conflict } from '../../util/errors.js';

/** A target prefix's UTF-8 bytes at most (it is part of every record's index key). */
export const LOG_PREFIX_BYTES_MAX = 512;
/** Characters of one record's line at most (its fields are bounded where they are made). */
const LINE_CHARS_MAX = 8192;
/** Records one delivery takes at most. */
export const DELIVERY_RECORDS_MAX = 4096;

/** What an audit row carries for bucket logging: the record and the stream it goes to. */
export interface AccessLogInput {
  readonly stream: string;
  readonly line: string;
  readonly sourceBucket: string;
  readonly sourceTenant: string;
}

/** Checks a logging configuration received over the engine's socket. */
export function checkLogging(value: unknown, now: number): BucketLoggingRecord {
  const config = (value ?? {}) as Record<string, unknown>;
  const { targetBucket, targetPrefix, keyFormat, dateSource } = config;
  if (typeof targetBucket !== 'string' || targetBucket.length === 0 || targetBucket.length > 63)
    throw BadRequest('the logging target bucket is a bucket name');
  if (typeof targetPrefix !== 'string' || Buffer.byteLength(targetPrefix) > LOG_PREFIX_BYTES_MAX)
    throw BadRequest(`the logging target prefix is at most ${LOG_PREFIX_BYTES_MAX} bytes`);
  if (targetPrefix.includes('\u0000')) throw BadRequest('the target prefix holds U+0000');
  if (keyFormat !== 'simple' && keyFormat !== 'partitioned')
    throw BadRequest('the log key format is simple or partitioned');
  const record: BucketLoggingRecord = { targetBucket, targetPrefix, keyFormat, updatedAt: now };
  if (keyFormat === 'partitioned') {
    if (dateSource !== 'EventTime' && dateSource !== 'DeliveryTime')
      throw BadRequest('the partition date source is EventTime or DeliveryTime');
    record.dateSource = dateSource;
  }
  return record;
}

function sameLogging(a: BucketLoggingRecord | undefined, b: BucketLoggingRecord): boolean {
  return (
    a !== undefined &&
    a.targetBucket === b.targetBucket &&
    a.targetPrefix === b.targetPrefix &&
    a.keyFormat === b.keyFormat &&
    a.dateSource === b.dateSource
  );
}

/**
 * Sets (or, with `logging` absent, removes) a bucket's logging configuration. The same
 * configuration again keeps its time (S3 answers the same Last-Modified).
 */
export function setBucketLogging(
  context: EngineContext,
  args: { tenantId: string; bucket: string; logging?: unknown },
): BucketRecord {
  requireActiveTenant(context, args.tenantId);
  const bucket = requireBucket(context, args.tenantId, args.bucket);
  if (args.logging === undefined || args.logging === null) delete bucket.logging;
  else {
    const logging = checkLogging(args.logging, context.now());
    if (!sameLogging(bucket.logging, logging)) bucket.logging = logging;
  }
  context.store.put(DB.buckets, tenantChildKey(args.tenantId, args.bucket), bucket);
  return bucket;
}

/** Stores the access-log record an audit row carries, under the row's own key. */
export function writeAccessLog(
  context: EngineContext,
  input: AccessLogInput,
  time: number,
  auditKeyBytes: Buffer,
): void {
  const { stream, line, sourceBucket, sourceTenant } = input;
  if (
    typeof stream !== 'string' ||
    stream.includes('\u0000') ||
    Buffer.byteLength(stream) > LOG_PREFIX_BYTES_MAX + 256 ||
    typeof line !== 'string' ||
    typeof sourceBucket !== 'string' ||
    typeof sourceTenant !== 'string'
  )
    return;
  const record: AccessLogRecord = {
    line: line.length > LINE_CHARS_MAX ? line.slice(0, LINE_CHARS_MAX) : line,
    sourceBucket,
    sourceTenant,
    time,
  };
  context.store.put(DB.accessLog, accessLogKey(stream, auditKeyBytes), record);
}

/** The keys of the records of `stream` from `first` to `last` (hex), both included. */
function batchKeys(context: EngineContext, args: DeliveryArgs): Buffer[] {
  const start = Buffer.from(args.first, 'hex');
  const last = Buffer.from(args.last, 'hex');
  const prefix = accessLogKey(args.stream, Buffer.alloc(0));
  if (!start.subarray(0, prefix.length).equals(prefix) || Buffer.compare(start, last) > 0)
    throw BadRequest('the delivery names records of another stream');
  const keys: Buffer[] = [];
  for (const { key } of context.store.range(DB.accessLog, {
    start,
    end: Buffer.concat([last, Buffer.from([0])]),
    limit: DELIVERY_RECORDS_MAX + 1,
  }))
    keys.push(Buffer.from(key));
  return keys;
}

interface DeliveryArgs {
  readonly stream: string;
  /** The first and last record's keys, in hex. */
  readonly first: string;
  readonly last: string;
  readonly count: number;
  /** The log object; absent: the records are dropped (their delivery was refused). */
  readonly put?: PutObjectArgs;
}

/**
 * Delivers a batch of a stream's records: the log object commits and the records go, or
 * nothing happens (`conflict` when the batch is no longer what the deliverer read).
 */
export function deliverAccessLog(
  context: EngineContext,
  args: DeliveryArgs,
): ObjectVersionRecord | null {
  const keys = batchKeys(context, args);
  if (keys.length !== args.count || keys[0]?.toString('hex') !== args.first)
    throw Conflict('the access-log records were delivered by another deliverer');
  const version = args.put ? putObject(context, args.put) : null;
  for (const key of keys) context.store.remove(DB.accessLog, key);
  return version;
}
