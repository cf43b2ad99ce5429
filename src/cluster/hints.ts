// Hinted handoff (docs/cluster.md §8a "Hints"): a replicated write is acknowledged once a majority
// of its replica set holds it, so a replica that failed or timed out after the majority answered
// would lack the write until a repair passes. The coordinator keeps such a send as a *hint* for
// that replica and sends it again with backoff until it lands.
//
// - One queue per target node, first in first out, one send at a time: a replica that missed an
//   upload's create gets it before the upload's parts. Every hinted send is a replicated write
//   that is a no-op where it already landed (the replica drops what is older than what it holds),
//   so a repeat, or a hint racing a repair, is harmless.
// - A send the target could not take (unreachable, timed out, busy: `unavailable`) is retried with
//   backoff from HINT_BACKOFF_MS_MIN doubling to HINT_BACKOFF_MS_MAX, for as long as the target is
//   a storage member. A target no longer a storage member (lost, removed, drained) has its hints
//   dropped: a lost member's replicas are rebuilt from the others, a drained one's were moved.
// - A send the target refused for another reason (a rule, a missing record) is tried
//   HINT_REFUSALS_MAX times; one refused as placed by a stale layout or epoch, or by a fenced
//   sender, is not repeated (the layout change's rebalance places it).
// - Bounded: at most HINTS_PER_NODE_MAX hints per node and HINTS_MAX in all, each holding a
//   write's manifest and chunk ids, never its bytes (the records are read again when it is sent);
//   and by what they hold in memory, HINT_BYTES_PER_NODE_MAX per node and HINT_BYTES_MAX in all
//   (a multipart completion's manifest may name a great many chunks, so a count alone does not
//   bound the memory).
//   A hint that does not fit, or is given up, is not forgotten: its tenant is noted, and once the
//   target takes sends again (its queue has drained) the coordinator runs the repair scan of
//   those tenants (`fallBack`), run again with backoff when it fails.
// - In memory only: the hints of a coordinator that restarts are gone; its catch-up at start has
//   every other member run the repair scan, which pushes what the other replicas of the majority
//   hold to the replica that missed it.

import assert from 'node:assert/strict';
import { errorCode } from '../util/errors.js';
import type { Logger } from '../util/log.js';

export const HINTS_PER_NODE_MAX = 4096;
export const HINTS_MAX = 16_384;
/** The memory the hints of one node may hold (their manifests, as `Hint.bytes` estimates). */
export const HINT_BYTES_PER_NODE_MAX = 64 * 1024 * 1024;
export const HINT_BYTES_MAX = 256 * 1024 * 1024;
/** What a hint that does not say is taken to hold. */
const HINT_BYTES_DEFAULT = 1024;
export const HINT_BACKOFF_MS_MIN = 250;
export const HINT_BACKOFF_MS_MAX = 30_000;
/**
 * After a target that did not answer takes a send again, the rest wait this long: it is most
 * likely starting up, as a member's catch-up waits after its start (shared-state.ts).
 */
export const HINT_RESUME_PAUSE_MS = 5_000;
/** How often a send the target refuses (not for being unreachable) is tried. */
export const HINT_REFUSALS_MAX = 5;
/** The tenants noted per node for a repair scan; past it, every tenant is scanned. */
const FALLBACK_TENANTS_MAX = 1024;

/** Refusals after which sending again cannot help: the write is left to a rebalance. */
const FINAL_CODES: ReadonlySet<string> = new Set([
  'stale_layout',
  'stale_epoch',
  'conflict',
  'fenced',
]);

export interface Hint {
  readonly tenantId: string;
  /** What the hint holds in memory (its manifest and ids), estimated; HINT_BYTES_DEFAULT when absent. */
  readonly bytes?: number;
  /** Sends the write to the target's data address again. */
  send(address: string): Promise<void>;
}

export interface HintFigures {
  /** Hints sent again until they landed. */
  delivered: number;
  /** Hints that did not fit in the bounds: left to the repair scan. */
  overflowed: number;
  /** Hints given up (refused too often, or for good): left to the repair scan. */
  givenUp: number;
  /** Hints dropped with their target, no longer a storage member. */
  abandoned: number;
  /** Repair scans run for a target whose hints overflowed or were given up. */
  repairScans: number;
}

