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
// - The poison outlives the engine: it is committed to the segment's index record
//   (`syncFailedAt`, through `persist`) before the commit that met the failure is refused and
//   before a writer's report of one is answered, and an engine loads the marks at start
//   (`load`). A gateway keeps writing while its engine restarts, and a restarted engine's new
//   handle would otherwise fdatasync a poisoned segment as if it were good. A mark that could
//   not be committed is tried again before each refusal of a commit into the segment.
// - Linux reports a failed write-back once to every file description opened before it (errseq),
//   so a handle opened after a writer's fdatasync failed would not hear of the failure while
//   the writer's report is still on its way. So a writer has the engine open its handle as soon
//   as the segment's file exists, before its first record is written (`hold`), and the handles
//   of segments being written are never evicted: an engine-side fdatasync always sees every
//   failed write-back of the records it is about to commit. Released at the seal (`forget`).
// - A restarted engine knows nothing a live writer saw before: its handles are new (Linux
//   reports an earlier failed write-back to none of them) and the writer's report of a failure
//   may have been lost with the old engine. So the open segments of live writers that it finds
//   at its start are refused (`expect`) until their writer registers each again (`hold`, after
//   resending the failures it saw and an fdatasync of its own handle: SegmentWriter.reregister)
//   or seals it; a commit into one waits up to `registrationWaitMs` for that, then is refused
//   with `engine_unavailable` (503 with Retry-After): the engine has just restarted.

import { join } from 'node:path';
import { segmentFileName } from '../../format/segment-header.js';
import {
  ChunkGone,
  EngineUnavailable,
  SegmentIoError,
  isLightwellError,
} from '../../util/errors.js';
import { nodeIo, type Io, type IoFile } from '../../util/io.js';

const HANDLES_MAX = 256;

interface SyncState {
  handle: Promise<IoFile>;
  /** The fdatasync in flight. */
  running?: Promise<void> | undefined;
  /** The next fdatasync, which starts when the running one ends; joined by later callers. */
  next?: Promise<void> | undefined;
  /** Opened for a writer before its first record (`hold`): never evicted. */
  held?: boolean;
}

export class SegmentSyncer {
  private readonly states = new Map<number, SyncState>();
  /** Segments whose fdatasync failed once: never synced as good again (see the header). */
  private readonly poisoned = new Set<number>();
  /** Poisoned segments whose mark is committed to the index. */
  private readonly marked = new Set<number>();
  /** Marks being committed, joined by later callers. */
  private readonly marking = new Map<number, Promise<void>>();
  /** Open segments of live writers that have not registered them since the start (`expect`). */
  private readonly unregistered = new Map<number, Array<() => void>>();
  syncs = 0;
  /** Told of each fdatasync's seconds (metrics). */
  onSync: ((seconds: number) => void) | undefined;
  /**
   * Commits the poison mark of a segment to the index (the engine's `markSegmentFailed`);
   * without it (tests) the poison lives in memory only.
   */
  persist: ((segmentId: number) => Promise<void>) | undefined;

  constructor(
    private readonly segmentsDir: string,
    private readonly io: Io = nodeIo,
    /** How long a commit into a segment not yet registered again waits (see the header). */
    private readonly registrationWaitMs = 0,
  ) {}

  async sync(segmentIds: Iterable<number>): Promise<void> {
    await Promise.all([...new Set(segmentIds)].map((segmentId) => this.syncOne(segmentId)));
  }

  /**
   * Syncs each segment on its own, as `sync` does, and answers the error of each that failed
   * instead of failing all: a group of commits refuses only those that point into a failed
   * segment (the engine's `putObjects`).
   */
  async syncEach(segmentIds: Iterable<number>): Promise<Map<number, unknown>> {
    const failed = new Map<number, unknown>();
    await Promise.all(
      [...new Set(segmentIds)].map((segmentId) =>
        this.syncOne(segmentId).catch((error: unknown) => failed.set(segmentId, error)),
      ),
    );
    return failed;
  }

  /**
   * A writer's fdatasync of the segment failed (SegmentRegistry.failed): the kernel told the
   * writer, not this syncer, whose next fdatasync would succeed over lost bytes. Refused at
   * once; resolves once the mark is committed (see the header).
   */
  poison(segmentId: number): Promise<void> {
    this.poisoned.add(segmentId);
    return this.mark(segmentId);
  }

  /** Segments marked as failed in the index (at the engine's start). */
  load(segmentIds: Iterable<number>): void {
    for (const segmentId of segmentIds) {
      this.poisoned.add(segmentId);
      this.marked.add(segmentId);
    }
  }

