// Scrub of a tenant's (or one bucket's) chunks: the single-node form of the admin API's
// checksum-verified rebalance. A read-only engine command (engine.ts `readOperations`): it runs
// outside every write transaction, awaits segment reads, and never writes.
//
// For every chunk reference of every version it checks, in order: the chunk record exists; its
// segment can be read at the recorded offset and length; the record header decodes and its
// header CRC holds; the header is a chunk record of this tenant with this chunk id and length;
// the header's payload checksum equals the one kept in the index (a misdirected or stale write
// would differ); and the CRC32C of the payload matches. A record that fails is reported, never
// changed (quarantine and repair from a replica belong to the cluster issue).
//
// Each call does a bounded amount of work and returns a cursor to continue from, so one call
// never holds the engine's attention for long; the admin process calls until the cursor is gone.
// Chunks shared by several versions are verified once per call.
//
// Persists: nothing.

import {
  DB,
  tenantChildKey,
  tenantChildRange,
  bucketKeyPrefix,
  chunkKey,
  type BucketRecord,
  type ObjectVersionRecord,
  type ChunkRecord,
} from '../index/schema.js';
import type { EngineContext } from './context.js';
import type { IndexStore } from '../index/store.js';
import { requireTenant } from './control.js';
import { unpackChunkRefs } from './objects.js';
import { dataDirPaths } from '../data-dir.js';
import { SegmentReader } from '../segments/segment-reader.js';
import {
  decodeRecordHeader,
  verifyPayload,
  RECORD_HEADER_SIZE,
  RECORD_KIND_CHUNK,
} from '../../format/record-frame.js';
import { NotFound, errorCode } from '../../util/errors.js';

/** Chunk references looked at per call. */
export const SCRUB_REFS_PER_CALL = 4096;
/** Segment bytes read per call. */
export const SCRUB_BYTES_PER_CALL = 256 * 1024 * 1024;
/** Corrupt chunks listed per call (all are counted). */
export const SCRUB_CORRUPT_LISTED_MAX = 100;
const VERSIONS_PER_PAGE = 256;

/** Where the next call starts: the version (by its index key, hex) and its next reference. */
export interface ScrubCursor {
  versionKey: string;
  ref: number;
}

export interface ScrubArgs {
  tenantId: string;
  bucket?: string;
  cursor?: ScrubCursor;
  /** false: only count what a scrub would read (the dry-run plan). */
  verify: boolean;
}

export interface CorruptChunk {
  bucket: string;
  key: string;
  versionId: string;
  chunkIndex: number;
  chunkId: string;
  segmentId?: number;
  offset?: number;
  problem: string;
}

export interface ScrubResult {
  buckets: number;
  versions: number;
  chunkRefs: number;
  logicalBytes: number;
  chunksVerified: number;
  bytesVerified: number;
  corruptChunks: number;
  corrupt: CorruptChunk[];
  /** Absent when the scrub reached the end. */
  cursor?: ScrubCursor;
}

export function scrubTargets(store: IndexStore, tenantId: string, bucket?: string): BucketRecord[] {
  if (bucket !== undefined) {
    const record = store.get<BucketRecord>(DB.buckets, tenantChildKey(tenantId, bucket));
    if (!record) throw NotFound(`bucket ${bucket} not found`);
    return [record];
  }
  return [...store.range<BucketRecord>(DB.buckets, tenantChildRange(tenantId))]
    .map((e) => e.value)
    .sort((a, b) => a.id - b.id);
}

export async function scrubTenantChunks(
  context: EngineContext,
  args: ScrubArgs,
): Promise<ScrubResult> {
  const tenant = requireTenant(context, args.tenantId);
  const buckets = scrubTargets(context.store, tenant.id, args.bucket);
  const result: ScrubResult = {
    buckets: 0,
    versions: 0,
    chunkRefs: 0,
    logicalBytes: 0,
    chunksVerified: 0,
    bytesVerified: 0,
    corruptChunks: 0,
    corrupt: [],
  };
  const reader = args.verify
    ? new SegmentReader(dataDirPaths(context.settings.string('data_dir')).segments)
    : undefined;
  const state: WalkState = {
    context,
    tenantNum: tenant.num,
    result,
    reader,
    seen: new Set(),
    refsLeft: SCRUB_REFS_PER_CALL,
  };
  try {
    const cursorKey =
      args.cursor === undefined ? undefined : Buffer.from(args.cursor.versionKey, 'hex');
    const cursorBucket = cursorKey?.readUInt32BE(0);
    for (const bucket of buckets) {
      if (cursorBucket !== undefined && bucket.id < cursorBucket) continue;
      const resume =
        cursorBucket === bucket.id && args.cursor
          ? { key: cursorKey as Buffer, ref: args.cursor.ref }
          : undefined;
      if (!resume) result.buckets += 1;
      const cursor = await walkBucket(state, bucket, resume);
      if (cursor) return { ...result, cursor };
    }
    return result;
  } finally {
    reader?.close();
  }
}

