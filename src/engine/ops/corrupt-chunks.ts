// Corrupt-chunk records: each chunk that a read or a scrub found damaged, kept in the index for
// the operator (the repair record of docs/errors.md, `corrupt_data`).
//
// Invariants:
// - One `meta` row per chunk, `corrupt-chunk\0 | u32be(tenantNum) | chunkId[32]`
//   (docs/on-disk-format.md §5): what was found (`reason`), where (`segmentId`, `offset`,
//   `length`), when (`firstSeenAt`, `lastSeenAt`, `seen` times), by what (`foundBy`: a read or a
//   scrub) and what was done (`action`). On one node nothing is moved or rewritten: a read
//   refuses the chunk (`corrupt_data`, never other bytes) and a scrub reports it; restoring the
//   object from a copy is the operator's, a cluster's repair the replicas'.
// - A report is checked against the chunk's entry: one whose place is no longer the entry's
//   (compaction moved the chunk since, or it is gone) is stale and records nothing.
// - At most CORRUPT_CHUNKS_MAX rows: past it a new chunk is not recorded (it is still logged,
//   and still refused); a chunk already recorded is updated.
//
// Persists: the rows described above.

import { Buffer } from 'node:buffer';
import { DB, chunkKey, type ChunkRecord } from '../index/schema.js';
import type { EngineContext } from './context.js';
import { BadRequest } from '../../util/errors.js';

export const CORRUPT_CHUNK_PREFIX = 'corrupt-chunk\0';
export const CORRUPT_CHUNKS_MAX = 10_000;
/** `reason` is cut to this many characters (a scrub's problem is a sentence). */
const REASON_CHARS_MAX = 200;
const LIST_MAX = 1000;

export type CorruptChunkFinder = 'read' | 'scrub';

export interface CorruptChunkRecord {
  tenantNum: number;
  /** The chunk id, 64 lowercase hex digits. */
  chunkId: string;
  segmentId: number;
  offset: number;
  length: number;
  /** `checksum` (damaged bytes), `authentication` (under no key of the tenant), or a scrub's. */
  reason: string;
  foundBy: CorruptChunkFinder;
  firstSeenAt: number;
  lastSeenAt: number;
  /** Reports of it so far. */
  seen: number;
  /** What was done: `read-refused` (a read failed, nothing sent) or `reported` (a scrub). */
  action: 'read-refused' | 'reported';
}

export interface CorruptChunkReport {
  tenantNum: number;
  chunkId: string;
  segmentId: number;
  offset: number;
  /** The record's length; a scrub's report leaves it to the chunk's entry. */
  length?: number;
  reason: string;
  foundBy: CorruptChunkFinder;
}

export function corruptChunkKey(tenantNum: number, chunkId: Buffer): Buffer {
  return Buffer.concat([Buffer.from(CORRUPT_CHUNK_PREFIX, 'utf8'), chunkKey(tenantNum, chunkId)]);
}

function validReport(args: unknown): CorruptChunkReport {
  const a = (args ?? {}) as Record<string, unknown>;
  const integer = (value: unknown): value is number =>
    typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
  if (
    !integer(a['tenantNum']) ||
    a['tenantNum'] > 0xffffffff ||
    typeof a['chunkId'] !== 'string' ||
    !/^[0-9a-f]{64}$/.test(a['chunkId']) ||
    !integer(a['segmentId']) ||
    !integer(a['offset']) ||
    (a['length'] !== undefined && !integer(a['length'])) ||
    typeof a['reason'] !== 'string' ||
    (a['foundBy'] !== 'read' && a['foundBy'] !== 'scrub')
  )
    throw BadRequest(
      'reportCorruptChunk takes {tenantNum, chunkId (64 hex digits), segmentId, offset, ' +
        'length?, reason, foundBy: read|scrub}',
    );
  return a as unknown as CorruptChunkReport;
}

/**
 * Records (or updates) the row of a chunk found corrupt; answers whether it did (a stale report,
 * or a new chunk past CORRUPT_CHUNKS_MAX, records nothing).
 */
export function reportCorruptChunk(
  context: EngineContext,
  args: CorruptChunkReport,
): { recorded: boolean } {
  const report = validReport(args);
  const { store } = context;
  const id = Buffer.from(report.chunkId, 'hex');
  const entry = store.peek<ChunkRecord>(DB.chunks, chunkKey(report.tenantNum, id));
  if (
    !entry ||
    entry.segmentId !== report.segmentId ||
    entry.offset !== report.offset ||
    (report.length !== undefined && entry.length !== report.length)
  )
    return { recorded: false };
  const key = corruptChunkKey(report.tenantNum, id);
  const now = context.now();
  const reason = report.reason.slice(0, REASON_CHARS_MAX);
  const known = store.get<CorruptChunkRecord>(DB.meta, key);
  if (known) {
    store.put(DB.meta, key, { ...known, reason, lastSeenAt: now, seen: known.seen + 1 });
    return { recorded: true };
  }
  if (countRows(context) >= CORRUPT_CHUNKS_MAX) return { recorded: false };
  const record: CorruptChunkRecord = {
    tenantNum: report.tenantNum,
    chunkId: report.chunkId,
    segmentId: report.segmentId,
    offset: report.offset,
    length: entry.length,
    reason,
    foundBy: report.foundBy,
    firstSeenAt: now,
    lastSeenAt: now,
    seen: 1,
    action: report.foundBy === 'read' ? 'read-refused' : 'reported',
  };
  store.put(DB.meta, key, record);
  return { recorded: true };
}

function prefixRange(tenantNum?: number): { start: Buffer; end: Buffer } {
  const prefix = Buffer.from(CORRUPT_CHUNK_PREFIX, 'utf8');
  const tenant = Buffer.alloc(tenantNum === undefined ? 0 : 4);
  if (tenantNum !== undefined) tenant.writeUInt32BE(tenantNum, 0);
  const start = Buffer.concat([prefix, tenant]);
  return { start, end: Buffer.concat([start, Buffer.alloc(37, 0xff)]) }; // past every chunk key
}

function countRows(context: Pick<EngineContext, 'store'>): number {
  let rows = 0;
  context.store.scanRaw(DB.meta, prefixRange(), () => {
    rows += 1;
    return rows < CORRUPT_CHUNKS_MAX;
  });
  return rows;
}

/**
 * The recorded corrupt chunks (of one tenant, by its number, when given), in key order, at most
 * `limit` (1000 at most). A read-only engine command (engine.ts `readOperations`).
 */
export function listCorruptChunks(
  context: Pick<EngineContext, 'store'>,
  args: { tenantNum?: number; limit?: number } | undefined,
): { chunks: CorruptChunkRecord[]; truncated: boolean } {
  const asked = args?.limit ?? LIST_MAX;
  const limit = Number.isSafeInteger(asked) ? Math.min(LIST_MAX, Math.max(1, asked)) : LIST_MAX;
  const tenantNum = args?.tenantNum;
  if (
    tenantNum !== undefined &&
    !(Number.isSafeInteger(tenantNum) && tenantNum >= 0 && tenantNum <= 0xffffffff)
  )
    throw BadRequest('listCorruptChunks takes {tenantNum?: an integer, limit?: 1..1000}');
  const chunks = [
    ...context.store.range<CorruptChunkRecord>(DB.meta, {
      ...prefixRange(tenantNum),
      limit: limit + 1,
    }),
  ].map((entry) => entry.value);
  return { chunks: chunks.slice(0, limit), truncated: chunks.length > limit };
}
