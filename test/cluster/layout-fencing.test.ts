// Goal: layouts are versioned and fence a stale coordinator (docs/cluster.md §8a, "Fencing by
// layout"): a replica that has seen a newer layout refuses a replicated write placed by an older
// one; the coordinator reads the layout and places the write on the new replica set; no
// acknowledged write is lost. A partition whose leader changed fences the deposed leader's
// epoch (docs/cluster.md §8): a replica refuses a write sent under it (`stale_epoch`).
// Method: the cluster kit, three nodes on real etcd, replication factor 2. n1 reads the layout
// only when a peer tells it of a newer one (`cluster.layout_poll` 1 h), so once n3 has joined it
// still places by the layout of n1 and n2 (version 2), which `/metrics` shows. A signed data
// message placed by layout 2 shows n2 refuses it (`stale_layout`). The bucket written is one
// whose replica set in the three-node layout (`GET /cluster/layout`) is n2 and n3; its partition
// was led by n1 and is now led by n2 at a higher epoch, and a signed message under n1's epoch is
// refused by n3 (`stale_epoch`), one under n2's taken. n1's first write there is sent to n2
// by layout 2, refused, and placed again (n1's figures say so); n3 then holds each version in its
// own copy (a read by version id reads only the local copy), and with n1 SIGKILLed every
// acknowledged object reads back byte for byte from n2 and n3. Skips, with the reason, where etcd
// cannot be had.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import {
  ClusterKit,
  clusterEnvironment,
  joinBody,
  replicasOfBucket,
  waitFor,
  type KitNode,
} from './kit.js';
import { Client, makeKey } from './data-client.js';
import { callData } from '../../src/cluster/data-transport.js';
import { clusterPaths, readClusterSecret } from '../../src/cluster/node-state.js';
import { errorCode } from '../../src/util/errors.js';
import { partitionOf } from '../../src/cluster/layout.js';

const env = await clusterEnvironment();
const RF = ['--cluster.replication_factor', '2'];
const STALE = [...RF, '--cluster.layout_poll', '1h'];

/** A figure of `node`'s `/metrics` (the engine's cluster figures). */
async function figure(node: KitNode, name: string): Promise<number> {
  const response = await fetch(`http://${node.host}:${node.ports.admin}/metrics`, {
    signal: AbortSignal.timeout(60_000),
  });
  const text = await response.text();
  const line = text.split('\n').find((entry) => entry.startsWith(`${name}{`));
  if (line === undefined) throw new Error(`${node.id} exposes no ${name}`);
  return Number(line.slice(line.lastIndexOf(' ') + 1));
}

