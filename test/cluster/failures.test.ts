// Goal: what a cluster's membership does when a node fails without being removed
// (docs/cluster.md §2, §10): a node cut off the network is seen down by the others (its liveness
// lease expires) while it stays a voter, and is seen live again once healed; a node whose
// supervisor alone was SIGKILLed (its etcd member left running) restarts as the same member, the
// leftover etcd killed, and answers the same membership.
// Method: the cluster kit with three nodes joined through node 1; the partition is a veth link
// set down (network namespaces only: on loopback addresses that part skips, saying why).
import t from 'tap';
import { ClusterKit, clusterEnvironment, waitFor, type KitNode } from './kit.js';

interface Membership {
  members: Array<{ id: string; state: string; live: boolean }>;
}

const env = await clusterEnvironment();

async function membership(node: KitNode): Promise<Membership> {
  const answer = await node.admin('GET', '/cluster/consensus/membership', undefined, 'viewer');
  if (answer.status !== 200) throw new Error(`membership answered ${answer.status}`);
  return answer.json as unknown as Membership;
}

async function liveness(node: KitNode, id: string): Promise<boolean | undefined> {
  return (await membership(node)).members.find((member) => member.id === id)?.live;
}

t.test('a partitioned node and a killed supervisor', { skip: env.skip ?? false }, async (t) => {
  const kit = await ClusterKit.create(3, (fn) => t.teardown(fn));
  await kit.formCluster();
  const [n1, n2, n3] = kit.nodes as [KitNode, KitNode, KitNode];
  await waitFor('all three nodes live', async () =>
    (await membership(n1)).members.every((member) => member.live) ? true : undefined,
  );

  await t.test(
    'a partitioned node is down, not out; healed, it is live again',
    {
      skip: env.partitionSkip ?? false,
    },
    async (t) => {
      await kit.partition(n3);
      await waitFor('n1 to see n3 down', async () =>
        (await liveness(n1, 'n3')) === false ? true : undefined,
      );
      const view = await membership(n1);
      t.equal(view.members.find((member) => member.id === 'n3')?.state, 'voter', 'still a voter');
      const plan = await n1.admin('POST', '/cluster/consensus/drain?dryRun=true', {
        id: 'n2',
        reason: 'x',
        confirm: 'n2',
      });
      t.ok(
        ((plan.json['blockers'] ?? []) as Array<{ code: string }>).some(
          (blocker) => blocker.code === 'quorum_loss',
        ),
        'with n3 cut off, draining n2 would lose quorum',
      );
      await kit.heal(n3);
      await waitFor('n1 to see n3 live again', async () =>
        (await liveness(n1, 'n3')) === true ? true : undefined,
      );
      await waitFor('n3 to answer the membership with every node live', async () =>
        (await membership(n3)).members.every((member) => member.live) ? true : undefined,
      );
    },
  );

  await t.test('a node whose supervisor was SIGKILLed restarts as the same member', async (t) => {
    await n2.killSupervisor();
    await n2.start();
    t.match(n2.output, /lightwell: cluster: member of cluster c[0-9a-f]{16} \(node n2 on /);
    t.match(n2.output, /an etcd member left running on this data directory: killed/);
    const view = await waitFor('n2 to answer the membership with every node live', async () => {
      const answer = await membership(n2);
      return answer.members.every((member) => member.live) ? answer : undefined;
    });
    t.same(
      view.members.map((member) => [member.id, member.state]),
      [
        ['n1', 'voter'],
        ['n2', 'voter'],
        ['n3', 'voter'],
      ],
    );
  });
});
