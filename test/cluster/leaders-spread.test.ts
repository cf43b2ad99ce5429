// Goal: leadership spreads over the live storage members as the layout orders each partition's
// replicas (docs/cluster.md §5 and §8): in a cluster formed by joins, each of three nodes leads
// its share of the 256 partitions (85 or 86), every partition led by its first replica; after a
// drain the drained node leads none and the two others share the partitions; no partition's
// epoch goes back. A member restarted with a new `cluster.capacity` stores the next layout.
// Method: the cluster kit, three nodes on real etcd (factor 3), joined one after the other as an
// operator does; the leaders are read from `GET /cluster/layout` until they settle (a member
// takes its partitions at its next poll). Skips, with the reason, where etcd cannot be had.
import t from 'tap';
import { ClusterKit, clusterEnvironment, waitFor, type KitNode } from './kit.js';

const env = await clusterEnvironment();

interface Led {
  readonly counts: Map<string, number>;
  readonly epochs: number[];
  readonly firstLeads: boolean;
}

/** Who leads how many partitions, as `node` reads the layout; undefined while one is unled. */
async function leadership(node: KitNode): Promise<Led | undefined> {
  const answer = await node.admin('GET', '/cluster/layout');
  if (answer.status !== 200) return undefined;
  const partitions = answer.json['partitions'] as Array<{
    replicas: string[];
    leader?: string;
    epoch?: number;
  }>;
  const counts = new Map<string, number>();
  for (const entry of partitions) {
    if (entry.leader === undefined) return undefined;
    counts.set(entry.leader, (counts.get(entry.leader) ?? 0) + 1);
  }
  return {
    counts,
    epochs: partitions.map((entry) => entry.epoch ?? 0),
    firstLeads: partitions.every((entry) => entry.leader === entry.replicas[0]),
  };
}

function describe(led: Led): string {
  return [...led.counts].map(([id, count]) => `${id}: ${count}`).join(', ');
}

t.test('leaders spread over the members', { skip: env.skip ?? false }, async (t) => {
  const kit = await ClusterKit.create(3, (fn) => t.teardown(fn));
  const nodes = kit.nodes as [KitNode, KitNode, KitNode];
  await kit.formCluster(3);
  const formed = await waitFor(
    'each of three nodes leading its share, every partition by its first replica',
    async () => {
      const led = await leadership(nodes[0]);
      if (led === undefined || !led.firstLeads) return undefined;
      const shares = nodes.map((node) => led.counts.get(node.id) ?? 0);
      return shares.every((count) => count >= 85 && count <= 86) ? led : undefined;
    },
    120_000,
  );
  t.pass(`three nodes lead ${describe(formed)}`);

  // A capacity change by restart reaches the member record and the next layout (§5).
  const version = async (): Promise<number> =>
    (await nodes[0].admin('GET', '/cluster/layout')).json['version'] as number;
  const before = await version();
  await nodes[1].stop();
  await nodes[1].start({ args: ['--cluster.capacity', '4TiB'] });
  const changed = await waitFor('a layout after the capacity change', async () => {
    const now = await version();
    return now > before ? now : undefined;
  });
  t.equal(changed, before + 1, 'a restart with a new cluster.capacity stores the next layout');
  await nodes[1].stop();
  await nodes[1].start({ args: ['--cluster.capacity', '4TiB'] });
  t.equal(await version(), changed, 'a restart with the same capacity stores none');

  const drained = await nodes[0].admin('POST', '/cluster/consensus/drain', {
    id: 'n3',
    reason: 'test drain',
    confirm: 'n3',
  });
  t.equal(drained.status, 200, `drain: ${JSON.stringify(drained.json)}`);
  const after = await waitFor(
    'n1 and n2 leading every partition, n3 none',
    async () => {
      const led = await leadership(nodes[0]);
      if (led === undefined || !led.firstLeads || led.counts.has('n3')) return undefined;
      return led;
    },
    120_000,
  );
  t.notOk(after.counts.has('n3'), `the drained node leads none (${describe(after)})`);
  for (const id of ['n1', 'n2'])
    t.ok((after.counts.get(id) ?? 0) >= 127, `${id} leads half (${after.counts.get(id) ?? 0})`);
  t.ok(
    after.epochs.every((epoch, p) => epoch >= (formed.epochs[p] ?? 0)),
    'no epoch went back',
  );
});
