// Goal: a master-key rotation re-seals every tenant data key (current and retired), access-key
// secret, webhook secret, backup target secret and backup chain key under a new key, leaves the data keys themselves unchanged, and
// is crash-safe: a crash before its commit keeps the old key (the stale new key file is
// discarded at the next start), a crash after it and before the key file's rename ends with
// the new key in place at the next start, and a process reading the key in between takes the
// file the index records. A tenant data-key rotation keeps the old key as a retired one.
// Method: the engine in process (`startEngine`) over a temporary directory, driven by its
// socket; the two crash windows are made by stopping the engine and leaving the files and the
// index as the interrupted step would (the re-seal run in a transaction of its own), then
// starting it again. Nothing is timed.
import t, { type Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startEngine } from '../../src/engine/engine.js';
import { EngineClient } from '../../src/engine/protocol.js';
import { IndexStore } from '../../src/engine/index/store.js';
import {
  DB,
  tenantKey,
  type TenantRecord,
  type AccessKeyRecord,
} from '../../src/engine/index/schema.js';
import { loadSettings } from '../../src/util/config.js';
import {
  deriveKey,
  openSecret,
  unwrapTenantKey,
  PURPOSE_SECRET_SEAL,
} from '../../src/security/keys.js';
import { masterKeyCheckOf, verifyMasterKey } from '../../src/engine/master-key-check.js';
import {
  nextMasterKeyFile,
  readCurrentMasterKeySync,
} from '../../src/engine/master-key-rotation.js';
import { resealUnderNewMasterKey } from '../../src/engine/ops/key-rotation.js';
import { dataDirPaths } from '../../src/engine/data-dir.js';
import { backupKeyFromIndex, keepBackupKey } from '../../src/engine/ops/backup-keys.js';
import { openTarget } from '../../src/engine/ops/backup-targets.js';
import { tempDir } from './segment-testing.js';

const settings = loadSettings({});

interface Running {
  engine: Awaited<ReturnType<typeof startEngine>>;
  client: EngineClient;
}

async function start(dataDir: string): Promise<Running> {
  const engine = await startEngine({ dataDir, settings });
  const client = new EngineClient(engine.paths.socket, 30_000);
  return { engine, client };
}

async function stop(running: Running): Promise<void> {
  running.client.close();
  await running.engine.stop();
}

/** Two tenants, an account and a key each; one tenant with a rotated (retired) data key. */
async function populate(client: EngineClient): Promise<Record<string, string>> {
  const secrets: Record<string, string> = {};
  for (const id of ['alpha', 'beta']) {
    await client.call('createTenant', { id });
    await client.call('createAccount', { tenantId: id, id: 'app' });
    const made = await client.call('createAccessKey', {
      tenantId: id,
      accountId: 'app',
      scopes: 'read,write',
    });
    secrets[made.key.accessKeyId] = made.secretKey;
  }
  await client.call('rotateTenantDataKey', { tenantId: 'beta' });
  await client.call('setBackupTarget', {
    name: 'offsite',
    endpoint: 'http://127.0.0.1:9',
    bucket: 'backups',
    accessKeyId: 'AKIDOFFSITE',
    secretAccessKey: 'the-target-secret',
  });
  return secrets;
}

/** A tenant backup chain's data key, kept in the index as a backup does (ops/backup-keys.ts). */
const chainKey = randomBytes(32);
async function keepChainKey(store: IndexStore, masterKey: Buffer): Promise<void> {
  await store.transact(() => keepBackupKey({ store, masterKey }, 'chain1', chainKey));
}

/** Every tenant's data keys (current first, then retired) as the master key opens them. */
function dataKeys(store: IndexStore, master: Buffer): Map<string, string[]> {
  const keys = new Map<string, string[]>();
  for (const { value } of store.range<TenantRecord>(DB.tenants, {})) {
    const wrapped = [value.wrappedKey, ...(value.retiredKeys ?? []).map((r) => r.wrappedKey)];
    keys.set(
      value.id,
      wrapped.map((w) => unwrapTenantKey(master, value.id, Buffer.from(w)).toString('hex')),
    );
  }
  return keys;
}

/** Asserts that everything in the index opens under `master` and the secrets are unchanged. */
function assertAllUnder(
  t: Test,
  store: IndexStore,
  master: Buffer,
  secrets: Record<string, string>,
): void {
  t.doesNotThrow(() => verifyMasterKey(store, master, 'key file'), 'the check value matches');
  const seal = deriveKey(master, PURPOSE_SECRET_SEAL);
  for (const { value } of store.range<AccessKeyRecord>(DB.accessKeys, {})) {
    const secret = openSecret(
      seal,
      Buffer.from(value.sealedSecret),
      `access-key:${value.accessKeyId}`,
    );
    t.equal(secret.toString(), secrets[value.accessKeyId], `secret of ${value.accessKeyId}`);
  }
  t.equal(
    openTarget({ store, masterKey: master }, 'offsite').secretAccessKey,
    'the-target-secret',
    "the backup target's secret",
  );
  t.same(backupKeyFromIndex(store, master, 'chain1'), chainKey, "a backup chain's data key");
}

