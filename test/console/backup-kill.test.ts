// Goal: a SIGKILL of the whole service while a backup runs never leaves a half backup. After the
// restart the cut backup is either `complete` (it finished before the kill), and then restores
// every object byte-exact, or `failed` with a message that says it was interrupted, and then
// nothing of it is left in the backup directory (neither its name nor its partial directory), so
// no restore can pick it up. The kill falls at two points: as soon as the backup runs (while it
// takes the index snapshot) and halfway through the segments of an incremental backup over a
// base. A failed backup is resumed by starting it again (under a new name: a name is used once),
// over the same base, and that backup restores byte-exact; its sealed segments are hard links
// into the base, whose checksums the restore verifies, so the cut backup's links and their
// removal took nothing from the base. (The last instant, after the rename, is
// backup-kill-renamed.test.ts.)
// Method: the real service on loopback with 1 MiB segments (so a backup copies a dozen), the
// console API polled until the backup reports the progress wanted, then SIGSTOP and SIGKILL of
// every process of the service (test/helpers/service.ts `kill9`), a restart on the same data
// directory, `lightwell restore` into fresh directories and a service on each.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Service } from '../helpers/service.js';
import { consoleCaller } from './console-call.js';
import {
  backupNamed,
  restore,
  sha,
  unreadable,
  waitForBackup,
  type Backup,
  type Written,
} from './backup-kit.js';

const WAIT_MS = 120_000;

interface Cut {
  readonly name: string;
  readonly base?: string;
  /** Whether the backup has gone far enough to be cut (it is running). */
  readonly when: (backup: Backup) => boolean;
  readonly point: string;
}

const cuts: readonly Cut[] = [
  { name: 'cut-start', when: () => true, point: 'as soon as it runs' },
  {
    name: 'cut-half',
    base: 'base',
    when: (b) => b.segmentsTotal > 0 && b.segmentsDone >= b.segmentsTotal / 2,
    point: 'halfway through an incremental backup',
  },
];

t.test('SIGKILL during a backup leaves it complete or failed, never half', async (t) => {
  const scratch = mkdtempSync(join(tmpdir(), 'lw-backup-kill-'));
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
  const acme = await service.tenant('acme', 'read,write,delete,admin', owner);
  t.equal((await acme.request('POST', '/buckets', { json: { name: 'photos' } })).status, 201);
  const written: Written[] = [];
  for (let index = 0; index < 12; index += 1) {
    const body = randomBytes(index % 3 === 0 ? 1000 : 900_000);
    const key = `photo-${String(index)}`;
    t.equal((await acme.put('photos', key, body)).status, 200);
    written.push({ client: acme, bucket: 'photos', key, digest: sha(body) });
  }
  t.equal((await call('POST', '/backups', owner, { name: 'base' })).status, 202);
  t.match(await waitForBackup(call, owner, 'base'), { state: 'complete' });

  let restores = 0;
  const restoresIntact = async (name: string): Promise<void> => {
    restores += 1;
    const target = join(scratch, `restored-${String(restores)}`);
    t.match(restore(join(root, name), target), { status: 0 }, `${name} restores`);
    t.same(await unreadable(target, written), [], `every object of ${name} reads byte-exact`);
  };

  for (const cut of cuts) {
    const body = { name: cut.name, ...(cut.base === undefined ? {} : { base: cut.base }) };
    t.equal((await call('POST', '/backups', owner, body)).status, 202);
    const deadline = Date.now() + WAIT_MS;
    let seen: Backup | undefined;
    // Polled without a pause: the kill should fall as close as it can to the point wanted.
    while (!(seen?.state === 'running' && cut.when(seen)) && seen?.state !== 'complete') {
      if (Date.now() > deadline)
        throw new Error(`waited for ${cut.name} to run ${cut.point}; ${JSON.stringify(seen)}`);
      seen = await backupNamed(call, owner, cut.name);
    }
    await service.kill9();
    t.comment(`${cut.name}: killed ${cut.point}, having seen ${JSON.stringify(seen)}`);
    await service.launch();

    const after = await waitForBackup(call, owner, cut.name);
    const entries = readdirSync(root);
    t.notOk(entries.includes(`.${cut.name}.partial`), `${cut.name}: no partial directory left`);
    if (after.state === 'failed') {
      t.match(after.error, /interrupted/, `${cut.name}: failed, and says why`);
      t.notOk(existsSync(join(root, cut.name)), `${cut.name}: nothing under its name`);
    } else {
      t.equal(after.state, 'complete', `${cut.name}: it finished before the kill`);
      await restoresIntact(cut.name);
    }
  }
  t.equal((await call('POST', '/backups', owner, { name: 'again', base: 'base' })).status, 202);
  t.match(await waitForBackup(call, owner, 'again'), { state: 'complete' });
  await restoresIntact('again');
});
