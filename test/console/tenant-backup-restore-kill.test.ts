// Goal: a SIGKILL of the whole service while a tenant restore runs loses nothing and counts
// nothing twice. The restore is cut twice, first after a number of versions drawn from a seed
// (printed; replay with LIGHTWELL_RESTORE_KILL_SEED), then as soon as the restarted service is
// up, while it resumes; the service is restarted each time; the restore is queued again at
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
    const cut = 1 + prng.int(OBJECTS / 3);
    const deadline = Date.now() + WAIT_MS;
    let seen: Restore | undefined;
    // Polled without a pause: the kill should fall as close as it can to the point drawn.
    while (!(seen && (seen.objectsDone >= cut || !['running', 'queued'].includes(seen.state)))) {
      if (Date.now() > deadline)
        throw new Error(`waited for the restore to write ${String(cut)}; ${JSON.stringify(seen)}`);
      const answer = await call('GET', '/restores', owner);
      const list = (answer.json as { restores?: Restore[] } | undefined)?.restores;
      if (answer.status === 200 && list) seen = list.find((r) => r.id === id);
      else t.comment(`GET /restores: ${String(answer.status)} ${JSON.stringify(answer.json)}`);
    }
    await service.kill9();
    t.comment(`killed after ${String(cut)} versions drawn, having seen ${JSON.stringify(seen)}`);
    await service.launch();
    // The second cut falls as soon as the restarted service is up: while the engine queues the
    // cut restore again and resumes it at its cursor (the resumed restore is quick; a point
    // drawn by polling would often come after its end).
    await service.kill9();
    t.comment('killed again as soon as the restarted service was up');
    await service.launch();
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
