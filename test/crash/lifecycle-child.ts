// The child process of test/crash/lifecycle.test.ts: fills an index with objects a lifecycle
// rule makes due (`fill`), or runs the lifecycle executor over it with the clock ten days on
// (`expire`), printing `done <n>` as commands commit, until the test kills it.
//
// Run only as `node lifecycle-child.js --child <index dir> fill|expire`; when tap runs the
// compiled test tree it also runs this file, which then does nothing.

import { randomBytes } from 'node:crypto';
import { IndexStore, CommandBatch } from '../../src/engine/index/store.js';
import type { EngineContext } from '../../src/engine/ops/context.js';
import * as control from '../../src/engine/ops/control.js';
import * as objects from '../../src/engine/ops/objects.js';
import * as segments from '../../src/engine/ops/segments.js';
import * as lifecycle from '../../src/engine/ops/lifecycle.js';
import { LifecycleExecutor } from '../../src/engine/lifecycle.js';
import { loadSettings } from '../../src/util/config.js';
import { componentLogger } from '../../src/util/log.js';

export const CRASH_TENANT = 'crash';
export const CRASH_OBJECTS = 3000;
export const CRASH_START = Date.UTC(2026, 0, 1, 10, 30);
export const CRASH_LATER = CRASH_START + 10 * 86_400_000;

export function crashContext(store: IndexStore, now: number): EngineContext {
  return { store, masterKey: randomBytes(32), settings: loadSettings({}), now: () => now };
}

async function fill(store: IndexStore): Promise<void> {
  const context = crashContext(store, CRASH_START);
  const { segmentId } = await store.transact(() => {
    control.createTenant(context, { id: CRASH_TENANT });
    objects.createBucket(context, { tenantId: CRASH_TENANT, name: 'plain' });
    objects.createBucket(context, { tenantId: CRASH_TENANT, name: 'vers', versioning: 'Enabled' });
    for (const bucket of ['plain', 'vers'])
      lifecycle.putBucketLifecycle(context, {
        tenantId: CRASH_TENANT,
        bucket,
        rules: [
          { id: 'r', status: 'Enabled', filter: { form: 'filter' }, expiration: { days: 1 } },
        ],
      });
    return segments.allocSegment(context, { ownerPid: process.pid });
  });
  for (let first = 0; first < CRASH_OBJECTS; first += 500) {
    await store.transact(() => {
      for (let index = first; index < first + 500; index += 1)
        objects.putObject(context, {
          tenantId: CRASH_TENANT,
          bucket: index % 2 === 0 ? 'plain' : 'vers',
          key: `k${index}`,
          size: 10,
          etag: '"e"',
          contentType: 'text/plain',
          metadata: {},
          checksums: {},
          compressed: false,
          chunks: [
            {
              id: randomBytes(32),
              plainLength: 10,
              location: { segmentId, offset: 64 + index * 100, length: 90, payloadChecksum: 1 },
            },
          ],
        });
    });
  }
  // The reindex jobs of both buckets (objects written after the rules are indexed as written).
  for (const bucketId of lifecycle.pendingJobs(context))
    while (!(await store.transact(() => lifecycle.reindexStep(context, { bucketId }))).done);
}

async function expire(store: IndexStore): Promise<void> {
  const context = crashContext(store, CRASH_LATER);
  const batch = new CommandBatch(store);
  let done = 0;
  const executor = new LifecycleExecutor({
    context,
    submit: async (apply) => {
      const result = await batch.submit(apply);
      done += 1;
      if (done % 64 === 0) process.stdout.write(`done ${done}\n`);
      return result;
    },
    log: componentLogger('test.lifecycle-child'),
    intervalMs: 60_000,
  });
  await executor.runPass();
  process.stdout.write(`finished ${done}\n`);
}

async function main(): Promise<void> {
  const at = process.argv.indexOf('--child');
  if (at < 0) return;
  const [directory, phase] = process.argv.slice(at + 1);
  const store = IndexStore.open({ path: directory ?? '', readOnly: false });
  if (phase === 'fill') await fill(store);
  else await expire(store);
  await store.close();
}

await main();
