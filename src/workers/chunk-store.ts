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
import type { Appended, SegmentWriter } from '../engine/segments/segment-writer.js';
import type { SegmentReader } from '../engine/segments/segment-reader.js';
import type { CorruptChunkReport } from '../engine/ops/corrupt-chunks.js';
import {
  chunkIdOf,
  encodeChunk,
  encodeOutputBytes,
  decodeChunk,
  decodeChunkInto,
  type TenantKeys,
} from '../engine/chunk-codec.js';
import { createMultiHasher, MultiHasher, type DigestAlg } from '../engine/checksums.js';
import { CorruptData, NotFound, errorCode, isLightwellError } from '../util/errors.js';
import { BufferPool } from '../util/buffer-pool.js';
import type { StoreResult } from './protocol.js';

export interface ChunkStoreDeps {
  index(): IndexStore;
  writer(): SegmentWriter;
  reader(): SegmentReader;
  readonly deadChunkGraceMs: number;
  /**
   * Told of each chunk a read found corrupt, with where it lies (the engine records it:
   * src/engine/ops/corrupt-chunks.ts); must not throw.
   */
  readonly corrupt?: (report: CorruptChunkReport) => void;
}

export async function storeChunk(
  deps: ChunkStoreDeps,
  input: {
    keys: TenantKeys;
    slices: readonly Buffer[];
    plainLength: number;
    objectChecksums?: readonly DigestAlg[] | undefined;
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
  const outputBytes = encodeOutputBytes(plainLength);
  const output =
    outputBytes <= SMALL_PAYLOAD_BYTES
      ? (smallPayloads.pop() ?? Buffer.allocUnsafeSlow(SMALL_PAYLOAD_BYTES))
      : payloadBuffers.take(outputBytes);
  const encoded = encodeChunk(keys, chunkId, slices, plainLength, output);
  const appended = await deps.writer().append([encoded.header, ...encoded.payload]);
  // Every record before this one in the segment must be written too: recovery cuts a segment
  // at its first damaged record, and an earlier write still in flight at a crash would take
  // this (acknowledged) record with it.
  await appended.written();
  // Only now has the write stopped reading `output`. On a failure above it is not reused: a
  // write of it might still be queued.
  if (output.length !== SMALL_PAYLOAD_BYTES) payloadBuffers.give(output);
  else if (smallPayloads.length < SMALL_PAYLOADS_KEPT) smallPayloads.push(output);
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

/** One small body of a batch (`storeChunks`): whole in memory, one chunk. */
export interface ChunkToStore {
  readonly keys: TenantKeys;
  readonly bytes: Buffer;
  readonly objectChecksums: readonly DigestAlg[];
}

/**
 * Stores the small bodies of a batch (an ingest stream's objects of one turn), each as one
 * chunk: what `storeChunk` does for each, but their records appended in one pass (the segment
 * writer writes the appends of one turn with one writev) and one wait for the batch, for the
 * last record of each segment the batch wrote to (`written()` of a record covers every record
 * before it in its segment), instead of a chain of promises per body; only where that failed,
 * a wait per record of the segment, which fails those from the segment's break on. Answers, in input order,
 * each body's result or the error that refused it alone: a body whose record did not write
 * fails, the others stand (a record written but not committed is garbage, never an object).
 */
export async function storeChunks(
  deps: ChunkStoreDeps,
  inputs: readonly ChunkToStore[],
): Promise<Array<StoreResult | Failed>> {
  const results: Array<StoreResult | Failed> = new Array<StoreResult | Failed>(inputs.length);
  const appends = new Array<Promise<Appended> | undefined>(inputs.length);
  const outputs = new Array<Buffer | undefined>(inputs.length);
  const encodedOf = new Array<Encoded | undefined>(inputs.length);
  const writer = deps.writer();
  for (let i = 0; i < inputs.length; i += 1) {
    const { keys, bytes } = inputs[i] as ChunkToStore;
    try {
      const now = objectChecksumsNow(inputs[i] as ChunkToStore);
      const checksums = now instanceof Promise ? await now : now;
      const chunkId = chunkIdOf(keys.dedupKey, [bytes]);
      if (alreadyStored(deps, keys.tenantNum, chunkId)) {
        results[i] = { chunkId, plainLength: bytes.length, compressed: false, checksums };
        continue;
      }
      const output = payloadFor(encodeOutputBytes(bytes.length));
      const encoded = encodeChunk(keys, chunkId, [bytes], bytes.length, output);
      results[i] = { chunkId, plainLength: bytes.length, compressed: false, checksums };
      encodedOf[i] = encoded;
      outputs[i] = output;
      appends[i] = writer.append([encoded.header, ...encoded.payload]);
    } catch (error) {
      results[i] = new Failed(error);
    }
  }
  await settleAppends(results, appends, outputs, encodedOf);
  return results;
}

type Encoded = { payloadChecksum: number; compressed: boolean };
const NO_APPEND: Promise<undefined> = Promise.resolve(undefined);

/** The error that refused one body of `storeChunks`. */
export class Failed {
  constructor(readonly error: unknown) {}
}

/** The object checksums of a batch's body; awaits only for CRC64NVME (a lazily loaded hasher). */
function objectChecksumsNow(
  input: ChunkToStore,
): Record<string, string> | Promise<Record<string, string>> {
  if (input.objectChecksums.includes('CRC64NVME'))
    return objectChecksums(input.objectChecksums, [input.bytes]);
  const hasher = new MultiHasher({ algs: input.objectChecksums, crc64Hasher: undefined });
  hasher.update(input.bytes);
  return hasher.digest();
}

/**
 * Waits for the appends of `storeChunks` and then for the last record of each segment they
 * wrote to; fills in each stored body's location, or its failure.
 */
async function settleAppends(
  results: Array<StoreResult | Failed>,
  appends: ReadonlyArray<Promise<Appended> | undefined>,
  outputs: ReadonlyArray<Buffer | undefined>,
  encodedOf: ReadonlyArray<Encoded | undefined>,
): Promise<void> {
  // An object deduplicated or refused before its append has none: it settles as `undefined`.
  const appended = await Promise.allSettled(appends.map((append) => append ?? NO_APPEND));
  /** The last record of each segment, and the error of its `written()`, once waited for. */
  const last = new Map<number, Appended>();
  for (const outcome of appended)
    if (outcome.status === 'fulfilled' && outcome.value !== undefined)
      last.set(outcome.value.segmentId, outcome.value);
  const failures = new Map<number, unknown>();
  await Promise.all(
    [...last].map(([segmentId, record]) =>
      record.written().catch((error: unknown) => failures.set(segmentId, error)),
    ),
  );
  // A segment that broke fails its records from the break on; those before it were written
  // whole, and stand: each such record's own `written()` tells on which side it is.
  const own = new Map<number, unknown>();
  await Promise.all(
    appended.map(async (outcome, i) => {
      const record = outcome.status === 'fulfilled' ? outcome.value : undefined;
      if (record === undefined || !failures.has(record.segmentId)) return;
      await record.written().catch((error: unknown) => own.set(i, error));
    }),
  );
  for (let i = 0; i < results.length; i += 1) {
    const outcome = appended[i] as PromiseSettledResult<Appended | undefined>;
    const output = outputs[i];
    if (outcome.status === 'rejected') {
      results[i] = new Failed(outcome.reason);
      continue; // a write of `output` might still be queued: it is not reused
    }
    const record = outcome.value;
    if (record === undefined) continue;
    if (own.has(i)) {
      results[i] = new Failed(own.get(i));
      continue;
    }
    givePayload(output as Buffer);
    const encoded = encodedOf[i] as Encoded;
    const stored = results[i] as StoreResult;
    results[i] = {
      ...stored,
      compressed: encoded.compressed,
      location: {
        segmentId: record.segmentId,
        offset: record.offset,
        length: record.length,
        payloadChecksum: encoded.payloadChecksum,
      },
    };
  }
}

/** A payload buffer for a record of `outputBytes` (given back with `givePayload`). */
function payloadFor(outputBytes: number): Buffer {
  return outputBytes <= SMALL_PAYLOAD_BYTES
    ? (smallPayloads.pop() ?? Buffer.allocUnsafeSlow(SMALL_PAYLOAD_BYTES))
    : payloadBuffers.take(outputBytes);
}

/** A payload buffer whose write has stopped reading it, for the next record. */
function givePayload(output: Buffer): void {
  if (output.length !== SMALL_PAYLOAD_BYTES) payloadBuffers.give(output);
  else if (smallPayloads.length < SMALL_PAYLOADS_KEPT) smallPayloads.push(output);
}

/**
 * The payload buffers of this thread, reused from one record to the next (see BufferPool).
 * A thread stores at most a few chunks at once (two pool tasks per worker), so at most two
 * buffers are kept, the largest ones, each as large as the largest chunk it served. Sizes are
 * rounded up so that chunks of similar sizes share buffers: to 64 KiB for large chunks, 4 KiB
 * for the small ones the gateway thread stores itself, many at a time.
 */
const payloadBuffers = new BufferPool(2, (bytes) => {
  const granule = bytes > 64 * 1024 ? 64 * 1024 : 4096;
  return Buffer.allocUnsafeSlow(Math.ceil(bytes / granule) * granule);
});

/**
 * The payload buffers of small records, all of one size, kept apart from `payloadBuffers`: the
 * gateway's thread stores the small objects of a turn all at once (hundreds of an ingest
 * stream's), more than a pool of two serves, and a fresh buffer each cost an allocation and
 * its collection. At most 2 MiB are kept.
 */
const SMALL_PAYLOAD_BYTES = 8192;
const SMALL_PAYLOADS_KEPT = 256;
const smallPayloads: Buffer[] = [];

function withChecksums(
  result: StoreResult,
  checksums: Record<string, string> | undefined,
): StoreResult {
  return checksums ? { ...result, checksums } : result;
}

async function objectChecksums(
  algs: readonly DigestAlg[],
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
  return readRecord(deps, input, (bytes, expected) => decodeChunk(input.keys, bytes, expected));
}

/**
 * Reads a chunk into `targets` (in order; their lengths add up to its plain length): decrypted
 * in place where it can be, else decoded and copied (decodeChunkInto).
 */
export async function readChunkInto(
  deps: ChunkStoreDeps,
  input: { keys: TenantKeys; chunkId: Uint8Array; plainLength: number },
  targets: readonly Uint8Array[],
): Promise<void> {
  await readRecord(deps, input, (bytes, expected) => {
    decodeChunkInto(input.keys, bytes, expected, targets);
  });
}

/**
 * Reads a chunk into `target` (its plain length) without waiting, where its record can be read
 * that way (`SegmentReader.readNow`): answers false when it cannot, and the caller reads it
 * with `readChunk` instead (which also answers a chunk that is not found, or moved).
 *
 * The chunk is looked up in the index's current snapshot, not a renewed one: the caller resolved
 * the object from that same snapshot, earlier in the same synchronous pass, and in it the chunk
 * is live (a newer snapshot could only have lost it).
 */
export function readChunkNow(
  deps: ChunkStoreDeps,
  input: { keys: TenantKeys; chunkId: Uint8Array; plainLength: number },
  target: Uint8Array,
): boolean {
  const index = deps.index();
  const record = index.get<ChunkRecord>(DB.chunks, chunkKey(input.keys.tenantNum, input.chunkId));
  if (!record) return false;
  const expected = expectedRecord(input, record);
  const read = deps.reader().readNow(record, (bytes) => {
    decodeChunkInto(input.keys, bytes, expected, [target]);
    return true;
  });
  return read ?? false;
}

/** What a chunk's record must hold: its id, its payload's checksum and its plain length. */
function expectedRecord(
  input: { chunkId: Uint8Array; plainLength: number },
  record: ChunkRecord,
): { chunkId: Uint8Array; payloadChecksum: number; plainLength: number } {
  return {
    chunkId: input.chunkId,
    payloadChecksum: record.payloadChecksum,
    plainLength: input.plainLength,
  };
}

/** Resolves the chunk, reads its record and decodes it with `decode`. */
/**
 * A corrupt chunk, with where it is (never shown to clients: a 500 carries no details), so that
 * the log line under the request id is the repair record: which tenant's chunk, in which
 * segment at which offset, and whether the bytes are damaged or under no key it has.
 */
function corruptAt(
  error: unknown,
  record: ChunkRecord,
  input: { keys: TenantKeys; chunkId: Uint8Array },
): Error {
  const reason = isLightwellError(error) ? error.details['reason'] : undefined;
  return CorruptData(
    isLightwellError(error) ? error.message : 'stored chunk failed verification',
    {
      ...(typeof reason === 'string' ? { reason } : {}),
      tenantNum: input.keys.tenantNum,
      chunkId: Buffer.from(input.chunkId).toString('hex'),
      segmentId: record.segmentId,
      offset: record.offset,
      length: record.length,
    },
    { cause: error },
  );
}

async function readRecord<T>(
  deps: ChunkStoreDeps,
  input: { keys: TenantKeys; chunkId: Uint8Array; plainLength: number },
  decode: (
    bytes: Buffer,
    expected: { chunkId: Uint8Array; payloadChecksum: number; plainLength: number },
  ) => T,
): Promise<T> {
  const key = chunkKey(input.keys.tenantNum, input.chunkId);
  // The gateway resolved the object from a snapshot at least as new as the commit that made
  // it; this thread's snapshot must be too.
  deps.index().refresh();
  for (let attempt = 0; ; attempt += 1) {
    const record = deps.index().get<ChunkRecord>(DB.chunks, key);
    if (!record) throw NotFound('chunk not found');
    try {
      return await deps
        .reader()
        .readWith(record, (bytes) => decode(bytes, expectedRecord(input, record)));
    } catch (error) {
      if (errorCode(error) === 'corrupt_data') {
        const reason = isLightwellError(error) ? error.details['reason'] : undefined;
        deps.corrupt?.({
          tenantNum: input.keys.tenantNum,
          chunkId: Buffer.from(input.chunkId).toString('hex'),
          segmentId: record.segmentId,
          offset: record.offset,
          length: record.length,
          reason: typeof reason === 'string' ? reason : 'corrupt',
          foundBy: 'read',
        });
        throw corruptAt(error, record, input);
      }
      // Compaction moved the chunk and deleted the old segment: look it up again, once.
      if (attempt > 0 || errorCode(error) !== 'not_found') throw error;
      deps.index().refresh();
    }
  }
}
