// Recovery of segments left open by a writer that died (a crashed gateway worker, or a crashed
// engine's compactor).
//
// For each open segment whose owner process is gone: scan it, cut a torn tail at the end of the
// last intact record (ftruncate + fsync), and seal it at that size. Intact records that no index
// entry references are garbage that compaction reclaims. A segment file that the index does not
// know is not ours to trust: it is quarantined (renamed to `.orphan`) and counted, never
// deleted. Runs at engine start and again periodically, so a gateway that died while the
// engine kept running is recovered too.

import { open, readdir, rename, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { IndexStore } from '../index/store.js';
import { DB, segmentKey, type SegmentRecord } from '../index/schema.js';
import { segmentFileName, parseSegmentFileName, SEGMENT_HEADER_SIZE } from '../../format/segment-header.js';
import { processAlive, type DataDirPaths } from '../data-dir.js';
import { scanSegment } from './segment-scan.js';

export interface RecoveryReport {
  recovered: number;
  truncatedBytes: number;
  quarantined: number;
}

export async function recoverSegments(options: { paths: DataDirPaths; store: IndexStore; log: Logger }): Promise<RecoveryReport> {
  const { paths, store, log } = options;
  const report: RecoveryReport = { recovered: 0, truncatedBytes: 0, quarantined: 0 };
  store.refresh();
  const open: SegmentRecord[] = [];
  for (const { value } of store.range<SegmentRecord>(DB.segments, {})) {
    if (value.state === 'open' && !(value.ownerPid !== undefined && value.ownerPid !== process.pid && processAlive(value.ownerPid))) {
      open.push(value);
    }
  }
  for (const segment of open) {
    const size = await cutTornTail(join(paths.segments, segmentFileName(segment.id)), report);
    await store.transact(() => {
      const current = store.get<SegmentRecord>(DB.segments, segmentKey(segment.id));
      if (!current || current.state !== 'open') return;
      current.state = 'sealed';
      current.size = size;
      current.sealedAt = Date.now();
      delete current.ownerPid;
      store.put(DB.segments, segmentKey(segment.id), current);
    });
    report.recovered += 1;
  }
  report.quarantined = await quarantineUnknownFiles(paths, store);
  if (report.recovered + report.quarantined > 0) log.info(report, 'segments recovered');
  return report;
}

/** Returns the recovered size: the end of the last intact record (0 when there is no file). */
async function cutTornTail(path: string, report: RecoveryReport): Promise<number> {
  try {
    await stat(path);
  } catch {
    return 0;
  }
  const scan = await scanSegment(path, () => undefined, { withBytes: false });
  const keep = scan.segmentId === undefined ? 0 : Math.max(scan.validEnd, SEGMENT_HEADER_SIZE);
  if (keep < scan.fileSize) {
    const handle = await open(path, 'r+');
    try {
      await handle.truncate(keep);
      await handle.sync();
    } finally {
      await handle.close();
    }
    report.truncatedBytes += scan.fileSize - keep;
  }
  return keep;
}

async function quarantineUnknownFiles(paths: DataDirPaths, store: IndexStore): Promise<number> {
  let quarantined = 0;
  for (const name of await readdir(paths.segments)) {
    const segmentId = parseSegmentFileName(name);
    if (segmentId === undefined) continue;
    if (store.has(DB.segments, segmentKey(segmentId))) continue;
    await rename(join(paths.segments, name), join(paths.segments, `${name}.orphan`));
    quarantined += 1;
  }
  return quarantined;
}
