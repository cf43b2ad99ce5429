// Goal: a tenant delete interrupted by a crash resumes on restart and completes, and at no
// point does the tenant look active: right after the kill the index already says `deleted`
// (with the purge unfinished), and after the restart the purge finishes by itself: every
// version and bucket of the tenant is gone and every chunk reference released.
// Method: the real service on loopback; a tenant with 3,000 objects in two buckets (24 purge
// batches of 128 versions); disable, then delete, and SIGKILL every process of the service as
// soon as the first purge batch has committed (seen in the tenant's usage record, which each
// batch saves, through the index opened read-only by the test). The pids are collected
// beforehand so that the kill is immediate, and the service runs at the lowest priority from
// the delete on, so that the test's polling keeps up on a loaded machine: polling a count of the
// versions at normal priority, the engine had committed 7 more batches before the kill when
// unloaded, and all 24 beside four busy loops on two cores. Then inspect the index with no
// process running; restart on the same data directory and watch the tenant through the admin
// API until its deletion completes; inspect the index again.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { setPriority } from 'node:os';
import { join } from 'node:path';
import { Service } from '../helpers/service.js';
import {
  call,
  mintToken,
  waitFor,
  type TenantAnswer,
  type TenantList,
  type UsageAnswer,
} from './admin-testing.js';
import { IndexStore } from '../../src/engine/index/store.js';
import {
  DB,
  tenantKey,
  tenantChildRange,
  type TenantRecord,
  type BucketRecord,
  type ChunkRecord,
  type UsageRecord,
} from '../../src/engine/index/schema.js';

const OBJECTS = 3000;

t.test('a tenant delete killed midway resumes after restart', async (t) => {
  const began = Date.now();
  const mark = (what: string): void => t.comment(`${what} at ${Date.now() - began} ms`);
  const service = await Service.start();
  mark('started');
  t.teardown(() => service.close());
  const owner = (await mintToken(service, 'owner')).token;
  const client = await service.tenant('bulk', 'read,write', owner);
  for (const name of ['alpha-bucket', 'beta-bucket'])
    t.equal((await client.request('POST', '/buckets', { json: { name } })).status, 201);
  let failures = 0;
  for (let start = 0; start < OBJECTS; start += 50) {
    const batch = Array.from({ length: 50 }, (_, offset) => start + offset);
    const statuses = await Promise.all(
      batch.map((index) =>
        client
          .put(
            index % 2 === 0 ? 'alpha-bucket' : 'beta-bucket',
            `obj-${index}`,
            `object number ${index}`,
          )
          .then((r) => r.status),
      ),
    );
    failures += statuses.filter((status) => status !== 200).length;
  }
  t.equal(failures, 0, `${OBJECTS} objects written`);
  mark('written');
  t.equal(
    ((await call(service, 'GET', '/tenants/bulk/usage', { token: owner })).json as UsageAnswer)
      .objects,
    OBJECTS,
  );
  t.equal(
    (
      await call(service, 'POST', '/tenants/bulk/disable', {
        token: owner,
        body: { reason: 'crash test' },
      })
    ).status,
    200,
  );

  const pids = processTree(service.child?.pid as number);
  // The service at the lowest priority: on a loaded machine this test's polling still runs
  // between purge batches, so the kill lands midway.
  for (const pid of pids) setPriority(pid, 19);
  const watcher = IndexStore.open({ path: join(service.dataDir, 'index'), readOnly: true });
  const answer = await call(service, 'POST', '/tenants/bulk/delete', {
    token: owner,
    body: { reason: 'crash test', confirm: 'bulk' },
  });
  // Kill as soon as the first purge batch has committed: each batch saves the tenant's usage,
  // so the watcher sees fewer versions there (one read a poll, not a count of the versions).
  for (let polls = 0; polls < 100_000; polls += 1) {
    watcher.refresh();
    const usage = watcher.get<UsageRecord>(DB.usage, tenantKey('bulk'));
    if (!usage || usage.versions < OBJECTS) break;
    await new Promise((resolve) => setImmediate(resolve));
  }
  for (const pid of pids) killHard(pid);
  await watcher.close();
  t.equal(answer.status, 200, 'the delete was acknowledged');
  t.match(answer.json, {
    applied: true,
    counts: { objects: OBJECTS, versions: OBJECTS, buckets: 2 },
    tenant: { state: 'deleted' },
  });
  await waitFor('the processes to exit', async () =>
    pids.every((pid) => !alive(pid)) ? true : undefined,
  );

  const atCrash = await inspect(service.dataDir);
  t.equal(atCrash.tenant.state, 'deleted', 'after the crash the tenant is deleted, never active');
  t.equal(atCrash.tenant.deletion?.completedAt, undefined, 'the kill interrupted the purge');
  t.ok(
    atCrash.versions > 0 && atCrash.versions < OBJECTS,
    `the purge was midway (${atCrash.versions} versions left)`,
  );

  mark('inspected');
  await service.launch();
  mark('restarted');
  const tenant = await waitFor(
    'the resumed purge',
    async () => {
      const current = (await call(service, 'GET', '/tenants/bulk', { token: owner }))
        .json as TenantAnswer;
      t.not(current.state, 'active');
      return current.deletion?.state === 'complete' ? current : undefined;
    },
    30_000,
  );
  t.match(tenant, { id: 'bulk', state: 'deleted', deletion: { state: 'complete' } });
  t.notOk(
    ((await call(service, 'GET', '/tenants', { token: owner })).json as TenantList).tenants.some(
      (entry) => entry.id === 'bulk',
    ),
  );
  t.equal((await call(service, 'GET', '/tenants/bulk/usage', { token: owner })).status, 404);
  mark('purged');
  await service.stop();
  const after = await inspect(service.dataDir);
  t.equal(after.versions, 0, 'no version left');
  t.equal(after.buckets, 0, 'no bucket left');
  t.equal(after.usage, undefined, 'no usage record left');
  t.ok(
    after.chunks > 0 && after.liveChunks === 0,
    'every chunk reference released; compaction reclaims the bytes',
  );
});

