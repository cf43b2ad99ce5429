// Goal: backup of one tenant and its restore into the running store. The tenant's backup holds
// its objects (not the master key, nor another tenant's data) with their checksums, and is
// incremental over a base of the same tenant (unchanged objects hard-linked); `lightwell
// restore` refuses it (it goes into a running store). A restore is planned first (the buckets it
// makes, a bucket name another tenant holds as a blocker, then 409), and restores every object
// byte-exact into a new tenant after the original is deleted, or into the same tenant, where
// objects still in place are skipped and changed or deleted ones come back. Gates as for
// whole-store backups. Method: the real service on loopback with small segments, the console API.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Service, type DataClient } from '../helpers/service.js';
import { consoleCaller } from './console-call.js';
import { restore, sha, waitForBackup, waitForRestore } from './backup-kit.js';

t.test('backup of one tenant and its restore into the running store', async (t) => {
  const scratch = mkdtempSync(join(tmpdir(), 'lw-tenant-backup-'));
  const root = join(scratch, 'backups');
  const service = await Service.start({
    env: { LIGHTWELL_BACKUP_DIRECTORY: root, LIGHTWELL_STORAGE_SEGMENT_BYTES_MAX: '1MiB' },
  });
  t.teardown(async () => {
    await service.close();
    rmSync(scratch, { recursive: true, force: true });
  });
  const call = consoleCaller(service);
  const owner = service.adminToken('owner');
  const viewer = service.adminToken('viewer');
  const scopedOwner = service.adminToken('owner', ['--tenant', 'acme']);
  const acme = await service.tenant('acme', 'read,write,delete,admin', owner);
  const globex = await service.tenant('globex', 'read,write,delete,admin', owner);
  const digests = new Map<string, string>();
  const put = async (client: DataClient, bucket: string, key: string, body: Buffer) => {
    t.equal((await client.put(bucket, key, body)).status, 200, `${bucket}/${key} is written`);
    digests.set(`${bucket}/${key}`, sha(body));
  };
  t.equal((await acme.request('POST', '/buckets', { json: { name: 'photos' } })).status, 201);
  t.equal((await acme.request('POST', '/buckets', { json: { name: 'notes' } })).status, 201);
  t.equal((await globex.request('POST', '/buckets', { json: { name: 'ledger' } })).status, 201);
  await put(acme, 'photos', 'small', Buffer.from('a small photo'));
  await put(acme, 'photos', 'large', randomBytes(3 * 1024 * 1024 + 17));
  await put(acme, 'notes', 'a/b c', randomBytes(200_000));
  await put(acme, 'notes', 'empty', Buffer.alloc(0));
  await put(globex, 'ledger', 'one', randomBytes(100_000));

  const body = { name: 'acme-1', tenantId: 'acme' };
  t.match(await call('POST', '/backups', viewer, body), { status: 403 });
  t.match(await call('POST', '/backups', scopedOwner, body), { status: 403 });
  t.match(await call('POST', '/backups', owner, { ...body, tenantId: 'nobody' }), { status: 404 });
  t.match(await call('POST', '/backups?dryRun=true', owner, body), {
    status: 200,
    json: { dryRun: true, result: { name: 'acme-1', tenant: 'acme', state: 'queued' } },
  });
  t.match(await call('POST', '/backups', owner, body), { status: 202, json: { tenant: 'acme' } });
  const first = await waitForBackup(call, owner, 'acme-1');
  t.match(first, { state: 'complete', counts: { tenants: 1, buckets: 2, versions: 4 } });
  const dir = join(root, 'acme-1');
  t.notOk(existsSync(join(dir, 'keys')), 'a tenant backup holds no master key');
  t.notOk(existsSync(join(dir, '.snapshot')), 'the index snapshot is removed');
  const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as {
    version: number;
    tenant: string;
    encryption: { algorithm: string; masterKey: string };
    files: Array<{ path: string; sha256: string }>;
  };
  t.match(manifest, { version: 2, tenant: 'acme', encryption: { algorithm: 'aes-256-gcm' } });
  t.same(
    manifest.files.map((file) => file.path),
    ['records'],
    'the manifest lists the records file, which lists the rest',
  );
  const objectFiles = readdirSync(join(dir, 'objects'));
  t.equal(objectFiles.length, 4, 'one file per version');
  for (const file of [...objectFiles.map((name) => join('objects', name)), 'records']) {
    const stored = readFileSync(join(dir, file));
    t.notOk(stored.includes('a small photo'), `${file} holds no object in clear`);
    t.notOk(stored.includes('photos'), `${file} holds no bucket name in clear`);
  }
  t.equal(statSync(dir).mode & 0o777, 0o700, 'the backup directory is 0700');
  const offline = restore(dir, join(scratch, 'offline'));
  t.equal(offline.status, 1, 'lightwell restore refuses a tenant backup');
  t.match(offline.out, /running store/);

  // Incremental over acme-1: only the new object is read again.
  await put(acme, 'photos', 'later', randomBytes(50_000));
  t.equal(
    (await call('POST', '/backups', owner, { name: 'whole', base: 'acme-1' })).status,
    409,
    'a whole-store backup does not take a tenant backup as its base',
  );
  t.equal(
    (await call('POST', '/backups', owner, { name: 'acme-2', tenantId: 'acme', base: 'acme-1' }))
      .status,
    202,
  );
  const second = await waitForBackup(call, owner, 'acme-2');
  t.match(second, { state: 'complete', segmentsDone: 5, segmentsReused: 4 });
  const inodes = (name: string) =>
    new Set(
      readdirSync(join(root, name, 'objects')).map(
        (f) => statSync(join(root, name, 'objects', f)).ino,
      ),
    );
  const linked = inodes('acme-2');
  for (const ino of inodes('acme-1'))
    t.ok(linked.has(ino), `base file ${String(ino)} is linked, not copied`);

  // Restore into another tenant: first a blocker, since acme still holds the bucket names.
  await service.tenant('phoenix', 'read,write,delete,admin', owner);
  const blocked = await call('POST', '/backups/acme-2/restore?dryRun=true', owner, {
    tenantId: 'phoenix',
  });
  t.match(blocked, {
    status: 200,
    json: {
      counts: { objects: 5, buckets: 2 },
      blockers: [{ code: 'bucket_name_taken' }, { code: 'bucket_name_taken' }],
    },
  });
  t.match(await call('POST', '/backups/acme-2/restore', owner, { tenantId: 'phoenix' }), {
    status: 409,
    json: { message: /notes, photos|photos, notes/ },
  });
  t.match(await call('POST', '/backups/acme-2/restore', viewer, { tenantId: 'phoenix' }), {
    status: 403,
  });
  t.match(await call('POST', '/backups/nothing/restore', owner, { tenantId: 'phoenix' }), {
    status: 404,
  });
  t.match(await call('POST', '/backups/acme-2/restore', owner, { tenantId: 'phoenix', x: 1 }), {
    status: 400,
  });

  // Delete acme; its backup goes into phoenix.
  const reason = { reason: 'the restore test' };
  t.equal((await service.admin('POST', '/tenants/acme/disable', owner, reason)).status, 200);
  const deleted = await service.admin('POST', '/tenants/acme/delete', owner, {
    ...reason,
    confirm: 'acme',
  });
  t.equal(deleted.status, 200, 'acme is deleted');
  // The deleted tenant's bucket names are freed by its purge, which may follow the answer.
  const planned = async () =>
    (await call('POST', '/backups/acme-2/restore?dryRun=true', owner, { tenantId: 'phoenix' }))
      .json as { counts: { bucketsToCreate: number }; blockers: unknown[] };
  const deadline = Date.now() + 60_000;
  let plan = await planned();
  while (plan.blockers.length > 0) {
    if (Date.now() > deadline) throw new Error(`waited 60 s for acme's bucket names to be freed`);
    await new Promise((resolve) => setTimeout(resolve, 100));
    plan = await planned();
  }
  t.match(plan, { counts: { bucketsToCreate: 2 } }, 'the plan makes both buckets');

  // With one byte of its last object file changed, the backup restores nothing: every file is
  // checked before the first bucket is made. The byte is put back afterwards.
  const last = readdirSync(join(root, 'acme-2', 'objects'))
    .map(Number)
    .sort((a, b) => b - a)[0];
  const damaged = join(root, 'acme-2', 'objects', String(last));
  const intact = readFileSync(damaged);
  const bytes = Buffer.from(intact);
  bytes[bytes.length >> 1] = (bytes[bytes.length >> 1] ?? 0) ^ 1;
  writeFileSync(damaged, bytes);
  await service.tenant('damaged', 'read,write,delete,admin', owner);
  const refused = await call('POST', '/backups/acme-2/restore', owner, { tenantId: 'damaged' });
  t.equal(refused.status, 202, 'the restore of the damaged backup is queued');
  t.match(await waitForRestore(call, owner, (refused.json as { id: string }).id), {
    state: 'failed',
    error: /corrupt_data/,
    objectsDone: 0,
    bucketsCreated: 0,
  });
  writeFileSync(damaged, intact);
  const started = await call('POST', '/backups/acme-2/restore', owner, { tenantId: 'phoenix' });
  t.equal(started.status, 202, 'the restore is queued');
  const done = await waitForRestore(call, owner, (started.json as { id: string }).id);
  t.match(done, { state: 'complete', objectsDone: 5, objectsSkipped: 0, bucketsCreated: 2 });
  const phoenix = await service.tenant('phoenix', 'read,write,delete,admin', owner);
  for (const [name, digest] of digests) {
    if (name.startsWith('ledger/')) continue;
    const [bucket, ...rest] = name.split('/');
    const answer = await phoenix.get(bucket ?? '', rest.join('/'));
    t.equal(answer.status, 200, `${name} reads from the new tenant`);
    t.equal(sha(answer.bytes), digest, `${name} is byte-exact`);
  }

  // Into the same tenant: what is in place is skipped, what changed or went comes back.
  t.equal(
    (await call('POST', '/backups', owner, { name: 'globex-1', tenantId: 'globex' })).status,
    202,
  );
  t.match(await waitForBackup(call, owner, 'globex-1'), { state: 'complete' });
  await put(globex, 'ledger', 'two', randomBytes(10));
  t.equal((await globex.put('ledger', 'one', 'overwritten')).status, 200);
  const again = await call('POST', '/backups/globex-1/restore', owner, { tenantId: 'globex' });
  t.equal(again.status, 202);
  t.match(await waitForRestore(call, owner, (again.json as { id: string }).id), {
    state: 'complete',
    objectsDone: 1,
    bucketsCreated: 0,
  });
  const one = await globex.get('ledger', 'one');
  t.equal(sha(one.bytes), digests.get('ledger/one'), 'the overwritten object is restored');
  t.equal((await globex.get('ledger', 'two')).status, 200, 'a later object stays');
  const third = await call('POST', '/backups/globex-1/restore', owner, { tenantId: 'globex' });
  t.match(await waitForRestore(call, owner, (third.json as { id: string }).id), {
    state: 'complete',
    objectsDone: 0,
    objectsSkipped: 1,
  });
  const restores = await call('GET', '/restores', viewer);
  t.match(restores, { status: 200, json: { restores: [{}, {}, {}, {}] } });
  t.match(await call('GET', '/restores', scopedOwner), { status: 403 });
});
