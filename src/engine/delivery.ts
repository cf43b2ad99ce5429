// The webhook delivery loop: sends the outbox (src/engine/ops/notifications.ts) to the
// configured targets, from the engine process, surviving restarts and crashes because the
// outbox is the only state.
//
// Each (bucket, config) pair is one queue whose rows sort in commit order. The loop sends only
// the head of a queue, at most one request per queue at a time, and removes the head only
// after a 2xx answer, in a transaction that also updates the bucket's delivery counters. So:
// - at-least-once: a crash between the answer and the commit sends the event again after the
//   restart (receivers deduplicate on the event `id`);
// - in commit order per bucket and target: a failing head blocks the later events of its own
//   queue, never another bucket's or another target's;
// - a failed attempt is retried with exponential backoff (`notifications.retry_backoff_min`,
//   doubling up to `notifications.retry_backoff_max`, ±20% jitter) until the event is older
//   than `notifications.retry_window` (24 h by default); then it is discarded and counted, and
//   the queue moves on.
//
// A request is `POST <url>` with the event JSON and `X-Service-Signature: t=<unix>,v1=<hex
// HMAC-SHA256(secret, t + "." + body)>` (spec/DECISIONS.md). Redirects are not followed; every
// connection resolves the host again and refuses private addresses unless
// `notifications.allow_private_targets` (`guardedLookup`, src/security/webhook-target.ts);
// `checkWebhookTarget` does the same check when a config is stored.

