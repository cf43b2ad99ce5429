// Metrics plumbing shared by every process: a prom-client registry per process (or listener
// thread) labelled with the process role, figures read from plain counters at collection, and
// the merge of several processes' snapshots into one exposition (src/http/metrics.ts says how
// the snapshots travel).
//
// Event-loop delay is sampled every LOOP_DELAY_SAMPLE_MS, not at prom-client's default of 10 ms:
// its sampler is a timer, so at 10 ms it woke every idle process 100 times a second, most of an
// idle service's 20 ms of CPU a second (docs/benchmarks.md). A sample records how late the
// timer fired past its interval, so the series say the delay itself (prom-client's include the
// interval: an idle loop showed 10 ms). A stall longer than the interval is always seen; a
// shorter one is seen with the odds of its length over the interval, which the percentiles of
// a busy loop average over. A collection resets the sampler, which then measures from its
// second sample on: a stall in the first interval after a collection (every 5 s) is not seen.

import { monitorEventLoopDelay } from 'node:perf_hooks';
import {
  AggregatorRegistry,
  Counter,
  Gauge,
  Registry,
  collectDefaultMetrics,
  type MetricObjectWithValues,
  type MetricValue,
} from 'prom-client';

/** How often the event loop's delay is sampled (the header says why not more often). */
export const LOOP_DELAY_SAMPLE_MS = 100;
/**
 * prom-client's own sampler, made to wait this long between samples: its timer is unref'd and
 * never fires in practice, and its series are replaced by `loopDelayFigures`'.
 */
const PROM_SAMPLER_IDLE_MS = 24 * 3600 * 1000;
const PREFIX = 'lightwell_';

/** The delay series, as prom-client names them, and how series of several processes merge. */
const LOOP_DELAY_SERIES = [
  ['min', 'min', 'The smallest event-loop delay sampled'],
  ['max', 'max', 'The largest event-loop delay sampled'],
  ['mean', 'average', 'The mean event-loop delay sampled'],
  ['stddev', 'average', 'The standard deviation of the event-loop delays sampled'],
  ['p50', 'average', 'The median event-loop delay sampled'],
  ['p90', 'average', 'The 90th percentile of the event-loop delays sampled'],
  ['p99', 'average', 'The 99th percentile of the event-loop delays sampled'],
] as const;

/** What a registry's `getMetricsAsJSON` answers: what crosses the engine socket. */
export type MetricsSnapshot = MetricObjectWithValues<MetricValue<string>>[];

/**
 * A registry labelled with the process role; with `processFigures`, Node's process figures
 * (CPU, resident memory, heap, event-loop lag, handles), which only one thread of a process
 * may collect (they are the process's, and would be summed once per thread).
 */
export function processRegistry(role: string, processFigures: boolean): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ process: role });
  if (processFigures) {
    collectDefaultMetrics({
      register: registry,
      prefix: PREFIX,
      eventLoopMonitoringPrecision: PROM_SAMPLER_IDLE_MS,
    });
    loopDelayFigures(registry);
  }
  return registry;
}

/**
 * Event-loop delay since the previous collection, in seconds past the sampling interval, under
 * prom-client's names (which replace its own series): min, max, mean, stddev, percentiles.
 */
function loopDelayFigures(registry: Registry): void {
  const sampler = monitorEventLoopDelay({ resolution: LOOP_DELAY_SAMPLE_MS });
  sampler.enable();
  const delay = (nanoseconds: number): number =>
    Math.max(0, nanoseconds / 1e9 - LOOP_DELAY_SAMPLE_MS / 1000);
  // Each series' value from one read of the sampler, which the first series' `collect` takes and
  // then resets (the series are collected in the order they were registered).
  const figures = (): number[] => [
    delay(sampler.min),
    delay(sampler.max),
    delay(sampler.mean),
    sampler.stddev / 1e9,
    delay(sampler.percentile(50)),
    delay(sampler.percentile(90)),
    delay(sampler.percentile(99)),
  ];
  let read: number[] = [];
  LOOP_DELAY_SERIES.forEach(([suffix, aggregator, help], index) => {
    const name = `${PREFIX}nodejs_eventloop_lag_${suffix}_seconds`;
    registry.removeSingleMetric(name);
    new Gauge({
      name,
      help,
      aggregator,
      registers: [registry],
      collect() {
        if (index === 0) {
          // No sample since the last collection (two within one interval): no delay seen.
          read = sampler.count > 0 ? figures() : LOOP_DELAY_SERIES.map(() => 0);
          sampler.reset();
        }
        this.set(read[index] ?? 0);
      },
    });
  });
}

/**
 * A counter whose value is read from `read` at each collection (figures a module keeps as
 * plain numbers, such as UploadStats): the data path keeps its own `+= 1`.
 */
export function counterOf(
  registry: Registry,
  name: string,
  help: string,
  read: () => number,
): void {
  new Counter({
    name,
    help,
    registers: [registry],
    collect() {
      this.reset();
      this.inc(read());
    },
  });
}

/** A gauge read from `read` at each collection. */
export function gaugeOf(registry: Registry, name: string, help: string, read: () => number): void {
  new Gauge({
    name,
    help,
    registers: [registry],
    collect() {
      this.set(read());
    },
  });
}

/** The exposition of several snapshots, series of the same name and labels summed. */
export async function exposition(
  snapshots: readonly MetricsSnapshot[],
): Promise<{ contentType: string; text: string }> {
  const merged = AggregatorRegistry.aggregate(snapshots as MetricsSnapshot[]);
  return { contentType: merged.contentType, text: await merged.metrics() };
}
