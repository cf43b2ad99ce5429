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
// merge of a few hundred series, whatever the traffic, and the data path pays only additions
// to plain numbers (`observe`), read into the registry at each collection. Figures of the other processes are at most REPORT_INTERVAL_MS old.
//
// Labels are bounded: the API (native, s3, admin, ...), the operation id (a route table's or
// S3's fixed set, `unrouted` for a request that matched none) and the status class; process
// figures carry the process role (engine, gateway, admin). Only usage gauges name tenants.

import { Counter, type Registry } from 'prom-client';
import type { Exchange } from './exchange.js';
import type { EngineClient } from '../engine/protocol.js';

export { processRegistry, counterOf, gaugeOf, type MetricsSnapshot } from '../util/metrics.js';

/** How often a process sends its figures to the engine. */
export const REPORT_INTERVAL_MS = 5_000;

/** Request latency buckets, seconds: 1 ms to 1 min. */
const LATENCY_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** Requests by API, operation and status class; their latency; bytes in and out. */
const STATUS_CLASSES: readonly string[] = ['0xx', '1xx', '2xx', '3xx', '4xx', '5xx'];

/**
 * The figures of one combination of labels, in plain numbers: a request adds to them, and a
 * collection reads them into prom-client's series. prom-client's labelled children validate and
 * hash their labels on every call, which cost a request more than all its figures together
 * (about 4% of a listener's time per 4 KiB GET, docs/benchmarks.md).
 */
class Series {
  requests = 0;
  received = 0;
  sent = 0;
  latencySum = 0;
  /** Observations per latency bucket (not cumulative); the last one is +Inf. */
  readonly latencyBuckets = new Float64Array(LATENCY_BUCKETS.length + 1);

  constructor(
    readonly api: string,
    readonly operation: string,
    readonly status: string,
  ) {}

  observe(seconds: number): void {
    let bucket = 0;
    while (bucket < LATENCY_BUCKETS.length && seconds > (LATENCY_BUCKETS[bucket] as number))
      bucket += 1;
    (this.latencyBuckets[bucket] as number) += 1;
    this.latencySum += seconds;
  }
}

/** A series' value as prom-client's `get()` answers it. */
interface MetricValueOut {
  value: number;
  labels: Record<string, string | number>;
  metricName?: string;
}

/**
 * The latency histogram, read from the series at collection in the shape prom-client's Histogram
 * answers (buckets cumulative, then +Inf, sum and count per `api` and `operation`), so the
 * registry's exposition and the merge of snapshots treat it as one of prom-client's.
 */
class LatencyHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';

  constructor(
    readonly name: string,
    readonly help: string,
    private readonly series: ReadonlyMap<string, Series>,
  ) {}

  get(): Promise<{
    name: string;
    help: string;
    type: string;
    values: MetricValueOut[];
    aggregator: string;
  }> {
    // The status class is not a label of the histogram: its series sum over it.
    const byOperation = new Map<string, { labels: Series; buckets: number[]; sum: number }>();
    for (const series of this.series.values()) {
      const key = `${series.api}\u0000${series.operation}`;
      let entry = byOperation.get(key);
      if (!entry) {
        entry = {
          labels: series,
          buckets: new Array<number>(LATENCY_BUCKETS.length + 1).fill(0),
          sum: 0,
        };
        byOperation.set(key, entry);
      }
      for (let bucket = 0; bucket <= LATENCY_BUCKETS.length; bucket += 1)
        (entry.buckets[bucket] as number) += series.latencyBuckets[bucket] as number;
      entry.sum += series.latencySum;
    }
    const values: MetricValueOut[] = [];
    for (const { labels, buckets, sum } of byOperation.values()) {
      const { api, operation } = labels;
      let count = 0;
      LATENCY_BUCKETS.forEach((le, bucket) => {
        count += buckets[bucket] as number;
        values.push({
          labels: { le, api, operation },
          value: count,
          metricName: `${this.name}_bucket`,
        });
      });
      count += buckets[LATENCY_BUCKETS.length] as number;
      values.push(
        { labels: { le: '+Inf', api, operation }, value: count, metricName: `${this.name}_bucket` },
        { labels: { api, operation }, value: sum, metricName: `${this.name}_sum` },
        { labels: { api, operation }, value: count, metricName: `${this.name}_count` },
      );
    }
    return Promise.resolve({
      name: this.name,
      help: this.help,
      type: this.type,
      values,
      aggregator: this.aggregator,
    });
  }

  /** Nothing to reset: the figures are the series', which only grow. */
  reset(): void {}
}

export class RequestMetrics {
  private readonly series = new Map<string, Series>();

  constructor(readonly registry: Registry) {
    const registers = [registry];
    const series = this.series;
    new Counter({
      name: 'lightwell_http_requests_total',
      help: 'HTTP requests answered, by API, operation and status class (aborted: no answer)',
      labelNames: ['api', 'operation', 'status'],
      registers,
      collect() {
        this.reset();
        for (const { api, operation, status, requests } of series.values())
          this.inc({ api, operation, status }, requests);
      },
    });
    registry.registerMetric(
      new LatencyHistogram(
        'lightwell_http_request_duration_seconds',
        'From the request head to the end of the answer',
        series,
      ) as unknown as Parameters<Registry['registerMetric']>[0],
    );
    const bytes = (name: string, help: string, pick: (series: Series) => number): void => {
      new Counter({
        name,
        help,
        labelNames: ['api'],
        registers,
        collect() {
          this.reset();
          const byApi = new Map<string, number>();
          for (const entry of series.values())
            byApi.set(entry.api, (byApi.get(entry.api) ?? 0) + pick(entry));
          for (const [api, value] of byApi) if (value > 0) this.inc({ api }, value);
        },
      });
    };
    bytes(
      'lightwell_http_received_bytes_total',
      'Request body bytes received',
      (entry) => entry.received,
    );
    bytes(
      'lightwell_http_sent_bytes_total',
      'Response body bytes sent (handed to the socket)',
      (entry) => entry.sent,
    );
  }

  /** One answered (or aborted) request: a few additions to plain numbers. */
  observe(api: string, exchange: Exchange): void {
    const operation = exchange.audit.action;
    const status = exchange.aborted ? 'aborted' : STATUS_CLASSES[Math.floor(exchange.status / 100)];
    const series = this.seriesOf(api, operation, status ?? 'other');
    series.requests += 1;
    series.observe((performance.now() - exchange.startedAt) / 1000);
    if (exchange.bytesIn > 0) series.received += exchange.bytesIn;
    if (exchange.bytesOut > 0) series.sent += exchange.bytesOut;
  }

  /** The series of one combination, made once: as many as the labels' bounded values combine to. */
  private seriesOf(api: string, operation: string, status: string): Series {
    const key = `${api}\u0000${operation}\u0000${status}`;
    let series = this.series.get(key);
    if (series === undefined) {
      series = new Series(api, operation, status);
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
