// Goal: the last instant a kill can fall on in a backup, after its directory was renamed into
// place and before the row saying `complete` committed, leaves a complete backup after the
// restart (not one reported failed while it sits in the backup directory), and it restores
// every object byte-exact. The instant is made by hand: the service is killed after a backup,
// and the backup's row set back to `running` in its index. (Kills earlier in a backup are
// backup-kill.test.ts.)
// Method: the real service on loopback, SIGKILL of its whole tree, the index edited while it is
// down, a restart on the same data directory, `lightwell restore` and a service on the copy.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Service } from '../helpers/service.js';
import { IndexStore } from '../../src/engine/index/store.js';
import { DB } from '../../src/engine/index/schema.js';
import { backupKey, type BackupRecord } from '../../src/engine/ops/backup.js';
import { consoleCaller } from './console-call.js';
import { restore, sha, unreadable, waitForBackup, type Written } from './backup-kit.js';

t.test('a kill after the backup was renamed into place leaves it complete', async (t) => {
  const scratch = mkdtempSync(join(tmpdir(), 'lw-backup-renamed-'));
  const root = join(scratch, 'backups');
  const service = await Service.start({ env: { LIGHTWELL_BACKUP_DIRECTORY: root } });
  t.teardown(async () => {
    await service.close();
    rmSync(scratch, { recursive: true, force: true });
  });
  const call = consoleCaller(service);
  const owner = service.adminToken('owner');
  const acme = await service.tenant('acme', 'read,write,delete,admin', owner);
  t.equal((await acme.request('POST', '/buckets', { json: { name: 'photos' } })).status, 201);
  const body = randomBytes(300_000);
  t.equal((await acme.put('photos', 'one', body)).status, 200);
  const written: Written[] = [{ client: acme, bucket: 'photos', key: 'one', digest: sha(body) }];
  t.equal((await call('POST', '/backups', owner, { name: 'nightly' })).status, 202);
  t.match(await waitForBackup(call, owner, 'nightly'), { state: 'complete' });

  await service.kill9();
  const store = IndexStore.open({ path: join(service.dataDir, 'index'), readOnly: false });
  await store.transact(() => {
    const row = store.get<BackupRecord>(DB.meta, backupKey('nightly'));
    store.put(DB.meta, backupKey('nightly'), { ...row, state: 'running', finishedAt: undefined });
  });
  await store.close();
  await service.launch();
  t.match(await waitForBackup(call, owner, 'nightly'), {
    state: 'complete',
    error: null,
    counts: { tenants: 1, buckets: 1 },
  });
  t.ok(existsSync(join(root, 'nightly', 'manifest.json')), 'the backup is still in place');
  const target = join(scratch, 'restored');
  t.match(restore(join(root, 'nightly'), target), { status: 0 });
  t.same(await unreadable(target, written), [], 'it restores byte-exact');
});
