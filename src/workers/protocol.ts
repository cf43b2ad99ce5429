// Task and result types of the worker pool, and the shared body-block arena they point into.
//
// Body bytes live in one SharedArrayBuffer per listener thread, cut into fixed blocks. The gateway
// copies each uWebSockets.js chunk into a block once; tasks name byte ranges of blocks and
// workers read them in place, so a chunk that spans two blocks needs no copy and no transfer.
// Results cross back as plain data; errors as `WireError` (structured clone drops subclasses).
//
// Downloads have an arena of their own, in smaller blocks: a read task may name blocks of it to
// put the plaintext in, so the gateway thread receives no new ArrayBuffer per chunk. (Every
// buffer that arrives counts as external memory there, and V8 answered a 1 GB/s stream of them
// with a full mark-compact every 30–60 ms.)

import type { WireError } from '../util/errors.js';
import type { DigestAlg } from '../engine/checksums.js';
import type { TenantKeys } from '../engine/chunk-codec.js';

/** One listener thread's arenas (gateway.ts): the blocks its tasks name are in these. */
export interface ListenerArenas {
  /** The body arena, in blocks of `blockBytes`. */
  readonly upload: SharedArrayBuffer;
  /** The download arena, in blocks of `downloadBlockBytes`. */
  readonly downloads: SharedArrayBuffer;
}

export interface WorkerConfig {
  /** Every listener thread's arenas, by listener number. */
  readonly arenas: readonly ListenerArenas[];
  readonly blockBytes: number;
  readonly downloadBlockBytes: number;
  readonly dataDir: string;
  readonly segmentBytesMax: number;
  /** `storage.direct_io`: segments written with O_DIRECT where possible. */
  readonly directIo: boolean;
  readonly deadChunkGraceMs: number;
  readonly logLevel: string;
  /** The BroadcastChannel on which the gateway asks the threads to seal (pool-seal.ts). */
  readonly sealChannel: string;
}

/** `[blockIndex, start, end)` within the arena. */
export type Slice = readonly [number, number, number];

export interface TenantKeyMaterial {
  readonly tenantNum: number;
  readonly dataKey: Uint8Array;
  readonly dedupKey: Uint8Array;
  /** Data keys a rotation retired, newest first: older chunks are read with them. */
  readonly retiredDataKeys?: readonly Uint8Array[];
}

/** The TenantKeys that chunk encoding takes, as Buffers over the material's own memory. */
export function tenantKeysFrom(material: TenantKeyMaterial): TenantKeys {
  const over = (bytes: Uint8Array): Buffer =>
    Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return {
    tenantNum: material.tenantNum,
    dataKey: over(material.dataKey),
    dedupKey: over(material.dedupKey),
    ...(material.retiredDataKeys?.length && {
      retiredDataKeys: material.retiredDataKeys.map(over),
    }),
  };
}

export interface StoreTask {
  readonly kind: 'store';
  readonly keys: TenantKeyMaterial;
  readonly slices: readonly Slice[];
  readonly plainLength: number;
  /** Set when this chunk is the whole body: the worker also computes the object checksums. */
  readonly objectChecksums?: readonly DigestAlg[];
}

export interface ChunkLocation {
  readonly segmentId: number;
  readonly offset: number;
  readonly length: number;
  readonly payloadChecksum: number;
}

export interface StoreResult {
  readonly chunkId: Uint8Array;
  readonly plainLength: number;
  /** Absent when the chunk was already stored for this tenant (deduplicated). */
  readonly location?: ChunkLocation;
  readonly compressed: boolean;
  readonly checksums?: Readonly<Record<string, string>>;
}

export interface ReadTask {
  readonly kind: 'read';
  readonly keys: TenantKeyMaterial;
  readonly chunkId: Uint8Array;
  readonly plainLength: number;
  /**
   * Download-arena blocks to fill, in order, with the plaintext; the task then answers its
   * length instead of an ArrayBuffer. Enough blocks for `plainLength`.
   */
  readonly into?: readonly number[];
}

export type Task = StoreTask | ReadTask;

/** A task as the pool receives it: with the number of the listener whose arenas it names. */
export interface PoolTask {
  readonly listener: number;
  readonly task: Task;
}

/**
 * Where a listener's uploads and downloads send their tasks: the gateway's pool, straight from
 * the gateway's first thread or through it from another listener thread (listener-threads.ts).
 * Answers what the pool's `run` answers (worker.ts).
 */
export interface TaskRunner {
  run(task: Task): Promise<unknown>;
}

export type Outcome<T> =
  { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: WireError };
