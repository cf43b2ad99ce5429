// Goal: cluster membership on real etcd, as DECISIONS.md ("Cluster mode (etcd)") and
// docs/cluster.md §11 say: a node bootstrapped with --cluster.bootstrap, two nodes that wait to
// be joined and are joined (as etcd learners, then promoted) through the admin API of different
// members; the membership alike from every node; refusals with their blockers (a bad secret, an
// id in use, removing an undrained member, a drain that would lose etcd's quorum); dry runs that
// plan and change nothing; forceLost removal of a killed node; an id never reused.
// Method: the cluster kit (three nodes, each in its own network namespace, or on its own
// loopback address); one scenario, in order, since each step builds on the last (a minute or
// two on a loaded machine). Skips, with the reason, where etcd cannot be had.
import t from 'tap';
import { ClusterKit, clusterEnvironment, joinBody, waitFor, type KitNode } from './kit.js';
import { answerSchema, schemaErrors } from '../helpers/json-schema.js';

interface Member {
  id: string;
  state: string;
  live: boolean;
  isLearner: boolean;
  zone?: string;
  site?: string;
  etcdMemberId?: string;
}
interface Membership {
  clusterId: string;
  leaderId: string;
  members: Member[];
}

const env = await clusterEnvironment();

async function membership(node: KitNode): Promise<Membership> {
  const answer = await node.admin('GET', '/cluster/consensus/membership', undefined, 'viewer');
  if (answer.status !== 200) throw new Error(`membership answered ${answer.status}`);
  return answer.json as unknown as Membership;
}

/** The codes of a plan's or a refusal's blockers. */
function blockers(json: Record<string, unknown>): string[] {
  const list = (json['blockers'] ?? []) as Array<{ code: string }>;
  return list.map((entry) => entry.code);
}

function states(view: Membership): Record<string, string> {
  return Object.fromEntries(view.members.map((member) => [member.id, member.state]));
}

