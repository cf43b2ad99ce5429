// Goal: the pure parts of a cluster's data (docs/cluster.md §6, §8a), without etcd (where a
// bucket's replicas are is the partition table's, test/cluster/layout.test.ts): what a majority is;
// and that a tenant's data key and an access key's secret cross etcd resealed under the cluster's
// control key, so that a node with another master key gets the same key and secret.
// Method: majorityOf, encodeShared and decodeShared called directly.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { majorityOf } from '../../src/cluster/replication.js';
import { encodeShared, decodeShared } from '../../src/cluster/shared-state.js';
import { DB, type AccessKeyRecord, type TenantRecord } from '../../src/engine/index/schema.js';
import {
  deriveKey,
  openSecret,
  unwrapTenantKey,
  wrapTenantKey,
  newTenantDataKey,
  PURPOSE_SECRET_SEAL,
} from '../../src/security/keys.js';
import { sealAccessSecret } from '../../src/engine/ops/control.js';

t.test('majorities', async (t) => {
  t.same([1, 2, 3, 4, 5].map(majorityOf), [1, 2, 2, 3, 3]);
});

t.test('sealed fields are resealed for another node', async (t) => {
  const control = randomBytes(32);
  const [masterA, masterB] = [randomBytes(32), randomBytes(32)];
  const dataKey = newTenantDataKey();
  const tenant: TenantRecord = {
    id: 'acme',
    num: 7,
    state: 'active',
    createdAt: 1,
    wrappedKey: wrapTenantKey(masterA, 'acme', dataKey),
  };
  const shared = encodeShared(DB.tenants, tenant, { master: masterA, control });
  t.notOk(shared.includes(dataKey), 'the data key is not in clear in etcd');
  const onB = decodeShared(DB.tenants, shared, { master: masterB, control }) as TenantRecord;
  t.ok(unwrapTenantKey(masterB, 'acme', onB.wrappedKey).equals(dataKey), 'the same data key');
  t.equal(onB.num, 7);
  t.throws(() => decodeShared(DB.tenants, shared, { master: masterB, control: randomBytes(32) }));

  const key: AccessKeyRecord = {
    accessKeyId: 'LWKEXAMPLE',
    tenantId: 'acme',
    accountId: 'app',
    scopes: 'read',
    sealedSecret: sealAccessSecret(masterA, 'LWKEXAMPLE', 'the-secret'),
    state: 'active',
    createdAt: 1,
  };
  const sharedKey = encodeShared(DB.accessKeys, key, { master: masterA, control });
  const keyOnB = decodeShared(DB.accessKeys, sharedKey, {
    master: masterB,
    control,
  }) as AccessKeyRecord;
  const secret = openSecret(
    deriveKey(masterB, PURPOSE_SECRET_SEAL),
    keyOnB.sealedSecret,
    'access-key:LWKEXAMPLE',
  );
  t.equal(secret.toString(), 'the-secret', 'the same secret, sealed under the other master key');
});
