// Segment commands: allocation of a new segment id to a writer, and sealing.
//
// A segment is registered (state `open`, owner pid) before its file exists, so every segment
// file on disk has an index entry; an entry whose file never appeared is sealed empty by
// recovery. A segment whose fdatasync failed is marked (`syncFailedAt`) so that the syncer refuses
// commits into it after a restart too (segment-syncer.ts).

import { DB, segmentKey, type SegmentRecord } from '../index/schema.js';
import { nextCounter, type EngineContext } from './context.js';
import { NotFound } from '../../util/errors.js';

export function allocSegment(
  context: EngineContext,
  args: { ownerPid: number },
): { segmentId: number } {
  const segmentId = nextCounter(context, 'nextSegmentId');
  const record: SegmentRecord = {
    id: segmentId,
    state: 'open',
    ownerPid: args.ownerPid,
    createdAt: context.now(),
    liveBytes: 0,
  };
  context.store.put(DB.segments, segmentKey(segmentId), record);
  return { segmentId };
}

export function sealSegment(
  context: EngineContext,
  args: { segmentId: number; size: number },
): SegmentRecord {
  const key = segmentKey(args.segmentId);
  const record = context.store.get<SegmentRecord>(DB.segments, key);
  if (!record) throw NotFound(`segment ${args.segmentId} not found`);
  if (record.state === 'open') {
    record.state = 'sealed';
    record.size = args.size;
    record.sealedAt = context.now();
    delete record.ownerPid;
    context.store.put(DB.segments, key, record);
  }
  return record;
}

/**
 * Marks a segment whose fdatasync failed (segment-syncer.ts); answers whether the mark is new.
 * A segment already gone needs none: nothing can point into it.
 */
export function markSegmentFailed(context: EngineContext, args: { segmentId: number }): boolean {
  const key = segmentKey(args.segmentId);
  const record = context.store.get<SegmentRecord>(DB.segments, key);
  if (!record || record.state === 'deleted' || record.syncFailedAt !== undefined) return false;
  record.syncFailedAt = context.now();
  context.store.put(DB.segments, key, record);
  return true;
}

/**
 * What the syncer watches at the engine's start: segments marked by `markSegmentFailed` that
 * still exist (refused), and segments still open after recovery, whose writers outlived the
 * engine (held).
 */
export function watchedSegments(context: EngineContext): { failed: number[]; writing: number[] } {
  const failed: number[] = [];
  const writing: number[] = [];
  for (const { value } of context.store.range<SegmentRecord>(DB.segments, {})) {
    if (value.syncFailedAt !== undefined && value.state !== 'deleted') failed.push(value.id);
    else if (value.state === 'open') writing.push(value.id);
  }
  return { failed, writing };
}