t.test('a rotation re-seals everything and keeps every data key', async (t) => {
  const dataDir = tempDir(t, 'lw-rotate-');
  const running = await start(dataDir);
  const secrets = await populate(running.client);
  const paths = running.engine.paths;
  const before = readFileSync(paths.masterKey);
  await keepChainKey(running.engine.store, before);
  const keysBefore = dataKeys(running.engine.store, before);
  t.equal(keysBefore.get('beta')?.length, 2, 'beta has a current and a retired key');
  const plan = await running.client.call('rotateMasterKey', { dryRun: true });
  t.same(plan.counts, { tenants: 2, tenantKeys: 3, accessKeys: 2, webhookSecrets: 0 });
  t.same(readFileSync(paths.masterKey), before, 'a dry run changes no key');
  const done = await running.client.call('rotateMasterKey', {});
  t.same(done.counts, plan.counts, 'the rotation re-sealed what the plan counted');
  const after = readFileSync(paths.masterKey);
  t.notSame(after, before, 'the key file holds a new key');
  t.equal(done.fingerprint, masterKeyCheckOf(after).subarray(0, 8).toString('hex'));
  t.notOk(existsSync(nextMasterKeyFile(paths)), 'no .next file is left');
  t.same(dataKeys(running.engine.store, after), keysBefore, 'every data key is unchanged');
  assertAllUnder(t, running.engine.store, after, secrets);
  t.throws(() => verifyMasterKey(running.engine.store, before, 'old'), {
    code: 'master_key_mismatch',
  });
  // The engine seals with the new key at once: a tenant made now opens under it.
  await running.client.call('createTenant', { id: 'gamma' });
  t.ok(dataKeys(running.engine.store, after).has('gamma'));
  await stop(running);
  const again = await start(dataDir);
  t.teardown(() => stop(again));
  assertAllUnder(t, again.engine.store, readFileSync(paths.masterKey), secrets);
});

t.test('a crash before the commit keeps the old key; the new key file is discarded', async (t) => {
  const dataDir = tempDir(t, 'lw-rotate-');
  const running = await start(dataDir);
  const secrets = await populate(running.client);
  const paths = running.engine.paths;
  await keepChainKey(running.engine.store, readFileSync(paths.masterKey));
  await stop(running);
  const before = readFileSync(paths.masterKey);
  // Step 1 done (and a temporary file of another one cut short), step 2 never committed.
  writeFileSync(nextMasterKeyFile(paths), randomBytes(32), { mode: 0o600 });
  writeFileSync(`${nextMasterKeyFile(paths)}.tmp-12345`, randomBytes(7), { mode: 0o600 });
  const store = IndexStore.open({ path: paths.index, readOnly: true });
  t.same(readCurrentMasterKeySync(paths, store, before), before, 'readers take the old key');
  await store.close();
  const again = await start(dataDir);
  t.teardown(() => stop(again));
  t.same(readFileSync(paths.masterKey), before, 'the old key stays');
  t.notOk(existsSync(nextMasterKeyFile(paths)), 'the stale new key is gone');
  t.notOk(existsSync(`${nextMasterKeyFile(paths)}.tmp-12345`), 'its temporary file too');
  assertAllUnder(t, again.engine.store, before, secrets);
});

t.test('a crash after the commit ends with the new key in place', async (t) => {
  const dataDir = tempDir(t, 'lw-rotate-');
  const running = await start(dataDir);
  const secrets = await populate(running.client);
  const paths = dataDirPaths(dataDir);
  const before = readFileSync(paths.masterKey);
  await keepChainKey(running.engine.store, before);
  const keysBefore = dataKeys(running.engine.store, before);
  await stop(running);
  // Steps 1 and 2 done, step 3 (the rename) never happened.
  const newKey = randomBytes(32);
  writeFileSync(nextMasterKeyFile(paths), newKey, { mode: 0o600 });
  const store = IndexStore.open({ path: paths.index, readOnly: false });
  const context = { store, masterKey: before, settings, now: () => Date.now() };
  await store.transact(() => resealUnderNewMasterKey(context, before, newKey));
  t.same(readCurrentMasterKeySync(paths, store, before), newKey, 'readers take the .next file');
  await store.close();
  const again = await start(dataDir);
  t.teardown(() => stop(again));
  t.same(readFileSync(paths.masterKey), newKey, 'the new key is in the key file');
  t.notOk(existsSync(nextMasterKeyFile(paths)));
  t.same(dataKeys(again.engine.store, newKey), keysBefore, 'every data key is unchanged');
  assertAllUnder(t, again.engine.store, newKey, secrets);
});

t.test('a tenant data-key rotation retires the old key, newest first', async (t) => {
  const dataDir = tempDir(t, 'lw-rotate-');
  const running = await start(dataDir);
  t.teardown(() => stop(running));
  await running.client.call('createTenant', { id: 'delta' });
  const master = readFileSync(join(dataDir, 'keys', 'master.key'));
  const first = dataKeys(running.engine.store, master).get('delta') ?? [];
  const plan = await running.client.call('rotateTenantDataKey', {
    tenantId: 'delta',
    dryRun: true,
  });
  t.same(plan, { tenantId: 'delta', keyGeneration: 2, retiredKeys: 1, dryRun: true });
  t.same(dataKeys(running.engine.store, master).get('delta'), first, 'a dry run changes nothing');
  await running.client.call('rotateTenantDataKey', { tenantId: 'delta' });
  const second = dataKeys(running.engine.store, master).get('delta') ?? [];
  const result = await running.client.call('rotateTenantDataKey', {
    tenantId: 'delta',
  });
  t.equal(result.keyGeneration, 3);
  const third = dataKeys(running.engine.store, master).get('delta') ?? [];
  t.equal(third.length, 3);
  t.same(third.slice(1), [second[0], first[0]], 'the retired keys, newest first');
  t.not(third[0], second[0], 'a new current key');
  const tenant = running.engine.store.get<TenantRecord>(DB.tenants, tenantKey('delta'));
  t.equal(tenant?.retiredKeys?.length, 2);
  await t.rejects(running.client.call('rotateTenantDataKey', { tenantId: 'nobody' }), {
    code: 'not_found',
  });
});
