// The audit sink of a listener: every request it answers becomes one audit row. Rows of requests
// whose mutation already carried its row to the engine are skipped; the rest go to the engine in
// one `appendAudit` command per turn of the event loop, the turn after their responses (the engine
// commits the commands that arrive during one commit together). A client can still ask for the
// audit log before they arrive (this listener's thread may not have run since), so the sink is an
// audit source of the engine (src/engine/audit-barrier.ts): an audit query first passes a
// barrier (`settle`), for which the engine has every source send the rows it holds, and finds
// the row of every request answered before it. At most 8 commands wait for answers (a gateway's
// listener: one, see `sendsInFlightMax`); more rows wait in a bounded buffer. Rows are never dropped for the engine being slow, down or short of
// space: the rows of a command the engine could not be reached for, or answered 503 (a full
// disk, a commit past its deadline, a restart), go back to the buffer and are retried every
// 50 ms (a timer armed only while a send has failed: an idle listener wakes for nothing), until
// the engine takes them; once the buffer holds BUFFER_ROWS_MAX rows the listener
// refuses new requests (`full`, 503 with Retry-After) instead of dropping rows. Only a row the
// engine refused as such (any other error) three times is dropped and logged, so one row it
// cannot store does not hold back the rest. `close` (a graceful stop, before the engine stops)
// sends what it holds and retries for up to CLOSE_WAIT_MS.

import type { EngineClient } from '../engine/protocol.js';
import { boundedAuditRow, type AuditInput } from '../engine/ops/audit.js';
import type { AuditOutcome } from '../engine/index/schema.js';
import type { Exchange } from './exchange.js';
import type { Logger } from '../util/log.js';
import { errorCode, isLightwellError } from '../util/errors.js';

/** How often rows that failed to send are retried. */
const RETRY_INTERVAL_MS = 50;
/** Rows per `appendAudit` command at most. */
const BATCH_ROWS_MAX = 2000;
/** Commands sent and not yet answered at most; more rows wait in the buffer. */
const SENDS_IN_FLIGHT_MAX = 8;
/** How long the audit query waits for the engine to commit the rows before it (then reads). */
const SETTLE_WAIT_MAX_MS = 2000;
/** Rows held from which new requests are refused (`full`). */
const BUFFER_ROWS_MAX = 100_000;
/**
 * Rows held at most: beyond BUFFER_ROWS_MAX only requests admitted before the buffer was full,
 * and the refusals' own rows, add to it; past this bound they are dropped and counted.
 */
const BUFFER_ROWS_HARD_MAX = 2 * BUFFER_ROWS_MAX;
/** How long a graceful stop goes on sending rows the engine has not taken yet. */
const CLOSE_WAIT_MS = 10_000;
/** Answers with an error after which a row is dropped. */
const REFUSALS_MAX = 3;

export function outcomeOf(status: number): AuditOutcome {
  if (status === 401 || status === 403 || status === 429) return 'denied';
  return status >= 400 ? 'error' : 'allowed';
}

/** What an audit row is made of: an Exchange, or a service operation's request context. */
export type AuditedRequest = Pick<Exchange, 'audit' | 'requestId' | 'path' | 'remoteAddress'>;

/** The audit row of an exchange, as the engine stores it. */
export function auditRowOf(exchange: AuditedRequest, status: number): AuditInput {
  const audit = exchange.audit;
  const row: AuditInput = {
    requestId: exchange.requestId,
    actor: audit.actor ?? 'anonymous',
    action: audit.action,
    resource: audit.resource ?? exchange.path,
    outcome: outcomeOf(status),
    status,
    remoteAddr: exchange.remoteAddress,
    time: Date.now(),
  };
  if (audit.tenantId !== undefined) row.tenantId = audit.tenantId;
  if (audit.reason !== undefined) row.reason = audit.reason;
  if (audit.dryRun) row.dryRun = true;
  if (audit.accessLog !== undefined) row.accessLog = audit.accessLog(status);
  // Bounded here too, not only where the engine stores it: a batch of rows carrying whole
  // 64 KiB URLs could outgrow an engine frame.
  return boundedAuditRow(row);
}

