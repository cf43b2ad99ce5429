// Goal: the plan arithmetic of membership changes (docs/cluster.md §11): etcd's quorum after
// adding or removing a voter, refusals that would lose quorum, and the storage warning when fewer
// nodes than the replication factor remain. Method: the pure functions, over small memberships.
import t from 'tap';
import {
  planQuorum,
  quorumBlockers,
  quorumOf,
  planStorage,
  storageFindings,
} from '../../src/cluster/quorum.js';

const voters = (...live: boolean[]) => live.map((up, index) => ({ id: `n${index + 1}`, live: up }));

t.test('quorum sizes', async (t) => {
  t.same([1, 2, 3, 4, 5].map(quorumOf), [1, 2, 2, 3, 3]);
});

t.test('removing a live voter from three healthy ones keeps quorum', async (t) => {
  const plan = planQuorum(voters(true, true, true), { removeId: 'n3' });
  t.same(plan, {
    votersBefore: 3,
    votersAfter: 2,
    liveVotersBefore: 3,
    liveVotersAfter: 2,
    quorumAfter: 2,
  });
  t.same(quorumBlockers(plan), []);
});

t.test('removing a live voter while another is down loses quorum', async (t) => {
  const plan = planQuorum(voters(true, true, false), { removeId: 'n2' });
  t.equal(plan.liveVotersAfter, 1);
  t.match(quorumBlockers(plan), [{ code: 'quorum_loss' }]);
});

t.test('removing the down voter itself restores a healthy quorum', async (t) => {
  const plan = planQuorum(voters(true, true, false), { removeId: 'n3' });
  t.same([plan.votersAfter, plan.liveVotersAfter], [2, 2]);
  t.same(quorumBlockers(plan), []);
});

t.test('the last voter cannot go; adding one counts as live', async (t) => {
  t.match(quorumBlockers(planQuorum(voters(true), { removeId: 'n1' })), [{ code: 'quorum_loss' }]);
  const grow = planQuorum(voters(true), { add: true });
  t.same([grow.votersAfter, grow.liveVotersAfter, grow.quorumAfter], [2, 2, 2]);
  t.same(quorumBlockers(planQuorum([], {})), [], 'external etcd: no voters of ours');
});

t.test('storage: fewer nodes than the factor warns; none left blocks', async (t) => {
  const two = planStorage(3, -1, 3);
  t.same(two, { nodesBefore: 3, nodesAfter: 2, replicationFactor: 3, effectiveFactorAfter: 2 });
  t.match(storageFindings(two), { blockers: [], warnings: [{ code: 'replication_reduced' }] });
  t.same(storageFindings(planStorage(3, 1, 3)), { blockers: [], warnings: [] });
  t.match(storageFindings(planStorage(1, -1, 3)), { blockers: [{ code: 'last_storage_node' }] });
});
