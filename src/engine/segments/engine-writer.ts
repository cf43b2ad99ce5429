// The segment writer of a job that runs inside the engine (compaction, re-encryption, a tenant
// restore): its segments are allocated and sealed by the engine's own index transactions, where
// a gateway's writer asks over the engine socket.

import type { EngineContext } from '../ops/context.js';
import * as segmentOps from '../ops/segments.js';
import type { Io } from '../../util/io.js';
import { SegmentWriter, engineSpaceFloorFor } from './segment-writer.js';

export function engineSegmentWriter(options: {
  readonly context: EngineContext;
  readonly segmentsDir: string;
  readonly io: Io;
  /** Told of a segment whose fdatasync failed (the engine poisons it: segment-syncer.ts). */
  readonly failed?: ((segmentId: number) => Promise<void> | void) | undefined;
}): SegmentWriter {
  const { context, failed } = options;
  const { store, settings } = context;
  return new SegmentWriter({
    io: options.io,
    clock: { now: () => context.now() },
    segmentsDir: options.segmentsDir,
    segmentBytesMax: settings.bytes('storage.segment_bytes_max'),
    // What an engine job writes is read again only later: past the page cache, as the pool's.
    directIo: settings.bool('storage.direct_io'),
    spaceFloor: engineSpaceFloorFor,
    registry: {
      allocate: async () =>
        (await store.transact(() => segmentOps.allocSegment(context, { ownerPid: process.pid })))
          .segmentId,
      seal: async (segmentId, size) => {
        await store.transact(() => segmentOps.sealSegment(context, { segmentId, size }));
      },
      ...(failed === undefined
        ? {}
        : {
            failed: async (segmentId: number) => {
              await failed(segmentId);
            },
          }),
    },
  });
}
