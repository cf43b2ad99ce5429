// Goal: scheduled scrubs run when due on the engine's clock and keep their last run. A tenant's
// schedule runs one interval after it is set, not before; its run verifies the tenant's chunks
// and names the object whose chunk was damaged; the global schedule (`*`) covers every active
// tenant; `runNow` makes a schedule due at once; the next run is one interval after a run ends;
// a schedule changed while it runs keeps the new due time; removing one keeps nothing; bad
// intervals and unknown tenants are refused.
// Method: a data directory written by the real service (two tenants, one chunk flipped on
// disk), then the scheduler over that index in process with a clock moved by hand
// (`runDue` called directly); nothing waits on the wall clock.
import t from 'tap';
import { IndexStore } from '../../src/engine/index/store.js';
import { DB } from '../../src/engine/index/schema.js';
import { ManualClock } from '../../src/util/clock.js';
import { loadSettings } from '../../src/util/config.js';
import { componentLogger } from '../../src/util/log.js';
import {
  ScrubScheduler,
  scheduleKey,
  scrubSchedules,
  setScrubSchedule,
  type ScrubScheduleRecord,
} from '../../src/engine/scrub-schedule.js';
import type { EngineContext } from '../../src/engine/ops/context.js';
import { Service } from '../helpers/service.js';
import { plantBadChunk } from '../console/plant.js';
import { join } from 'node:path';

const HOUR = 3_600_000;

t.test('schedules run when due on the injected clock', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const owner = service.adminToken('owner');
  const acme = await service.tenant('acme', 'read,write,delete,admin', owner);
  const globex = await service.tenant('globex', 'read,write,delete,admin', owner);
  t.equal((await acme.request('POST', '/buckets', { json: { name: 'acme-b' } })).status, 201);
  t.equal((await globex.request('POST', '/buckets', { json: { name: 'globex-b' } })).status, 201);
  t.equal((await acme.put('acme-b', 'damaged', 'a body that will be damaged')).status, 200);
  t.equal((await acme.put('acme-b', 'sound', 'a body that stays sound')).status, 200);
  t.equal((await globex.put('globex-b', 'other', 'another tenant')).status, 200);
  await service.stop();
  await plantBadChunk(service.dataDir, 'acme', 'acme-b', 'damaged');

  const clock = new ManualClock(Date.UTC(2026, 11, 7));
  const store = IndexStore.open({ path: join(service.dataDir, 'index'), readOnly: false });
  t.teardown(() => store.close());
  const context: EngineContext = {
    store,
    masterKey: Buffer.alloc(0),
    settings: loadSettings({ flags: { data_dir: service.dataDir } }),
    now: () => clock.now(),
  };
  const set = (args: Parameters<typeof setScrubSchedule>[1]) =>
    store.transact(() => setScrubSchedule(context, args));
  const scheduler = new ScrubScheduler({ context, log: componentLogger('test') });
  const get = (target: string) =>
    store.get<ScrubScheduleRecord>(DB.meta, scheduleKey(target)) as ScrubScheduleRecord;

  await t.rejects(set({ target: 'acme', intervalHours: 0 }), { code: 'bad_request' });
  await t.rejects(set({ target: 'acme', intervalHours: 1.5 }), { code: 'bad_request' });
  await t.rejects(set({ target: 'nobody', intervalHours: 24 }), { code: 'not_found' });
  await t.rejects(set({ target: 'acme', intervalHours: null }), { code: 'not_found' });
  t.same(await set({ target: 'acme', intervalHours: 24, dryRun: true }), {
    target: 'acme',
    intervalHours: 24,
    nextRunAt: clock.now() + 24 * HOUR,
    createdAt: clock.now(),
    updatedAt: clock.now(),
  });
  t.same(scrubSchedules(context), [], 'a dry run stores nothing');
  await set({ target: 'acme', intervalHours: 24 });
  await set({ target: '*', intervalHours: 48 });

  t.equal(await scheduler.runDue(), 0, 'nothing is due before its interval');
  clock.advance(24 * HOUR);
  t.equal(await scheduler.runDue(), 1, "the tenant's schedule runs after one interval");
  const tenantRun = get('acme').lastRun;
  t.match(tenantRun, {
    state: 'complete',
    tenants: 1,
    versions: 2,
    corruptChunks: 1,
    corrupt: [{ tenantId: 'acme', bucket: 'acme-b', key: 'damaged' }],
  });
  t.equal(get('acme').nextRunAt, clock.now() + 24 * HOUR, 'due again one interval later');
  t.equal(get('*').lastRun, undefined, 'the global schedule is not due yet');

  clock.advance(24 * HOUR);
  t.equal(await scheduler.runDue(), 2, 'both are due now');
  t.match(get('*').lastRun, {
    state: 'complete',
    tenants: 2,
    versions: 3,
    corruptChunks: 1,
    corrupt: [{ tenantId: 'acme', key: 'damaged' }],
  });

  await set({ target: 'globex', intervalHours: 12, runNow: true });
  t.equal(get('globex').nextRunAt, clock.now(), 'runNow: due at once');
  t.equal(await scheduler.runDue(), 1);
  t.match(get('globex').lastRun, { state: 'complete', versions: 1, corruptChunks: 0 });
  t.equal(get('globex').nextRunAt, clock.now() + 12 * HOUR);

  // A change while a schedule runs keeps the changed due time (the run ends at a later clock).
  await set({ target: 'globex', intervalHours: 12, runNow: true });
  const changedDuringRun = scheduler.runDue();
  clock.advance(HOUR);
  await set({ target: 'globex', intervalHours: 6 });
  await changedDuringRun;
  t.equal(get('globex').intervalHours, 6);
  t.equal((get('globex').nextRunAt - clock.now()) / HOUR, 6, 'the operator’s due time stands');

  t.equal(await set({ target: 'acme', intervalHours: null }), null);
  t.same(
    scrubSchedules(context).map((s) => s.target),
    ['*', 'globex'],
    'removed; the global one sorts first',
  );
  await scheduler.stop();
  t.equal(await scheduler.runDue(), 0, 'a stopped scheduler runs nothing');
});
