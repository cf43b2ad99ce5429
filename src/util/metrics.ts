// Metrics plumbing shared by every process: a prom-client registry per process (or listener
// thread) labelled with the process role, figures read from plain counters at collection, and
// the merge of several processes' snapshots into one exposition (src/http/metrics.ts says how
// the snapshots travel).

import {
  AggregatorRegistry,
  Counter,
  Gauge,
  Registry,
  collectDefaultMetrics,
  type MetricObjectWithValues,
  type MetricValue,
} from 'prom-client';

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
  if (processFigures) collectDefaultMetrics({ register: registry, prefix: 'lightwell_' });
  return registry;
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