  /**
   * The open segments of live writers, found at the engine's start: commits into them are
   * refused until their writer registers them again (`hold`) or seals them (see the header).
   */
  expect(segmentIds: Iterable<number>): void {
    for (const segmentId of segmentIds)
      if (!this.unregistered.has(segmentId)) this.unregistered.set(segmentId, []);
  }

  /** A segment's writer registered it again, or it was sealed: commits into it may go on. */
  private registered(segmentId: number): void {
    const waiters = this.unregistered.get(segmentId);
    if (!waiters) return;
    this.unregistered.delete(segmentId);
    for (const wake of waiters) wake();
  }

  /** Waits for the segment's writer to register it again, up to `registrationWaitMs`. */
  private async awaitRegistration(segmentId: number): Promise<void> {
    const waiters = this.unregistered.get(segmentId);
    if (!waiters) return;
    const refusal = (): Error =>
      EngineUnavailable(
        `segment ${segmentId} is not yet registered again by its writer since the engine started`,
        { segmentId, retryAfterSeconds: 1 },
      );
    if (this.registrationWaitMs <= 0) throw refusal();
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        const at = waiters.indexOf(wake);
        if (at >= 0) waiters.splice(at, 1);
        reject(refusal());
      }, this.registrationWaitMs);
      timer.unref();
      const wake = (): void => {
        clearTimeout(timer);
        resolve();
      };
      waiters.push(wake);
    });
  }

  /** Whether commits into the segment are refused. */
  isPoisoned(segmentId: number): boolean {
    return this.poisoned.has(segmentId);
  }

  /**
   * Opens the segment's handle for a writer before the writer appends its first record, and
   * keeps it until the seal (see the header); resolves once it is open.
   */
  async hold(segmentId: number): Promise<void> {
    // Twice: a handle opened earlier may have failed (an engine that started while the writer
    // was creating the file found none yet); the writer's call comes once the file exists.
    for (let attempt = 1; ; attempt += 1) {
      const state = this.stateOf(segmentId);
      state.held = true;
      try {
        await state.handle;
        this.registered(segmentId);
        return;
      } catch (cause) {
        if (this.states.get(segmentId) === state) this.forget(segmentId);
        if (attempt === 2) {
          const message = `cannot open segment ${segmentId} to sync it`;
          throw SegmentIoError(message, { segmentId }, { cause });
        }
      }
    }
  }

  /** Commits the segment's poison mark, once; a failed attempt is tried again by the next. */
  private mark(segmentId: number): Promise<void> {
    const persist = this.persist;
    if (!persist || this.marked.has(segmentId)) return Promise.resolve();
    let marking = this.marking.get(segmentId);
    if (!marking) {
      marking = persist(segmentId)
        .then(() => {
          this.marked.add(segmentId);
        })
        .finally(() => this.marking.delete(segmentId));
      this.marking.set(segmentId, marking);
    }
    return marking;
  }

  /** Refuses a commit into a poisoned segment, once its mark is committed (or failed again). */
  private async refuse(segmentId: number): Promise<never> {
    await this.mark(segmentId).catch(() => undefined);
    throw poisonedError(segmentId);
  }

  private syncOne(segmentId: number): Promise<void> {
    if (this.poisoned.has(segmentId)) return this.refuse(segmentId);
    if (this.unregistered.has(segmentId))
      return this.awaitRegistration(segmentId).then(() => this.syncOne(segmentId));
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
        // The fdatasync itself failed: what it covered may be lost (see the header). The mark
        // is committed before the commit that met the failure is refused.
        this.poisoned.add(segmentId);
        await this.mark(segmentId).catch(() => undefined);
        throw cause;
      }
      this.onSync?.((performance.now() - started) / 1000);
      // A writer reported a failure while this fdatasync ran: it may have covered lost pages.
      if (this.poisoned.has(segmentId)) await this.refuse(segmentId);
      this.syncs += 1;
    } catch (cause) {
      // A held handle stays: an open failure forgot it already, and a failed fdatasync
      // poisoned the segment, whose later syncs never reach the handle.
      if (!state.held) this.forget(segmentId);
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
      if (state.running || state.next || state.held) continue;
      this.forget(segmentId);
    }
  }

  /** Closes the handle of a sealed, retired or deleted segment. */
  forget(segmentId: number): void {
    // Sealed by its writer, whose fdatasync of the seal heard of every failed write-back.
    this.registered(segmentId);
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
