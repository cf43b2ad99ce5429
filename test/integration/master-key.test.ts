// Goal: a data directory never starts under a master key its data is not under. Restored
// without its key file, the engine made a new key, printed its ready lines and then answered
// every token mint with a 500; a wrong LIGHTWELL_MASTER_KEY_FILE did the same. Now the index
// records a check value of the key (master-key-check.ts) and the start is refused, with a line
// that says what to do; a directory from before the check is recorded once its key has opened
// a tenant's wrapped key.
// Method: serve on a directory with a tenant; stop; start again without the key file, with
// another key, with the check value removed (as an older directory) and each key; read the
// refusal, or mint a token with the tenant's access key.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { readFileSync, renameSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Service, DataClient } from '../helpers/service.js';
import { IndexStore } from '../../src/engine/index/store.js';
import { DB, META_MASTER_KEY_CHECK } from '../../src/engine/index/schema.js';

/** Starts serve again on the directory; resolves with the refusal text, or '' once ready. */
async function relaunch(service: Service): Promise<string> {
  try {
    await service.launch();
    return '';
  } catch (error) {
    return String(error);
  }
}

t.test('a data directory starts only under its own master key', async (t) => {
  const keys = mkdtempSync(join(tmpdir(), 'lw-keys-'));
  t.teardown(() => rmSync(keys, { recursive: true, force: true }));
  const service = await Service.start();
  t.teardown(() => service.close());
  const tenant = await service.tenant('keyed');
  await service.stop();
  const keyFile = join(service.dataDir, 'keys', 'master.key');
  const kept = join(keys, 'master.key');
  renameSync(keyFile, kept);

  let refusal = await relaunch(service);
  t.match(refusal, /master\.key is missing, but this data directory holds data/);
  t.throws(() => readFileSync(keyFile), 'no new key was made');

  writeFileSync(keyFile, randomBytes(32), { mode: 0o600 });
  refusal = await relaunch(service);
  t.match(refusal, /is not the key of this data directory/, 'another key is refused');

  // As a directory from before the check value: the key is proved on a tenant's wrapped key.
  const store = IndexStore.open({ path: join(service.dataDir, 'index'), readOnly: false });
  await store.transact(() => store.remove(DB.meta, META_MASTER_KEY_CHECK));
  await store.close();
  refusal = await relaunch(service);
  t.match(refusal, /is not the key of this data directory/, 'unchecked: another key refused');

  renameSync(kept, keyFile);
  t.equal(await relaunch(service), '', 'its own key starts it');
  const client = new DataClient(service.publicUrl, tenant.accessKeyId, tenant.secretKey);
  await client.login();
  t.ok(client.token.startsWith('lwtk_'), 'and tokens are minted again');
  await service.stop();
  const recorded = IndexStore.open({ path: join(service.dataDir, 'index'), readOnly: true });
  t.ok(recorded.get(DB.meta, META_MASTER_KEY_CHECK), 'the check value is recorded again');
  await recorded.close();
});

t.test('a master key file that others can read is warned about, not refused', async (t) => {
  const keys = mkdtempSync(join(tmpdir(), 'lw-keys-'));
  t.teardown(() => rmSync(keys, { recursive: true, force: true }));
  const keyFile = join(keys, 'shared.key');
  writeFileSync(keyFile, randomBytes(32), { mode: 0o644 });
  const service = await Service.start({ env: { LIGHTWELL_MASTER_KEY_FILE: keyFile } });
  t.teardown(() => service.close());
  t.match(service.startOutput, /"level":40.*the master key file is readable by other users/);
});

t.test(
  'a directory without a tenant takes a new key: nothing in it was under the old',
  async (t) => {
    const service = await Service.start();
    t.teardown(() => service.close());
    await service.stop();
    rmSync(join(service.dataDir, 'keys', 'master.key'));
    t.equal(await relaunch(service), '', 'starts, with a new key made');
    const client = await service.tenant('rekeyed');
    t.ok(client.token.startsWith('lwtk_'), 'and serves under it');
    await service.stop();
    t.equal(await relaunch(service), '', 'and starts again under it');
  },
);
