// Goal: scheduled scrubs through the console API. The routes keep the admin gates (401 without a
// token, a viewer changes nothing, a tenant-scoped operator sets only its own tenant's schedule
// and never the global one); bad bodies are 400 naming the field; a dry run stores nothing; a
// schedule set with runNow is run by the engine in the background and its last run names the
// object whose chunk was damaged on disk; a scoped token sees the global schedule's findings in
// its own tenant only; removing a schedule removes it; every change leaves an audit row.
// Method: the real service on loopback; a chunk flipped on disk (plant.ts); the schedule's
// last run polled until the engine has written it.
import t from 'tap';
import { Service } from '../helpers/service.js';
import { consoleCaller } from './console-call.js';
import { plantBadChunk } from './plant.js';

interface Schedule {
  target: string;
  intervalHours: number;
  lastRun: null | {
    state: string;
    corruptChunks: number;
    corrupt: Array<{ tenantId: string; key: string }>;
  };
}

t.test('scheduled scrubs through the console API', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const call = consoleCaller(service);
  const owner = service.adminToken('owner');
  const viewer = service.adminToken('viewer');
  const scoped = service.adminToken('operator', ['--tenant', 'acme']);
  const acme = await service.tenant('acme', 'read,write,delete,admin', owner);
  const globex = await service.tenant('globex', 'read,write,delete,admin', owner);
  t.equal((await acme.request('POST', '/buckets', { json: { name: 'acme-b' } })).status, 201);
  t.equal((await globex.request('POST', '/buckets', { json: { name: 'globex-b' } })).status, 201);
  t.equal((await acme.put('acme-b', 'damaged', 'a body to damage')).status, 200);
  t.equal((await globex.put('globex-b', 'sound', 'a sound body')).status, 200);
  await plantBadChunk(service.dataDir, 'acme', 'acme-b', 'damaged');

  t.match(await call('GET', '/scrub-schedules'), { status: 401 });
  t.match(await call('PUT', '/scrub-schedules/acme', undefined, { intervalHours: 24 }), {
    status: 401,
  });
  t.match(await call('PUT', '/scrub-schedules/acme', viewer, { intervalHours: 24 }), {
    status: 403,
  });
  t.match(await call('PUT', '/scrub-schedules/globex', scoped, { intervalHours: 24 }), {
    status: 403,
  });
  t.match(await call('PUT', '/scrub-schedules/*', scoped, { intervalHours: 24 }), {
    status: 403,
    json: { message: /tenant-scoped/ },
  });
  t.match(await call('PUT', '/scrub-schedules/acme', owner, { intervalHours: 0 }), {
    status: 400,
    json: { message: /intervalHours/ },
  });
  t.match(await call('PUT', '/scrub-schedules/acme', owner, {}), { status: 400 });
  t.match(await call('PUT', '/scrub-schedules/acme', owner, { intervalHours: 1, colour: 1 }), {
    status: 400,
    json: { message: /colour/ },
  });
  t.match(await call('PUT', '/scrub-schedules/nobody', owner, { intervalHours: 24 }), {
    status: 404,
  });
  t.match(await call('PUT', '/scrub-schedules/acme?dryRun=true', scoped, { intervalHours: 24 }), {
    status: 200,
    json: { dryRun: true, schedule: { target: 'acme', intervalHours: 24 } },
  });
  t.same((await call('GET', '/scrub-schedules', viewer)).json, { schedules: [] }, 'none stored');

  const waitRun = async (target: string, token: string): Promise<Schedule> => {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const list = (await call('GET', '/scrub-schedules', token)).json as { schedules: Schedule[] };
      const found = list.schedules.find((entry) => entry.target === target);
      if (found?.lastRun) return found;
      if (Date.now() > deadline)
        throw new Error(`the scheduled scrub of ${target} did not run within 60 s`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };
  t.match(
    await call('PUT', '/scrub-schedules/acme', scoped, {
      intervalHours: 24,
      runNow: true,
      reason: 'nightly',
    }),
    { status: 200, json: { target: 'acme', schedule: { intervalHours: 24 } } },
  );
  t.match(await waitRun('acme', viewer), {
    intervalHours: 24,
    lastRun: {
      state: 'complete',
      corruptChunks: 1,
      corrupt: [{ tenantId: 'acme', key: 'damaged' }],
    },
  });
  t.equal(
    (await call('PUT', '/scrub-schedules/*', owner, { intervalHours: 168, runNow: true })).status,
    200,
  );
  t.match(await waitRun('*', owner), { lastRun: { state: 'complete', corruptChunks: 1 } });
  const globexScoped = service.adminToken('viewer', ['--tenant', 'globex']);
  const seen = (await call('GET', '/scrub-schedules', globexScoped)).json as {
    schedules: Schedule[];
  };
  t.same(
    seen.schedules.map((entry) => [entry.target, entry.lastRun?.corrupt.length ?? null]),
    [['*', 0]],
    "a scoped token sees the global schedule without another tenant's findings",
  );
  t.match(await call('PUT', '/scrub-schedules/acme', owner, { intervalHours: null }), {
    status: 200,
    json: { schedule: null },
  });
  const left = (await call('GET', '/scrub-schedules', owner)).json as { schedules: Schedule[] };
  t.same(
    left.schedules.map((entry) => entry.target),
    ['*'],
  );

  const audit = await service.admin('GET', '/audit?limit=1000', owner);
  const rows = (audit.json as { events: Array<Record<string, unknown>> }).events;
  t.ok(
    rows.some((row) => row['action'] === 'putConsoleScrubSchedule' && row['reason'] === 'nightly'),
  );
  t.ok(rows.some((row) => row['action'] === 'putConsoleScrubSchedule' && row['dryRun'] === true));
});
