// Garbage collection and compaction, run by the engine in the background.
//
// Each pass:
// 1. Recovers segments whose writer died (recovery.ts), never the compactor's own open one.
// 2. Drops chunk entries that have been dead (no references) for longer than
//    `storage.dead_chunk_grace`; until then a new upload may still revive them by dedup.
// 3. Compacts sealed segments whose live ratio fell under `storage.compaction_live_ratio`
//    (dead chunks still inside their grace count as live here, since a compaction copies them):
//    live records are copied verbatim (still encrypted and checksummed) to the engine's own
//    segment, made durable, and only then do the chunk entries move, in one transaction that
//    also retires the old segment. A crash before that transaction leaves garbage in the new
//    segment; a crash after it leaves a retired segment that the next pass deletes.
// 4. Deletes retired segments after `storage.retired_segment_grace`, longer than any read
//    that could still hold the old address (a read that misses re-resolves once), unless a
//    gateway's upload in flight has pinned the segment (segment-pins.ts).
// 5. Expires old audit rows and idempotency keys, and aborts multipart uploads older than
//    `multipart.expiry` (or whose bucket is gone), releasing their parts' chunk references.
//
// Short of space (the space reserve is out, or less than a segment is free: space-reserve.ts),
// a pass reclaims as fast as it safely can: dead chunks and retired segments go without their
// grace periods (a commit that needs a dropped chunk fails with `chunk_gone`, a read of a deleted
// segment re-resolves), the reserve is given to a copy the file system has no room for, and it
// is taken back at the end of the pass once there is room for it and a segment more.
//
// Invariants:
// - A segment's `liveBytes` counts the records that chunk entries with references point at.
//   Retiring subtracts only what was moved, so a commit that lands in the segment after the
//   scan (an upload whose records were written before the seal and committed later) leaves
//   `liveBytes` above zero. A retired segment with live bytes is never deleted: it goes back
//   to `sealed`, and a later pass moves what it still holds.
// - The segment's index entry is removed, in a transaction that checks the above, before its
//   file is unlinked; from then on a commit that would point into it fails (`chunk_gone`), so
//   no entry can point at a deleted file. A crash between the two leaves a file the index does
//   not know, which recovery quarantines.
// - A segment whose scan does not reach its end (damaged) is never retired: its records past
//   the damage may be referenced. It is logged once and left for an operator.

import assert from 'node:assert';
import { errorCode } from '../../util/errors.js';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { IndexStore } from '../index/store.js';
import { DB, chunkKey, segmentKey, type ChunkRecord, type SegmentRecord } from '../index/schema.js';
import { segmentFileName, SEGMENT_HEADER_SIZE } from '../../format/segment-header.js';
import type { Settings } from '../../util/config.js';
import type { DataDirPaths } from '../data-dir.js';
import type { SegmentWriter } from './segment-writer.js';
import { engineSegmentWriter } from './engine-writer.js';
import { scanSegment } from './segment-scan.js';
import { recoverSegments } from './recovery.js';
import { expireAudit } from '../ops/audit.js';
import { expireIdempotency } from '../ops/idempotency.js';
import { expireMultipartUploads, MULTIPART_EXPIRE_PARTS_PER_BATCH } from '../ops/multipart.js';
import { nodeIo, type Io } from '../../util/io.js';
import { realClock, type Clock } from '../../util/clock.js';
import { segmentBytesFor, type SpaceReserve } from '../space-reserve.js';

