// Recovery of segments left open by a writer that died (a crashed gateway worker, or a crashed
// engine's compactor).
//
// For each open segment whose owner process is gone: scan it, cut a torn tail at the end of the
// last intact record (ftruncate + fsync), and seal it at that size. Intact records that no index
// entry references are garbage that compaction reclaims. A segment file that the index does not
// know is not ours to trust: it is quarantined (renamed to `.orphan`) and counted, never
// deleted. Runs at engine start and again periodically, so a gateway that died while the
// engine kept running is recovered too.
//
// Invariants:
// - A writer acknowledges a record only when every record before it in the segment is written
//   and fsynced (segment-writer.ts), so the bytes after the last intact record were never
//   acknowledged. As a guard, before cutting, recovery checks that no chunk entry of the index
//   points into the bytes it would cut; if one does, the damage is not a torn tail but damage
//   to acknowledged data: nothing is cut, the segment is sealed at its full size and counted
//   as damaged (compaction leaves such a segment alone), and an operator must look at it.
// - The periodic pass (`includeOwn: false`) never touches the open segments of this process:
//   the engine's compactor appends to one of its own while the engine runs. At start
//   (`includeOwn: true`) an open segment with this process's pid belongs to an earlier process
//   that had the same pid, and is recovered.
// - A file is quarantined only when the index, read after the directory listing, does not
//   know it: a writer registers a segment (durably) before it creates the file, so a listing
//   can never see a live segment's file before the index does.
// - A file whose header names another segment than its file name is never cut: it is sealed at
//   its size and counted as damaged (the reader refuses its records: segment-reader.ts).
// - What recovery seals ends in a seal footer, as a writer's seal does (one sealed shape), unless
//   the footer cannot be written: then it is sealed at its last record, as earlier releases did.

import { join } from 'node:path';
import type { Logger } from 'pino';
import type { IndexStore } from '../index/store.js';
import { DB, segmentKey, type ChunkRecord, type SegmentRecord } from '../index/schema.js';
import {
  segmentFileName,
  parseSegmentFileName,
  SEGMENT_HEADER_SIZE,
} from '../../format/segment-header.js';
import { processAlive, type DataDirPaths } from '../data-dir.js';
import { scanSegment } from './segment-scan.js';
import { encodeSealFooter } from '../../format/seal-footer.js';
import { SegmentIoError } from '../../util/errors.js';
import { nodeIo, type Io } from '../../util/io.js';
import { realClock, type Clock } from '../../util/clock.js';

export interface RecoveryReport {
  recovered: number;
  truncatedBytes: number;
  /** Segments whose torn tail held bytes the index points at: sealed uncut, left alone. */
  damaged: number;
  quarantined: number;
}

export async function recoverSegments(options: {
  paths: DataDirPaths;
  store: IndexStore;
  log: Logger;
  includeOwn?: boolean;
  io?: Io;
  clock?: Clock;
  /** Told of each segment it sealed (the engine's syncer lets go of its handle). */
  sealed?: ((segmentId: number) => void) | undefined;
}): Promise<RecoveryReport> {
  const { paths, store, log } = options;
  const io = options.io ?? nodeIo;
  const clock = options.clock ?? realClock;
  const includeOwn = options.includeOwn ?? true;
  const report: RecoveryReport = { recovered: 0, truncatedBytes: 0, damaged: 0, quarantined: 0 };
  store.refresh();
  const open: SegmentRecord[] = [];
  for (const { value } of store.range<SegmentRecord>(DB.segments, {})) {
    if (value.state === 'open' && ownerGone(value.ownerPid, includeOwn)) open.push(value);
  }
  const scans = new Map<number, { path: string } & Measured>();
  for (const segment of open) {
    const path = join(paths.segments, segmentFileName(segment.id));
    scans.set(segment.id, { path, ...(await measure(io, path)) });
  }
  const referencedEnd = referencedEnds(
    store,
    [...scans].filter(([, scan]) => scan.keep < scan.fileSize).map(([id]) => id),
  );
  for (const segment of open) {
    const scan = scans.get(segment.id) as { path: string } & Measured;
    let size = scan.keep;
    const needed = referencedEnd.get(segment.id) ?? 0;
    if (scan.headerId !== undefined && scan.headerId !== segment.id) {
      // Another segment's file under this one's name (a misplaced or misdirected file): none of
      // its bytes are this segment's to cut. It is sealed as it is and left to an operator.
      log.error(
        { segmentId: segment.id, headerSegmentId: scan.headerId, fileSize: scan.fileSize },
        "segment file holds another segment's header; not cut",
      );
      report.damaged += 1;
      size = scan.fileSize;
    } else if (scan.keep < scan.fileSize) {
      if (needed > scan.keep) {
        log.error(
          {
            segmentId: segment.id,
            validEnd: scan.keep,
            fileSize: scan.fileSize,
            referencedEnd: needed,
          },
          'segment damaged before acknowledged records; not cut',
        );
        report.damaged += 1;
        size = scan.fileSize;
      } else {
        await cut(io, scan.path, scan.keep);
        report.truncatedBytes += scan.fileSize - scan.keep;
      }
    }
    // One sealed shape: what recovery seals ends in a footer, as what a writer seals does.
    if (size === scan.keep && scan.headerId === segment.id && !scan.sealed)
      size = await appendFooter(io, scan.path, scan, clock, log, segment.id);
    await store.transact(() => {
      const current = store.get<SegmentRecord>(DB.segments, segmentKey(segment.id));
      if (!current || current.state !== 'open') return;
      current.state = 'sealed';
      current.size = size;
      current.sealedAt = clock.now();
      delete current.ownerPid;
      store.put(DB.segments, segmentKey(segment.id), current);
    });
    options.sealed?.(segment.id);
    report.recovered += 1;
  }
  report.quarantined = await quarantineUnknownFiles(io, paths, store);
  if (report.recovered + report.quarantined > 0) log.info(report, 'segments recovered');
  return report;
}

