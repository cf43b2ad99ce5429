// Goal: a SIGKILL of the whole service while a tenant restore runs loses nothing and counts
// nothing twice. The restore is cut twice, at points drawn from a seed (printed; replay with
// LIGHTWELL_RESTORE_KILL_SEED), the service restarted each time; the restore is queued again at
// the start and resumes at its cursor. At the end every object reads back with its checksum,
// and the job's counters are exact: every version written once (none skipped: the bucket was
// gone), its bytes once. Method: the real service on loopback with small segments, the console
// API polled until the restore has written the number of versions drawn, then SIGSTOP and
// SIGKILL of every process of the service (test/helpers/service.ts `kill9`) and a restart on the
// same data directory.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Service } from '../helpers/service.js';
import { Prng, seedFrom } from '../helpers/prng.js';
import { consoleCaller } from './console-call.js';
import { sha, waitForBackup, waitForRestore, type Restore } from './backup-kit.js';

const OBJECTS = 48;
const WAIT_MS = 120_000;

t.test(
  'SIGKILL during a tenant restore: it resumes, every object intact, counted once',
  async (t) => {
    const seed = seedFrom('LIGHTWELL_RESTORE_KILL_SEED');
    t.comment(`seed ${String(seed)} (LIGHTWELL_RESTORE_KILL_SEED replays it)`);
    const prng = new Prng(seed);
    const scratch = mkdtempSync(join(tmpdir(), 'lw-restore-kill-'));
    const service = await Service.start({
      env: {
        LIGHTWELL_BACKUP_DIRECTORY: join(scratch, 'backups'),
        LIGHTWELL_STORAGE_SEGMENT_BYTES_MAX: '1MiB',
      },
    });
    t.teardown(async () => {
      await service.close();
      rmSync(scratch, { recursive: true, force: true });
    });
    const call = consoleCaller(service);
    const owner = service.adminToken('owner');
    const acme = await service.tenant('acme', 'read,write,delete,admin', owner);
    t.equal((await acme.request('POST', '/buckets', { json: { name: 'photos' } })).status, 201);
    const digests = new Map<string, string>();
    let bytes = 0;
    for (let index = 0; index < OBJECTS; index += 1) {
      const body = prng.bytes(index % 4 === 0 ? 1_300_000 : 1 + prng.int(200_000));
      const key = `photo-${String(index)}`;
      t.equal((await acme.put('photos', key, body)).status, 200);
      digests.set(key, sha(body));
      bytes += body.length;
    }
    t.equal(
      (await call('POST', '/backups', owner, { name: 'acme', tenantId: 'acme' })).status,
      202,
    );
    t.match(await waitForBackup(call, owner, 'acme'), { state: 'complete' });

    for (const key of digests.keys())
      t.equal((await acme.request('DELETE', `/buckets/photos/objects/${key}`)).status, 204);
    t.equal((await acme.request('DELETE', '/buckets/photos')).status, 204, 'the bucket is gone');

    const started = await call('POST', '/backups/acme/restore', owner, { tenantId: 'acme' });
    t.equal(started.status, 202);
    const id = (started.json as { id: string }).id;
    // The second cut falls a few versions after the resumed restore passes its cursor.
    let cut = 1 + prng.int(OBJECTS / 3);
    for (let round = 0; round < 2; round += 1) {
      const deadline = Date.now() + WAIT_MS;
      let seen: Restore | undefined;
      // Polled without a pause: the kill should fall as close as it can to the point drawn.
      while (!(
        seen &&
        (seen.objectsDone >= cut || (seen.state !== 'running' && seen.state !== 'queued'))
      )) {
        if (Date.now() > deadline)
          throw new Error(
            `waited for the restore to write ${String(cut)}; ${JSON.stringify(seen)}`,
          );
        const answer = await call('GET', '/restores', owner);
        // Just after a restart the console may still answer 503 while the engine recovers.
        const list = (answer.json as { restores?: Restore[] } | undefined)?.restores;
        if (answer.status === 200 && list) seen = list.find((r) => r.id === id);
        else t.comment(`GET /restores: ${String(answer.status)} ${JSON.stringify(answer.json)}`);
      }
      await service.kill9();
      t.comment(`killed after ${String(cut)} versions drawn, having seen ${JSON.stringify(seen)}`);
      cut = seen.objectsDone + 1 + prng.int(3);
      await service.launch();
    }
    const done = await waitForRestore(call, owner, id);
    t.match(done, {
      state: 'complete',
      objectsTotal: OBJECTS,
      objectsDone: OBJECTS,
      objectsSkipped: 0,
      bucketsCreated: 1,
      bytesTotal: bytes,
      bytesDone: bytes,
    });
    acme.token = '';
    await acme.login();
    for (const [key, digest] of digests) {
      const answer = await acme.get('photos', key);
      t.equal(answer.status, 200, `${key} reads back`);
      t.equal(sha(answer.bytes), digest, `${key} is byte-exact`);
    }
  },
);
