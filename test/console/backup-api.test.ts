// Goal: backup and restore of the whole store. The backup routes keep the admin gates (401
// without a token; a tenant-scoped token sees no backup; a viewer lists but starts none); a bad
// name is 400, a used name 409, a dry run queues nothing. A backup runs in the background to
// `complete`; a second one over it as `base` hard-links the sealed segments it shares instead of
// copying them. `lightwell restore` puts a backup into an empty data directory (and refuses a
// directory that is not empty, or a backup with a damaged file, restoring nothing); the store
// served from the restored directory holds every tenant, bucket and object of the snapshot,
// each reads back byte-exact with the same access keys and admin tokens, an object written
// after the backup is absent, and the restored store takes new writes. Each start is audited.
// Method: the real service on loopback with small segments (so that some seal), backups into
// a temporary directory, the CLI run as a child process, a second service on the restored
// directory.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DataClient, Service, type ObjectsPage } from '../helpers/service.js';
import { consoleCaller } from './console-call.js';
import { restore, sha, waitForBackup } from './backup-kit.js';

t.test('backup of the whole store and its restore into an empty data directory', async (t) => {
  const scratch = mkdtempSync(join(tmpdir(), 'lw-backup-'));
  const root = join(scratch, 'backups');
  const service = await Service.start({
    env: { LIGHTWELL_BACKUP_DIRECTORY: root, LIGHTWELL_STORAGE_SEGMENT_BYTES_MAX: '1MiB' },
  });
  const started: Service[] = [];
  t.teardown(async () => {
    for (const other of started) await other.close();
    await service.close();
    rmSync(scratch, { recursive: true, force: true });
  });
  const call = consoleCaller(service);
  const owner = service.adminToken('owner');
  const viewer = service.adminToken('viewer');
  const scopedOwner = service.adminToken('owner', ['--tenant', 'acme']);
  const acme = await service.tenant('acme', 'read,write,delete,admin', owner);
  const globex = await service.tenant('globex', 'read,write,delete,admin', owner);
  const objects = new Map<string, { client: DataClient; bucket: string; digest: string }>();
  const put = async (client: DataClient, bucket: string, key: string, body: Buffer) => {
    t.equal((await client.put(bucket, key, body)).status, 200, `${bucket}/${key} is written`);
    objects.set(`${bucket}/${key}`, { client, bucket, digest: sha(body) });
  };
  t.equal((await acme.request('POST', '/buckets', { json: { name: 'photos' } })).status, 201);
  t.equal((await globex.request('POST', '/buckets', { json: { name: 'ledger' } })).status, 201);
  await put(acme, 'photos', 'small', Buffer.from('a small photo'));
  await put(acme, 'photos', 'medium', randomBytes(200_000));
  await put(acme, 'photos', 'large', randomBytes(3 * 1024 * 1024));
  await put(globex, 'ledger', 'one', randomBytes(1_500_000));
  await put(globex, 'ledger', 'two', Buffer.from('the second entry'));
  t.equal((await acme.put('photos', 'gone', 'deleted before the backup')).status, 200);
  t.equal((await acme.request('DELETE', '/buckets/photos/objects/gone')).status, 204);

  t.match(await call('GET', '/backups'), { status: 401 });
  t.match(await call('GET', '/backups', scopedOwner), { status: 403 });
  t.match(await call('GET', '/backups', viewer), { status: 200, json: { backups: [] } });
  t.match(await call('POST', '/backups', viewer, { name: 'first' }), { status: 403 });
  t.match(await call('POST', '/backups', scopedOwner, { name: 'first' }), { status: 403 });
  t.match(await call('POST', '/backups', owner, { name: '../up' }), { status: 400 });
  t.match(await call('POST', '/backups', owner, { name: 'x', where: '/etc' }), {
    status: 400,
    json: { message: /where/ },
  });
  const plan = await call('POST', '/backups?dryRun=true', owner, { name: 'first' });
  t.match(plan, {
    status: 200,
    json: { dryRun: true, applied: false, counts: { segments: Number } },
  });
  t.match(
    await call('GET', '/backups', viewer),
    { json: { backups: [] } },
    'the plan queued nothing',
  );

  t.match(await call('POST', '/backups', owner, { name: 'first', reason: 'nightly' }), {
    status: 202,
    json: { name: 'first', state: 'queued' },
  });
  const first = await waitForBackup(call, viewer, 'first');
  t.match(first, { state: 'complete', error: null, counts: { tenants: 2, buckets: 2 } });
  t.ok(first.segmentsTotal > 1, `the backup holds ${first.segmentsTotal} segments`);
  t.match(await call('POST', '/backups', owner, { name: 'first' }), { status: 409 });
  await put(acme, 'photos', 'after-first', Buffer.from('written after the first backup'));
  objects.delete('photos/after-first');

  t.match(await call('POST', '/backups', owner, { name: 'second', base: 'first' }), {
    status: 202,
  });
  const second = await waitForBackup(call, viewer, 'second');
  t.equal(second.state, 'complete');
  t.ok(
    second.segmentsReused > 0,
    `sealed segments linked from the base (${second.segmentsReused})`,
  );
  const manifest = JSON.parse(readFileSync(join(root, 'second', 'manifest.json'), 'utf8')) as {
    files: Array<{ path: string }>;
  };
  const linked = manifest.files.filter(
    (file) =>
      file.path.startsWith('segments/') && statSync(join(root, 'second', file.path)).nlink > 1,
  );
  t.equal(linked.length, second.segmentsReused, 'each reused segment is a hard link');
  t.equal(statSync(join(root, 'first', 'keys', 'master.key')).mode & 0o077, 0, 'key file is 0600');

  // Refusals restore nothing.
  const busy = join(scratch, 'busy');
  mkdirSync(busy);
  writeFileSync(join(busy, 'keep'), 'x');
  t.match(restore(join(root, 'first'), busy), { status: 1, out: /not empty/ });
  const damaged = join(scratch, 'damaged');
  cpSync(join(root, 'first'), damaged, { recursive: true });
  const victim = join(damaged, 'index', 'data.mdb');
  const bytes = readFileSync(victim);
  bytes[bytes.length - 1] = (bytes[bytes.length - 1] ?? 0) ^ 0xff;
  writeFileSync(victim, bytes);
  const refused = join(scratch, 'refused');
  t.match(restore(damaged, refused), { status: 1, out: /does not match its manifest/ });
  t.throws(() => statSync(refused), 'a refused restore leaves no directory');

  const target = join(scratch, 'restored');
  const done = restore(join(root, 'first'), target);
  t.match(done, { status: 0, out: /restored \d+ files .*2 tenants, 2 buckets/ });
  const restored = await Service.start({ dataDir: target });
  started.push(restored);
  const again = new Map<string, DataClient>();
  for (const client of [acme, globex]) {
    const copy = new DataClient(restored.publicUrl, client.accessKeyId, client.secretKey);
    await copy.login();
    again.set(client.accessKeyId, copy);
  }
  for (const [name, object] of objects) {
    const client = again.get(object.client.accessKeyId) as DataClient;
    const answer = await client.get(object.bucket, name.slice(object.bucket.length + 1));
    t.equal(answer.status, 200, `restored: ${name} reads`);
    t.equal(sha(answer.bytes), object.digest, `restored: ${name} is byte-exact`);
  }
  const acmeAgain = again.get(acme.accessKeyId) as DataClient;
  const listed = (await acmeAgain.request('GET', '/buckets/photos/objects')).json as ObjectsPage;
  t.same(
    listed.objects.map((object) => object.key).sort(),
    ['large', 'medium', 'small'],
    'the snapshot: nothing deleted before it, nothing written after it',
  );
  t.equal((await acmeAgain.put('photos', 'new', 'written to the restored store')).status, 200);
  t.equal((await acmeAgain.get('photos', 'new')).status, 200);
  t.match(await restored.admin('GET', '/tenants', owner), { status: 200 }, 'admin tokens restored');

  const audit = await service.admin('GET', '/audit?limit=1000', owner);
  const rows = (audit.json as { events: Array<Record<string, unknown>> }).events;
  t.ok(
    rows.some((row) => row['action'] === 'startConsoleBackup' && row['reason'] === 'nightly'),
    'a backup start is audited',
  );
  t.ok(rows.some((row) => row['action'] === 'startConsoleBackup' && row['dryRun'] === true));
});
