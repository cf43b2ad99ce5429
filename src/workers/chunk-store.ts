// Storing and reading one chunk: the work of a store or read task, shared by the pool's worker
// threads and by the gateway's own thread (which handles small bodies and chunks itself: for a
// few KiB the hand-off to the pool costs more than the work).
//
// Store: object checksums when asked, keyed chunk id, dedup look-up, encode (LZ4 when it pays,
// AES-256-GCM, CRC32C), append. Returns once the record and every record before it in the
// segment are written; the engine fdatasyncs the segment before committing a manifest that
// points at it. Read: resolve, read, verify and decrypt; a chunk that compaction moved is
// looked up again once.

import type { IndexStore } from '../engine/index/store.js';
import { DB, chunkKey, type ChunkRecord } from '../engine/index/schema.js';
import type { SegmentWriter } from '../engine/segments/segment-writer.js';
import type { SegmentReader } from '../engine/segments/segment-reader.js';
import { chunkIdOf, encodeChunk, decodeChunk, type TenantKeys } from '../engine/chunk-codec.js';
import { createMultiHasher, type ChecksumAlg } from '../engine/checksums.js';
import { NotFound, errorCode } from '../util/errors.js';
import type { StoreResult } from './protocol.js';

export interface ChunkStoreDeps {
  index(): IndexStore;
  writer(): SegmentWriter;
  reader(): SegmentReader;
  readonly deadChunkGraceMs: number;
}

export async function storeChunk(
  deps: ChunkStoreDeps,
  input: {
    keys: TenantKeys;
    slices: readonly Buffer[];
    plainLength: number;
    objectChecksums?: readonly ChecksumAlg[] | undefined;
  },
): Promise<StoreResult> {
  const { keys, slices, plainLength } = input;
  const checksums = input.objectChecksums
    ? await objectChecksums(input.objectChecksums, slices)
    : undefined;
  const chunkId = chunkIdOf(keys.dedupKey, slices);
  if (alreadyStored(deps, keys.tenantNum, chunkId)) {
    return withChecksums({ chunkId, plainLength, compressed: false }, checksums);
  }
  const encoded = encodeChunk(keys, chunkId, slices, plainLength);
  const appended = await deps.writer().append([encoded.header, ...encoded.payload]);
  // Every record before this one in the segment must be written too: recovery cuts a segment
  // at its first damaged record, and an earlier write still in flight at a crash would take
  // this (acknowledged) record with it.
  await appended.written();
  const location = {
    segmentId: appended.segmentId,
    offset: appended.offset,
    length: appended.length,
    payloadChecksum: encoded.payloadChecksum,
  };
  return withChecksums(
    { chunkId, plainLength, location, compressed: encoded.compressed },
    checksums,
  );
}

function withChecksums(
  result: StoreResult,
  checksums: Record<string, string> | undefined,
): StoreResult {
  return checksums ? { ...result, checksums } : result;
}

async function objectChecksums(
  algs: readonly ChecksumAlg[],
  slices: readonly Buffer[],
): Promise<Record<string, string>> {
  const hasher = await createMultiHasher(algs);
  for (const slice of slices) hasher.update(slice);
  return hasher.digest();
}

/** A chunk this tenant already stored, live or dead for less than half the grace period. */
function alreadyStored(deps: ChunkStoreDeps, tenantNum: number, chunkId: Buffer): boolean {
  const record = deps.index().get<ChunkRecord>(DB.chunks, chunkKey(tenantNum, chunkId));
  if (!record) return false;
  return record.refs > 0 || Date.now() - (record.deadSince ?? 0) < deps.deadChunkGraceMs / 2;
}

export async function readChunk(
  deps: ChunkStoreDeps,
  input: { keys: TenantKeys; chunkId: Uint8Array; plainLength: number },
): Promise<Buffer> {
  const key = chunkKey(input.keys.tenantNum, input.chunkId);
  // The gateway resolved the object from a snapshot at least as new as the commit that made
  // it; this thread's snapshot must be too.
  deps.index().refresh();
  for (let attempt = 0; ; attempt += 1) {
    const record = deps.index().get<ChunkRecord>(DB.chunks, key);
    if (!record) throw NotFound('chunk not found');
    try {
      const bytes = await deps.reader().read(record);
      return decodeChunk(input.keys, bytes, {
        chunkId: input.chunkId,
        payloadChecksum: record.payloadChecksum,
        plainLength: input.plainLength,
      });
    } catch (error) {
      // Compaction moved the chunk and deleted the old segment: look it up again, once.
      if (attempt > 0 || errorCode(error) !== 'not_found') throw error;
      deps.index().refresh();
    }
  }
}
