// Goal: the control plane is cluster-wide (docs/cluster.md §6): a tenant, account and access key
// made on one node work on another; a bucket name taken on one node is refused on another, to
// any tenant; two nodes racing to make one tenant id give one 201 and one 409; a key revoked on
// one node stops working on the other.
// Method: the cluster kit, two nodes on real etcd; the admin API of each node and the native API
// of each node's public port. Skips, with the reason, where etcd cannot be had.
import t from 'tap';
import { ClusterKit, clusterEnvironment, waitFor, type KitNode } from './kit.js';

const env = await clusterEnvironment();

async function login(node: KitNode, accessKeyId: string, secretKey: string): Promise<number> {
  const basic = Buffer.from(`${accessKeyId}:${secretKey}`).toString('base64');
  const response = await fetch(`${node.publicUrl}/auth/token`, {
    method: 'POST',
    headers: { Authorization: `Basic ${basic}` },
    signal: AbortSignal.timeout(30_000),
  });
  const text = await response.text();
  if (response.status === 200)
    tokens.set(node.id + accessKeyId, (JSON.parse(text) as { token: string }).token);
  return response.status;
}
const tokens = new Map<string, string>();

async function createBucket(node: KitNode, accessKeyId: string, name: string): Promise<number> {
  const response = await fetch(`${node.publicUrl}/buckets`, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${tokens.get(node.id + accessKeyId) ?? ''}`,
      'Content-Type': 'application/json',
    },
    body: JSON.stringify({ name }),
    signal: AbortSignal.timeout(30_000),
  });
  await response.arrayBuffer();
  return response.status;
}

async function makeKey(node: KitNode, tenant: string): Promise<[string, string]> {
  const tenantAnswer = await node.admin('POST', '/tenants', { id: tenant });
  if (tenantAnswer.status !== 201) throw new Error(`tenant: ${JSON.stringify(tenantAnswer.json)}`);
  const account = await node.admin('POST', `/tenants/${tenant}/accounts`, { id: 'app' });
  if (account.status !== 201) throw new Error(`account: ${JSON.stringify(account.json)}`);
  const key = await node.admin('POST', `/tenants/${tenant}/keys`, {
    accountId: 'app',
    scopes: 'read,write,delete,admin',
  });
  if (key.status !== 201) throw new Error(`key: ${JSON.stringify(key.json)}`);
  return [key.json['accessKeyId'] as string, key.json['secretKey'] as string];
}

t.test('tenants, keys and buckets are cluster-wide', { skip: env.skip ?? false }, async (t) => {
  const kit = await ClusterKit.create(2, (fn) => t.teardown(fn));
  const [n1, n2] = kit.nodes as [KitNode, KitNode];
  await kit.formCluster(2);

  const [keyId, secret] = await makeKey(n1, 'acme');
  t.equal(await login(n1, keyId, secret), 200, 'the key works where it was made');
  await waitFor('the key made on n1 to work on n2', async () =>
    (await login(n2, keyId, secret)) === 200 ? true : undefined,
  );
  t.pass('the key made on n1 works on n2');

  t.equal(await createBucket(n2, keyId, 'shared-one'), 201, 'a bucket made on n2');
  const [otherId, otherSecret] = await makeKey(n2, 'globex');
  t.equal(await login(n2, otherId, otherSecret), 200);
  await waitFor('globex to log in on n1', async () =>
    (await login(n1, otherId, otherSecret)) === 200 ? true : undefined,
  );
  t.equal(await createBucket(n1, otherId, 'shared-one'), 409, 'another tenant cannot take it');
  t.equal(await createBucket(n1, keyId, 'shared-one'), 409, 'nor its owner, twice');

  const listed = await n1.admin('GET', '/tenants/acme', undefined, 'viewer');
  t.equal(listed.status, 200, 'the tenant made on n1 is read on n1');
  const seen = await waitFor('n2 to show tenant acme', async () => {
    const answer = await n2.admin('GET', '/tenants/acme', undefined, 'viewer');
    return answer.status === 200 ? answer : undefined;
  });
  t.equal(seen.json['id'], 'acme');

  const race = await Promise.all([
    n1.admin('POST', '/tenants', { id: 'racer' }),
    n2.admin('POST', '/tenants', { id: 'racer' }),
  ]);
  t.same(
    race.map((answer) => answer.status).sort(),
    [201, 409],
    'one tenant id made on two nodes at once: one wins',
  );

  const revoked = await n2.admin('POST', `/tenants/acme/keys/${keyId}/revoke`, {
    reason: 'leaked',
  });
  t.equal(revoked.status, 200, JSON.stringify(revoked.json));
  await waitFor('the key revoked on n2 to be refused on n1', async () =>
    (await login(n1, keyId, secret)) === 401 ? true : undefined,
  );
  t.pass('the key revoked on n2 is refused on n1');
});
