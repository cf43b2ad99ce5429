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
import assert, { AssertionError } from 'node:assert';
import { IndexStore } from '../engine/index/store.js';
import { EngineClient } from '../engine/protocol.js';
import { SegmentWriter } from '../engine/segments/segment-writer.js';
import { SegmentReader } from '../engine/segments/segment-reader.js';
import { storeChunk, readChunk, readChunkInto, type ChunkStoreDeps } from './chunk-store.js';
import { toWire } from '../util/errors.js';
import { native } from '../util/libc.js';
import { ownBytes } from '../util/buffer-pool.js';
import { answerSealRequests } from './pool-seal.js';
import {
  tenantKeysFrom,
  type WorkerConfig,
  type StoreTask,
  type StoreResult,
  type ReadTask,
  type PoolTask,
  type Outcome,
} from './protocol.js';

const config = workerData as WorkerConfig;
const arenas = config.arenas.map((shared) => ({
  upload: Buffer.from(shared.upload),
  downloads: Buffer.from(shared.downloads),
}));
let index: IndexStore | undefined;
let writer: SegmentWriter | undefined;
let reader: SegmentReader | undefined;
let engine: EngineClient | undefined;

function indexStore(): IndexStore {
  index ??= IndexStore.open({ path: join(config.dataDir, 'index'), readOnly: true });
  return index;
}

function engineClient(): EngineClient {
  if (engine) return engine;
  engine = new EngineClient(join(config.dataDir, 'engine.sock'));
  // A restarted engine refuses commits into the writer's open segment until the writer
  // registers it again (segment-writer.ts, `reregister`): at once, on every new connection.
  engine.onConnected(() => void writer?.reregister());
  engine.reconnectWhile(() => writer?.needsEngine ?? false);
  return engine;
}

function segmentWriter(): SegmentWriter {
  writer ??= new SegmentWriter({
    segmentsDir: join(config.dataDir, 'segments'),
    segmentBytesMax: config.segmentBytesMax,
    directIo: config.directIo,
    registry: {
      allocate: async () =>
        (
          await engineClient().call('allocSegment', {
            ownerPid: process.pid,
          })
        ).segmentId,
      seal: async (segmentId, size) => {
        await engineClient().call('sealSegment', { segmentId, size });
      },
      failed: async (segmentId) => {
        await engineClient().call('segmentFailed', { segmentId });
      },
      opened: async (segmentId) => {
        await engineClient().call('segmentOpened', { segmentId });
      },
    },
  });
  return writer;
}

// A clean stop of the gateway seals this thread's open segment (pool-seal.ts). The engine may
// be stopping too: its client then fails at once instead of waiting to reconnect, and the next
// start recovers the segment.
answerSealRequests(config.sealChannel, async () => {
  engine?.stopWaiting();
  const open = writer;
  writer = undefined;
  return (await open?.close()) ?? true;
});

/** Records of chunks this large come from the pool's segments, written with O_DIRECT. */
const DIRECT_READ_BYTES_MIN = 64 * 1024;

function segmentReader(): SegmentReader {
  const misalignment = config.directIo ? native()?.misalignment : undefined;
  return new SegmentReader(join(config.dataDir, 'segments'), {
    cachedFirst: true,
    ...(misalignment ? { direct: { minBytes: DIRECT_READ_BYTES_MIN, misalignment } } : {}),
  });
}

/**
 * A store task answers an Outcome. A read task answers the plaintext's length once it is in
 * the download-arena blocks the task named, else the plaintext ArrayBuffer itself (transferred,
 * not copied); a failed read answers a failed Outcome.
 */
export default async function run({
  listener,
  task,
}: PoolTask): Promise<Outcome<StoreResult> | ArrayBuffer | number> {
  const arena = arenas[listener];
  assert.ok(arena !== undefined, `no arenas for listener ${listener}`);
  try {
    switch (task.kind) {
      case 'store': {
        const value = await store(task, arena.upload);
        // The chunk id may be a slice of this thread's buffer pool (see ownBytes).
        return { ok: true, value: { ...value, chunkId: ownBytes(value.chunkId) } };
      }
      case 'read':
        return await read(task, arena.downloads);
    }
  } catch (error) {
    if (error instanceof AssertionError)
      process.nextTick(() => {
        throw error;
      });
    return { ok: false, error: toWire(error) };
  }
}

const deps: ChunkStoreDeps = {
  index: indexStore,
  writer: segmentWriter,
  reader: () => (reader ??= segmentReader()),
  deadChunkGraceMs: config.deadChunkGraceMs,
  corrupt: (report) => {
    // The read's own error says it; the record is for later, and never fails the read.
    Promise.resolve()
      .then(() => engineClient().call('reportCorruptChunk', report))
      .catch(() => undefined);
  },
};

function store(task: StoreTask, arena: Buffer): Promise<StoreResult> {
  const slices = task.slices.map(([block, start, end]) => {
    const base = block * config.blockBytes;
    return arena.subarray(base + start, base + end);
  });
  return storeChunk(deps, {
    keys: tenantKeysFrom(task.keys),
    slices,
    plainLength: task.plainLength,
    objectChecksums: task.objectChecksums,
  });
}

async function read(task: ReadTask, downloads: Buffer): Promise<ArrayBuffer | number> {
  const input = {
    keys: tenantKeysFrom(task.keys),
    chunkId: task.chunkId,
    plainLength: task.plainLength,
  };
  // Transferred, so it must be the plaintext's own ArrayBuffer: a pooled slab must never be.
  if (task.into === undefined)
    return move(ownBytes(await readChunk(deps, input)).buffer) as ArrayBuffer;
  const blockBytes = config.downloadBlockBytes;
  assert.ok(task.into.length * blockBytes >= task.plainLength, 'too few blocks for the chunk');
  const targets = task.into.map((block, i) => {
    const length = Math.max(0, Math.min(blockBytes, task.plainLength - i * blockBytes));
    return downloads.subarray(block * blockBytes, block * blockBytes + length);
  });
  await readChunkInto(deps, input, targets);
  return task.plainLength;
}
