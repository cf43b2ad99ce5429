// Goal: the pure parts of a cluster's data (docs/cluster.md §6, §8a), without etcd: where a
// bucket's replicas are (as many as the factor allows, one per zone first, the same answer for
// the same membership, unchanged by a member that was not chosen leaving); what a majority is;
// and that a tenant's data key and an access key's secret cross etcd resealed under the cluster's
// control key, so that a node with another master key gets the same key and secret.
// Method: replicasOf, majorityOf, encodeShared and decodeShared called directly.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { replicasOf, majorityOf } from '../../src/cluster/replication.js';
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

const nodes = (zones: Record<string, string>): Array<{ id: string; zone: string }> =>
  Object.entries(zones).map(([id, zone]) => ({ id, zone }));

t.test('replica sets: size, zones, determinism, stability', async (t) => {
  const five = nodes({ a1: 'a', a2: 'a', a3: 'a', b1: 'b', c1: 'c' });
  for (let bucketId = 1; bucketId <= 50; bucketId += 1) {
    const set = replicasOf(bucketId, five, 3);
    t.equal(new Set(set).size, 3, `bucket ${bucketId}: three distinct nodes`);
    t.same(
      new Set(set.map((id) => id[0])),
      new Set(['a', 'b', 'c']),
      `bucket ${bucketId}: one copy in each zone`,
    );
    t.same(replicasOf(bucketId, [...five].reverse(), 3), set, 'the order of members is moot');
  }
  const flat = nodes({ n1: '', n2: '', n3: '', n4: '', n5: '' });
  let moved = 0;
  for (let bucketId = 1; bucketId <= 200; bucketId += 1) {
    const set = replicasOf(bucketId, flat, 3);
    const without = flat.find((member) => !set.includes(member.id)) as { id: string };
    const smaller = flat.filter((member) => member.id !== without.id);
    t.same(replicasOf(bucketId, smaller, 3), set, 'a member not chosen leaving changes nothing');
    const fewer = flat.filter((member) => member.id !== set[0]);
    moved += replicasOf(bucketId, fewer, 3).filter((id) => !set.includes(id)).length;
  }
  t.equal(moved, 200, 'a chosen member leaving replaces exactly that one copy');
  t.same(replicasOf(7, nodes({ n1: '', n2: '' }), 3).length, 2, 'fewer nodes than the factor');
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
