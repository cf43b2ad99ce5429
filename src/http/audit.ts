// The audit sink of a listener: every request it answers becomes one audit row. Rows of
// requests whose mutation already carried its row to the engine are skipped; the rest are
// batched (every 50 ms, or at 500 rows) into one `appendAudit` command, so auditing costs the
// data path one buffered object per request. The buffer is bounded: when the engine is
// unreachable for long, the oldest rows are dropped and counted in the log. `settle` sends the
// pending rows at once, so that the admin audit query sees every request answered before it.

import type { EngineClient } from '../engine/protocol.js';
import type { AuditInput } from '../engine/ops/audit.js';
import type { AuditOutcome } from '../engine/index/schema.js';
import type { Exchange } from './exchange.js';
import type { Logger } from '../util/log.js';

const FLUSH_INTERVAL_MS = 50;
const BATCH_ROWS_MAX = 500;
const BUFFER_ROWS_MAX = 100_000;

export function outcomeOf(status: number): AuditOutcome {
  if (status === 401 || status === 403 || status === 429) return 'denied';
  return status >= 400 ? 'error' : 'allowed';
}

/** The audit row of an exchange, as the engine stores it. */
export function auditRowOf(exchange: Exchange, status: number): AuditInput {
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
  return row;
}

export class AuditSink {
  private buffer: AuditInput[] = [];
  private dropped = 0;
  private flushing: Promise<void> | undefined;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly engine: EngineClient,
    private readonly log: Logger,
  ) {
    this.timer = setInterval(() => void this.flush(), FLUSH_INTERVAL_MS);
    this.timer.unref();
  }

  record(exchange: Exchange): void {
    if (exchange.audit.written || exchange.status === 0) return;
    if (this.buffer.length >= BUFFER_ROWS_MAX) {
      this.buffer.shift();
      this.dropped += 1;
    }
    this.buffer.push(auditRowOf(exchange, exchange.status));
    if (this.buffer.length >= BATCH_ROWS_MAX) void this.flush();
  }

  flush(): Promise<void> {
    if (this.flushing || this.buffer.length === 0) return this.flushing ?? Promise.resolve();
    const events = this.buffer.splice(0, BATCH_ROWS_MAX * 4);
    this.flushing = this.engine
      .call('appendAudit', { events })
      .then(
        () => {
          if (this.dropped > 0) {
            this.log.warn(
              { dropped: this.dropped },
              'audit rows dropped while the engine was unreachable',
            );
            this.dropped = 0;
          }
        },
        () => {
          this.buffer = events.concat(this.buffer).slice(-BUFFER_ROWS_MAX);
        },
      )
      .finally(() => {
        this.flushing = undefined;
      });
    return this.flushing;
  }

  /**
   * Resolves once the rows recorded before the call are committed (or their send failed): the
   * batch in flight, then one more holding everything recorded since it started.
   */
  async settle(): Promise<void> {
    await this.flushing;
    await this.flush();
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
    await this.flush();
  }
}