interface WalkState {
  readonly context: EngineContext;
  readonly tenantNum: number;
  readonly result: ScrubResult;
  readonly reader: SegmentReader | undefined;
  readonly seen: Set<string>;
  refsLeft: number;
}

async function walkBucket(
  state: WalkState,
  bucket: BucketRecord,
  resume?: { key: Buffer; ref: number },
): Promise<ScrubCursor | undefined> {
  const prefix = bucketKeyPrefix(bucket.id);
  const end = Buffer.concat([prefix, Buffer.from([0xff])]);
  let start = resume?.key ?? prefix;
  for (;;) {
    const page = [
      ...state.context.store.range<ObjectVersionRecord>(DB.versions, {
        start,
        end,
        limit: VERSIONS_PER_PAGE,
      }),
    ];
    for (const { key, value: version } of page) {
      const resumed = resume !== undefined && key.equals(resume.key);
      const next = await walkVersion(state, {
        bucket,
        version,
        from: resumed ? resume.ref : 0,
        resumed,
      });
      if (next !== undefined) return { versionKey: Buffer.from(key).toString('hex'), ref: next };
    }
    if (page.length < VERSIONS_PER_PAGE) return undefined;
    start = Buffer.concat([(page[page.length - 1] as { key: Buffer }).key, Buffer.from([0])]);
  }
}

/** Returns the reference to resume at when the call's budget ran out inside this version. */
async function walkVersion(
  state: WalkState,
  args: { bucket: BucketRecord; version: ObjectVersionRecord; from: number; resumed: boolean },
): Promise<number | undefined> {
  const { result } = state;
  const { bucket, version, from } = args;
  const refs = version.deleteMarker ? [] : unpackChunkRefs(Buffer.from(version.chunks));
  if (!args.resumed) {
    result.versions += 1;
    result.logicalBytes += version.deleteMarker ? 0 : version.size;
  }
  for (let index = from; index < refs.length; index += 1) {
    if (state.refsLeft <= 0 || result.bytesVerified >= SCRUB_BYTES_PER_CALL) return index;
    state.refsLeft -= 1;
    result.chunkRefs += 1;
    const ref = refs[index] as { id: Buffer };
    const id = ref.id.toString('hex');
    if (!state.reader || state.seen.has(id)) continue;
    state.seen.add(id);
    const problem = await verifyChunk(state, ref.id);
    if (problem === undefined) continue;
    result.corruptChunks += 1;
    if (result.corrupt.length < SCRUB_CORRUPT_LISTED_MAX) {
      result.corrupt.push({
        bucket: bucket.name,
        key: version.key,
        versionId: version.versionId,
        chunkIndex: index,
        chunkId: id,
        ...problem,
      });
    }
  }
  return undefined;
}

interface Problem {
  problem: string;
  segmentId?: number;
  offset?: number;
}

/** Verifies one chunk; a read that misses is retried once at the chunk's current location. */
async function verifyChunk(state: WalkState, id: Buffer): Promise<Problem | undefined> {
  const { context, reader, tenantNum } = state;
  let problem: Problem | undefined;
  for (let attempt = 0; attempt < 2; attempt += 1) {
    // The engine sees its own commits: a retry finds a chunk that compaction moved meanwhile.
    const chunk = context.store.get<ChunkRecord>(DB.chunks, chunkKey(tenantNum, id));
    if (!chunk) return { problem: 'chunk_record_missing' };
    const where = { segmentId: chunk.segmentId, offset: chunk.offset };
    let bytes: Buffer;
    try {
      bytes = await (reader as SegmentReader).read(chunk);
    } catch (error) {
      problem = {
        problem: errorCode(error) === 'not_found' ? 'segment_missing' : 'segment_unreadable',
        ...where,
      };
      continue;
    }
    state.result.chunksVerified += 1;
    state.result.bytesVerified += bytes.length;
    const found = checkRecord(bytes, chunk, { tenantNum, id });
    if (found === undefined) return undefined;
    problem = { problem: found, ...where };
  }
  return problem;
}

/** The first check a stored record fails, or undefined. */
export function checkRecord(
  bytes: Buffer,
  chunk: ChunkRecord,
  expected: { tenantNum: number; id: Buffer },
): string | undefined {
  let header;
  try {
    header = decodeRecordHeader(bytes, 0);
  } catch {
    return 'record_header_corrupt';
  }
  if (header.kind !== RECORD_KIND_CHUNK) return 'not_a_chunk_record';
  if (header.recordLength !== chunk.length) return 'record_length_mismatch';
  if (header.tenantNum !== expected.tenantNum || !header.chunkId.equals(expected.id))
    return 'misdirected_record';
  if (header.payloadChecksum !== chunk.payloadChecksum) return 'index_checksum_mismatch';
  try {
    verifyPayload(header, bytes.subarray(RECORD_HEADER_SIZE));
  } catch {
    return 'payload_checksum_mismatch';
  }
  return undefined;
}