export class AuditSink {
  private buffer: AuditInput[] = [];
  private dropped = 0;
  /** How often the engine refused each row that is still waiting. */
  private readonly refusals = new WeakMap<AuditInput, number>();
  /** Batches sent and not yet answered (at most `sendsInFlightMax`). */
  private readonly sending = new Set<Promise<void>>();
  /** A flush is due (in the next turn of the event loop, or after `sendDelayMs`). */
  private scheduled = false;
  /** The last send failed: wait for the retry timer rather than sending again at once. */
  private failing = false;
  /** The retry, armed while `failing` (by the failure, and by every row recorded meanwhile). */
  private retryTimer: NodeJS.Timeout | undefined;
  private readonly retryIntervalMs: number;
  private readonly sendDelayMs: number;
  private readonly sendsInFlightMax: number;
  private closed = false;

  /**
   * `sendDelayMs`: how long a recorded row waits for the rows after it before it is sent; 0 (the
   * default) sends the rows of one turn in the next. `retryIntervalMs`: how often the retry timer
   * sends whatever waits (50 ms). `sendsInFlightMax`: commands unanswered at most (8). With 1,
   * the sink is clocked by the engine's commits: a row recorded while a command is unanswered
   * goes with the rows of every turn until its answer, in one command. A busy listener then
   * sends one command a commit instead of one a turn, and the engine reads, decodes and answers
   * that many fewer frames, while a lone request's row still goes in the next turn.
   */
  constructor(
    private readonly engine: EngineClient,
    private readonly log: Logger,
    options: { sendDelayMs?: number; retryIntervalMs?: number; sendsInFlightMax?: number } = {},
  ) {
    this.sendDelayMs = options.sendDelayMs ?? 0;
    this.sendsInFlightMax = options.sendsInFlightMax ?? SENDS_IN_FLIGHT_MAX;
    this.retryIntervalMs = options.retryIntervalMs ?? RETRY_INTERVAL_MS;
    // A new connection (a restarted engine, or a lost link made again) does not know the sink.
    engine.onConnected(() => this.announce());
    engine.onPush('flushAudit', (args) => void this.flushForBarrier(args));
    this.announce();
  }

  private announce(): void {
    if (this.closed) return;
    this.engine.call('auditSource', {}).catch((error: unknown) => {
      this.log.debug({ err: error }, 'audit source not announced; the next connection will');
    });
  }

  /**
   * The engine passes an audit barrier: every row held now goes out, also those waiting for a
   * free send (`sendsInFlightMax`), then the answer, on the same connection and so after them.
   * Rows recorded after the push are not waited for; nor is anything once a send has failed (the
   * engine does not wait for a lost connection, and gives up on a source after a second).
   */
  private async flushForBarrier(args: unknown): Promise<void> {
    void this.flush();
    const last = this.buffer.at(-1);
    while (last && this.sending.size > 0 && !this.failing && this.buffer.includes(last)) {
      await Promise.race(this.sending);
      void this.flush();
    }
    this.engine.call('auditFlushed', args).catch(() => {
      // The connection is lost: the engine no longer waits for this source.
    });
  }

  record(exchange: Exchange): void {
    if (exchange.audit.written || exchange.status === 0) return;
    this.buffer.push(auditRowOf(exchange, exchange.status));
    this.trim();
    if (this.failing) this.armRetry();
    else if (!this.scheduled) {
      this.scheduled = true;
      const send = (): void => {
        this.scheduled = false;
        void this.flush();
      };
      if (this.sendDelayMs > 0) setTimeout(send, this.sendDelayMs).unref();
      else setImmediate(send);
    }
  }