import { createHmac } from 'node:crypto';
import { request as httpRequest, type ClientRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { lookup } from 'node:dns';
import type { Logger } from 'pino';
import {
  DB,
  tenantKey,
  tenantChildKey,
  decodeOutboxKey,
  outboxQueueRange,
  type BucketRecord,
  type OutboxRecord,
  type TenantRecord,
  type BucketNotificationsRecord,
  type OutboxStatusRecord,
} from './index/schema.js';
import type { EngineContext } from './ops/context.js';
import {
  notificationsOf,
  openSigningSecret,
  settleDelivery,
  forgetDeletedBucket,
  onOutboxWrite,
  type DeliveryOutcome,
} from './ops/notifications.js';
import { isPrivateAddress, hostOf } from '../security/webhook-target.js';
import { BadRequest } from '../util/errors.js';

/** Requests in flight at once, over all queues. */
export const DELIVERY_CONCURRENCY_MAX = 16;
/** How often the loop looks for work when nothing woke it. */
const POLL_MS = 1000;
/** New rows wake the loop this long after their command (their commit is then on disk). */
const WAKE_DELAY_MS = 20;
const CLEANUP_INTERVAL_MS = 60_000;
const ERROR_CHARS_MAX = 200;
const RESPONSE_BYTES_MAX = 64 * 1024;
const JITTER = 0.2;

interface Flight {
  promise: Promise<void>;
  tenantId: string;
  request?: ClientRequest;
}

export class Deliverer {
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Number.POSITIVE_INFINITY;
  private stopped = true;
  private scanning = false;
  /** A wake-up arrived during a scan: scan again right after it. */
  private again = false;
  private lastCleanup = 0;
  private unsubscribe: (() => void) | undefined;
  private readonly inFlight = new Map<string, Flight>();

  constructor(private readonly options: { context: EngineContext; log: Logger }) {}

  start(): void {
    this.stopped = false;
    this.unsubscribe = onOutboxWrite(() => this.schedule(WAKE_DELAY_MS));
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    if (this.timer) clearTimeout(this.timer);
    await endFlights([...this.inFlight.values()]);
  }

  /**
   * A deleted tenant's purge calls this before its first batch: ends the requests in flight for
   * the tenant's events and resolves once they have settled. The tenant is already deleted, so
   * `attempt` starts no new request for it (it discards the row instead).
   */
  async endTenantDeliveries(tenantId: string): Promise<void> {
    await endFlights([...this.inFlight.values()].filter((flight) => flight.tenantId === tenantId));
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    const at = this.options.context.now() + delayMs;
    if (this.timer && this.timerAt <= at) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.timerAt = Number.POSITIVE_INFINITY;
      void this.scan();
    }, delayMs);
    this.timer.unref();
  }

  /** Starts every queue head that is due; sleeps until the next one is. */
  private async scan(): Promise<void> {
    if (this.stopped) return;
    if (this.scanning) {
      this.again = true;
      return;
    }
    this.scanning = true;
    this.again = false;
    const { store } = this.options.context;
    let next = this.options.context.now() + POLL_MS;
    try {
      store.refresh();
      const now = this.options.context.now();
      let start: Buffer | undefined;
      for (;;) {
        const head = first(
          store.range<OutboxRecord>(DB.outbox, start ? { start, limit: 1 } : { limit: 1 }),
        );
        if (!head) break;
        const { bucketId, configId } = decodeOutboxKey(head.key);
        start = outboxQueueRange(bucketId, configId).end;
        const queue = `${bucketId}/${configId}`;
        if (this.inFlight.has(queue)) continue;
        if (head.value.nextAttemptAt > now) next = Math.min(next, head.value.nextAttemptAt);
        else if (this.inFlight.size < DELIVERY_CONCURRENCY_MAX)
          this.begin(queue, Buffer.from(head.key), head.value);
      }
      if (now - this.lastCleanup > CLEANUP_INTERVAL_MS) {
        this.lastCleanup = now;
        await this.forgetDeletedBuckets();
      }
    } catch (error) {
      this.options.log.error({ err: error }, 'delivery scan failed');
    } finally {
      this.scanning = false;
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- set while awaiting
      this.schedule(this.again ? 0 : Math.max(0, next - this.options.context.now()));
    }
  }

  private begin(queue: string, key: Buffer, row: OutboxRecord): void {
    const flight: Flight = { promise: Promise.resolve(), tenantId: row.tenantId };
    flight.promise = this.attempt(key, row, flight)
      .catch((error: unknown) => {
        this.options.log.error({ err: error, queue }, 'delivery attempt failed unexpectedly');
      })
      .finally(() => {
        this.inFlight.delete(queue);
        // The next head of this queue (or a slot for another queue) is due now.
        this.schedule(0);
      });
    this.inFlight.set(queue, flight);
  }

  private async attempt(
    key: Buffer,
    row: OutboxRecord,
    flight: { request?: ClientRequest },
  ): Promise<void> {
    const { context, log } = this.options;
    const { store, settings } = context;
    const record = notificationsOf(store, row.bucketId);
    const config = record?.configs.find((candidate) => candidate.id === row.configId);
    const tenant = store.get<TenantRecord>(DB.tenants, tenantKey(row.tenantId));
    let outcome: DeliveryOutcome;
    if (!record || !config || !tenant || tenant.state === 'deleted') {
      outcome = { kind: 'discarded' };
    } else {
      const error = await this.post(record, config.url, row, flight);
      if (this.stopped && error !== undefined) return;
      const now = this.options.context.now();
      if (error === undefined) outcome = { kind: 'delivered' };
      else if (now - row.createdAt >= settings.duration('notifications.retry_window')) {
        outcome = {
          kind: 'discarded',
          error: `gave up after ${row.attempts + 1} attempts: ${error}`,
        };
        log.warn(
          { bucketId: row.bucketId, configId: row.configId, eventId: row.event.id, error },
          'webhook event discarded after the retry window',
        );
      } else {
        outcome = {
          kind: 'failed',
          error,
          retryAt:
            now +
            backoffMs(
              settings.duration('notifications.retry_backoff_min'),
              settings.duration('notifications.retry_backoff_max'),
              row.attempts + 1,
            ),
        };
        log.debug(
          {
            bucketId: row.bucketId,
            configId: row.configId,
            eventId: row.event.id,
            error,
            attempts: row.attempts + 1,
          },
          'webhook delivery failed',
        );
      }
    }
    await store.transact(() =>
      settleDelivery(store, { key, seq: row.seq, outcome, now: this.options.context.now() }),
    );
  }

  /** Sends one event; resolves with undefined on a 2xx answer, else with what went wrong. */
  private post(
    record: BucketNotificationsRecord,
    target: string,
    row: OutboxRecord,
    flight: { request?: ClientRequest },
  ): Promise<string | undefined> {
    const { context } = this.options;
    const allowPrivate = context.settings.bool('notifications.allow_private_targets');
    const timeoutMs = context.settings.duration('notifications.delivery_timeout');
    const config = record.configs.find((candidate) => candidate.id === row.configId);
    if (!config) return Promise.resolve('config removed');
    let url: URL;
    try {
      url = new URL(target);
    } catch {
      return Promise.resolve('malformed url');
    }
    const host = hostOf(url);
    if (!allowPrivate && isIP(host) !== 0 && isPrivateAddress(host))
      return Promise.resolve('target address is private');
    const body = JSON.stringify(row.event);
    const time = Math.floor(this.options.context.now() / 1000);
    const secret = openSigningSecret(context.masterKey, record, config);
    const signature = createHmac('sha256', secret).update(`${time}.${body}`).digest('hex');
    secret.fill(0);
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    return new Promise((resolve) => {
      let settled = false;
      const done = (error: string | undefined): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(error === undefined ? undefined : error.slice(0, ERROR_CHARS_MAX));
      };
      const timer = setTimeout(() => {
        request.destroy();
        done(`timeout after ${timeoutMs} ms`);
      }, timeoutMs);
      const request = send(
        url,
        {
          method: 'POST',
          lookup: guardedLookup(allowPrivate),
          headers: {
            'Content-Type': 'application/json',
            'Content-Length': String(Buffer.byteLength(body)),
            'User-Agent': 'lightwell-webhook/1',
            'X-Service-Signature': `t=${time},v1=${signature}`,
          },
        },
        (response) => {
          let received = 0;
          response.on('data', (chunk: Buffer) => {
            received += chunk.length;
            if (received > RESPONSE_BYTES_MAX) response.destroy();
          });
          response.on('error', () => undefined);
          response.on('close', () => {
            const status = response.statusCode ?? 0;
            done(status >= 200 && status < 300 ? undefined : `HTTP ${status}`);
          });
        },
      );
      flight.request = request;
      request.on('error', (error: NodeJS.ErrnoException) => done(error.code ?? error.message));
      request.end(body);
    });
  }

  /** Drops the config and status records of deleted buckets whose outbox has drained. */
  private async forgetDeletedBuckets(): Promise<void> {
    const { store } = this.options.context;
    const candidates = new Map<number, { bucketId: number; tenantId: string; bucket: string }>();
    for (const { value } of store.range<BucketNotificationsRecord>(DB.notifications, {})) {
      candidates.set(value.bucketId, {
        bucketId: value.bucketId,
        tenantId: value.tenantId,
        bucket: value.bucket,
      });
    }
    for (const { value } of store.range<OutboxStatusRecord>(DB.outboxStatus, {})) {
      candidates.set(value.bucketId, {
        bucketId: value.bucketId,
        tenantId: value.tenantId,
        bucket: value.bucket,
      });
    }
    const gone = [...candidates.values()].filter((candidate) => {
      const bucket = store.get<BucketRecord>(
        DB.buckets,
        tenantChildKey(candidate.tenantId, candidate.bucket),
      );
      return bucket?.id !== candidate.bucketId;
    });
    if (gone.length === 0) return;
    await store.transact(() => {
      for (const candidate of gone) forgetDeletedBucket(store, candidate);
    });
  }
}