export interface HintOptions {
  /** The data address of a storage member; undefined once it is not one (lost, removed). */
  addressOf(nodeId: string): string | undefined;
  /**
   * Runs the repair scan of these tenants (undefined: all) for a target whose hints were not all
   * delivered; fails when the target did not take it all (tried again later).
   */
  fallBack(nodeId: string, tenantIds: ReadonlySet<string> | undefined): Promise<void>;
  log: Logger;
  /** Timers (tests fire them by hand). */
  schedule?: (fn: () => void, ms: number) => { cancel(): void };
  perNodeMax?: number;
  max?: number;
  perNodeBytesMax?: number;
  bytesMax?: number;
}

interface NodeQueue {
  hints: Hint[];
  /** What `hints` hold in memory (`bytesOf`). */
  bytes: number;
  timer?: { cancel(): void } | undefined;
  running: boolean;
  backoffMs: number;
  refusals: number;
  /** Tenants whose writes to this node were not all delivered; `all` past the bound. */
  missed: Set<string>;
  missedAll: boolean;
}

function defaultSchedule(fn: () => void, ms: number): { cancel(): void } {
  const timer = setTimeout(fn, ms);
  timer.unref();
  return { cancel: () => clearTimeout(timer) };
}

export class Hints {
  readonly figures: HintFigures = {
    delivered: 0,
    overflowed: 0,
    givenUp: 0,
    abandoned: 0,
    repairScans: 0,
  };
  private readonly queues = new Map<string, NodeQueue>();
  private total = 0;
  private totalBytes = 0;
  private closed = false;
  private readonly schedule: NonNullable<HintOptions['schedule']>;

  constructor(private readonly options: HintOptions) {
    this.schedule = options.schedule ?? defaultSchedule;
  }

  /** Hints held now, for one node or in all. */
  pending(nodeId?: string): number {
    if (nodeId === undefined) return this.total;
    return this.queues.get(nodeId)?.hints.length ?? 0;
  }

  /** The memory hints hold now, for one node or in all. */
  pendingBytes(nodeId?: string): number {
    if (nodeId === undefined) return this.totalBytes;
    return this.queues.get(nodeId)?.bytes ?? 0;
  }

  /** Keeps `hint` for `nodeId`, whose send failed after the write's majority answered. */
  add(nodeId: string, hint: Hint, error: unknown): void {
    if (this.closed) return;
    const code = errorCode(error);
    // A stale epoch is kept: a hint is sent under the partition's epoch as it is then, so the
    // next try can land (an epoch change, unlike a layout change, starts no rebalance).
    if (code !== undefined && code !== 'stale_epoch' && FINAL_CODES.has(code)) return;
    const queue = this.queueOf(nodeId);
    const bytes = bytesOf(hint);
    if (
      queue.hints.length >= (this.options.perNodeMax ?? HINTS_PER_NODE_MAX) ||
      this.total >= (this.options.max ?? HINTS_MAX) ||
      queue.bytes + bytes > (this.options.perNodeBytesMax ?? HINT_BYTES_PER_NODE_MAX) ||
      this.totalBytes + bytes > (this.options.bytesMax ?? HINT_BYTES_MAX)
    ) {
      this.figures.overflowed += 1;
      this.miss(queue, hint.tenantId);
    } else {
      queue.hints.push(hint);
      queue.bytes += bytes;
      this.total += 1;
      this.totalBytes += bytes;
    }
    if (!queue.running && queue.timer === undefined) this.wake(nodeId, queue, queue.backoffMs);
  }

  /** Drops every hint and timer (the engine is closing). */
  close(): void {
    this.closed = true;
    for (const queue of this.queues.values()) queue.timer?.cancel();
    this.queues.clear();
    this.total = 0;
    this.totalBytes = 0;
  }

  /** Read through a call: `close` may run while a send is awaited. */
  private isClosed(): boolean {
    return this.closed;
  }

  private queueOf(nodeId: string): NodeQueue {
    let queue = this.queues.get(nodeId);
    if (queue === undefined) {
      queue = {
        hints: [],
        bytes: 0,
        running: false,
        backoffMs: HINT_BACKOFF_MS_MIN,
        refusals: 0,
        missed: new Set(),
        missedAll: false,
      };
      this.queues.set(nodeId, queue);
    }
    return queue;
  }

  private miss(queue: NodeQueue, tenantId: string): void {
    if (queue.missedAll) return;
    if (queue.missed.size >= FALLBACK_TENANTS_MAX) {
      queue.missedAll = true;
      queue.missed.clear();
    } else queue.missed.add(tenantId);
  }

