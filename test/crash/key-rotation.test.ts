// Goal: master-key and tenant data-key rotations are crash-safe. The whole service is killed
// with SIGKILL at a random moment while a master-key rotation (and a data-key rotation of one
// tenant) runs; then, before anything restarts, the index and key files must be whole: the key
// a reader takes (master.key, or master.key.next where the index records that one) opens every
// tenant's data keys and every access-key secret, so nothing is half-rotated. After the
// restart no .next file is left, the console shows the key file's fingerprint, every access key
// logs in with its unchanged secret, and every object written so far (before and after each
// rotation) reads back byte-exact.
// Method: `lightwell serve` as a child process; each round writes objects, starts both
// rotations through the console API and kills the tree after a random delay (seeded by
// LIGHTWELL_CRASH_SEED); it prints how many rounds were cut before and after the commit.
import t from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Service, type DataClient } from '../helpers/service.js';
import { crashRandom, CRASH_SEED, withIndex, sleep } from './crash-kit.js';
import { DB, type AccessKeyRecord, type TenantRecord } from '../../src/engine/index/schema.js';
import { dataDirPaths } from '../../src/engine/data-dir.js';
import { readCurrentMasterKeySync } from '../../src/engine/master-key-rotation.js';
import { masterKeyCheckOf, verifyMasterKey } from '../../src/engine/master-key-check.js';
import {
  deriveKey,
  openSecret,
  unwrapTenantKey,
  PURPOSE_SECRET_SEAL,
} from '../../src/security/keys.js';

const ROUNDS = 6;
const TENANTS = ['north', 'south'];
const KILL_DELAY_MS_MAX = 80;

const sha = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

/** Retries while a listener still loads a new master key (503). */
async function settled<T extends { status: number }>(request: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    const answer = await request();
    if (answer.status !== 503 || attempt === 200) return answer;
    await sleep(25);
  }
}

async function loginSettled(client: DataClient): Promise<void> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      await client.login();
      return;
    } catch (error) {
      if (!String(error).includes('login: 503') || attempt === 200) throw error;
      await sleep(25);
    }
  }
}

/** Every sealed value in the index opens under the key a reader takes now; returns that key. */
async function wholeIndex(dataDir: string): Promise<{ key: Buffer; opened: number }> {
  const paths = dataDirPaths(dataDir);
  return withIndex(dataDir, (store) => {
    const key = readCurrentMasterKeySync(paths, store, readFileSync(paths.masterKey));
    verifyMasterKey(store, key, paths.masterKey);
    let opened = 0;
    for (const { value } of store.range<TenantRecord>(DB.tenants, {})) {
      for (const wrapped of [
        value.wrappedKey,
        ...(value.retiredKeys ?? []).map((r) => r.wrappedKey),
      ]) {
        unwrapTenantKey(key, value.id, Buffer.from(wrapped));
        opened += 1;
      }
    }
    const seal = deriveKey(key, PURPOSE_SECRET_SEAL);
    for (const { value } of store.range<AccessKeyRecord>(DB.accessKeys, {})) {
      openSecret(seal, Buffer.from(value.sealedSecret), `access-key:${value.accessKeyId}`);
      opened += 1;
    }
    return { key, opened };
  });
}

t.test('rotations killed at random moments leave every object readable', async (t) => {
  t.comment(`LIGHTWELL_CRASH_SEED=${CRASH_SEED}`);
  const service = await Service.start();
  t.teardown(() => service.close());
  const base = service.adminUrl.replace('/admin/api/v1', '') + '/admin/console/api';
  const owner = service.adminToken('owner');
  const rotate = (path: string): Promise<number> =>
    fetch(base + path, {
      method: 'POST',
      headers: { Authorization: `Bearer ${owner}`, 'Content-Type': 'application/json' },
      body: '{}',
    }).then(
      async (response) => {
        await response.arrayBuffer();
        return response.status;
      },
      () => 0, // the connection died with the service
    );
  const clients: DataClient[] = [];
  for (const id of TENANTS) {
    const client = await service.tenant(id, 'read,write,delete,admin', owner);
    t.equal(
      (await client.request('POST', '/buckets', { json: { name: `${id}-data` } })).status,
      201,
    );
    clients.push(client);
  }
  const objects: Array<{ client: DataClient; bucket: string; key: string; digest: string }> = [];
  const keyFile = join(service.dataDir, 'keys', 'master.key');
  let committed = 0;
  for (let round = 1; round <= ROUNDS; round += 1) {
    for (const [n, client] of clients.entries()) {
      const bucket = `${TENANTS[n] ?? ''}-data`;
      for (const size of [100, 70_000, 1_500_000]) {
        const body = randomBytes(size);
        const key = `round-${round}/${size}`;
        const put = await settled(() => client.put(bucket, key, body));
        t.equal(put.status, 200, `${bucket}/${key} written`);
        objects.push({ client, bucket, key, digest: sha(body) });
      }
    }
    const before = readFileSync(keyFile);
    const delay = crashRandom.int(KILL_DELAY_MS_MAX);
    const answers = Promise.all([
      rotate('/master-key/rotate'),
      rotate(`/tenants/${TENANTS[round % 2] ?? ''}/data-key/rotate`),
    ]);
    await sleep(delay);
    await service.kill9();
    const statuses = await answers;
    const whole = await wholeIndex(service.dataDir);
    t.ok(whole.opened >= 4, `round ${round}: every sealed value opens (killed after ${delay} ms)`);
    if (!whole.key.equals(before)) committed += 1;
    else t.not(statuses[0], 200, 'an answered rotation had committed');
    await service.launch();
    t.notOk(existsSync(`${keyFile}.next`), 'no new key file is left after the start');
    t.same(readFileSync(keyFile), whole.key, 'the key in force is the one the index recorded');
    const keys = await fetch(`${base}/keys`, { headers: { Authorization: `Bearer ${owner}` } });
    const state = (await keys.json()) as { masterKey: { fingerprint: string } };
    t.equal(
      state.masterKey.fingerprint,
      masterKeyCheckOf(whole.key).subarray(0, 8).toString('hex'),
    );
    for (const client of clients) await loginSettled(client);
    for (const entry of objects) {
      const answer = await settled(() => entry.client.get(entry.bucket, entry.key));
      if (answer.status !== 200 || sha(answer.bytes) !== entry.digest)
        t.fail(`round ${round}: ${entry.bucket}/${entry.key} answered ${answer.status}`);
    }
    t.pass(`round ${round}: all ${objects.length} objects read back byte-exact`);
  }
  t.comment(`${committed} of ${ROUNDS} rounds were killed after the rotation committed`);
});
