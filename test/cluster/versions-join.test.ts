// Goal: a rebalance after a join puts a versioned bucket's whole history on the new replica
// (docs/cluster.md §8a, "Repair of every version"): its non-current versions and delete markers,
// each with the version id and LastModified it has on the other replicas, not only the current
// versions.
// Method: the cluster kit, real etcd; two nodes (replication factor 3, so each holds every
// partition), a versioned bucket with several versions of one key, a delete marker between them
// and a key whose current version is a delete marker. A third node joins (it becomes a replica of
// every partition) and a rebalance runs. On the new node every version is read by its id (a read
// by version id reads only the local copy): byte for byte, and a delete marker as the marker
// (405), never 404. Skips, with the reason, where etcd cannot be had.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { ClusterKit, clusterEnvironment, joinBody, waitFor, type KitNode } from './kit.js';
import { Client, makeKey } from './data-client.js';

const env = await clusterEnvironment();

interface Written {
  key: string;
  versionId: string;
  body?: Buffer;
  lastModified?: string | null;
}

t.test('a new replica holds every version', { skip: env.skip ?? false }, async (t) => {
  const kit = await ClusterKit.create(3, (fn) => t.teardown(fn));
  const [n1, , n3] = kit.nodes as [KitNode, KitNode, KitNode];
  await kit.formCluster(2);
  const [keyId, secret] = await makeKey(n1);
  const c1 = new Client(n1, keyId, secret);
  await c1.login();
  const made = await c1.send(
    'POST',
    '/buckets',
    JSON.stringify({ name: 'data', versioning: 'Enabled' }),
  );
  t.equal(made.status, 201, 'a versioned bucket');

  // The bucket's partition takes writes once the joins' leadership moves have settled: a probe
  // key is written until it is acknowledged (a 503 meanwhile may or may not have made a
  // version, which the versions written below must not count).
  await waitFor('the bucket to take writes', async () => {
    const probe = await fetch(`${n1.publicUrl}/buckets/data/objects/probe`, {
      method: 'PUT',
      headers: { Authorization: `Bearer ${c1.token}` },
      body: 'probe',
      signal: AbortSignal.timeout(60_000),
    });
    await probe.arrayBuffer();
    return probe.status === 200 ? true : undefined;
  });
  const written: Written[] = [];
  const send = async (method: string, key: string, body?: Buffer): Promise<void> => {
    const response = await fetch(`${n1.publicUrl}/buckets/data/objects/${key}`, {
      method,
      headers: { Authorization: `Bearer ${c1.token}` },
      ...(body === undefined ? {} : { body }),
      signal: AbortSignal.timeout(60_000),
    });
    const text = Buffer.from(await response.arrayBuffer()).toString();
    t.ok(
      response.status === 200 || response.status === 204,
      `${method} ${key} acknowledged: ${response.status} ${text}`,
    );
    const versionId = response.headers.get('x-service-version-id') ?? '';
    t.not(versionId, '', `${method} ${key} has a version id`);
    written.push({ key, versionId, ...(body === undefined ? {} : { body }) });
  };
  await send('PUT', 'k', randomBytes(40_000));
  await send('PUT', 'k', randomBytes(1_500_000));
  await send('DELETE', 'k');
  await send('PUT', 'k', randomBytes(20_000));
  await send('PUT', 'gone', randomBytes(10_000));
  await send('DELETE', 'gone');
  for (const version of written) {
    const read = await c1.send(
      'HEAD',
      `/buckets/data/objects/${version.key}?versionId=${version.versionId}`,
    );
    t.ok(read.status === 200 || read.status === 405, `${version.versionId} is on n1`);
  }

  await n3.start();
  const joined = await n1.admin('POST', '/cluster/consensus/join', joinBody(n3));
  t.equal(joined.status, 200, `n3 joined: ${JSON.stringify(joined.json)}`);
  // The new member's data transport starts moments after its join answers: a rebalance that
  // could not reach it counts it unreachable, and is run again.
  const rebalanced = await waitFor('a rebalance that reaches every replica', async () => {
    const answer = await n1.rebalance({ tenantId: 'acme', reason: 'test', confirmTenant: 'acme' });
    if (answer.status !== 200) throw new Error(JSON.stringify(answer.json));
    const counts = (answer.json['replication'] as { counts: { replicasUnreachable: number } })
      .counts;
    return counts.replicasUnreachable === 0 ? answer : undefined;
  });
  t.equal(rebalanced.status, 200, 'a rebalance reached n3');
  const again = await n1.rebalance(
    { tenantId: 'acme', reason: 'test', confirmTenant: 'acme' },
    true,
  );
  t.match(
    again.json,
    { replication: { counts: { copiesSent: 0, deletesSent: 0 } } },
    'a second rebalance finds nothing to copy',
  );

  const c3 = new Client(n3, keyId, secret);
  await c3.login();
  for (const version of written) {
    const path = `/buckets/data/objects/${version.key}?versionId=${version.versionId}`;
    const read = await c3.send('GET', path);
    if (version.body === undefined) {
      t.equal(read.status, 405, `delete marker ${version.versionId} of ${version.key} is on n3`);
      continue;
    }
    t.equal(read.status, 200, `version ${version.versionId} of ${version.key} is on n3`);
    t.ok(read.bytes.equals(version.body), `byte for byte`);
  }
});