/** Aborts each flight's request (an answer that was on its way is lost) and awaits them all. */
async function endFlights(flights: readonly Flight[]): Promise<void> {
  for (const flight of flights) flight.request?.destroy();
  await Promise.allSettled(flights.map((flight) => flight.promise));
}

/** Delay before retry number `attempt` (1-based): min·2^(attempt−1), capped, ±20% jitter. */
export function backoffMs(minMs: number, maxMs: number, attempt: number): number {
  const base = Math.min(maxMs, minMs * 2 ** Math.min(attempt - 1, 40));
  return Math.round(base * (1 - JITTER + Math.random() * 2 * JITTER));
}

function first<T>(entries: Iterable<T>): T | undefined {
  for (const entry of entries) return entry;
  return undefined;
}

/**
 * Refuses (`bad_request`) a target whose host is, or resolves to, a private address, unless
 * `allowPrivate`; also refuses a name that does not resolve.
 */
export async function checkWebhookTarget(url: URL, allowPrivate: boolean): Promise<void> {
  if (allowPrivate) return;
  const host = hostOf(url);
  const addresses = isIP(host) !== 0 ? [host] : await resolveAll(host);
  if (addresses.length === 0)
    throw BadRequest(`cannot resolve the webhook host ${JSON.stringify(host.slice(0, 64))}`);
  if (addresses.some(isPrivateAddress)) {
    throw BadRequest(
      'webhook targets on loopback, link-local or private addresses are refused (notifications.allow_private_targets)',
    );
  }
}

function resolveAll(host: string): Promise<string[]> {
  return new Promise((resolve) => {
    lookup(host, { all: true, verbatim: true }, (error, addresses) => {
      resolve(error ? [] : addresses.map((entry) => entry.address));
    });
  });
}

/**
 * A `lookup` for http.request that refuses private addresses at connection time (the DNS
 * answer then may differ from the one checked when the config was stored).
 */
export function guardedLookup(allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    lookup(hostname, { ...options, all: true, verbatim: true }, (error, addresses) => {
      if (error) {
        (callback as (error: NodeJS.ErrnoException | null, addresses: unknown) => void)(error, []);
        return;
      }
      const allowed = addresses.filter((entry) => allowPrivate || !isPrivateAddress(entry.address));
      if (allowed.length === 0) {
        const refused: NodeJS.ErrnoException = Object.assign(
          new RangeError(`${hostname} resolves only to private addresses`),
          { code: 'EPRIVATE' },
        );
        (callback as (error: NodeJS.ErrnoException | null, addresses: unknown) => void)(
          refused,
          [],
        );
        return;
      }
      if ((options as { all?: boolean }).all)
        (callback as (error: null, addresses: unknown) => void)(null, allowed);
      else {
        const first = allowed[0] as { address: string; family: number };
        (callback as (error: null, address: string, family: number) => void)(
          null,
          first.address,
          first.family,
        );
      }
    });
  };
}
