// Goal: losing etcd members (docs/cluster.md §10): with one etcd member killed, writes through
// every node go on (a majority of etcd is left, and each node's client uses the other members);
// with two of three members frozen, etcd has no quorum and every write is refused with 503
// `unavailable`, saying why (etcd has no majority, or the partition's leader could not renew its
// lease); once they run again, writes go on, and every acknowledged write
// reads back.
// Method: the cluster kit, three nodes on real etcd. An etcd member is the child of its node's
// supervisor, with its pid in `<data>/cluster/etcd.pid`: SIGKILL to one (the supervisor restarts
// it with a backoff), SIGSTOP and SIGCONT to two. Skips, with the reason, where etcd cannot be
// had.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ClusterKit, clusterEnvironment, waitFor, type KitNode } from './kit.js';
import { Client, makeKey } from './data-client.js';

const env = await clusterEnvironment();

async function etcdPid(node: KitNode): Promise<number> {
  const pid = Number((await readFile(join(node.dataDir, 'cluster', 'etcd.pid'), 'utf8')).trim());
  if (!Number.isSafeInteger(pid) || pid <= 0) throw new Error(`no etcd pid for ${node.id}`);
  return pid;
}

t.test('writes with and without a majority of etcd', { skip: env.skip ?? false }, async (t) => {
  const kit = await ClusterKit.create(3, (fn) => t.teardown(fn));
  const [n1, n2, n3] = kit.nodes as [KitNode, KitNode, KitNode];
  await kit.formCluster(3);
  const [keyId, secret] = await makeKey(n1);
  const clients = [n1, n2, n3].map((node) => new Client(node, keyId, secret));
  const [c1] = clients as [Client, Client, Client];
  await c1.login();
  t.equal((await c1.send('POST', '/buckets', JSON.stringify({ name: 'data' }))).status, 201);
  for (const client of clients) client.token = c1.token;
  const acknowledged = new Map<string, Buffer>();
  const write = async (client: Client, key: string): Promise<number> => {
    const body = randomBytes(4096);
    const answer = await client.put(key, body);
    if (answer.status === 200) acknowledged.set(key, body);
    return answer.status;
  };
  await waitFor('the bucket on every node', async () => {
    for (const client of clients) if ((await write(client, 'probe')) !== 200) return undefined;
    return true;
  });

  // One member killed: two of three are left.
  const killed = await etcdPid(n3);
  process.kill(killed, 'SIGKILL');
  for (const [index, client] of clients.entries())
    for (let round = 0; round < 3; round += 1)
      t.equal(
        await write(client, `one-down-${index}-${round}`),
        200,
        `a write through ${client.node.id} with one etcd member killed`,
      );
  await waitFor("n3's etcd member restarted by its supervisor", async () =>
    [0, killed].includes(await etcdPid(n3).catch(() => 0)) ? undefined : true,
  );

  // Two frozen: no quorum. Every node refuses, and says why.
  const frozen = [await etcdPid(n2), await etcdPid(n3)];
  for (const pid of frozen) process.kill(pid, 'SIGSTOP');
  t.teardown(() => {
    for (const pid of frozen) process.kill(pid, 'SIGCONT');
  });
  // Until a node notices (10 s without a read of etcd), its writes are still taken.
  let attempt = 0;
  const refusedOn = (client: Client) =>
    waitFor(
      `writes through ${client.node.id} refused once etcd has no quorum`,
      async () => {
        const key = `no-quorum-${(attempt += 1)}`;
        const body = randomBytes(100);
        const answer = await client.put(key, body);
        if (answer.status === 200) acknowledged.set(key, body);
        return answer.status === 503 ? { ...answer, key } : undefined;
      },
      90_000,
    );
  const refusals = [];
  for (const client of clients) refusals.push(await refusedOn(client));
  for (const [index, refusal] of refusals.entries()) {
    const problem = JSON.parse(refusal.bytes.toString()) as { code: string; message: string };
    t.equal(problem.code, 'unavailable', `refused on n${index + 1}`);
    // Why: no majority of etcd, or (first, once its lease is near its end) a leader that could
    // not renew its lease in etcd and stopped writing before another node could take over.
    t.match(problem.message, /majority|lease/, `it says why: ${problem.message}`);
  }

  for (const pid of frozen) process.kill(pid, 'SIGCONT');
  await waitFor(
    'writes accepted again once etcd has its quorum back',
    async () => ((await write(c1, 'healed')) === 200 ? true : undefined),
    90_000,
  );
  for (const client of clients)
    for (const [key, body] of acknowledged) {
      const read = await client.get(key);
      t.ok(read.status === 200 && read.bytes.equals(body), `${key} on ${client.node.id}`);
    }
  for (const refusal of refusals)
    t.equal((await c1.get(refusal.key)).status, 404, `the refused ${refusal.key} was not kept`);
});
