// Goal: the background re-encryption that follows a tenant data-key rotation, through the
// console API. Its routes keep the admin gates (401 without a token, a viewer reads but changes
// nothing, a tenant-scoped operator acts on its own tenant only); a bad body is 400 naming the
// field; pausing with no job is 409. A rotation starts the job; a dry run of a pause changes
// nothing; a pause holds it (objects still read, new ones write); a SIGKILL of the whole
// service while the pass runs loses nothing: after a restart it resumes and completes, every
// chunk is rewritten under the current key, the retired key is dropped (retiredKeys 0, the
// generation kept), and every object, written before, during and after, reads back byte-exact,
// also after a further restart whose gateways never held the retired key. Each change leaves
// an audit row.
// Method: the real service on loopback with `keys.reencrypt_rate` at 1 MiB/s, so that a pass
// over about 5 MiB is still under way when it is paused and when it is killed; the job's
// progress polled until the engine has written the state waited for.
import t, { type Test } from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import { Service, type DataClient } from '../helpers/service.js';
import { consoleCaller, type ConsoleCall } from './console-call.js';

interface Job {
  state: string;
  keyGeneration: number;
  retiredKeys: number;
  chunksScanned: number;
  chunksRewritten: number;
  chunksUnreadable: number;
  keysDropped: number | null;
}

const sha = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');
const WAIT_MS = 120_000;

/** Polls the job until `done` holds; fails saying what it waited for. */
async function waitForJob(
  call: ConsoleCall,
  token: string,
  what: string,
  done: (job: Job) => boolean,
): Promise<Job> {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const answer = await call('GET', '/tenants/acme/data-key/reencryption', token);
    const job = answer.json as Job;
    if (answer.status === 200 && done(job)) return job;
    if (Date.now() > deadline)
      throw new Error(`waited ${WAIT_MS / 1000} s for ${what}; last: ${JSON.stringify(job)}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

async function readsBack(
  t: Test,
  client: DataClient,
  objects: Map<string, string>,
  label: string,
): Promise<void> {
  for (const [key, digest] of objects) {
    const answer = await client.get('keys', key);
    t.equal(answer.status, 200, `${label}: ${key} reads`);
    t.equal(sha(answer.bytes), digest, `${label}: ${key} is byte-exact`);
  }
}

t.test('re-encryption after a data-key rotation, through the console API', async (t) => {
  const service = await Service.start({ env: { LIGHTWELL_KEYS_REENCRYPT_RATE: '1MiB' } });
  t.teardown(() => service.close());
  const call = consoleCaller(service);
  const owner = service.adminToken('owner');
  const viewer = service.adminToken('viewer');
  const scoped = service.adminToken('operator', ['--tenant', 'acme']);
  const other = service.adminToken('operator', ['--tenant', 'globex']);
  const acme = await service.tenant('acme', 'read,write,delete,admin', owner);
  await service.tenant('globex', 'read,write,delete,admin', owner);
  t.equal((await acme.request('POST', '/buckets', { json: { name: 'keys' } })).status, 201);
  const objects = new Map<string, string>();
  const put = async (key: string, body: Buffer): Promise<void> => {
    t.equal((await acme.put('keys', key, body)).status, 200, `${key} is written`);
    objects.set(key, sha(body));
  };
  await put('before/small', Buffer.from('hello, re-encryption'));
  await put('before/medium', randomBytes(200_000));
  await put('before/large', randomBytes(3 * 1024 * 1024));
  await put('before/larger', randomBytes(2 * 1024 * 1024));

  const path = '/tenants/acme/data-key/reencryption';
  t.match(await call('GET', path), { status: 401 }, 'the progress needs a token');
  t.match(await call('PUT', path, undefined, { paused: true }), { status: 401 });
  t.match(await call('GET', path, viewer), {
    status: 200,
    json: { tenantId: 'acme', state: 'none', keyGeneration: 1, retiredKeys: 0 },
  });
  t.match(await call('GET', '/tenants/acme/data-key/reencryption', other), { status: 403 });
  t.match(await call('PUT', path, viewer, { paused: false }), { status: 403 });
  t.match(await call('PUT', path, other, { paused: false }), { status: 403 });
  t.match(await call('PUT', path, scoped, {}), { status: 400, json: { message: /paused/ } });
  t.match(await call('PUT', path, scoped, { paused: true, speed: 2 }), {
    status: 400,
    json: { message: /speed/ },
  });
  t.match(await call('PUT', path, scoped, { paused: true }), { status: 409 }, 'nothing to pause');

  t.match(await call('POST', '/tenants/acme/data-key/rotate', scoped, { reason: 'drill' }), {
    status: 200,
    json: { keyGeneration: 2, retiredKeys: 1 },
  });
  const plan = await call('PUT', `${path}?dryRun=true`, scoped, { paused: true });
  t.match(plan, {
    status: 200,
    json: { dryRun: true, applied: false, result: { state: 'paused' } },
  });
  const paused = await call('PUT', path, scoped, { paused: true, reason: 'busy hour' });
  t.match(paused, { status: 200, json: { state: 'paused', retiredKeys: 1 } });
  await readsBack(t, acme, objects, 'while paused');
  await put('during/new', randomBytes(300_000));

  t.match(await call('PUT', path, scoped, { paused: false }), {
    status: 200,
    json: { state: 'running' },
  });
  await service.kill9();
  await service.launch();
  await acme.login();
  const done = await waitForJob(call, viewer, 'the job to complete', (job) => {
    return job.state === 'complete';
  });
  t.match(done, {
    state: 'complete',
    keyGeneration: 2,
    retiredKeys: 0,
    keysDropped: 1,
    chunksUnreadable: 0,
  });
  t.ok(
    done.chunksRewritten >= 4,
    `chunks under the old key were rewritten (${done.chunksRewritten})`,
  );
  await put('after/new', randomBytes(100_000));
  await readsBack(t, acme, objects, 'after the re-encryption');

  await service.stop();
  await service.launch();
  await acme.login();
  await readsBack(t, acme, objects, 'after a restart, with no retired key anywhere');
  t.match(await call('GET', '/keys', owner), {
    status: 200,
    json: { tenants: [{ tenantId: 'acme', keyGeneration: 2, retiredKeys: 0 }, {}] },
  });

  const audit = await service.admin('GET', '/audit?limit=1000', owner);
  const rows = (audit.json as { events: Array<Record<string, unknown>> }).events;
  const has = (extra: Record<string, unknown>): boolean =>
    rows.some(
      (row) =>
        row['action'] === 'putConsoleReencryption' &&
        Object.entries(extra).every(([k, v]) => row[k] === v),
    );
  t.ok(has({ reason: 'busy hour', tenantId: 'acme', outcome: 'allowed' }), 'a pause is audited');
  t.ok(has({ dryRun: true }), 'the dry run is audited as one');
  t.ok(has({ outcome: 'denied' }), 'a refusal is audited');
});
