// Goal: a process registry exports each event-loop delay series once, as the delay past the
// sampling interval (a stall shows as its length, not the interval), reads nothing as no delay,
// and merges several processes' series (min of the mins, max of the maxes).
// Method: a registry of this test's process; the event loop blocked on purpose; a snapshot's
// values read back, then two snapshots merged into one exposition.
import t from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  LOOP_DELAY_SAMPLE_MS,
  exposition,
  processRegistry,
  type MetricsSnapshot,
} from '../../src/util/metrics.js';

const SERIES = ['min', 'max', 'mean', 'stddev', 'p50', 'p90', 'p99'].map(
  (suffix) => `lightwell_nodejs_eventloop_lag_${suffix}_seconds`,
);

function valueOf(snapshot: MetricsSnapshot, name: string): number {
  const metric = snapshot.find((m) => m.name === name);
  const value = metric?.values[0]?.value;
  if (typeof value !== 'number') throw new TypeError(`no value of ${name}`);
  return value;
}

t.test('a stall of the event loop shows as its length past the sampling interval', async (t) => {
  const registry = processRegistry('engine', true);
  await registry.getMetricsAsJSON(); // the delays sampled so far are forgotten
  // A reset sampler records from its second sample on (its first has no previous to measure
  // from): past its first sample, so the stall below is measured.
  await sleep(2 * LOOP_DELAY_SAMPLE_MS);
  const stallMs = 3 * LOOP_DELAY_SAMPLE_MS;
  const until = performance.now() + stallMs;
  while (performance.now() < until); // the stall: the sampler's timer waits behind it
  // Long enough for the late sample to be taken and at least one more after it.
  await sleep(2 * LOOP_DELAY_SAMPLE_MS + 50);
  const snapshot = await registry.getMetricsAsJSON();
  for (const name of SERIES)
    t.equal(snapshot.filter((m) => m.name === name).length, 1, `${name} once`);
  const max = valueOf(snapshot, 'lightwell_nodejs_eventloop_lag_max_seconds');
  // The stall began at most one interval after a sample, so the sample after it is late by at
  // least the stall less one interval.
  t.ok(max >= (stallMs - LOOP_DELAY_SAMPLE_MS) / 1000, `max ${max} s after a ${stallMs} ms stall`);
  const min = valueOf(snapshot, 'lightwell_nodejs_eventloop_lag_min_seconds');
  t.ok(min >= 0 && min <= max, `min ${min} s: the delay past the interval, not the interval`);
  // Collected again at once: no sample since, so no delay seen.
  const again = await registry.getMetricsAsJSON();
  for (const name of SERIES) t.equal(valueOf(again, name), 0, `${name} without a sample`);
});

t.test("several processes' delays merge: the smallest min, the largest max", async (t) => {
  const stalled = processRegistry('gateway', true);
  const calm = processRegistry('gateway', true);
  await Promise.all([stalled.getMetricsAsJSON(), calm.getMetricsAsJSON()]);
  await sleep(2 * LOOP_DELAY_SAMPLE_MS);
  const until = performance.now() + 2 * LOOP_DELAY_SAMPLE_MS;
  while (performance.now() < until);
  await sleep(2 * LOOP_DELAY_SAMPLE_MS + 50);
  const first = await stalled.getMetricsAsJSON();
  const second = await calm.getMetricsAsJSON();
  const { text } = await exposition([first, second]);
  const line = (name: string): number => {
    const found = new RegExp(`^${name}\\{process="gateway"\\} (\\S+)$`, 'm').exec(text);
    if (!found?.[1]) throw new TypeError(`no ${name} in the exposition`);
    return Number(found[1]);
  };
  const [min, max] = ['min', 'max'].map((s) => `lightwell_nodejs_eventloop_lag_${s}_seconds`) as [
    string,
    string,
  ];
  t.equal(line(min), Math.min(valueOf(first, min), valueOf(second, min)), 'the smaller min');
  t.equal(line(max), Math.max(valueOf(first, max), valueOf(second, max)), 'the larger max');
});
