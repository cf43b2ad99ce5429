// Goal: the engine's group fdatasync, the point at which an upload's records become durable
// before its manifest commits. `sync(ids)` resolves only after an fdatasync of each segment
// that started after the call (a sync already running when the call arrives does not count);
// concurrent calls share fdatasyncs; each segment is synced once per call however often it is
// named; a failed fdatasync fails its callers with segment_io and the next call starts afresh.
// Method: the real SegmentSyncer on segment files written by a SegmentWriter in a temporary
// directory; fdatasync is counted, held at a gate or failed by wrapping the FileHandle
// prototype for one test.
import t from 'tap';
import { SegmentSyncer } from '../../src/engine/segments/segment-syncer.js';
import { SegmentWriter } from '../../src/engine/segments/segment-writer.js';
import { errorCode } from '../../src/util/errors.js';
import { nodeIo, type Io, type IoFile } from '../../src/util/io.js';
import { segmentFileName } from '../../src/format/segment-header.js';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  tempDir,
  chunkRecord,
  RecordingRegistry,
  hookFileHandle,
  gate,
  settle,
  track,
} from './segment-testing.js';

async function twoSegments(dir: string): Promise<number[]> {
  const writer = new SegmentWriter({
    segmentsDir: dir,
    registry: new RecordingRegistry(),
    segmentBytesMax: 64 + 2 * 1080,
  });
  const ids = new Set<number>();
  for (let index = 0; index < 3; index += 1) {
    const appended = await writer.append([chunkRecord(1000)]);
    await appended.written();
    ids.add(appended.segmentId);
  }
  await writer.close();
  return [...ids];
}

t.test('concurrent calls share fdatasyncs; a segment named twice is synced once', async (t) => {
  const dir = tempDir(t);
  const [first, second] = (await twoSegments(dir)) as [number, number];
  const syncer = new SegmentSyncer(dir);
  t.teardown(() => syncer.close());
  let syncs = 0;
  await hookFileHandle(t, 'datasync', async (original) => {
    syncs += 1;
    await settle(5);
    return original();
  });
  await syncer.sync([first, first, first]);
  t.equal(syncs, 1, 'one fdatasync for a segment named three times');
  syncs = 0;
  await Promise.all(
    Array.from({ length: 100 }, (_, index) => syncer.sync(index % 2 ? [first] : [first, second])),
  );
  t.ok(syncs <= 4, `100 concurrent calls over two segments shared ${syncs} fdatasyncs`);
  t.ok(syncs >= 2, 'each segment was synced');
});

t.test('a call made while an fdatasync runs waits for the next one', async (t) => {
  const dir = tempDir(t);
  const [segment] = (await twoSegments(dir)) as [number];
  const syncer = new SegmentSyncer(dir);
  t.teardown(() => syncer.close());
  const gates: Array<ReturnType<typeof gate>> = [];
  let finished = 0;
  await hookFileHandle(t, 'datasync', async (original) => {
    const held = gate();
    gates.push(held);
    await held.promise;
    const result = await original();
    finished += 1;
    return result;
  });
  const early = track(syncer.sync([segment]));
  await settle();
  t.equal(gates.length, 1, 'the first call started an fdatasync');
  const late = track(syncer.sync([segment]));
  const later = track(syncer.sync([segment]));
  await settle();
  t.equal(gates.length, 1, 'later calls do not start a second one while it runs');
  gates[0]?.open();
  await early.promise;
  await settle();
  t.equal(finished, 1);
  t.notOk(late.settled, 'a call that arrived during the running fdatasync is not satisfied by it');
  t.equal(gates.length, 2, 'the next fdatasync started');
  gates[1]?.open();
  await Promise.all([late.promise, later.promise]);
  t.equal(finished, 2, 'both waiting calls shared it');
});

t.test('a failed fdatasync fails its callers; other segments go on', async (t) => {
  const dir = tempDir(t);
  const [segment, other] = (await twoSegments(dir)) as [number, number];
  const syncer = new SegmentSyncer(dir);
  t.teardown(() => syncer.close());
  let fail = true;
  await hookFileHandle(t, 'datasync', async (original) => {
    if (fail) {
      fail = false;
      throw Object.assign(new Error('EIO: injected'), { code: 'EIO' });
    }
    return original();
  });
  const failed = await syncer.sync([segment]).catch((error: unknown) => error);
  t.equal(errorCode(failed), 'segment_io', 'segment_io');
  await syncer.sync([other]);
  t.pass('another segment syncs');
  const missing = await syncer.sync([999]).catch((error: unknown) => error);
  t.equal(errorCode(missing), 'chunk_gone', 'a segment without a file was reclaimed: chunk_gone');
});

t.test('a failed fdatasync poisons the segment: no later sync of it succeeds', async (t) => {
  const dir = tempDir(t);
  const path = join(dir, segmentFileName(7));
  writeFileSync(path, Buffer.alloc(64));
  let failNext = true;
  const io: Io = {
    ...nodeIo,
    open: async (file, flags, mode) => {
      const handle = await nodeIo.open(file, flags, mode);
      return Object.assign(Object.create(handle) as IoFile, {
        fd: handle.fd,
        close: () => handle.close(),
        datasync: async () => {
          if (failNext) {
            failNext = false;
            throw Object.assign(new Error('EIO (injected)'), { code: 'EIO' });
          }
          await handle.datasync();
        },
      });
    },
  };
  const syncer = new SegmentSyncer(dir, io);
  t.teardown(() => syncer.close());
  await t.rejects(syncer.sync([7]), { code: 'segment_io' });
  // Linux reports a failed write-back once; a new handle's fdatasync would succeed, while the
  // writes that were in the dropped pages are gone. The syncer must not believe it.
  await t.rejects(syncer.sync([7]), { code: 'segment_io' }, 'still refused');
  await t.rejects(syncer.sync([7]), { code: 'segment_io' }, 'and again');
});

t.test('syncEach fails only the segments that failed, and syncs the others', async (t) => {
  const dir = tempDir(t);
  const [poisoned, healthy] = (await twoSegments(dir)) as [number, number];
  const syncer = new SegmentSyncer(dir);
  t.teardown(() => syncer.close());
  await syncer.poison(poisoned);
  const together = await syncer.sync([poisoned, healthy]).catch((error: unknown) => error);
  t.equal(errorCode(together), 'segment_io', '`sync` of both fails as a whole');
  const failed = await syncer.syncEach([poisoned, healthy, poisoned]);
  t.same([...failed.keys()], [poisoned], 'syncEach names only the poisoned segment');
  t.equal(errorCode(failed.get(poisoned)), 'segment_io', 'with its error');
  const syncs = syncer.syncs;
  t.same(await syncer.syncEach([healthy]), new Map(), 'the healthy one syncs on its own');
  t.equal(syncer.syncs, syncs + 1, 'with an fdatasync of its own');
});