function versionsLeft(store: IndexStore): number {
  let versions = 0;
  for (const { value: bucket } of store.range<BucketRecord>(DB.buckets, tenantChildRange('bulk'))) {
    const start = Buffer.alloc(4);
    start.writeUInt32BE(bucket.id, 0);
    versions += [
      ...store.range(DB.versions, { start, end: Buffer.concat([start, Buffer.from([0xff])]) }),
    ].length;
  }
  return versions;
}

interface Snapshot {
  tenant: TenantRecord;
  buckets: number;
  versions: number;
  usage: unknown;
  chunks: number;
  liveChunks: number;
}

/** Reads the index with no service running. */
async function inspect(dataDir: string): Promise<Snapshot> {
  const store = IndexStore.open({ path: join(dataDir, 'index'), readOnly: true });
  try {
    const tenant = store.get<TenantRecord>(DB.tenants, tenantKey('bulk')) as TenantRecord;
    const buckets = [...store.range<BucketRecord>(DB.buckets, tenantChildRange('bulk'))];
    const versions = versionsLeft(store);
    const start = Buffer.alloc(4);
    start.writeUInt32BE(tenant.num, 0);
    const end = Buffer.alloc(4);
    end.writeUInt32BE(tenant.num + 1, 0);
    const chunks = [...store.range<ChunkRecord>(DB.chunks, { start, end })].map(
      (entry) => entry.value,
    );
    return {
      tenant,
      buckets: buckets.length,
      versions,
      usage: store.get(DB.usage, tenantKey('bulk')),
      chunks: chunks.length,
      liveChunks: chunks.filter((chunk) => chunk.refs > 0).length,
    };
  } finally {
    await store.close();
  }
}

function processTree(root: number): number[] {
  const found = [root];
  for (let index = 0; index < found.length; index += 1) {
    let children = '';
    try {
      children = execFileSync('ps', ['-o', 'pid=', '--ppid', String(found[index])], {
        encoding: 'utf8',
      });
    } catch {
      continue;
    }
    for (const line of children.split('\n'))
      if (Number(line.trim()) > 0) found.push(Number(line.trim()));
  }
  return found;
}

function killHard(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return !execFileSync('ps', ['-o', 'stat=', '-p', String(pid)], { encoding: 'utf8' })
      .trim()
      .startsWith('Z');
  } catch {
    return false;
  }
}
