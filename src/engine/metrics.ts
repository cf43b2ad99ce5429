// The engine's figures for `/metrics` (src/http/metrics.ts says how they reach the admin
// listener): its commit groups and fdatasyncs, observed as they happen (an increment and a
// histogram bucket each); and, read only when a scrape asks, the segments, compaction and
// garbage collection, deduplication, the webhook outbox and each tenant's usage, from the index
// and the compactor's totals. A scrape's read is bounded by the number of segments, tenants and
// buckets with notifications, and never runs inside a write transaction.
//
// The snapshots of the other processes (`reportMetrics`) are kept per connection, the newest
// only, and dropped with the connection.

import type { Socket } from 'node:net';
import { Counter, Gauge, Histogram } from 'prom-client';
import { processRegistry, type MetricsSnapshot } from '../util/metrics.js';
import type { IndexStore } from './index/store.js';
import {
  DB,
  type OutboxStatusRecord,
  type SegmentRecord,
  type UsageRecord,
} from './index/schema.js';
import type { CompactionStats } from './segments/compaction.js';
import { BadRequest } from '../util/errors.js';

/** The most series one process may report (a listener has a few hundred). */
const REPORTED_SERIES_MAX = 5_000;

const SECONDS_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5];

export class EngineMetrics {
  readonly registry = processRegistry('engine', true);
  private readonly reported = new Map<Socket, MetricsSnapshot>();
  private readonly commitSize: Histogram;
  private readonly commitSeconds: Histogram;
  private readonly syncSeconds: Histogram;
  private readonly chunks: Counter<'kind'>;

  constructor(sources: { store: IndexStore; compaction: () => CompactionStats }) {
    const registers = [this.registry];
    this.commitSize = new Histogram({
      name: 'lightwell_engine_commit_group_size',
      help: 'Commands that shared one durable commit',
      buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512],
      registers,
    });
    this.commitSeconds = new Histogram({
      name: 'lightwell_engine_commit_seconds',
      help: 'From a commit group opening to its durable commit',
      buckets: SECONDS_BUCKETS,
      registers,
    });
    this.syncSeconds = new Histogram({
      name: 'lightwell_engine_fdatasync_seconds',
      help: 'fdatasync of a segment before the commit that references it',
      buckets: SECONDS_BUCKETS,
      registers,
    });
    this.chunks = new Counter({
      name: 'lightwell_engine_manifest_chunks_total',
      help: 'Chunks named by committed manifests: written (new bytes) or deduplicated (existing)',
      labelNames: ['kind'],
      registers,
    });
    segmentFigures(this.registry, sources.store);
    compactionFigures(this.registry, sources.compaction);
    outboxFigures(this.registry, sources.store);
    usageFigures(this.registry, sources.store);
  }

  commit(size: number, seconds: number): void {
    this.commitSize.observe(size);
    this.commitSeconds.observe(seconds);
  }

  fdatasync(seconds: number): void {
    this.syncSeconds.observe(seconds);
  }

  manifest(written: number, deduplicated: number): void {
    if (written > 0) this.chunks.inc({ kind: 'written' }, written);
    if (deduplicated > 0) this.chunks.inc({ kind: 'deduplicated' }, deduplicated);
  }

  /** A process's snapshot (`reportMetrics`); replaces the one its connection sent before. */
  report(socket: Socket, args: unknown): void {
    const metrics = (args as { metrics?: unknown } | undefined)?.metrics;
    if (!Array.isArray(metrics) || metrics.length > REPORTED_SERIES_MAX)
      throw BadRequest(`reportMetrics takes {metrics}: at most ${REPORTED_SERIES_MAX} metrics`);
    this.reported.set(socket, metrics as MetricsSnapshot);
  }

  drop(socket: Socket): void {
    this.reported.delete(socket);
  }

  /** The engine's own figures, then every process's newest snapshot (`collectMetrics`). */
  async collect(): Promise<MetricsSnapshot[]> {
    return [await this.registry.getMetricsAsJSON(), ...this.reported.values()];
  }
}

type Registry = EngineMetrics['registry'];