/** Room a compaction leaves free beyond its copy: the footer, LMDB's pages of the move. */
const COPY_MARGIN_BYTES = 1024 * 1024;

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
  private readonly io: Io;
  private readonly clock: Clock;
  /** Segments found damaged: logged once, never compacted. */
  private readonly damaged = new Set<number>();
  readonly totals: CompactionStats = {
    segmentsCompacted: 0,
    recordsMoved: 0,
    bytesReclaimed: 0,
    chunksDropped: 0,
    segmentsDeleted: 0,
  };

  constructor(
    private readonly options: {
      paths: DataDirPaths;
      store: IndexStore;
      settings: Settings;
      log: Logger;
      /** Segments that uploads in flight wrote to: never deleted while pinned. */
      pins?: { has(segmentId: number): boolean; settled(): boolean };
      /** The file system (node:fs by default). */
      io?: Io;
      /** Grace periods and expiry read this clock (the wall clock by default). */
      clock?: Clock;
      /**
       * An fdatasync of the compactor's segment failed (SegmentRegistry.failed); the writer
       * waits for the answer (the engine commits the segment's poison mark).
       */
      segmentFailed?: (segmentId: number) => Promise<void> | void;
      /** Recovery sealed a segment whose writer is gone (the syncer lets its handle go). */
      segmentSealed?: (segmentId: number) => void;
      /** The data directory's space reserve, given to compaction on a full disk. */
      space?: SpaceReserve;
    },
  ) {
    const { store, settings } = options;
    this.io = options.io ?? nodeIo;
    this.clock = options.clock ?? realClock;
    this.liveRatioMin = settings.ratio('storage.compaction_live_ratio');
    const clock = this.clock;
    const context = { store, masterKey: Buffer.alloc(0), settings, now: () => clock.now() };
    this.writer = engineSegmentWriter({
      context,
      segmentsDir: options.paths.segments,
      io: this.io,
      failed: options.segmentFailed,
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
      return {
        segmentsCompacted: 0,
        recordsMoved: 0,
        bytesReclaimed: 0,
        chunksDropped: 0,
        segmentsDeleted: 0,
      };
    });
  }

  private async pass(): Promise<CompactionStats> {
    const { paths, store, log } = this.options;
    const stats: CompactionStats = {
      segmentsCompacted: 0,
      recordsMoved: 0,
      bytesReclaimed: 0,
      chunksDropped: 0,
      segmentsDeleted: 0,
    };
    await recoverSegments({
      paths,
      store,
      log,
      includeOwn: false,
      io: this.io,
      clock: this.clock,
      sealed: this.options.segmentSealed,
    });
    store.refresh();
    const short = await this.shortOfSpace();
    const { dropped, keptBytes } = await this.dropDeadChunks(short);
    stats.chunksDropped = dropped;
    for (const segment of this.candidates(keptBytes)) {
      try {
        if (short) await this.roomToCopy(segment.liveBytes + (keptBytes.get(segment.id) ?? 0));
        await this.compact(segment, stats);
      } catch (error) {
        // A full disk is not damage: the segment is tried again on a later pass, once there is
        // room for the records it still holds.
        if (errorCode(error) === 'disk_full') {
          log.warn(
            { segmentId: segment.id },
            'no space to compact segment now; trying again later',
          );
          break;
        }
        this.damaged.add(segment.id);
        log.error(
          { err: error, segmentId: segment.id },
          'cannot compact segment; leaving it alone',
        );
      }
    }
    stats.segmentsDeleted = await this.deleteRetired(short);
    // Writes resume once the reserve is whole again, with a segment's room on top of it.
    if (short && this.options.space)
      await this.options.space.restore(await this.segmentBytes()).catch((error: unknown) => {
        log.warn({ err: error }, 'cannot take the space reserve back yet');
      });
    const auditCutoff = this.clock.now() - this.options.settings.duration('audit.retention');
    while ((await store.transact(() => expireAudit(store, auditCutoff, 10_000))) === 10_000);
    const now = this.clock.now();
    while ((await store.transact(() => expireIdempotency(store, now, 10_000))) === 10_000);
    // Abandoned multipart uploads (and uploads of deleted buckets) release their parts' chunks.
    const expiry = {
      now,
      expiryMs: this.options.settings.duration('multipart.expiry'),
      partsMax: MULTIPART_EXPIRE_PARTS_PER_BATCH,
    };
    const context = {
      store,
      masterKey: Buffer.alloc(0),
      settings: this.options.settings,
      now: () => this.clock.now(),
    };
    while (
      (await store.transact(() => expireMultipartUploads(context, expiry))) >= expiry.partsMax
    );
    for (const key of Object.keys(stats) as Array<keyof CompactionStats>)
      this.totals[key] += stats[key];
    if (stats.segmentsCompacted + stats.segmentsDeleted + stats.chunksDropped > 0)
      log.info(stats, 'compaction pass');
    return stats;
  }

  /**
   * Drops the chunk entries dead for longer than the grace, and answers, by segment, the bytes
   * of dead chunks still inside it: a compaction would have to copy those (a new upload may
   * still revive them), so they are not reclaimable yet (see `candidates`).
   */
  private async dropDeadChunks(
    short: boolean,
  ): Promise<{ dropped: number; keptBytes: Map<number, number> }> {
    const { store, settings } = this.options;
    // Short of space, dead chunks go at once: an upload that found one by dedup and commits
    // after it went fails with `chunk_gone` (503, retried), never with wrong data.
    const cutoff = this.clock.now() - (short ? 0 : settings.duration('storage.dead_chunk_grace'));
    const dead: Buffer[] = [];
    const keptBytes = new Map<number, number>();
    for (const { key, value } of store.range<ChunkRecord>(DB.chunks, {})) {
      if (value.refs > 0) continue;
      if ((value.deadSince ?? 0) <= cutoff) dead.push(Buffer.from(key));
      else keptBytes.set(value.segmentId, (keptBytes.get(value.segmentId) ?? 0) + value.length);
    }
    if (dead.length === 0) return { dropped: 0, keptBytes };
    const dropped = await store.transact(() => {
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
    return { dropped, keptBytes };
  }

  /**
   * Sealed segments whose live and still-kept bytes (dead chunks inside their grace, which a
   * compaction copies too) fall under the live ratio: a segment whose dead bytes are all kept
   * waits for the grace to pass, instead of being copied to a new segment that would qualify
   * again on the next pass, again and again until then.
   */
  private candidates(keptBytes: ReadonlyMap<number, number>): SegmentRecord[] {
    const found: SegmentRecord[] = [];
    for (const { value } of this.options.store.range<SegmentRecord>(DB.segments, {})) {
      if (value.state !== 'sealed' || value.size === undefined || this.damaged.has(value.id))
        continue;
      const retained = value.liveBytes + (keptBytes.get(value.id) ?? 0);
      if (
        retained < value.size * this.liveRatioMin ||
        (value.size <= SEGMENT_HEADER_SIZE && value.liveBytes === 0)
      )
        found.push(value);
    }
    // The emptiest first: they cost the least room to copy, which a full disk has little of.
    return found.sort((a, b) => a.liveBytes - b.liveBytes);
  }

  /**
   * The data filesystem is short of space: the reserve is out (given to reclaiming), or less
   * than a segment is free. Never without a reserve to tell (the simulation's file system).
   */
  private async shortOfSpace(): Promise<boolean> {
    const space = this.options.space;
    if (!space) return false;
    if (!space.whole) return true;
    const figures = await space.figures();
    return figures !== undefined && figures.freeBytes < (await this.segmentBytes());
  }

  /** The size of segments on this file system (space-reserve.ts). */
  private async segmentBytes(): Promise<number> {
    const figures = await this.options.space?.figures();
    return segmentBytesFor(
      this.options.settings.bytes('storage.segment_bytes_max'),
      figures?.totalBytes,
    );
  }

  /** Gives the reserve to this compaction when the file system has no room for its copy. */
  private async roomToCopy(bytes: number): Promise<void> {
    const space = this.options.space;
    const figures = await space?.figures();
    if (!space || !figures || figures.freeBytes >= bytes + COPY_MARGIN_BYTES) return;
    await space.release('compaction needs room to copy a segment');
  }

  private async compact(segment: SegmentRecord, stats: CompactionStats): Promise<void> {
    const { store, paths, log } = this.options;
    type Move = {
      key: Buffer;
      from: number;
      to: { segmentId: number; offset: number; length: number };
    };
    const moves: Move[] = [];
    const waits: Array<Promise<void>> = [];
    let copiedBytes = 0;
    if (segment.size !== undefined && segment.size > SEGMENT_HEADER_SIZE) {
      let scan;
      try {
        scan = await scanSegment(
          join(paths.segments, segmentFileName(segment.id)),
          async (record) => {
            if (!record.bytes || record.header.kind !== 1) return;
            const key = chunkKey(record.header.tenantNum, record.header.chunkId);
            const chunk = store.get<ChunkRecord>(DB.chunks, key);
            if (!chunk || chunk.segmentId !== segment.id || chunk.offset !== record.offset) return;
            const appended = await this.writer.append([record.bytes]);
            copiedBytes += record.bytes.length;
            const durable = appended.durable();
            // Handled at once: a failed fdatasync while the scan goes on must not be an
            // unhandled rejection, which ends the engine process; it is awaited below.
            durable.catch(() => undefined);
            waits.push(durable);
            moves.push({ key, from: record.offset, to: appended });
          },
          { withBytes: true, io: this.io },
        );
      } finally {
        // Every durable() is awaited, even when the scan failed half way.
        await Promise.allSettled(waits);
      }
      if (scan.torn || scan.segmentId !== segment.id) {
        this.damaged.add(segment.id);
        log.error(
          { segmentId: segment.id, validEnd: scan.validEnd, fileSize: scan.fileSize },
          'sealed segment does not scan to its end; not compacting it',
        );
        return;
      }
      await Promise.all(waits);
    }
    const moved = await store.transact(() => this.applyMoves(segment.id, moves));
    stats.segmentsCompacted += 1;
    stats.recordsMoved += moved;
    // What the copy left behind: the records of live chunks and of kept dead ones moved.
    stats.bytesReclaimed += Math.max(0, (segment.size ?? 0) - copiedBytes);
  }

  private applyMoves(
    segmentId: number,
    moves: ReadonlyArray<{
      key: Buffer;
      from: number;
      to: { segmentId: number; offset: number; length: number };
    }>,
  ): number {
    const { store } = this.options;
    let moved = 0;
    let movedLive = 0;
    for (const move of moves) {
      const chunk = store.get<ChunkRecord>(DB.chunks, move.key);
      if (!chunk || chunk.segmentId !== segmentId || chunk.offset !== move.from) continue;
      chunk.segmentId = move.to.segmentId;
      chunk.offset = move.to.offset;
      store.put(DB.chunks, move.key, chunk);
      if (chunk.refs > 0) {
        adjustLive(store, move.to.segmentId, chunk.length);
        movedLive += chunk.length;
      }
      moved += 1;
    }
    const old = store.get<SegmentRecord>(DB.segments, segmentKey(segmentId));
    if (old) {
      old.state = 'retired';
      // What remains belongs to chunks committed into the segment after the scan. The moved
      // chunks were live here, so their bytes are part of the count: less is a broken ledger,
      // which must stop the engine rather than be hidden as zero.
      assert(
        old.liveBytes >= movedLive,
        `segment ${segmentId} counts ${old.liveBytes} live bytes, under the ${movedLive} moved`,
      );
      old.liveBytes -= movedLive;
      old.retiredAt = this.clock.now();
      store.put(DB.segments, segmentKey(segmentId), old);
    }
    return moved;
  }

  private async deleteRetired(short: boolean): Promise<number> {
    const { store, paths, settings, log } = this.options;
    // Just started: the gateways' uploads in flight have not all been reported yet.
    if (this.options.pins && !this.options.pins.settled()) return 0;
    // Short of space, retired segments go at once: a read that still holds the old address
    // finds the file gone and resolves the chunk's new one (segment-reader.ts).
    const grace = short ? 0 : settings.duration('storage.retired_segment_grace');
    const cutoff = this.clock.now() - grace;
    const expired: number[] = [];
    const unfinished: number[] = [];
    for (const { value } of store.range<SegmentRecord>(DB.segments, {})) {
      if (value.state === 'retired' && (value.retiredAt ?? 0) <= cutoff) expired.push(value.id);
      if (value.state === 'deleted') unfinished.push(value.id);
    }
    if (expired.length + unfinished.length === 0) return 0;
    const { removed, revived } = await store.transact(() => {
      const result = { removed: [] as number[], revived: [] as number[] };
      for (const segmentId of expired) {
        const key = segmentKey(segmentId);
        const record = store.get<SegmentRecord>(DB.segments, key);
        if (!record || record.state !== 'retired') continue;
        // An upload in flight wrote records here that it has not committed yet: the segment
        // stays retired until it has (its live bytes then bring it back) or has given up.
        if (this.options.pins?.has(segmentId)) continue;
        if (record.liveBytes > 0) {
          // Chunks were committed into it after its records were moved: compact it again.
          record.state = 'sealed';
          delete record.retiredAt;
          store.put(DB.segments, key, record);
          result.revived.push(segmentId);
          continue;
        }
        // The record stays (state `deleted`) until the file is gone: a crash in between leaves a
        // known file that the next pass removes, never an unknown one.
        record.state = 'deleted';
        store.put(DB.segments, key, record);
        result.removed.push(segmentId);
      }
      return result;
    });
    if (revived.length > 0)
      log.info(
        { segments: revived },
        'retired segments still hold live chunks; compacting them again',
      );
    const gone = [...unfinished, ...removed];
    for (const segmentId of gone) {
      await this.io
        .unlink(join(paths.segments, segmentFileName(segmentId)))
        .catch((error: unknown) => {
          if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
        });
    }
    // The files are gone for good before their index entries go (a crash between the two
    // leaves a known entry whose file is missing, which the next pass finishes).
    if (gone.length > 0) await this.io.syncDirectory(paths.segments);
    await store.transact(() => {
      for (const segmentId of gone) {
        if (store.get<SegmentRecord>(DB.segments, segmentKey(segmentId))?.state === 'deleted')
          store.remove(DB.segments, segmentKey(segmentId));
      }
    });
    return removed.length;
  }
}

function adjustLive(store: IndexStore, segmentId: number, delta: number): void {
  const record = store.get<SegmentRecord>(DB.segments, segmentKey(segmentId));
  if (!record) return;
  record.liveBytes += delta;
  store.put(DB.segments, segmentKey(segmentId), record);
}
