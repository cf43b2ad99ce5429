// Segment commands: allocation of a new segment id to a writer, and sealing.
//
// A segment is registered (state `open`, owner pid) before its file exists, so every segment
// file on disk has an index entry; an entry whose file never appeared is sealed empty by
// recovery.

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