  private wake(nodeId: string, queue: NodeQueue, ms: number): void {
    queue.timer = this.schedule(() => {
      queue.timer = undefined;
      void this.drain(nodeId, queue);
    }, ms);
  }

  /** Sends the node's hints in order until one fails (then backs off) or none is left. */
  private async drain(nodeId: string, queue: NodeQueue): Promise<void> {
    if (this.closed || queue.running) return;
    queue.running = true;
    try {
      const address = this.options.addressOf(nodeId);
      if (address === undefined) {
        this.abandon(nodeId, queue);
        return;
      }
      while (queue.hints.length > 0) {
        const hint = queue.hints[0] as Hint;
        const failure = await hint.send(address).then(
          () => undefined,
          (error: unknown) => ({ error }),
        );
        if (this.isClosed()) return;
        if (failure === undefined) {
          const resumed = queue.backoffMs > HINT_BACKOFF_MS_MIN;
          this.settle(queue);
          this.figures.delivered += 1;
          if (resumed && queue.hints.length > 0) {
            this.wake(nodeId, queue, HINT_RESUME_PAUSE_MS);
            return;
          }
        } else if (!this.refused(nodeId, queue, hint, failure.error)) {
          this.backOff(nodeId, queue);
          return;
        }
      }
      if (queue.missedAll || queue.missed.size > 0) await this.repairScan(nodeId, queue);
      else queue.backoffMs = HINT_BACKOFF_MS_MIN;
    } finally {
      queue.running = false;
      if (!this.isClosed() && queue.hints.length === 0 && queue.timer === undefined)
        if (!queue.missedAll && queue.missed.size === 0) this.queues.delete(nodeId);
    }
  }

  /** Takes the head hint off the queue. */
  private settle(queue: NodeQueue): void {
    const bytes = bytesOf(queue.hints.shift() as Hint);
    queue.bytes -= bytes;
    this.totalBytes -= bytes;
    this.total -= 1;
    queue.refusals = 0;
    queue.backoffMs = HINT_BACKOFF_MS_MIN;
    assert.ok(this.total >= 0 && this.totalBytes >= 0, 'hint figures stay non-negative');
  }

  /**
   * Whether the head hint's failure gives it up (true: go on with the next) rather than waiting
   * for the target (false).
   */
  private refused(nodeId: string, queue: NodeQueue, hint: Hint, failure: unknown): boolean {
    const code = errorCode(failure);
    if (code === undefined || code === 'unavailable') return false;
    queue.refusals += 1;
    if (!FINAL_CODES.has(code) && queue.refusals < HINT_REFUSALS_MAX) return false;
    this.options.log.warn(
      { err: failure, nodeId, tenantId: hint.tenantId },
      'a replica refused a hinted write: left to the repair scan',
    );
    this.settle(queue);
    this.figures.givenUp += 1;
    this.miss(queue, hint.tenantId);
    return true;
  }

  private backOff(nodeId: string, queue: NodeQueue): void {
    queue.backoffMs = Math.min(queue.backoffMs * 2, HINT_BACKOFF_MS_MAX);
    this.wake(nodeId, queue, queue.backoffMs);
  }

  private abandon(nodeId: string, queue: NodeQueue): void {
    this.figures.abandoned += queue.hints.length;
    this.total -= queue.hints.length;
    this.totalBytes -= queue.bytes;
    queue.bytes = 0;
    this.options.log.info(
      { nodeId, hints: queue.hints.length },
      'hints dropped: their target is no longer a storage member',
    );
    queue.hints = [];
    queue.missed.clear();
    queue.missedAll = false;
  }

  /** The repair scan for the writes this node's hints did not deliver; backs off on failure. */
  private async repairScan(nodeId: string, queue: NodeQueue): Promise<void> {
    const tenants = queue.missedAll ? undefined : new Set(queue.missed);
    queue.missed.clear();
    queue.missedAll = false;
    this.figures.repairScans += 1;
    try {
      await this.options.fallBack(nodeId, tenants);
    } catch (error) {
      this.options.log.warn({ err: error, nodeId }, 'repair scan for missed hints failed');
      if (tenants === undefined) queue.missedAll = true;
      else for (const tenantId of tenants) this.miss(queue, tenantId);
      this.backOff(nodeId, queue);
    }
  }
}

function bytesOf(hint: Hint): number {
  return hint.bytes ?? HINT_BYTES_DEFAULT;
}
