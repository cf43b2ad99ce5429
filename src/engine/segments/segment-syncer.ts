// Group fdatasync of segment data, done by the engine right before the commit that references
// it.
//
// Workers append records with plain writes and return at once; the engine makes the bytes
// durable before it commits the manifests that point at them. fdatasync flushes the file's
// dirty pages whichever process wrote them (the page cache is per inode), and the device's
// write cache, which is what makes the pool's direct (O_DIRECT) writes durable, so one
// engine-side sync per segment covers every write that any worker of any gateway completed
// before it: concurrent commits share one fdatasync per segment, across all gateways.
//
// Invariants:
// - `sync(ids)` resolves only after an fdatasync of each segment that *started* after the call,
//   so every write completed before the call is durable.
// - A failed fdatasync is never retried as if the data were safe. After it, Linux marks the
//   dirty pages clean (their bytes may be lost) and reports the error once per open file: a
//   second fdatasync, through a new handle above all, succeeds while the writes of other
//   uploads that were in those pages are gone. So a segment whose fdatasync failed is poisoned
//   for the life of the engine: every later sync of it fails (`segment_io`), no commit can
//   point into it again, and recovery cuts it at its first damaged record once its writer is
//   gone. Found by the fault simulation (test/fault/simulation.test.ts).

import { join } from 'node:path';
import { segmentFileName } from '../../format/segment-header.js';
import { ChunkGone, SegmentIoError, isLightwellError } from '../../util/errors.js';
import { nodeIo, type Io, type IoFile } from '../../util/io.js';

const HANDLES_MAX = 256;

interface SyncState {
  handle: Promise<IoFile>;
  /** The fdatasync in flight. */
  running?: Promise<void> | undefined;
  /** The next fdatasync, which starts when the running one ends; joined by later callers. */
  next?: Promise<void> | undefined;
}

export class SegmentSyncer {
  private readonly states = new Map<number, SyncState>();
  /** Segments whose fdatasync failed once: never synced as good again (see the header). */
  private readonly poisoned = new Set<number>();
  syncs = 0;
  /** Told of each fdatasync's seconds (metrics). */
  onSync: ((seconds: number) => void) | undefined;

  constructor(
    private readonly segmentsDir: string,
    private readonly io: Io = nodeIo,
  ) {}

  async sync(segmentIds: Iterable<number>): Promise<void> {
    await Promise.all([...new Set(segmentIds)].map((segmentId) => this.syncOne(segmentId)));
  }

  /**
   * A writer's fdatasync of the segment failed (SegmentRegistry.failed): the kernel told the
   * writer, not this syncer, whose next fdatasync would succeed over lost bytes.
   */
  poison(segmentId: number): void {
    this.poisoned.add(segmentId);
  }

  private syncOne(segmentId: number): Promise<void> {
    if (this.poisoned.has(segmentId)) return Promise.reject(poisonedError(segmentId));
    const state = this.stateOf(segmentId);
    if (!state.running) {
      state.running = this.run(state, segmentId);
      return state.running;
    }
    state.next ??= state.running
      .catch(() => undefined)
      .then(() => {
        state.next = undefined;
        state.running = this.run(state, segmentId);
        return state.running;
      });
    return state.next;
  }

  private async run(state: SyncState, segmentId: number): Promise<void> {
    try {
      if (this.poisoned.has(segmentId)) throw poisonedError(segmentId);
      const handle = await state.handle;
      const started = performance.now();
      try {
        await handle.datasync();
      } catch (cause) {
        // The fdatasync itself failed: what it covered may be lost (see the header).
        this.poisoned.add(segmentId);
        throw cause;
      }
      this.onSync?.((performance.now() - started) / 1000);
      // A writer reported a failure while this fdatasync ran: it may have covered lost pages.
      if (this.poisoned.has(segmentId)) throw poisonedError(segmentId);
      this.syncs += 1;
    } catch (cause) {
      this.forget(segmentId);
      // A segment whose file is gone was reclaimed: the upload that wrote to it must retry.
      if ((cause as NodeJS.ErrnoException).code === 'ENOENT')
        throw ChunkGone(`segment ${segmentId} was reclaimed before the commit; retry the upload`);
      if (isLightwellError(cause)) throw cause;
      throw SegmentIoError(`fdatasync of segment ${segmentId} failed`, { segmentId }, { cause });
    } finally {
      if (this.states.get(segmentId) === state && !state.next) state.running = undefined;
    }
  }

  private stateOf(segmentId: number): SyncState {
    let state = this.states.get(segmentId);
    if (state) {
      this.states.delete(segmentId);
      this.states.set(segmentId, state);
      return state;
    }
    const handle = this.io.open(join(this.segmentsDir, segmentFileName(segmentId)), 'r+');
    handle.catch(() => undefined);
    state = { handle };
    this.states.set(segmentId, state);
    this.evict();
    return state;
  }

  private evict(): void {
    for (const [segmentId, state] of this.states) {
      if (this.states.size <= HANDLES_MAX) return;
      if (state.running || state.next) continue;
      this.forget(segmentId);
    }
  }

  /** Closes the handle of a sealed, retired or deleted segment. */
  forget(segmentId: number): void {
    const state = this.states.get(segmentId);
    if (!state) return;
    this.states.delete(segmentId);
    const close = (): void => {
      void state.handle.then((handle) => handle.close()).catch(() => undefined);
    };
    if (state.running || state.next)
      void Promise.allSettled([state.running, state.next]).then(close);
    else close();
  }

  close(): void {
    for (const segmentId of [...this.states.keys()]) this.forget(segmentId);
  }
}

function poisonedError(segmentId: number): Error {
  return SegmentIoError(
    `an earlier fdatasync of segment ${segmentId} failed; its unsynced writes may be lost`,
    { segmentId },
  );
}
