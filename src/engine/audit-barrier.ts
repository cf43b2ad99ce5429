// The audit barrier: what lets an audit query see the row of every request answered before it.
//
// Listeners send the audit rows of reads and refusals in batches, a moment after the responses
// (src/http/audit.ts), so a client that asks the admin API for the audit log right after an
// answer can be faster than the row: the listener's thread may not have run since. Each audit
// sink therefore announces itself on its connection (`auditSource`); an audit query first sends
// `auditBarrier`, and the engine asks every source to send what it holds (a `flushAudit` push
// frame, see protocol.ts). A source sends its rows, then `auditFlushed` on the same connection,
// so when that arrives the rows have too, in the command batch ahead of the barrier's commit.
// A request answered before the push arrives has its row in the sink by then: a listener records
// it in the event-loop turn of its response, and reads the push in a later one.
//
// A source that does not answer within FLUSH_WAIT_MAX_MS (its event loop is blocked, or it is
// overloaded) is not waited for longer, and a connection that closes is not waited for at all:
// the query then reads what has arrived.

/** One connection to the engine. */
export type AuditSource = object;

/** How long a barrier waits for the sources' answers. */
export const FLUSH_WAIT_MAX_MS = 1000;

interface Barrier {
  /** Sources asked and not yet answered. */
  readonly waiting: Set<AuditSource>;
  readonly done: () => void;
}

export class AuditBarriers {
  /** Every source, with how to send it a push frame. */
  private readonly sources = new Map<AuditSource, (message: object) => void>();
  private readonly barriers = new Map<number, Barrier>();
  private nextBarrier = 1;

  private readonly waitMaxMs: number;
  private readonly unanswered: (sources: number) => void;

  /**
   * `waitMaxMs`: how long a barrier waits for the sources (FLUSH_WAIT_MAX_MS); `unanswered`
   * hears how many sources a barrier passed without (a listener thread blocked or overloaded).
   */
  constructor(options: { waitMaxMs?: number; unanswered?: (sources: number) => void } = {}) {
    this.waitMaxMs = options.waitMaxMs ?? FLUSH_WAIT_MAX_MS;
    this.unanswered = options.unanswered ?? (() => {});
  }

  /** `source` holds audit rows; `push` sends it a push frame. Idempotent. */
  add(source: AuditSource, push: (message: object) => void): void {
    this.sources.set(source, push);
  }

  /** The connection has closed: not a source, nor waited for, any more. */
  drop(source: AuditSource): void {
    this.sources.delete(source);
    for (const [id, barrier] of this.barriers) this.answered(id, barrier, source);
  }

  /** `source` has sent the rows it held when barrier `id` reached it. */
  flushed(source: AuditSource, id: number): void {
    const barrier = this.barriers.get(id);
    if (barrier) this.answered(id, barrier, source);
  }

  /**
   * Asks every source to send its rows; resolves once each has answered (its rows have then
   * arrived), has gone, or after the wait limit.
   */
  pass(): Promise<void> {
    if (this.sources.size === 0) return Promise.resolve();
    const id = this.nextBarrier++;
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.unanswered(this.barriers.get(id)?.waiting.size ?? 0);
        this.end(id);
      }, this.waitMaxMs);
      const barrier: Barrier = {
        waiting: new Set(this.sources.keys()),
        done: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      this.barriers.set(id, barrier);
      for (const push of this.sources.values()) push({ p: 'flushAudit', a: { barrier: id } });
    });
  }

  private answered(id: number, barrier: Barrier, source: AuditSource): void {
    barrier.waiting.delete(source);
    if (barrier.waiting.size === 0) this.end(id);
  }

  private end(id: number): void {
    const barrier = this.barriers.get(id);
    if (!barrier) return;
    this.barriers.delete(id);
    barrier.done();
  }
}

/** The barrier id of an `auditFlushed` command: `{barrier: number}`. */
export function flushedBarrierOf(args: unknown): number | undefined {
  const barrier = (args as { barrier?: unknown } | undefined)?.barrier;
  return Number.isSafeInteger(barrier) ? (barrier as number) : undefined;
}
