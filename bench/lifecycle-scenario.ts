// The lifecycle scenario: a bucket of `listKeys` objects (1,000,000 in the full run) of which 1%
// is due, expired by the engine's lifecycle executor; and the cost of a pass with nothing due.
//
// How it is measured, and why so: lifecycle runs inside the engine process and never crosses a
// socket, so the scenario runs the engine's own code in this process (IndexStore, CommandBatch,
// ops/lifecycle.ts, LifecycleExecutor) on a fresh index of its own, with a manual clock moved
// past the due time instead of waiting days. The objects are filled by the engine's `putObject`
// command, 2,000 per transaction (the quick path: no HTTP, and every object refers to one
// 16-byte chunk, as identical bodies deduplicate), so the fill measures metadata, not bytes. The
// rules are set after the fill, so the reindex walks all objects once, as it would after a
// configuration change on a full bucket. Every object is covered by a rule: 99% by one whose days
// have not passed (they wait in the due-date index), 1% by one that is due.
//
// Reported: the expiry rate (objects per second over the pass that expires the 1%), and in the
// notes the fill and reindex times, the empty pass (index range reads and entries read, median
// and p99 wall time over EMPTY_PASSES passes) and the machine's load average.

import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Histogram } from './histogram.js';
import {
  emptyMeasured,
  type Measured,
  type Scenario,
  type ScenarioContext,
} from './scenario-kit.js';
import { IndexStore, CommandBatch } from '../src/engine/index/store.js';
import { DB } from '../src/engine/index/schema.js';
import type { EngineContext } from '../src/engine/ops/context.js';
import * as control from '../src/engine/ops/control.js';
import * as objects from '../src/engine/ops/objects.js';
import * as segments from '../src/engine/ops/segments.js';
import * as lifecycle from '../src/engine/ops/lifecycle.js';
import { LifecycleExecutor } from '../src/engine/lifecycle.js';
import type { LifecycleRuleRecord } from '../src/engine/index/lifecycle-schema.js';
import { ManualClock } from '../src/util/clock.js';
import { loadSettings } from '../src/util/config.js';
import { componentLogger } from '../src/util/log.js';

const DAY_MS = 86_400_000;
const START = Date.UTC(2026, 0, 1, 10, 30);
const FILL_PER_TRANSACTION = 2000;
const EMPTY_PASSES = 200;
const TENANT = 'bench';
const BUCKET = 'expiring';

function seconds(started: bigint): number {
  return Number(process.hrtime.bigint() - started) / 1e9;
}

async function fill(context: EngineContext, count: number, dueEvery: number): Promise<void> {
  const { store } = context;
  const chunk = randomBytes(32);
  const { segmentId } = await store.transact(() => {
    control.createTenant(context, { id: TENANT });
    objects.createBucket(context, { tenantId: TENANT, name: BUCKET });
    return segments.allocSegment(context, { ownerPid: process.pid });
  });
  const location = { segmentId, offset: 64, length: 96, payloadChecksum: 1 };
  for (let first = 0; first < count; first += FILL_PER_TRANSACTION) {
    await store.transact(() => {
      for (let index = first; index < Math.min(count, first + FILL_PER_TRANSACTION); index += 1)
        objects.putObject(context, {
          tenantId: TENANT,
          bucket: BUCKET,
          // Due objects are spread through the key space, not one range at its end.
          key: `${index % dueEvery === 0 ? 'due' : 'keep'}/${index.toString(36).padStart(6, '0')}`,
          size: 16,
          etag: '"bench"',
          contentType: 'application/octet-stream',
          metadata: {},
          checksums: {},
          compressed: false,
          chunks: [{ id: chunk, plainLength: 16, location }],
        });
    });
  }
}

async function runLifecycle(context: ScenarioContext): Promise<Measured> {
  const count = context.sizes.listKeys;
  const dueEvery = 100;
  const directory = mkdtempSync(join(tmpdir(), 'lw-bench-lifecycle-'));
  const store = IndexStore.open({ path: directory, readOnly: false });
  try {
    const clock = new ManualClock(START);
    const engine: EngineContext = {
      store,
      masterKey: randomBytes(32),
      settings: loadSettings({}),
      now: () => clock.now(),
    };
    const batch = new CommandBatch(store);
    const executor = new LifecycleExecutor({
      context: engine,
      submit: (apply) => batch.submit(apply),
      log: componentLogger('bench.lifecycle'),
      intervalMs: 60_000,
    });
    const notes: string[] = [
      `load average before ${loadavg()
        .map((v) => v.toFixed(2))
        .join(' ')}`,
    ];
    let started = process.hrtime.bigint();
    await fill(engine, count, dueEvery);
    notes.push(`fill: ${count} objects in ${seconds(started).toFixed(1)} s (engine putObject)`);
    started = process.hrtime.bigint();
    await store.transact(() =>
      lifecycle.putBucketLifecycle(engine, {
        tenantId: TENANT,
        bucket: BUCKET,
        rules: [rule('due', 'due/', 1), rule('keep', 'keep/', 3650)],
      }),
    );
    const reindex = await executor.runPass();
    notes.push(
      `reindex after the rules were set: ${count} objects in ${seconds(started).toFixed(1)} s ` +
        `(${reindex.reindexSteps} steps)`,
    );
    const indexed = [...store.range(DB.lifecycleSubjects, {})].length;
    notes.push(`due-date index holds ${indexed} entries`);
    const empty = new Histogram();
    let rangeReads = 0;
    let entriesRead = 0;
    for (let pass = 0; pass < EMPTY_PASSES; pass += 1) {
      const at = process.hrtime.bigint();
      const stats = await executor.runPass();
      empty.record(Number(process.hrtime.bigint() - at) / 1e3);
      rangeReads += stats.rangeReads;
      entriesRead += stats.entriesRead;
    }
    notes.push(
      `empty pass (${EMPTY_PASSES} passes over ${count} objects, none due): ` +
        `${rangeReads / EMPTY_PASSES} index range read and ${entriesRead / EMPTY_PASSES} ` +
        `entries read per pass; wall p50 ${empty.percentile(0.5)} µs, ` +
        `p99 ${empty.percentile(0.99)} µs`,
    );
    clock.advance(3 * DAY_MS);
    started = process.hrtime.bigint();
    const due = await executor.runPass();
    const elapsed = seconds(started);
    const expired = due.outcomes['expire-current'] ?? 0;
    notes.push(
      `expiry pass: ${expired} expired in ${elapsed.toFixed(2)} s, ${due.entriesRead} entries ` +
        `and ${due.rangeReads} range reads; load average after ` +
        loadavg()
          .map((v) => v.toFixed(2))
          .join(' '),
    );
    const failures =
      expired === Math.ceil(count / dueEvery)
        ? []
        : [`expected ${Math.ceil(count / dueEvery)} expiries, got ${expired}`];
    return {
      ...emptyMeasured({ failures }),
      operations: expired,
      seconds: elapsed,
      unit: 'ops/s',
      objects: count,
      concurrency: 1,
      notes,
    };
  } finally {
    await store.close();
    rmSync(directory, { recursive: true, force: true });
  }
}

function rule(id: string, prefix: string, days: number): LifecycleRuleRecord {
  return { id, status: 'Enabled', filter: { form: 'filter', prefix }, expiration: { days } };
}

export const LIFECYCLE_SCENARIOS: readonly Scenario[] = [
  {
    name: 'lifecycle-expire-1m',
    title: 'lifecycle: expire the 1% due of a 1,000,000-object bucket; an empty pass',
    bounds: ['lmdb-group-commit'],
    run: runLifecycle,
  },
];
