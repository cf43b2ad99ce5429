// Request metrics of a listener, and how a process's figures reach `/metrics`.
//
// Every process keeps its own prom-client registry: a gateway's listener threads one each (a
// thread has its own heap), the admin process one, the engine one (engine/metrics.ts). Each
// process other than the engine sends a snapshot of its registry to the engine every
// REPORT_INTERVAL_MS over the connection it already has (`reportMetrics`); the engine keeps the
// newest snapshot of each connection and forgets it when the connection closes. A scrape of
// the admin listener's `/metrics` asks the engine for its figures and the snapshots
// (`collectMetrics`), adds its own, and sums series of the same name and labels
// (prom-client's AggregatorRegistry.aggregate). So a scrape costs one engine round trip and a
// merge of a few hundred series, whatever the traffic, and the data path pays only counter
// increments (`observe`). Figures of the other processes are at most REPORT_INTERVAL_MS old.
//
// Labels are bounded: the API (native, s3, admin, ...), the operation id (a route table's or
// S3's fixed set, `unrouted` for a request that matched none) and the status class; process
// figures carry the process role (engine, gateway, admin). Only usage gauges name tenants.

import { Counter, Histogram, type Registry } from 'prom-client';
import type { Exchange } from './exchange.js';
import type { EngineClient } from '../engine/protocol.js';

export { processRegistry, counterOf, gaugeOf, type MetricsSnapshot } from '../util/metrics.js';

/** How often a process sends its figures to the engine. */
export const REPORT_INTERVAL_MS = 5_000;

/** Request latency buckets, seconds: 1 ms to 1 min. */
const LATENCY_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** Requests by API, operation and status class; their latency; bytes in and out. */
const STATUS_CLASSES: readonly string[] = ['0xx', '1xx', '2xx', '3xx', '4xx', '5xx'];

interface Series {
  readonly requests: { inc(value?: number): void };
  readonly latency: { observe(value: number): void };
  readonly received: { inc(value?: number): void };
  readonly sent: { inc(value?: number): void };
}

export class RequestMetrics {
  private readonly series = new Map<string, Series>();
  private readonly requests: Counter<'api' | 'operation' | 'status'>;
  private readonly latency: Histogram<'api' | 'operation'>;
  private readonly received: Counter<'api'>;
  private readonly sent: Counter<'api'>;

  constructor(readonly registry: Registry) {
    const registers = [registry];
    this.requests = new Counter({
      name: 'lightwell_http_requests_total',
      help: 'HTTP requests answered, by API, operation and status class (aborted: no answer)',
      labelNames: ['api', 'operation', 'status'],
      registers,
    });
    this.latency = new Histogram({
      name: 'lightwell_http_request_duration_seconds',
      help: 'From the request head to the end of the answer',
      labelNames: ['api', 'operation'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.received = new Counter({
      name: 'lightwell_http_received_bytes_total',
      help: 'Request body bytes received',
      labelNames: ['api'],
      registers,
    });
    this.sent = new Counter({
      name: 'lightwell_http_sent_bytes_total',
      help: 'Response body bytes sent (handed to the socket)',
      labelNames: ['api'],
      registers,
    });
  }

  /** One answered (or aborted) request: a few counter increments. */
  observe(api: string, exchange: Exchange): void {
    const operation = exchange.audit.action;
    const status = exchange.aborted ? 'aborted' : STATUS_CLASSES[Math.floor(exchange.status / 100)];
    const series = this.seriesOf(api, operation, status ?? 'other');
    series.requests.inc();
    series.latency.observe((performance.now() - exchange.startedAt) / 1000);
    if (exchange.bytesIn > 0) series.received.inc(exchange.bytesIn);
    if (exchange.bytesOut > 0) series.sent.inc(exchange.bytesOut);
  }

  /**
   * The labelled children of one combination, made once: prom-client hashes a label object on
   * every call, which cost several times the increments themselves. As many as the labels'
   * bounded values combine to.
   */
  private seriesOf(api: string, operation: string, status: string): Series {
    const key = `${api}\u0000${operation}\u0000${status}`;
    let series = this.series.get(key);
    if (series === undefined) {
      series = {
        requests: this.requests.labels({ api, operation, status }),
        latency: this.latency.labels({ api, operation }),
        received: this.received.labels({ api }),
        sent: this.sent.labels({ api }),
      };
      this.series.set(key, series);
    }
    return series;
  }
}

/**
 * Sends the registry's snapshot to the engine now and every REPORT_INTERVAL_MS while the
 * connection is up (a reconnect is made by the process's own calls); returns the stop.
 */
export function reportToEngine(engine: EngineClient, registry: Registry): () => void {
  const send = async (): Promise<void> => {
    if (!engine.connected) return;
    try {
      await engine.call('reportMetrics', { metrics: await registry.getMetricsAsJSON() });
    } catch {
      // The engine went away: the next report goes to the next connection.
    }
  };
  void send();
  const timer = setInterval(() => void send(), REPORT_INTERVAL_MS);
  timer.unref();
  return () => clearInterval(timer);
}