  private armRetry(): void {
    if (this.retryTimer !== undefined || this.closed) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void this.flush();
    }, this.retryIntervalMs);
    this.retryTimer.unref();
  }

  /**
   * The rows of a failed batch to send again: all of them while the engine cannot be reached;
   * when it answered with an error (a failed commit, or a row it cannot store), each row at most
   * REFUSALS_MAX times, so that a row the engine refuses cannot hold back the rows after it.
   */
  private retriable(events: AuditInput[], error: unknown): AuditInput[] {
    // Not reached, or not now (503: a full disk, a restart): nothing about the rows themselves.
    if (errorCode(error) === 'engine_unavailable') return events;
    if (isLightwellError(error) && error.status === 503) return events;
    const kept = events.filter((event) => {
      const refusals = (this.refusals.get(event) ?? 0) + 1;
      this.refusals.set(event, refusals);
      return refusals < REFUSALS_MAX;
    });
    if (kept.length < events.length)
      this.log.warn(
        { err: error, rows: events.length - kept.length },
        'audit rows refused by the engine; dropped',
      );
    return kept;
  }

  /**
   * The buffer holds BUFFER_ROWS_MAX rows the engine has not taken: the listener refuses new
   * requests (503) until it has taken some, rather than drop rows.
   */
  get full(): boolean {
    return this.buffer.length >= BUFFER_ROWS_MAX;
  }

  /** Bounds the buffer: the oldest rows beyond BUFFER_ROWS_HARD_MAX are dropped and counted. */
  private trim(): void {
    const excess = this.buffer.length - BUFFER_ROWS_HARD_MAX;
    if (excess > 0) {
      this.buffer.splice(0, excess);
      this.dropped += excess;
    }
  }

  /**
   * Sends buffered rows, in batches of at most BATCH_ROWS_MAX and with at most
   * `sendsInFlightMax` batches unanswered (the rest wait in the bounded buffer, also when the
   * engine has stopped answering), and resolves once the batches sent are answered.
   */
  flush(): Promise<void> {
    const sent: Array<Promise<void>> = [];
    while (this.buffer.length > 0 && this.sending.size < this.sendsInFlightMax) {
      const events = this.buffer.splice(0, BATCH_ROWS_MAX);
      const sending: Promise<void> = this.engine
        .call('appendAudit', { events })
        .then(
          () => {
            this.failing = false;
            if (this.dropped > 0) {
              this.log.warn({ dropped: this.dropped }, 'audit rows dropped: the engine was slow');
              this.dropped = 0;
            }
          },
          (error: unknown) => {
            this.failing = true;
            this.buffer = this.retriable(events, error).concat(this.buffer);
            this.trim();
            this.armRetry();
          },
        )
        .finally(() => {
          this.sending.delete(sending);
          if (this.buffer.length > 0 && !this.failing) void this.flush();
        });
      this.sending.add(sending);
      sent.push(sending);
    }
    return Promise.all(sent).then(() => undefined);
  }

  /**
   * Resolves once the rows recorded before the call are committed (or their send failed), with
   * those every other audit source held (audit-barrier.ts), or after SETTLE_WAIT_MAX_MS when the
   * engine does not answer.
   */
  async settle(): Promise<void> {
    const pending = [...this.sending, this.flush()];
    pending.push(this.engine.call('auditBarrier', {}).then(() => undefined));
    let timer: NodeJS.Timeout | undefined;
    const givenUp = new Promise<void>(
      (resolve) => (timer = setTimeout(resolve, SETTLE_WAIT_MAX_MS)),
    );
    await Promise.race([Promise.allSettled(pending), givenUp]);
    clearTimeout(timer);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    const until = Date.now() + CLOSE_WAIT_MS;
    for (;;) {
      await Promise.allSettled([...this.sending, this.flush()]);
      if ((this.buffer.length === 0 && this.sending.size === 0) || Date.now() >= until) break;
      // What waited for a free send goes now; what failed, after the retry interval.
      if (this.failing) await new Promise((resolve) => setTimeout(resolve, RETRY_INTERVAL_MS));
    }
    const unsent = this.buffer.length + this.dropped;
    if (unsent > 0)
      this.log.warn({ unsent }, 'audit rows not written: the engine did not take them');
  }
}
