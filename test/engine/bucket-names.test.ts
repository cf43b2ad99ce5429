// Goal: bucket names are global across tenants (DECISIONS.md): the engine refuses a name another
// tenant holds, frees it with the bucket, fills its name index for buckets made before the index
// existed, and refuses to start on a directory where two tenants hold one name, naming both.
// Method: the engine's commands on a fresh index store; the "older directory" is made by writing
// bucket records directly, as a release without the index left them.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { IndexStore } from '../../src/engine/index/store.js';
import {
  DB,
  bucketNameKey,
  tenantChildKey,
  type BucketRecord,
} from '../../src/engine/index/schema.js';
import type { EngineContext } from '../../src/engine/ops/context.js';
import * as control from '../../src/engine/ops/control.js';
import * as objects from '../../src/engine/ops/objects.js';
import { loadSettings } from '../../src/util/config.js';

t.test('bucket names are global across tenants', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'lw-names-'));
  const store = IndexStore.open({ path: dir, readOnly: false });
  t.teardown(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const context: EngineContext = {
    store,
    masterKey: randomBytes(32),
    settings: loadSettings({}),
    now: () => Date.now(),
  };
  await store.transact(() => {
    control.createTenant(context, { id: 'alpha' });
    control.createTenant(context, { id: 'beta' });
    objects.createBucket(context, { tenantId: 'alpha', name: 'shared' });
  });
  await t.rejects(
    store.transact(() => objects.createBucket(context, { tenantId: 'beta', name: 'shared' })),
    { code: 'conflict', details: { bucketOwner: 'other' } },
  );
  await t.rejects(
    store.transact(() => objects.createBucket(context, { tenantId: 'alpha', name: 'shared' })),
    { code: 'conflict', details: { bucketOwner: 'caller' } },
  );
  await store.transact(() => objects.deleteBucket(context, { tenantId: 'alpha', name: 'shared' }));
  await store.transact(() => objects.createBucket(context, { tenantId: 'beta', name: 'shared' }));
  t.ok(store.get(DB.bucketNames, bucketNameKey('shared')), 'the freed name went to beta');

  // A bucket written without the index (an older release) is indexed at the next check.
  const older = (tenantId: string, name: string, id: number): BucketRecord => ({
    id,
    tenantId,
    name,
    createdAt: 0,
    versioning: 'Unversioned',
    objectLock: false,
  });
  await store.transact(() => {
    store.put(DB.buckets, tenantChildKey('alpha', 'legacy'), older('alpha', 'legacy', 900));
  });
  t.equal(await store.transact(() => objects.checkBucketNames(context)), 1);
  t.same(store.get(DB.bucketNames, bucketNameKey('legacy')), { tenantId: 'alpha' });
  t.equal(await store.transact(() => objects.checkBucketNames(context)), 0, 'idempotent');

  await store.transact(() => {
    store.put(DB.buckets, tenantChildKey('beta', 'legacy'), older('beta', 'legacy', 901));
  });
  await t.rejects(
    store.transact(() => objects.checkBucketNames(context)),
    {
      code: 'conflict',
      message: /legacy \(tenants alpha, beta\)/,
    },
  );
});
