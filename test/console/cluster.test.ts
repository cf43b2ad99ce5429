// Goal: the console's Cluster page against a real 3-node cluster in a browser. The membership
// table lists the three voters and the leader; placement shows tenant acme's bucket on its three
// replicas; an owner is offered the drain control; every object reads back through a node. No
// script error or CSP violation; screenshot for docs/console.md. An owner drains n3 from the
// page: the preview shows the membership plan (voters, storage nodes, partitions, the warning
// that fewer copies are kept), the confirm applies it, and the objects still read back.
// Method: the cluster kit (three `lightwell serve` nodes with real etcd), Chromium through
// puppeteer-core. Skips, saying why, where etcd or Chromium cannot be had.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { ClusterKit, clusterEnvironment, waitFor, type KitNode } from '../cluster/kit.js';
import { Client, makeKey } from '../cluster/data-client.js';
import {
  SHOTS_DIR,
  UPDATE_SHOTS,
  chromiumPath,
  fill,
  go,
  launch,
  newPage,
  press,
  screenshot,
  signIn,
  textOf,
  waitText,
} from './browser.js';
import { rmSync } from 'node:fs';

const env = await clusterEnvironment();
const chromium = chromiumPath();
const skip = env.skip ?? ('skip' in chromium ? chromium.skip : undefined);

t.test('the Cluster page on three nodes', { skip: skip ?? false }, async (t) => {
  if (!('path' in chromium)) return;
  const kit = await ClusterKit.create(3, (fn) => t.teardown(fn));
  const nodes = kit.nodes as [KitNode, KitNode, KitNode];
  const [n1] = nodes;
  await kit.formCluster(3);
  const [keyId, secret] = await makeKey(n1);
  const client = new Client(n1, keyId, secret);
  await client.login();
  t.equal((await client.send('POST', '/buckets', JSON.stringify({ name: 'data' }))).status, 201);
  const bodies = new Map<string, Buffer>();
  for (let index = 0; index < 4; index += 1) {
    const body = randomBytes(10_000 + index);
    t.equal((await client.put(`k${index}`, body)).status, 200, `k${index} written`);
    bodies.set(`k${index}`, body);
  }

  const browser = await launch(chromium.path);
  t.teardown(async () => {
    await browser.close();
    if (!UPDATE_SHOTS) rmSync(SHOTS_DIR, { recursive: true, force: true });
  });
  const errors: string[] = [];
  const page = await newPage(browser, errors);
  await signIn(page, { adminUrl: n1.adminUrl }, await n1.token('owner'));
  await go(page, '#/cluster', 'Consensus membership');
  await waitText(page, 'n3');
  const members = await textOf(page, 'table');
  for (const node of nodes) t.match(members, node.id, `${node.id} is listed`);
  t.match(members, /yes/, 'the leader is marked');
  await page.waitForSelector('table[aria-label="Bucket replicas"]');
  const replicas = await textOf(page, 'table[aria-label="Bucket replicas"]');
  t.match(replicas, /data/, "acme's bucket is placed");
  for (const node of nodes) t.match(replicas, node.id, `on ${node.id}`);

  await waitText(page, 'Drain a member');
  await screenshot(page, 'cluster-nodes');

  // The drain from the page: its preview shows the membership plan, and the confirm applies it.
  await fill(page, 'Member', 'n3');
  await fill(page, 'Reason (for the audit log)', 'retire n3');
  await fill(page, 'Type the member id (n3) to confirm', 'n3');
  await press(page, 'Preview: drain member');
  await page.waitForSelector('table[aria-label="Membership plan"]');
  const plan = await textOf(page, 'table[aria-label="Membership plan"]');
  t.match(plan, /Voters3 → 2/, 'the plan shows the voters before and after');
  t.match(plan, /Storage nodes3 → 2/, 'and the storage nodes');
  t.match(plan, /Partitions to move/, 'and the partitions that move');
  t.match(await textOf(page, '.warnings'), /fewer than cluster.replication_factor/);
  await press(page, 'Confirm: drain member');
  await waitFor('n3 shown drained on the Cluster page', async () =>
    /n3[^]*drained/.test(await textOf(page, 'table')) ? true : undefined,
  );
  t.pass('n3 is drained from the page');
  for (const [key, body] of bodies) {
    const answer = await client.get(key);
    t.equal(answer.status, 200, `${key} reads after the drain`);
    t.ok(answer.bytes.equals(body), `${key} is byte-exact`);
  }
  // Chromium notes that it ignores the Cross-Origin-Opener-Policy header on plain HTTP from a
  // non-loopback address (the nodes' own network): a notice about the origin, not a page error.
  const origin = /Cross-Origin-Opener-Policy header has been ignored/;
  t.same(
    errors.filter((error) => !origin.test(error)),
    [],
    'no script error or CSP violation',
  );
});
