// Garbage collection and compaction, run by the engine in the background.
//
// Each pass:
// 1. Recovers segments whose writer died (recovery.ts).
// 2. Drops chunk entries that have been dead (no references) for longer than
//    `storage.dead_chunk_grace`; until then a new upload may still revive them by dedup.
// 3. Compacts sealed segments whose live ratio fell under `storage.compaction_live_ratio`:
//    live records are copied verbatim (still encrypted and checksummed) to the engine's own
//    segment, made durable, and only then do the chunk entries move, in one transaction that
//    also retires the old segment. A crash before that transaction leaves garbage in the new
//    segment; a crash after it leaves a retired segment that the next pass deletes.
// 4. Deletes retired segments after `storage.retired_segment_grace`, longer than any read
//    that could still hold the old address; a read that misses re-resolves once.

import { unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { IndexStore } from '../index/store.js';
import { DB, chunkKey, segmentKey, type ChunkRecord, type SegmentRecord } from '../index/schema.js';
import { segmentFileName } from '../../format/segment-header.js';
import type { Settings } from '../../util/config.js';
import type { DataDirPaths } from '../data-dir.js';
import { SegmentWriter } from './segment-writer.js';
import { scanSegment } from './segment-scan.js';
import { recoverSegments } from './recovery.js';
import * as segmentOps from '../ops/segments.js';
import { expireAudit } from '../ops/audit.js';

export interface CompactionStats {
  segmentsCompacted: number;
  recordsMoved: number;
  bytesReclaimed: number;
  chunksDropped: number;
  segmentsDeleted: number;
}

export class Compactor {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  private readonly writer: SegmentWriter;
  private readonly liveRatioMin: number;
  readonly totals: CompactionStats = { segmentsCompacted: 0, recordsMoved: 0, bytesReclaimed: 0, chunksDropped: 0, segmentsDeleted: 0 };

  constructor(private readonly options: { paths: DataDirPaths; store: IndexStore; settings: Settings; log: Logger }) {
    const { store, settings } = options;
    this.liveRatioMin = Number(settings.string('storage.compaction_live_ratio'));
    const context = { store, masterKey: Buffer.alloc(0), settings, now: () => Date.now() };
    this.writer = new SegmentWriter({
      segmentsDir: options.paths.segments,
      segmentBytesMax: settings.bytes('storage.segment_bytes_max'),
      registry: {
        allocate: async () => (await store.transact(() => segmentOps.allocSegment(context, { ownerPid: process.pid }))).segmentId,
        seal: async (segmentId, size) => {
          await store.transact(() => segmentOps.sealSegment(context, { segmentId, size }));
        },
      },
    });
  }

  start(): void {
    const interval = this.options.settings.duration('storage.compaction_interval');
    this.timer = setInterval(() => void this.runOnce(), interval);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.running?.catch(() => undefined);
    await this.writer.close();
  }

  /** One full pass; concurrent calls share the pass in progress. */
  runOnce(): Promise<CompactionStats> {
    const pass = (this.running ??= this.pass().finally(() => {
      this.running = undefined;
    })) as Promise<CompactionStats>;
    return pass.catch((error: unknown) => {
      this.options.log.error({ err: error }, 'compaction pass failed');
      return { segmentsCompacted: 0, recordsMoved: 0, bytesReclaimed: 0, chunksDropped: 0, segmentsDeleted: 0 };
    });
  }

  private async pass(): Promise<CompactionStats> {
    const { paths, store, log } = this.options;
    const stats: CompactionStats = { segmentsCompacted: 0, recordsMoved: 0, bytesReclaimed: 0, chunksDropped: 0, segmentsDeleted: 0 };
    await recoverSegments({ paths, store, log });
    store.refresh();
    stats.chunksDropped = await this.dropDeadChunks();
    for (const segment of this.candidates()) await this.compact(segment, stats);
    stats.segmentsDeleted = await this.deleteRetired();
    const auditCutoff = Date.now() - this.options.settings.duration('audit.retention');
    while ((await store.transact(() => expireAudit(store, auditCutoff, 10_000))) === 10_000);
    for (const key of Object.keys(stats) as Array<keyof CompactionStats>) this.totals[key] += stats[key];
    if (stats.segmentsCompacted + stats.segmentsDeleted + stats.chunksDropped > 0) log.info(stats, 'compaction pass');
    return stats;
  }

  private async dropDeadChunks(): Promise<number> {
    const { store, settings } = this.options;
    const cutoff = Date.now() - settings.duration('storage.dead_chunk_grace');
    const dead: Buffer[] = [];
    for (const { key, value } of store.range<ChunkRecord>(DB.chunks, {})) {
      if (value.refs === 0 && (value.deadSince ?? 0) <= cutoff) dead.push(Buffer.from(key));
    }
    if (dead.length === 0) return 0;
    return store.transact(() => {
      let dropped = 0;
      for (const key of dead) {
        const record = store.get<ChunkRecord>(DB.chunks, key);
        if (record && record.refs === 0 && (record.deadSince ?? 0) <= cutoff) {
          store.remove(DB.chunks, key);
          dropped += 1;
        }
      }
      return dropped;
    });
  }

  private candidates(): SegmentRecord[] {
    const found: SegmentRecord[] = [];
    for (const { value } of this.options.store.range<SegmentRecord>(DB.segments, {})) {
      if (value.state !== 'sealed' || value.size === undefined) continue;
      if (value.liveBytes < value.size * this.liveRatioMin) found.push(value);
    }
    return found;
  }

  private async compact(segment: SegmentRecord, stats: CompactionStats): Promise<void> {
    const { store, paths } = this.options;
    const moves: Array<{ key: Buffer; from: number; to: { segmentId: number; offset: number; length: number } }> = [];
    const waits: Array<Promise<void>> = [];
    await scanSegment(join(paths.segments, segmentFileName(segment.id)), async (record) => {
      if (!record.bytes || record.header.kind !== 1) return;
      const key = chunkKey(record.header.tenantNum, record.header.chunkId);
      const chunk = store.get<ChunkRecord>(DB.chunks, key);
      if (!chunk || chunk.segmentId !== segment.id || chunk.offset !== record.offset) return;
      const appended = await this.writer.append([record.bytes]);
      waits.push(appended.durable());
      moves.push({ key, from: record.offset, to: appended });
    }, { withBytes: true });
    await Promise.all(waits);
    const moved = await store.transact(() => this.applyMoves(segment.id, moves));
    stats.segmentsCompacted += 1;
    stats.recordsMoved += moved;
    stats.bytesReclaimed += (segment.size ?? 0) - segment.liveBytes;
  }

  private applyMoves(segmentId: number, moves: ReadonlyArray<{ key: Buffer; from: number; to: { segmentId: number; offset: number; length: number } }>): number {
    const { store } = this.options;
    let moved = 0;
    for (const move of moves) {
      const chunk = store.get<ChunkRecord>(DB.chunks, move.key);
      if (!chunk || chunk.segmentId !== segmentId || chunk.offset !== move.from) continue;
      chunk.segmentId = move.to.segmentId;
      chunk.offset = move.to.offset;
      store.put(DB.chunks, move.key, chunk);
      if (chunk.refs > 0) adjustLive(store, move.to.segmentId, chunk.length);
      moved += 1;
    }
    const old = store.get<SegmentRecord>(DB.segments, segmentKey(segmentId));
    if (old) {
      old.state = 'retired';
      old.liveBytes = 0;
      old.retiredAt = Date.now();
      store.put(DB.segments, segmentKey(segmentId), old);
    }
    return moved;
  }

  private async deleteRetired(): Promise<number> {
    const { store, paths, settings } = this.options;
    const cutoff = Date.now() - settings.duration('storage.retired_segment_grace');
    const expired: number[] = [];
    for (const { value } of store.range<SegmentRecord>(DB.segments, {})) {
      if (value.state === 'retired' && (value.retiredAt ?? 0) <= cutoff) expired.push(value.id);
    }
    for (const segmentId of expired) {
      await unlink(join(paths.segments, segmentFileName(segmentId))).catch((error: NodeJS.ErrnoException) => {
        if (error.code !== 'ENOENT') throw error;
      });
      await store.transact(() => store.remove(DB.segments, segmentKey(segmentId)));
    }
    return expired.length;
  }
}

function adjustLive(store: IndexStore, segmentId: number, delta: number): void {
  const record = store.get<SegmentRecord>(DB.segments, segmentKey(segmentId));
  if (!record) return;
  record.liveBytes += delta;
  store.put(DB.segments, segmentKey(segmentId), record);
}