function segmentFigures(registry: Registry, store: IndexStore): void {
  let byState = new Map<string, { count: number; bytes: number; live: number }>();
  const read = (): void => {
    byState = new Map();
    for (const { value } of store.range<SegmentRecord>(DB.segments, {})) {
      const entry = byState.get(value.state) ?? { count: 0, bytes: 0, live: 0 };
      entry.count += 1;
      entry.bytes += value.size ?? 0;
      entry.live += value.liveBytes;
      byState.set(value.state, entry);
    }
  };
  const gauge = (
    name: string,
    help: string,
    pick: (entry: { count: number; bytes: number; live: number }) => number,
    first: boolean,
  ): void => {
    new Gauge({
      name,
      help,
      labelNames: ['state'],
      registers: [registry],
      collect() {
        if (first) read();
        this.reset();
        for (const [state, entry] of byState) this.set({ state }, pick(entry));
      },
    });
  };
  gauge('lightwell_segments', 'Segments by state', (entry) => entry.count, true);
  gauge(
    'lightwell_segment_bytes',
    'Sealed segment file bytes by state',
    (entry) => entry.bytes,
    false,
  );
  gauge(
    'lightwell_segment_live_bytes',
    'Bytes of segment records that live chunks reference, by state',
    (entry) => entry.live,
    false,
  );
}

function compactionFigures(registry: Registry, totals: () => CompactionStats): void {
  const figures: Array<[keyof CompactionStats, string, string]> = [
    ['segmentsCompacted', 'lightwell_compaction_segments_compacted_total', 'Segments compacted'],
    [
      'recordsMoved',
      'lightwell_compaction_records_moved_total',
      'Live records copied by compaction',
    ],
    ['bytesReclaimed', 'lightwell_gc_bytes_reclaimed_total', 'Segment bytes reclaimed'],
    ['chunksDropped', 'lightwell_gc_chunks_dropped_total', 'Dead chunks dropped from the index'],
    ['segmentsDeleted', 'lightwell_gc_segments_deleted_total', 'Retired segment files deleted'],
  ];
  for (const [field, name, help] of figures)
    new Counter({
      name,
      help,
      registers: [registry],
      collect() {
        this.reset();
        this.inc(totals()[field]);
      },
    });
}

function outboxFigures(registry: Registry, store: IndexStore): void {
  const sums = { pending: 0, delivered: 0, failedAttempts: 0, discarded: 0 };
  const read = (): void => {
    sums.pending = sums.delivered = sums.failedAttempts = sums.discarded = 0;
    for (const { value } of store.range<OutboxStatusRecord>(DB.outboxStatus, {})) {
      sums.pending += value.pending;
      sums.delivered += value.delivered;
      sums.failedAttempts += value.failedAttempts;
      sums.discarded += value.discarded;
    }
  };
  new Gauge({
    name: 'lightwell_outbox_pending_events',
    help: 'Webhook events waiting for delivery (outbox depth)',
    registers: [registry],
    collect() {
      read();
      this.set(sums.pending);
    },
  });
  const counters: Array<[keyof typeof sums, string, string]> = [
    ['delivered', 'lightwell_outbox_delivered_total', 'Webhook events delivered'],
    [
      'failedAttempts',
      'lightwell_outbox_delivery_failures_total',
      'Webhook delivery attempts that failed',
    ],
    [
      'discarded',
      'lightwell_outbox_discarded_total',
      'Webhook events dropped after the retry window',
    ],
  ];
  for (const [field, name, help] of counters)
    new Counter({
      name,
      help,
      registers: [registry],
      collect() {
        this.reset();
        this.inc(sums[field]);
      },
    });
}

function usageFigures(registry: Registry, store: IndexStore): void {
  let rows: UsageRecord[] = [];
  const gauge = (
    name: string,
    help: string,
    pick: (usage: UsageRecord) => number,
    first: boolean,
  ): void => {
    new Gauge({
      name,
      help,
      labelNames: ['tenant'],
      registers: [registry],
      collect() {
        if (first) rows = [...store.range<UsageRecord>(DB.usage, {})].map((entry) => entry.value);
        this.reset();
        for (const usage of rows) this.set({ tenant: usage.tenantId }, pick(usage));
      },
    });
  };
  gauge(
    'lightwell_tenant_logical_bytes',
    'Bytes of object versions a tenant stores',
    (usage) => usage.logicalBytes,
    true,
  );
  gauge(
    'lightwell_tenant_physical_bytes',
    'Bytes a tenant stores after deduplication and compression',
    (usage) => usage.physicalBytes,
    false,
  );
  gauge('lightwell_tenant_objects', 'Objects a tenant stores', (usage) => usage.objects, false);
}
