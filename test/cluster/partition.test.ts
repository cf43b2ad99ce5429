// Goal: a network partition of one node (docs/cluster.md §10), the leader of the bucket's
// partition: it stops writing before its lease can have passed to another node (§8, "Strict
// single writer"), another node takes the partition at a higher epoch; the cut-off node refuses writes
// (503: it cannot reach etcd's quorum nor a majority of the replicas), the two others go on
// writing and reading, and once healed every write acknowledged during the cut reads back byte
// for byte from the node that was cut off; a write it refused once it knew it was cut off shows
// up nowhere (one in its first seconds cut off may, as docs/cluster.md §8a says).
// Method: the cluster kit, three nodes in network namespaces (the partition cuts a node's veth);
// the native API. Skips, with the reason, where etcd or namespaces cannot be had.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { ClusterKit, clusterEnvironment, waitFor, type KitNode } from './kit.js';
import { Client, makeKey } from './data-client.js';

const env = await clusterEnvironment();
const execFileAsync = promisify(execFile);

/**
 * A PUT sent from inside `node`'s own network namespace (the cut leaves it reachable only from
 * there); answers the status (0 when the request itself failed) and the body.
 */
async function putFromInside(
  kit: ClusterKit,
  client: Client,
  key: string,
): Promise<{ status: number; text: string }> {
  const script =
    `fetch(${JSON.stringify(`${client.node.publicUrl}/buckets/data/objects/${key}`)}, ` +
    `{method: 'PUT', body: 'x'.repeat(1000), headers: {Authorization: ` +
    `${JSON.stringify(`Bearer ${client.token}`)}}, signal: AbortSignal.timeout(30000)})` +
    `.then(async (r) => console.log(r.status + ' ' + (await r.text())), () => console.log(0))`;
  const [command, args] = kit.wrap(client.node.index, [process.execPath, '-e', script]);
  const { stdout } = await execFileAsync(command, args);
  const space = stdout.indexOf(' ');
  return space < 0
    ? { status: Number(stdout.trim()), text: '' }
    : { status: Number(stdout.slice(0, space)), text: stdout.slice(space + 1) };
}
/** The partition of bucket `data`, its leader and epoch, once one other than `not` leads it. */
async function leaderOfData(
  node: KitNode,
  not?: string,
): Promise<{ partition: number; leader: string; epoch: number }> {
  return waitFor(
    `a leader of bucket data's partition${not ? ` other than ${not}` : ''}`,
    async () => {
      const layout = await node.admin('GET', '/cluster/layout?tenant=acme');
      const buckets = layout.json['buckets'] as
        Array<{ name: string; partition: number }> | undefined;
      const partition = buckets?.find((entry) => entry.name === 'data')?.partition;
      if (partition === undefined) return undefined;
      const entry = (layout.json['partitions'] as Array<{ leader?: string; epoch?: number }>)[
        partition
      ];
      if (entry?.leader === undefined || entry.leader === not) return undefined;
      return { partition, leader: entry.leader, epoch: entry.epoch ?? 0 };
    },
  );
}

const skip =
  env.skip ?? (env.namespaces ? false : 'network namespaces cannot be made here (not root)');

t.test('a partitioned node refuses writes; healed, it loses nothing', { skip }, async (t) => {
  const kit = await ClusterKit.create(3, (fn) => t.teardown(fn));
  await kit.formCluster(3);
  const [keyId, secret] = await makeKey(kit.nodes[0] as KitNode);
  const clients = kit.nodes.map((node) => new Client(node, keyId, secret));
  await (clients[0] as Client).login();
  t.equal(
    (await (clients[0] as Client).send('POST', '/buckets', JSON.stringify({ name: 'data' })))
      .status,
    201,
  );
  // The node cut off is the leader of the bucket's partition (docs/cluster.md §8, "Strict
  // single writer"): it stops writing by itself, and another takes the partition.
  const first = await leaderOfData(kit.nodes[0] as KitNode);
  const cut = kit.nodes.findIndex((node) => node.id === first.leader);
  const [c3, c1, c2] = [cut, ...[0, 1, 2].filter((index) => index !== cut)].map(
    (index) => clients[index],
  ) as [Client, Client, Client];
  const n3 = c3.node;
  t.comment(`${n3.id} leads partition ${first.partition} at epoch ${first.epoch}`);
  for (const client of [c1, c2, c3]) await client.login();
  const before = randomBytes(20_000);
  t.equal((await c1.put('before', before)).status, 200);

  await kit.partition(n3);
  t.teardown(() => kit.heal(n3).catch(() => undefined));
  // In its first seconds cut off, a node may still apply a write locally and then answer 503
  // for want of replicas (an outcome the client cannot know, as with any failed write); once it
  // knows it cannot reach etcd's quorum, it refuses writes before it changes anything.
  let probe = 0;
  // The leader cut off stops writing before its lease can have expired (its own lease is the
  // first thing it cannot renew), and before it notices it lost etcd's quorum.
  await waitFor('the cut-off leader to stop writing for want of a renewed lease', async () => {
    const answer = await putFromInside(kit, c3, `probe-${probe++}`);
    return answer.status === 503 && /has not renewed its lease/.test(answer.text)
      ? true
      : undefined;
  });
  t.equal((await putFromInside(kit, c3, 'minority')).status, 503, 'the cut-off node refuses');
  const next = await leaderOfData(c1.node, n3.id);
  t.ok(next.epoch > first.epoch, `${next.leader} took the partition at epoch ${next.epoch}`);
  const during = new Map<string, Buffer>();
  for (let index = 0; index < 10; index += 1) {
    const body = randomBytes(5000 + index);
    const client = index % 2 === 0 ? c1 : c2;
    const answer = await waitFor(`during-${index} on the majority side`, async () => {
      const put = await client.put(`during-${index}`, body);
      return put.status === 503 ? undefined : put;
    });
    t.equal(answer.status, 200, `during-${index} written on the majority side`);
    during.set(`during-${index}`, body);
  }
  t.ok((await c2.get('during-0')).bytes.equals(during.get('during-0') as Buffer));

  await kit.heal(n3);
  for (const [key, body] of [...during, ['before', before] as const]) {
    const read = await waitFor(`${key} on ${n3.id} once healed`, async () => {
      const answer = await c3.get(key).catch(() => undefined);
      return answer?.status === 200 ? answer : undefined;
    });
    t.ok(read.bytes.equals(body), `${key} reads back on ${n3.id}`);
  }
  for (const client of [c1, c2])
    t.equal(
      (await client.get('minority')).status,
      404,
      `${n3.id}'s refused write is not on ${client.node.id}`,
    );
});
