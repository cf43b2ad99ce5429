// Goal: a rebalance job is kept in etcd with its checkpoint and survives the restart of the node
// running it (docs/cluster.md §9): any member answers its progress, also while its node is down;
// the restarted node resumes it from its checkpoint (the buckets repaired before are not counted
// again) and finishes it; a cluster dry run reports the partitions to move and their bytes.
// Method: the cluster kit, three nodes on real etcd (replication factor 3: every node holds every
// partition), two objects in each of six buckets. n1 paces its rebalance jobs
// (`cluster.rebalance_objects_per_s`: the three members check six objects per bucket) so the job
// outlasts its request (202); once it has repaired at least one bucket and not all, n1 is
// SIGKILLed (supervisor, engine, admin and its etcd member) and started again. n2 answers the job
// throughout; the job ends `succeeded` with `resumed: 1` and every bucket counted once. Skips,
// with the reason, where etcd cannot be had.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { ClusterKit, clusterEnvironment, waitFor, type KitNode } from './kit.js';
import { Client, makeKey } from './data-client.js';

const env = await clusterEnvironment();
/** Six objects checked per bucket at two a second: six buckets take about 18 s. */
const PACED = ['--cluster.rebalance_objects_per_s', '2'];
const BUCKETS = ['data-1', 'data-2', 'data-3', 'data-4', 'data-5', 'data-6'];
const body = { tenantId: 'acme', reason: 'test', confirmTenant: 'acme' };

interface Job {
  state?: string;
  runner?: string;
  resumed?: number;
  progress?: { phase?: string; bucketsDone?: number; bucketsTotal?: number };
  result?: { replication?: { counts?: Record<string, number> } };
  error?: unknown;
}

t.test(
  'a rebalance job resumes after its node restarts',
  { skip: env.skip ?? false },
  async (t) => {
    const kit = await ClusterKit.create(3, (fn) => t.teardown(fn));
    const [n1, n2, n3] = kit.nodes as [KitNode, KitNode, KitNode];
    await Promise.all([n1.start({ bootstrap: true, args: PACED }), n2.start(), n3.start()]);
    for (const node of [n2, n3]) {
      const joined = await kit.join(n1, node);
      t.equal(joined.status, 200, `${node.id} joined: ${JSON.stringify(joined.json)}`);
    }
    const [keyId, secret] = await makeKey(n1);
    const client = new Client(n1, keyId, secret);
    await client.login();
    for (const name of BUCKETS)
      t.equal((await client.send('POST', '/buckets', JSON.stringify({ name }))).status, 201);
    for (const name of BUCKETS)
      for (const key of ['k1', 'k2']) {
        // A 503 (Retry-After) while the joins' leadership moves settle is tried again, as
        // clients do; a PUT of an unversioned key sent twice leaves one object.
        const body = randomBytes(8_000);
        const put = await waitFor(`${name}/${key} answered other than 503`, async () => {
          const answer = await client.send('PUT', `/buckets/${name}/objects/${key}`, body);
          return answer.status === 503 ? undefined : answer;
        });
        t.equal(put.status, 200, `${name}/${key} acknowledged: ${put.bytes.toString()}`);
      }
    // A write is acknowledged by a majority (two of three), so a replica may still lack one.
    const plan = await n1.rebalance(body, true);
    const partitions = plan.json['partitions'] as Record<string, number>;
    t.equal(partitions['partitionCount'], 256, 'the dry run names the partition count');
    const moving = partitions['partitionsToMove'] ?? -1;
    t.ok(moving >= 0 && moving <= BUCKETS.length, `partitions to move: ${moving}`);
    t.equal((partitions['bytesToMove'] ?? 0) > 0, moving > 0, 'bytes to move when any partition');

    const started = await n1.admin('POST', '/cluster/repair/rebalance', body);
    t.equal(
      started.status,
      202,
      `the paced rebalance became a job: ${JSON.stringify(started.json)}`,
    );
    const jobId = String(started.json['jobId']);
    const job = async (node: KitNode): Promise<Job> =>
      (await node.admin('GET', `/cluster/repair/jobs/${jobId}`)).json;
    const halfway = await waitFor('the job to repair a first bucket', async () => {
      const seen = await job(n2);
      return (seen.progress?.bucketsDone ?? 0) >= 1 ? seen : undefined;
    });
    t.match(halfway, { state: 'running', runner: 'n1', progress: { phase: 'replicas' } });
    t.ok((halfway.progress?.bucketsDone ?? 0) < BUCKETS.length, 'n1 is stopped half way');

    await n1.kill9();
    const whileDown = await job(n2);
    t.match(whileDown, { state: 'running', runner: 'n1' }, 'n2 answers the job while n1 is down');
    t.ok((whileDown.progress?.bucketsDone ?? 0) >= 1, 'with its checkpoint');
    await n1.start({ args: PACED });

    const ended = await waitFor(
      'the resumed job to end',
      async () => {
        const seen = await job(n2);
        return seen.state === 'succeeded' || seen.state === 'failed' ? seen : undefined;
      },
      180_000,
    );
    t.match(ended, {
      state: 'succeeded',
      resumed: 1,
      progress: { phase: 'done', bucketsDone: BUCKETS.length, bucketsTotal: BUCKETS.length },
    });
    t.equal(
      ended.result?.replication?.counts?.['buckets'],
      3 * BUCKETS.length,
      'each bucket counted once on each of the three members',
    );
    t.same(await job(n1), ended, 'n1 answers the same job');
    const after = await n2.rebalance(body, true);
    t.match(
      after.json,
      { replication: { counts: { copiesSent: 0, replicasUnreachable: 0 } } },
      'nothing left to copy',
    );
  },
);
