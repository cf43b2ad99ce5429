// Goal: the console API (/admin/console/api/) keeps the admin API's gates: its OpenAPI document
// is served without a token and matches docs/openapi/console-api.json (regenerate with
// LIGHTWELL_UPDATE_OPENAPI=1); every route answers 401 without a token; a viewer cannot change a
// policy or start a scrub (403); a tenant-scoped token gets 403 for another tenant's buckets,
// policies and scrub jobs, and its job list holds only its tenant; a policy dry run validates
// and stores nothing, an invalid policy and an undeclared field are 400 naming the problem, and
// a saved policy is enforced on the data plane; every request leaves an audit row, a dry run's
// marked. Scrub jobs run to completion, and a cancelled job stops at its next step.
// Method: the real service on loopback for the routes; ScrubJobs over a scripted engine for
// cancellation (a real scrub of a small tenant finishes before a cancel could arrive).
import t from 'tap';
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Service } from '../helpers/service.js';
import { consoleCaller, type Answer } from './console-call.js';
import { ScrubJobs } from '../../src/console/scrub-jobs.js';
import type { EngineClient } from '../../src/engine/protocol.js';
import type { ScrubResult } from '../../src/engine/ops/tenant-scrub.js';

const docPath = fileURLToPath(new URL('../../../docs/openapi/console-api.json', import.meta.url));

t.test('the console API on the admin gates', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const call = consoleCaller(service);
  const owner = service.adminToken('owner');
  const viewer = service.adminToken('viewer');
  const scoped = service.adminToken('operator', ['--tenant', 'acme']);
  const data = await service.tenant('acme', 'read,write,delete,admin', owner);
  await service.tenant('globex', 'read,write,delete,admin', owner);
  t.equal((await data.request('POST', '/buckets', { json: { name: 'logs' } })).status, 201);
  t.equal((await data.put('logs', 'a', 'hello')).status, 200);

  const doc = await call('GET', '/openapi.json');
  t.equal(doc.status, 200);
  const text = JSON.stringify(doc.json, null, 2) + '\n';
  if (process.env['LIGHTWELL_UPDATE_OPENAPI'] === '1') writeFileSync(docPath, text);
  t.equal(text, readFileSync(docPath, 'utf8'), 'docs/openapi/console-api.json is current');
  const paths = Object.keys((doc.json as { paths: Record<string, unknown> }).paths);
  t.same(paths.sort(), [
    '/backup-targets',
    '/backup-targets/{name}',
    '/backups',
    '/backups/{name}/restore',
    '/keys',
    '/master-key/rotate',
    '/openapi.json',
    '/placement',
    '/restores',
    '/scrub-schedules',
    '/scrub-schedules/{target}',
    '/scrubs',
    '/scrubs/{jobId}',
    '/scrubs/{jobId}/cancel',
    '/session',
    '/tenants/{id}/buckets',
    '/tenants/{id}/buckets/{bucket}/lifecycle',
    '/tenants/{id}/buckets/{bucket}/policy',
    '/tenants/{id}/corrupt-chunks',
    '/tenants/{id}/data-key/reencryption',
    '/tenants/{id}/data-key/rotate',
    '/tenants/{id}/public-access-block',
  ]);
  for (const [method, path] of [
    ['GET', '/session'],
    ['GET', '/tenants/acme/buckets'],
    ['PUT', '/tenants/acme/buckets/logs/policy'],
    ['POST', '/scrubs'],
    ['GET', '/scrubs'],
    ['GET', '/scrubs/scrub_0'],
    ['POST', '/scrubs/scrub_0/cancel'],
  ] as const)
    t.match(await call(method, path), { status: 401, json: { code: 'unauthorized' } }, path);

  t.match(await call('GET', '/session', scoped), {
    status: 200,
    json: { role: 'operator', tenant: 'acme' },
  });
  const deny = {
    policy: { version: 1, statements: [{ effect: 'Deny', actions: ['read'], principals: ['*'] }] },
  };
  const policyPath = '/tenants/acme/buckets/logs/policy';
  t.match(await call('PUT', policyPath, viewer, deny), { status: 403 }, 'a viewer changes none');
  t.match(await call('PUT', '/tenants/globex/buckets/logs/policy', scoped, deny), {
    status: 403,
    json: { message: /limited to tenant acme/ },
  });
  t.match(await call('GET', '/tenants/globex/buckets', scoped), { status: 403 });
  t.match(await call('PUT', policyPath, owner, { policy: { version: 2, statements: [] } }), {
    status: 400,
    json: { message: /version must be 1/ },
  });
  t.match(await call('PUT', policyPath, owner, { ...deny, colour: 'red' }), { status: 400 });
  t.match(await call('PUT', '/tenants/acme/buckets/nope/policy', owner, deny), { status: 404 });
  t.match(await call('PUT', `${policyPath}?dryRun=true`, scoped, deny), {
    status: 200,
    json: {
      dryRun: true,
      applied: false,
      counts: { policies: 1 },
      result: { policy: deny.policy },
    },
  });
  t.equal((await data.get('logs', 'a')).status, 200, 'a dry run stores nothing');
  t.match(await call('PUT', policyPath, scoped, { ...deny, reason: 'freeze' }), {
    status: 200,
    json: { name: 'logs', policy: deny.policy },
  });
  t.equal((await data.get('logs', 'a')).status, 403, 'the saved policy is enforced');
  t.match(await call('GET', '/tenants/acme/buckets', viewer), {
    status: 200,
    json: { buckets: [{ name: 'logs', versioning: 'Unversioned', policy: deny.policy }] },
  });
  t.match(await call('PUT', policyPath, owner, { policy: null }), { json: { policy: null } });
  t.equal((await data.get('logs', 'a')).status, 200, 'a removed policy denies nothing');

  // Scrubs.
  t.match(await call('POST', '/scrubs', viewer, { tenantId: 'acme' }), { status: 403 });
  t.match(await call('POST', '/scrubs', scoped, { tenantId: 'globex' }), { status: 403 });
  t.match(await call('POST', '/scrubs', owner, { tenantId: 'acme', bucket: 'nope' }), {
    status: 404,
  });
  t.match(await call('POST', '/scrubs?dryRun=true', scoped, { tenantId: 'acme' }), {
    status: 200,
    json: { dryRun: true, complete: true, counts: { buckets: 1, versions: 1, chunkRefs: 1 } },
  });
  const started = await call('POST', '/scrubs', scoped, { tenantId: 'acme', reason: 'weekly' });
  t.equal(started.status, 202);
  const jobId = (started.json as { id: string }).id;
  const other = await call('POST', '/scrubs', owner, { tenantId: 'globex' });
  t.equal(other.status, 202);
  const otherId = (other.json as { id: string }).id;
  let job: Answer;
  const deadline = Date.now() + 30_000;
  do {
    if (Date.now() > deadline) throw new Error(`scrub ${jobId} did not complete within 30 s`);
    job = await call('GET', `/scrubs/${jobId}`, viewer);
  } while ((job.json as { state: string }).state !== 'complete');
  t.match(job.json, {
    tenantId: 'acme',
    progress: 1,
    counts: { chunksVerified: 1, corruptChunks: 0 },
    corrupt: [],
  });
  t.match(await call('GET', `/scrubs/${otherId}`, scoped), { status: 403 });
  t.match(await call('POST', `/scrubs/${otherId}/cancel`, scoped), { status: 403 });
  t.match(await call('GET', '/scrubs/scrub_nope', scoped), { status: 404 });
  const listed = await call('GET', '/scrubs', scoped);
  t.same(
    (listed.json as { jobs: Array<{ tenantId: string }> }).jobs.map((entry) => entry.tenantId),
    ['acme'],
    'a scoped token lists only its tenant',
  );
  t.match(await call('POST', `/scrubs/${jobId}/cancel`, owner), {
    status: 200,
    json: { state: 'complete' },
  });

  const audit = await service.admin('GET', '/audit?tenant=acme&limit=1000', owner);
  const rows = (audit.json as { events: Array<Record<string, unknown>> }).events;
  t.ok(
    rows.some((row) => row['action'] === 'putConsoleBucketPolicy' && row['reason'] === 'freeze'),
    'the policy change is audited with its reason',
  );
  t.ok(
    rows.some((row) => row['action'] === 'putConsoleBucketPolicy' && row['dryRun'] === true),
    'the dry run is audited as one',
  );
  t.ok(
    rows.some((row) => row['action'] === 'startConsoleScrub' && row['reason'] === 'weekly'),
    'the scrub is audited',
  );
});