t.test(
  'three nodes join, and membership changes keep etcd quorum',
  { skip: env.skip ?? false },
  async (t) => {
    const kit = await ClusterKit.create(3, (fn) => t.teardown(fn));
    const [n1, n2, n3] = kit.nodes as [KitNode, KitNode, KitNode];
    await Promise.all([n1.start({ bootstrap: true }), n2.start(), n3.start()]);
    t.match(n1.output, /lightwell: cluster: member of cluster c[0-9a-f]{16} \(node n1 on /);
    t.match(n2.output, /lightwell: cluster: waiting to be joined, secret lwjoin_/);

    await t.test('a waiting node: its join secret, and no membership yet', async (t) => {
      t.same(await n2.joinSecretCli(), { code: 0, stdout: n2.joinSecret() + '\n', stderr: '' });
      const waiting = await n2.admin('GET', '/cluster/consensus/membership', undefined, 'viewer');
      t.equal(waiting.status, 409);
      t.match(waiting.json, { code: 'conflict', message: /waits to be joined/ });
    });

    await t.test('join: a dry run plans, a bad secret is refused, the join commits', async (t) => {
      const plan = await n1.admin('POST', '/cluster/consensus/join?dryRun=true', joinBody(n2));
      t.equal(plan.status, 200);
      t.match(plan.json, {
        dryRun: true,
        applied: false,
        quorum: { votersBefore: 1, votersAfter: 2, quorumAfter: 2 },
        storage: { nodesBefore: 1, nodesAfter: 2, replicationFactor: 3, effectiveFactorAfter: 2 },
        blockers: [],
        warnings: [{ code: 'replication_reduced' }],
      });
      t.same(states(await membership(n1)), { n1: 'voter' }, 'the dry run changed nothing');

      const wrong = joinBody(n2, { secret: n3.joinSecret() });
      const refused = await n1.admin('POST', '/cluster/consensus/join', wrong);
      t.equal(refused.status, 409, 'a secret of another node is refused');
      t.match(refused.json, { code: 'conflict' });
      t.same(blockers(refused.json), ['node_unreachable']);
      t.same(states(await membership(n1)), { n1: 'voter' }, 'nothing recorded');

      const joined = await kit.join(n1, n2, { zone: 'b' });
      t.equal(joined.status, 200, JSON.stringify(joined.json));
      t.match(joined.json, {
        members: [
          { id: 'n1', state: 'voter' },
          { id: 'n2', state: 'voter', live: true },
        ],
      });
      // The third joins through the second: any member serves membership changes.
      const third = await kit.join(n2, n3, { zone: 'c' });
      t.equal(third.status, 200, JSON.stringify(third.json));
      t.ok(
        (third.json as unknown as Membership).members.every((member) => member.live),
        'a join answers once the new member is live, so the next join is not refused',
      );
      const gone = await n3.joinSecretCli();
      t.equal(gone.code, 1, 'a joined node has no join secret any more');
      t.match(gone.stderr, /has no join secret: the node has joined a cluster/);
    });

    await t.test('membership is the same from every node', async (t) => {
      const views = await Promise.all([n1, n2, n3].map(membership));
      const first = views[0] as Membership;
      t.same(states(first), { n1: 'voter', n2: 'voter', n3: 'voter' });
      t.ok(['n1', 'n2', 'n3'].includes(first.leaderId), 'the leader is a member');
      for (const view of views) {
        t.equal(view.clusterId, first.clusterId);
        t.same(states(view), states(first));
        t.ok(
          view.members.every((member) => !member.isLearner),
          'no learner is left',
        );
      }
      const n2View = first.members.find((member) => member.id === 'n2');
      t.equal(n2View?.zone, 'b');
      t.notOk(n2View !== undefined && 'site' in n2View, 'an empty site is absent');
      t.notOk(
        first.members.some((member) => member.id === 'n1' && 'zone' in member),
        'an empty zone is absent',
      );
      t.match(n2View?.etcdMemberId, /^\d+$/, 'etcd member ids are decimal strings (> 2^53)');
      await waitFor('every node live', async () =>
        (await membership(n1)).members.every((member) => member.live) ? true : undefined,
      );
    });

    await t.test(
      'an admin token minted on one node works on every node, and its revocation',
      async (t) => {
        const minted = JSON.parse(
          (await n1.adminTokenCli(['create', '--role', 'viewer', '--json']))
            .trim()
            .split('\n')
            .pop() ?? '{}',
        ) as { token: string; tokenId: string };
        const path = '/cluster/consensus/membership';
        for (const node of [n1, n2, n3])
          t.equal(
            await waitFor(`${node.id} to accept the token minted on n1`, async () => {
              const status = await node.adminWith(minted.token, 'GET', path);
              return status === 200 ? status : undefined;
            }),
            200,
          );
        await n2.adminTokenCli(['revoke', minted.tokenId]);
        for (const node of [n1, n2, n3])
          t.equal(
            await waitFor(`${node.id} to refuse the token revoked on n2`, async () => {
              const status = await node.adminWith(minted.token, 'GET', path);
              return status === 401 ? status : undefined;
            }),
            401,
          );
      },
    );

    await t.test('refusals: an id in use, removing a member that is not drained', async (t) => {
      const again = await n1.admin('POST', '/cluster/consensus/join', {
        ...joinBody(n3),
        secret: 'lwjoin_' + 'A'.repeat(43),
      });
      t.equal(again.status, 409);
      t.ok(blockers(again.json).includes('id_in_use'), 'blocker id_in_use');
      const remove = { id: 'n3', reason: 'test', confirm: 'n3' };
      const notDrained = await n1.admin('POST', '/cluster/consensus/remove', remove);
      t.equal(notDrained.status, 409);
      t.same(blockers(notDrained.json), ['not_drained']);
      const drainPlan = await n1.admin('POST', '/cluster/consensus/drain?dryRun=true', remove);
      t.equal(drainPlan.status, 200);
      t.match(drainPlan.json, {
        dryRun: true,
        quorum: { votersBefore: 3, votersAfter: 2, liveVotersAfter: 2, quorumAfter: 2 },
        storage: { nodesAfter: 2, effectiveFactorAfter: 2 },
        blockers: [],
        warnings: [{ code: 'replication_reduced' }],
      });
    });

    await t.test('with one voter down, a drain that would lose quorum is refused', async (t) => {
      await n3.kill9();
      await waitFor('n3 seen down (its liveness lease expired)', async () => {
        const member = (await membership(n1)).members.find((entry) => entry.id === 'n3');
        return member?.live === false ? true : undefined;
      });
      const body = { id: 'n2', reason: 'test', confirm: 'n2' };
      const plan = await n1.admin('POST', '/cluster/consensus/drain?dryRun=true', body);
      t.equal(plan.status, 200);
      t.match(plan.json, {
        quorum: { votersAfter: 2, liveVotersAfter: 1, quorumAfter: 2 },
      });
      t.same(blockers(plan.json), ['quorum_loss']);
      const refused = await n1.admin('POST', '/cluster/consensus/drain', body);
      t.equal(refused.status, 409);
      t.match(refused.json, { code: 'conflict' });
      t.same(blockers(refused.json), ['quorum_loss']);
      t.equal(states(await membership(n1))['n2'], 'voter', 'n2 is still a voter');
      const live = await n1.admin('POST', '/cluster/consensus/drain', {
        ...body,
        forceLost: true,
      });
      t.equal(live.status, 409, 'a live member cannot be marked lost');
      t.same(blockers(live.json), ['member_live']);
    });

    await t.test('forceLost removes the killed node; its id is never reused', async (t) => {
      const body = { id: 'n3', reason: 'disk died', confirm: 'n3', forceLost: true };
      const plan = await n1.admin('POST', '/cluster/consensus/remove?dryRun=true', body);
      t.match(plan.json, { quorum: { votersAfter: 2, liveVotersAfter: 2 } });
      t.same(blockers(plan.json), []);
      const removed = await n1.admin('POST', '/cluster/consensus/remove', body);
      t.equal(removed.status, 200, JSON.stringify(removed.json));
      t.same(states(removed.json as unknown as Membership), {
        n1: 'voter',
        n2: 'voter',
        n3: 'removed',
      });
      const view = await membership(n2);
      t.notOk(
        view.members.find((member) => member.id === 'n3')?.etcdMemberId === undefined,
        'the tombstone keeps its record',
      );
      const rejoin = await n1.admin('POST', '/cluster/consensus/join', {
        ...joinBody(n2),
        id: 'n3',
        confirm: 'n3',
        address: n3.clusterAddress,
      });
      t.equal(rejoin.status, 409);
      t.ok(blockers(rejoin.json).includes('id_in_use'), 'blocker id_in_use');

      await t.test(
        'drain, then remove: the drained node stays readable until removed',
        async (t) => {
          const body = { id: 'n2', reason: 'retire', confirm: 'n2' };
          const drained = await n1.admin('POST', '/cluster/consensus/drain', body);
          t.equal(drained.status, 200, JSON.stringify(drained.json));
          // DECISIONS.md's cluster states: a drained member is `drained` until removed.
          t.equal(states(drained.json as unknown as Membership)['n2'], 'drained');
          const view = await waitFor('n2 to answer membership as a drained node', async () => {
            const answer = await n2.admin(
              'GET',
              '/cluster/consensus/membership',
              undefined,
              'viewer',
            );
            return answer.status === 200 ? (answer.json as unknown as Membership) : undefined;
          });
          t.same(states(view), { n1: 'voter', n2: 'drained', n3: 'removed' });
          const openapi = (await (await fetch(`${n2.adminUrl}/openapi.json`)).json()) as Record<
            string,
            unknown
          >;
          for (const [path, answer] of [
            ['/cluster/consensus/membership', view],
            ['/cluster/consensus/drain', drained.json],
          ] as const) {
            const method = path.endsWith('membership') ? 'GET' : 'POST';
            const schema = answerSchema(openapi, method, path, 200);
            t.ok(schema, `the served document has ${method} ${path}'s answer`);
            t.same(schemaErrors(answer, schema, openapi), [], `${path}: the answer is valid`);
          }
          t.notOk(
            view.members.find((member) => member.id === 'n2')?.isLearner,
            'no longer an etcd member',
          );
          const last = await n1.admin('POST', '/cluster/consensus/drain?dryRun=true', {
            id: 'n1',
            reason: 'x',
            confirm: 'n1',
          });
          t.ok(blockers(last.json).includes('last_storage_node'), 'the last storage node stays');
          const removed = await n1.admin('POST', '/cluster/consensus/remove', body);
          t.equal(removed.status, 200, JSON.stringify(removed.json));
          t.same(states(removed.json as unknown as Membership), {
            n1: 'voter',
            n2: 'removed',
            n3: 'removed',
          });
        },
      );
    });
  },
);
