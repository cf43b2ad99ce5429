// The worker-pool entry point (Piscina). Stays thin: decode the task, call the engine layer,
// return an Outcome.
//
// Each worker thread owns one open segment (SegmentWriter), its own read-only view of the
// index (for dedup look-ups and chunk locations) and its own engine connection (to register
// and seal segments). A store task ends when its record's write has completed; the engine
// fdatasyncs the segment before committing a manifest that points at it.
//
// A failed assertion is a bug: it is rethrown on the next tick, which ends the thread; Piscina
// fails its in-flight tasks and starts a replacement.

import { workerData, move } from 'piscina';
import { join } from 'node:path';
import { AssertionError } from 'node:assert';
import { IndexStore } from '../engine/index/store.js';
import { DB, chunkKey, type ChunkRecord } from '../engine/index/schema.js';
import { EngineClient } from '../engine/protocol.js';
import { SegmentWriter } from '../engine/segments/segment-writer.js';
import { SegmentReader } from '../engine/segments/segment-reader.js';
import { chunkIdOf, encodeChunk, decodeChunk, type TenantKeys } from '../engine/chunk-codec.js';
import { createMultiHasher } from '../engine/checksums.js';
import { toWire, NotFound, errorCode } from '../util/errors.js';
import type { WorkerConfig, Task, StoreTask, StoreResult, ReadTask, Outcome, TenantKeyMaterial } from './protocol.js';

const config = workerData as WorkerConfig;
const arena = Buffer.from(config.arena);
let index: IndexStore | undefined;
let writer: SegmentWriter | undefined;
let reader: SegmentReader | undefined;
let engine: EngineClient | undefined;

function indexStore(): IndexStore {
  index ??= IndexStore.open({ path: join(config.dataDir, 'index'), readOnly: true });
  return index;
}

function engineClient(): EngineClient {
  engine ??= new EngineClient(join(config.dataDir, 'engine.sock'));
  return engine;
}

function segmentWriter(): SegmentWriter {
  writer ??= new SegmentWriter({
    segmentsDir: join(config.dataDir, 'segments'),
    segmentBytesMax: config.segmentBytesMax,
    registry: {
      allocate: async () => (await engineClient().call<{ segmentId: number }>('allocSegment', { ownerPid: process.pid })).segmentId,
      seal: async (segmentId, size) => {
        await engineClient().call('sealSegment', { segmentId, size });
      },
    },
  });
  return writer;
}

function tenantKeys(material: TenantKeyMaterial): TenantKeys {
  return {
    tenantNum: material.tenantNum,
    dataKey: Buffer.from(material.dataKey.buffer, material.dataKey.byteOffset, material.dataKey.byteLength),
    dedupKey: Buffer.from(material.dedupKey.buffer, material.dedupKey.byteOffset, material.dedupKey.byteLength),
  };
}

/** A store task answers an Outcome; a read task answers the plaintext ArrayBuffer itself
 * (transferred, not copied) or a failed Outcome. */
export default async function run(task: Task): Promise<Outcome<StoreResult> | ArrayBuffer> {
  try {
    switch (task.kind) {
      case 'store': return { ok: true, value: await store(task) };
      case 'read': return move(await read(task)) as ArrayBuffer;
    }
  } catch (error) {
    if (error instanceof AssertionError) process.nextTick(() => { throw error; });
    return { ok: false, error: toWire(error) };
  }
}

async function store(task: StoreTask): Promise<StoreResult> {
  const keys = tenantKeys(task.keys);
  const slices = task.slices.map(([block, start, end]) => {
    const base = block * config.blockBytes;
    return arena.subarray(base + start, base + end);
  });
  const checksums = task.objectChecksums ? await objectChecksums(task.objectChecksums, slices) : undefined;
  const chunkId = chunkIdOf(keys.dedupKey, slices);
  if (alreadyStored(keys.tenantNum, chunkId)) {
    return withChecksums({ chunkId, plainLength: task.plainLength, compressed: false }, checksums);
  }
  const encoded = encodeChunk(keys, chunkId, slices, task.plainLength);
  // The write has completed; the engine fdatasyncs the segment before it commits a manifest
  // that points here (group fsync across every worker and gateway).
  const appended = await segmentWriter().append([encoded.header, ...encoded.payload]);
  const location = {
    segmentId: appended.segmentId,
    offset: appended.offset,
    length: appended.length,
    payloadChecksum: encoded.payloadChecksum,
  };
  return withChecksums({ chunkId, plainLength: task.plainLength, location, compressed: encoded.compressed }, checksums);
}

function withChecksums(result: StoreResult, checksums: Record<string, string> | undefined): StoreResult {
  return checksums ? { ...result, checksums } : result;
}

async function objectChecksums(algs: StoreTask['objectChecksums'] & object, slices: readonly Buffer[]): Promise<Record<string, string>> {
  const hasher = await createMultiHasher(algs);
  for (const slice of slices) hasher.update(slice);
  return hasher.digest();
}

/** A chunk this tenant already stored, live or dead for less than half the grace period. */
function alreadyStored(tenantNum: number, chunkId: Buffer): boolean {
  const record = indexStore().get<ChunkRecord>(DB.chunks, chunkKey(tenantNum, chunkId));
  if (!record) return false;
  return record.refs > 0 || Date.now() - (record.deadSince ?? 0) < config.deadChunkGraceMs / 2;
}

async function read(task: ReadTask): Promise<ArrayBuffer> {
  const keys = tenantKeys(task.keys);
  const key = chunkKey(keys.tenantNum, task.chunkId);
  // The gateway resolved the object from a snapshot at least as new as the commit that made
  // it; this thread's snapshot must be too.
  indexStore().refresh();
  for (let attempt = 0; ; attempt += 1) {
    const record = indexStore().get<ChunkRecord>(DB.chunks, key);
    if (!record) throw NotFound('chunk not found');
    reader ??= new SegmentReader(join(config.dataDir, 'segments'));
    try {
      const bytes = await reader.read(record);
      const plain = decodeChunk(keys, bytes, { chunkId: task.chunkId, payloadChecksum: record.payloadChecksum, plainLength: task.plainLength });
      return ownArrayBuffer(plain);
    } catch (error) {
      // Compaction moved the chunk and deleted the old segment: look it up again, once.
      if (attempt > 0 || errorCode(error) !== 'not_found') throw error;
      indexStore().refresh();
    }
  }
}

/** The bytes in an ArrayBuffer of their own: a pooled Buffer's slab must never be transferred. */
function ownArrayBuffer(bytes: Buffer): ArrayBuffer {
  if (bytes.byteOffset === 0 && bytes.buffer.byteLength === bytes.length && !(bytes.buffer instanceof SharedArrayBuffer)) {
    return bytes.buffer;
  }
  const own = new ArrayBuffer(bytes.length);
  new Uint8Array(own).set(bytes);
  return own;
}
