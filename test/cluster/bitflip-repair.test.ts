// Goal: a bit flipped in one replica's copy of a chunk is found by a rebalance's scrub on that
// node and replaced with a good copy from another member (docs/cluster.md §8a): the rebalance
// reports it repaired, a second rebalance finds nothing corrupt, and the object reads back byte
// for byte from that node's own copy.
// Method: the cluster kit, three nodes on real etcd (replication factor 3). An object written
// through n1; on n2, one byte in the middle of the segment file that holds its records (the
// only data n2 wrote) is inverted. Skips, with the reason, where etcd cannot be had.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { open, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { ClusterKit, clusterEnvironment, waitFor, type KitNode } from './kit.js';
import { Client, makeKey } from './data-client.js';

const env = await clusterEnvironment();

/** Inverts one byte in the middle of the largest segment file of `node`. */
async function flipByte(node: KitNode): Promise<void> {
  const dir = join(node.dataDir, 'segments');
  const files = await Promise.all(
    (await readdir(dir))
      .filter((name) => name.endsWith('.seg'))
      .map(async (name) => ({ path: join(dir, name), size: (await stat(join(dir, name))).size })),
  );
  const largest = files.sort((a, b) => b.size - a.size)[0];
  if (largest === undefined || largest.size < 100_000) throw new Error(`no data in ${dir}`);
  const file = await open(largest.path, 'r+');
  try {
    const at = Math.floor(largest.size / 2);
    const byte = Buffer.alloc(1);
    await file.read(byte, 0, 1, at);
    byte[0] = (byte[0] as number) ^ 0xff;
    await file.write(byte, 0, 1, at);
    await file.sync();
  } finally {
    await file.close();
  }
}

t.test('a flipped bit is repaired from a replica', { skip: env.skip ?? false }, async (t) => {
  const kit = await ClusterKit.create(3, (fn) => t.teardown(fn));
  const [n1, n2] = kit.nodes as [KitNode, KitNode, KitNode];
  await kit.formCluster(3);
  const [keyId, secret] = await makeKey(n1);
  const c1 = new Client(n1, keyId, secret);
  await c1.login();
  t.equal((await c1.send('POST', '/buckets', JSON.stringify({ name: 'data' }))).status, 201);
  const body = randomBytes(300_000);
  await waitFor('a write acknowledged', async () =>
    (await c1.put('flipped', body)).status === 200 ? true : undefined,
  );
  const c2 = new Client(n2, keyId, secret);
  c2.token = c1.token;
  t.ok((await c2.get('flipped')).bytes.equals(body), 'n2 holds the object');

  await flipByte(n2);
  const rebalance = async (): Promise<Record<string, unknown>> => {
    const answer = await n2.admin('POST', '/cluster/repair/rebalance', {
      tenantId: 'acme',
      reason: 'test',
      confirmTenant: 'acme',
    });
    t.equal(answer.status, 200, JSON.stringify(answer.json));
    return answer.json;
  };
  const first = await rebalance();
  t.match(first, { counts: { corruptChunks: 1 }, replication: { chunks: { repaired: 1 } } });
  const second = await rebalance();
  t.match(second, { counts: { corruptChunks: 0 } }, 'nothing corrupt any more');
  t.ok((await c2.get('flipped')).bytes.equals(body), 'n2 reads it back byte for byte');
});