t.test(
  'a stale coordinator is fenced and loses nothing',
  { skip: env.skip ?? false },
  async (t) => {
    const kit = await ClusterKit.create(3, (fn) => t.teardown(fn));
    const [n1, n2, n3] = kit.nodes as [KitNode, KitNode, KitNode];
    await Promise.all([n1.start({ bootstrap: true, args: STALE }), n2.start({ args: RF })]);
    const join2 = await kit.join(n1, n2);
    t.equal(join2.status, 200, `n2 joined: ${JSON.stringify(join2.json)}`);
    // Restarted, n1 reads the layout of n1 and n2 (bootstrap: 1, n2 a voter: 2) and keeps it.
    await n1.stop();
    await n1.start({ args: STALE });
    await waitFor('n1 to place by layout 2', async () =>
      (await figure(n1, 'lightwell_cluster_layout_version').catch(() => 0)) === 2
        ? true
        : undefined,
    );

    await n3.start({ args: RF });
    await n2.waitLive(['n1', 'n2']); // restarted, n1 is a voter down until its liveness key is back
    const join3 = await n2.admin('POST', '/cluster/consensus/join', joinBody(n3));
    t.equal(join3.status, 200, `n3 joined: ${JSON.stringify(join3.json)}`);

    // n2 learns layout 3 by its own poll: a write placed by layout 2 is then refused.
    const secret = await readClusterSecret(clusterPaths(n1.dataDir));
    const placedBy = (layout: number) =>
      callData({
        address: n2.clusterAddress,
        name: 'records',
        body: { tenantNum: 1, records: [], layout },
        secret,
        from: 'n1',
      }).then(
        () => 'taken',
        (error: unknown) => errorCode(error) ?? String(error),
      );
    t.equal(
      await waitFor('n2 to refuse a write placed by layout 2', async () =>
        (await placedBy(2)) === 'stale_layout' ? 'stale_layout' : undefined,
      ),
      'stale_layout',
      'n2 fences a message placed by the old layout',
    );
    t.equal(await placedBy(3), 'taken', 'and takes one placed by the current layout');
    t.equal(await figure(n1, 'lightwell_cluster_layout_version'), 2, 'n1 still places by layout 2');

    // The first bucket id whose replica set in the stored three-node layout leaves n1 out (by
    // layout 2, of n1 and n2 with factor 2, every partition is on both).
    let target = 1;
    while ((await replicasOfBucket(n2, target)).includes('n1')) target += 1;
    t.same(
      (await replicasOfBucket(n2, target)).sort(),
      ['n2', 'n3'],
      `bucket ${target} is on n2, n3`,
    );

    // Its partition was led by n1 (the first of n1 and n2 by layout 2); by layout 3 n1 holds no
    // replica of it, and n2, now its first live replica, takes it under the next epoch. A write
    // sent under n1's old epoch (the deposed leader's) is refused by n3; the current one taken.
    const partition = partitionOf(target);
    const led = await waitFor(`n2 to lead partition ${partition}`, async () => {
      const layout = await n3.admin('GET', '/cluster/layout');
      const entry = (layout.json['partitions'] as Array<{ leader?: string; epoch?: number }>)[
        partition
      ];
      return entry?.leader === 'n2' ? entry : undefined;
    });
    const epoch = led.epoch ?? 0;
    t.ok(epoch >= 2, `partition ${partition} is at epoch ${epoch}, past n1's`);
    const sentUnder = (under: number) =>
      callData({
        address: n3.clusterAddress,
        name: 'records',
        body: { tenantNum: 1, records: [], layout: 3, partition, epoch: under },
        secret,
        from: 'n1',
      }).then(
        () => 'taken',
        (error: unknown) => errorCode(error) ?? String(error),
      );
    t.equal(
      await waitFor(`n3 to refuse epoch ${epoch - 1} of partition ${partition}`, async () =>
        (await sentUnder(epoch - 1)) === 'stale_epoch' ? 'stale_epoch' : undefined,
      ),
      'stale_epoch',
      "n3 refuses a write sent under the deposed leader's epoch",
    );
    t.equal(await sentUnder(epoch), 'taken', 'and takes one under the current epoch');

    const [keyId, keySecret] = await makeKey(n1);
    const client = new Client(n1, keyId, keySecret);
    await client.login();
    for (let id = 1; id <= target; id += 1) {
      const body = JSON.stringify({
        name: id === target ? 'data' : `b${id}`,
        versioning: 'Enabled',
      });
      t.equal((await client.send('POST', '/buckets', body)).status, 201, `bucket ${id} made`);
    }
    const viewers = [n2, n3].map((node) => {
      const viewer = new Client(node, keyId, keySecret);
      viewer.token = client.token;
      return viewer;
    });
    for (const viewer of viewers)
      await waitFor(`${viewer.node.id} to know bucket data`, async () =>
        (await viewer.send('GET', '/buckets/data/versioning')).status === 200 ? true : undefined,
      );

    const written = new Map<string, { body: Buffer; versionId: string }>();
    for (let index = 0; index < 6; index += 1) {
      const body = randomBytes(30_000 + index);
      const response = await fetch(`${n1.publicUrl}/buckets/data/objects/k${index}`, {
        method: 'PUT',
        headers: { Authorization: `Bearer ${client.token}` },
        body,
        signal: AbortSignal.timeout(60_000),
      });
      await response.arrayBuffer();
      t.equal(response.status, 200, `k${index} acknowledged through n1`);
      const versionId = response.headers.get('x-service-version-id') ?? '';
      t.not(versionId, '', `k${index} has a version id`);
      written.set(`k${index}`, { body, versionId });
    }
    // n1 leads no replica of it: its writes go to n2, the leader, which refuses one forwarded
    // under layout 2; n1 reads layout 3 and sends it again. n1 may also have read layout 3 on
    // another path first (the bucket creations above read shared state), and then nothing is
    // refused: either way at most one write is sent twice, and every one was acknowledged once.
    t.ok(
      (await figure(n1, 'lightwell_cluster_forwards_resent_total')) <= 1,
      'n1 was fenced at most once',
    );
    t.equal(await figure(n1, 'lightwell_cluster_layout_version'), 3, 'and places by layout 3 now');

    // n3 holds every version in its own copy (a version read by id is served locally).
    const onN3 = viewers[1] as Client;
    for (const [key, { body, versionId }] of written) {
      const local = await onN3.send('GET', `/buckets/data/objects/${key}?versionId=${versionId}`);
      t.equal(local.status, 200, `${key} is in n3's own copy`);
      t.ok(local.bytes.equals(body), `${key} byte for byte on n3`);
    }
    // The stale coordinator dies: every acknowledged write is on the new replica set.
    await n1.kill9();
    for (const viewer of viewers)
      for (const [key, { body }] of written) {
        const read = await viewer.get(key);
        t.equal(read.status, 200, `${key} read on ${viewer.node.id} with n1 dead`);
        t.ok(read.bytes.equals(body), `${key} byte for byte on ${viewer.node.id}`);
      }
  },
);