t.test('a cancelled scrub job stops at its next step', async (t) => {
  const calls: Array<Record<string, unknown>> = [];
  let release: () => void = () => undefined;
  const step = (cursor: boolean): ScrubResult => ({
    buckets: 0,
    versions: 1,
    chunkRefs: 1,
    logicalBytes: 10,
    chunksVerified: 1,
    bytesVerified: 10,
    corruptChunks: 0,
    corrupt: [],
    ...(cursor ? { cursor: { versionKey: '00', ref: 0 } } : {}),
  });
  const engine = {
    call: async (_op: string, args: Record<string, unknown>) => {
      calls.push(args);
      // The counting pass ends after two steps; the verifying pass waits to be released.
      if (args['verify'] === false) return step(calls.length < 2);
      await new Promise<void>((resolve) => {
        release = resolve;
      });
      return step(true);
    },
  } as unknown as EngineClient;
  const jobs = new ScrubJobs(engine);
  const job = jobs.start({ tenantId: 'acme' }, 'admin:test');
  t.throws(() => jobs.start({ tenantId: 'acme' }, 'admin:test'), { code: 'conflict' });
  while (job.state !== 'running') await new Promise((resolve) => setImmediate(resolve));
  t.same(job.planned, { versions: 2, chunkRefs: 2, logicalBytes: 20 });
  jobs.cancel(job);
  release();
  const stateOf = (): string => job.state; // read afresh: the job runs between the awaits
  while (stateOf() === 'running') await new Promise((resolve) => setImmediate(resolve));
  t.equal(stateOf(), 'cancelled');
  t.equal(calls.filter((args) => args['verify'] === true).length, 1, 'no step after the cancel');
  t.equal(job.counts.chunksVerified, 1);
  t.ok(job.finishedAt, 'the finish is recorded');
});