function ownerGone(ownerPid: number | undefined, includeOwn: boolean): boolean {
  if (ownerPid === undefined) return true;
  if (ownerPid === process.pid) return includeOwn;
  return !processAlive(ownerPid);
}

interface Measured {
  readonly fileSize: number;
  /** End of the last intact record (of the footer, when the segment is sealed already). */
  readonly keep: number;
  readonly headerId: number | undefined;
  /** Intact records before `keep` (the footer not counted). */
  readonly records: number;
  /** The file already ends in a footer that agrees with it (its writer sealed it, then died). */
  readonly sealed: boolean;
}

/** The file's size and the end of its last intact record (0 when there is no valid header). */
async function measure(io: Io, path: string): Promise<Measured> {
  try {
    await io.size(path);
  } catch {
    return { fileSize: 0, keep: 0, headerId: undefined, records: 0, sealed: false };
  }
  const scan = await scanSegment(path, () => undefined, { withBytes: false, io });
  const keep = scan.segmentId === undefined ? 0 : Math.max(scan.validEnd, SEGMENT_HEADER_SIZE);
  return {
    fileSize: scan.fileSize,
    keep: Math.min(keep, scan.fileSize),
    headerId: scan.segmentId,
    records: scan.records,
    sealed: scan.sealed,
  };
}

/**
 * Appends a seal footer after the last intact record and syncs it; answers the sealed size.
 * Where it cannot be written (a full disk, an I/O error), the file is cut back to its records
 * and sealed there without one, the shape of segments sealed by earlier releases, which every
 * reader takes (the scan checks a footer only where there is one).
 */
async function appendFooter(
  io: Io,
  path: string,
  scan: Measured,
  clock: Clock,
  log: Logger,
  segmentId: number,
): Promise<number> {
  const footer = encodeSealFooter({
    recordCount: scan.records,
    dataEnd: scan.keep,
    sealedAtMs: clock.now(),
  });
  const handle = await io.open(path, 'r+');
  try {
    for (let done = 0; done < footer.length;) {
      const { bytesWritten } = await handle.write(
        footer,
        done,
        footer.length - done,
        scan.keep + done,
      );
      if (bytesWritten <= 0) throw SegmentIoError('a footer write wrote nothing', { segmentId });
      done += bytesWritten;
    }
    await handle.sync();
    return scan.keep + footer.length;
  } catch (error) {
    log.warn({ err: error, segmentId }, 'no seal footer written; sealed at its last record');
    await handle.truncate(scan.keep);
    await handle.sync();
    return scan.keep;
  } finally {
    await handle.close();
  }
}

/** For the given segments, the end of the furthest record a chunk entry points at. */
function referencedEnds(store: IndexStore, segmentIds: readonly number[]): Map<number, number> {
  const ends = new Map<number, number>();
  if (segmentIds.length === 0) return ends;
  const wanted = new Set(segmentIds);
  for (const { value } of store.range<ChunkRecord>(DB.chunks, {})) {
    if (!wanted.has(value.segmentId)) continue;
    ends.set(
      value.segmentId,
      Math.max(ends.get(value.segmentId) ?? 0, value.offset + value.length),
    );
  }
  return ends;
}

async function cut(io: Io, path: string, size: number): Promise<void> {
  const handle = await io.open(path, 'r+');
  try {
    await handle.truncate(size);
    await handle.sync();
  } finally {
    await handle.close();
  }
}

async function quarantineUnknownFiles(
  io: Io,
  paths: DataDirPaths,
  store: IndexStore,
): Promise<number> {
  let quarantined = 0;
  const names = await io.readdir(paths.segments);
  // Read the index after the listing: every file listed was registered before it was created.
  store.refresh();
  for (const name of names) {
    const segmentId = parseSegmentFileName(name);
    if (segmentId === undefined) continue;
    if (store.has(DB.segments, segmentKey(segmentId))) continue;
    await io.rename(join(paths.segments, name), join(paths.segments, `${name}.orphan`));
    quarantined += 1;
  }
  if (quarantined > 0) await io.syncDirectory(paths.segments);
  return quarantined;
}
