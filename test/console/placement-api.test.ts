// Goal: the console's placement answer. On a single node every bucket of the tenant has one
// copy, on this node, and the route keeps the gates (401 without a token; a tenant-scoped token
// sees only its tenant, and its own without naming it; an unknown tenant is 404). In cluster
// mode the placement is the cluster's own rule (the partition table over the members that are not
// draining): `placementOf` over three voters in two zones gives each bucket the replication
// factor's copies in both zones, counts what each node holds, and gives a draining member (its
// data moves off), a learner or a drained node nothing.
// Method: `placementOf` called with a made-up membership; the real service on loopback.
import t from 'tap';
import { Service } from '../helpers/service.js';
import { placementOf } from '../../src/console/placement-routes.js';
import { consoleCaller } from './console-call.js';

t.test('placement over a membership is the cluster rule', async (t) => {
  const members = [
    { id: 'n1', name: 'a', zone: 'east', state: 'voter' },
    { id: 'n2', name: 'b', zone: 'east', state: 'voter' },
    { id: 'n3', name: 'c', zone: 'west', state: 'draining' },
    { id: 'n4', name: 'd', zone: 'west', state: 'voter' },
    { id: 'n5', name: 'e', zone: 'west', state: 'learner' },
    { id: 'n6', name: 'f', zone: 'east', state: 'drained' },
  ];
  const buckets = Array.from({ length: 40 }, (_, index) => ({ id: index + 1, name: `b${index}` }));
  const placed = placementOf(members, 2, buckets);
  t.equal(placed.replicationFactor, 2);
  for (const bucket of placed.buckets) {
    t.equal(bucket.replicas.length, 2, `${bucket.name} has two copies`);
    const zones = bucket.replicas.map((id) => members.find((m) => m.id === id)?.zone);
    t.same(new Set(zones), new Set(['east', 'west']), `${bucket.name} is in both zones`);
  }
  const held = Object.fromEntries(placed.nodes.map((node) => [node.id, node.buckets]));
  t.equal(held['n3'], 0, 'a draining member takes no replica');
  t.equal(held['n4'], 40, 'so the one voter of the west zone holds every bucket');
  t.equal(held['n5'], 0, 'a learner holds nothing');
  t.equal(held['n6'], 0, 'a drained node holds nothing');
  t.equal(
    placed.nodes.reduce((sum, node) => sum + node.buckets, 0),
    80,
    'every copy is counted once',
  );
  t.equal(
    placed.nodes.reduce((sum, node) => sum + node.preferred, 0),
    40,
    'each bucket has one preferred replica',
  );
  t.equal(placementOf(members.slice(0, 1), 3, buckets).replicationFactor, 1, 'at most the nodes');
});

t.test('placement through the console API on a single node', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const call = consoleCaller(service);
  const owner = service.adminToken('owner');
  const scoped = service.adminToken('viewer', ['--tenant', 'acme']);
  const acme = await service.tenant('acme', 'read,write,delete,admin', owner);
  await service.tenant('globex', 'read,write,delete,admin', owner);
  for (const name of ['photos', 'logs'])
    t.equal((await acme.request('POST', '/buckets', { json: { name } })).status, 201);

  t.match(await call('GET', '/placement?tenant=acme'), { status: 401 });
  t.match(await call('GET', '/placement?tenant=globex', scoped), { status: 403 });
  t.match(await call('GET', '/placement?tenant=nobody', owner), { status: 404 });
  t.match(await call('GET', '/placement', owner), { status: 400, json: { message: /tenant/ } });
  const answer = await call('GET', '/placement', scoped);
  t.match(answer, {
    status: 200,
    json: {
      mode: 'single',
      tenantId: 'acme',
      replicationFactor: 1,
      nodes: [{ id: 'local', state: 'voter', storage: true, buckets: 2, preferred: 2 }],
      buckets: [
        { name: 'logs', replicas: ['local'] },
        { name: 'photos', replicas: ['local'] },
      ],
      truncated: false,
    },
  });
});
