// Goal: a layout (src/cluster/layout.ts) holds the storage members and the partition table
// placement reads, and a new version is made only when what placement reads changes
// (docs/cluster.md §5, "Layouts and placement"). The table: 256 partitions whatever the node
// count, each with min(factor, nodes) distinct replicas; zone-aware (a partition spans as many
// zones as there are); capacity-weighted; deterministic; and a change moves only the partitions
// whose replica set must change (a join only adds the new node where it takes a share, a drain
// only replaces the draining node). No etcd: the records are built here; the etcd transactions
// that publish a layout with its member change are exercised by
// test/cluster/layout-fencing.test.ts.
import t from 'tap';
import {
  assignPartitions,
  layoutHistoryKey,
  layoutMembersOf,
  movedPartitions,
  nextLayout,
  partitionOf,
  PARTITIONS,
  sameMembers,
  type LayoutMember,
} from '../../src/cluster/layout.js';
import type { MemberRecord } from '../../src/cluster/registry.js';

function member(id: string, state: MemberRecord['state'], zone = ''): MemberRecord {
  return {
    v: 1,
    id,
    state,
    address: `10.0.0.1:${7000 + id.length}`,
    name: id,
    zone,
    site: '',
    softwareVersion: 'test',
    joinedAt: '2026-01-01T00:00:00.000Z',
    stateSince: '2026-01-01T00:00:00.000Z',
    reason: 'test',
  };
}

t.test('a layout holds the storage members, sorted, with their zones and drains', async (t) => {
  const members = [
    member('n3', 'voter', 'b'),
    member('n1', 'voter', 'a'),
    member('n2', 'draining', 'a'),
    member('n4', 'joining'),
    member('n5', 'learner'),
    member('n6', 'drained'),
    member('n7', 'lost'),
    member('n8', 'removed'),
  ];
  t.same(layoutMembersOf(members), [
    { id: 'n1', zone: 'a', draining: false },
    { id: 'n2', zone: 'a', draining: true },
    { id: 'n3', zone: 'b', draining: false },
  ]);
});

t.test('versions: the first is 1; a change of placement makes the next', async (t) => {
  const first = nextLayout(undefined, [member('n1', 'voter')], 'bootstrap', 3);
  t.match(first, { v: 2, version: 1, members: [{ id: 'n1' }], reason: 'bootstrap' });
  if (first === undefined) throw new Error('expected a layout');
  t.equal(
    nextLayout(first, [member('n1', 'voter'), member('n2', 'joining')], 'join', 3),
    undefined,
    'a join in progress changes no placement: no new version',
  );
  const second = nextLayout(first, [member('n1', 'voter'), member('n2', 'voter')], 'n2 voter', 3);
  t.match(second, { version: 2, members: [{ id: 'n1' }, { id: 'n2' }] });
  if (second === undefined) throw new Error('expected a layout');
  const draining = nextLayout(
    second,
    [member('n1', 'voter'), member('n2', 'draining')],
    'n2 draining',
    3,
  );
  t.match(draining, { version: 3, members: [{ id: 'n1' }, { id: 'n2', draining: true }] });
  const moved = nextLayout(second, [member('n1', 'voter', 'z'), member('n2', 'voter')], 'zone', 3);
  t.equal(moved?.version, 3, 'a zone change is a placement change');
  t.ok(
    sameMembers(second.members, layoutMembersOf([member('n2', 'voter'), member('n1', 'voter')])),
  );
  t.notOk(sameMembers(second.members, first.members));
});

t.test('history keys sort by version', async (t) => {
  t.equal(layoutHistoryKey(7), 'layout/v/0000000000000007');
  t.ok(layoutHistoryKey(10) > layoutHistoryKey(9));
});

const nodes = (
  spec: Record<string, string>,
  weights: Record<string, number> = {},
): LayoutMember[] =>
  Object.entries(spec).map(([id, zone]) => ({
    id,
    zone,
    draining: false,
    ...(weights[id] === undefined ? {} : { weight: weights[id] }),
  }));

function countsOf(table: ReadonlyArray<readonly string[]>): Map<string, number> {
  const counts = new Map<string, number>();
  for (const replicas of table)
    for (const id of replicas) counts.set(id, (counts.get(id) ?? 0) + 1);
  return counts;
}

t.test('the table: 256 partitions of distinct replicas, balanced, deterministic', async (t) => {
  for (const count of [1, 2, 3, 5, 7]) {
    const members = nodes(
      Object.fromEntries([...Array(count).keys()].map((i) => [`n${i + 1}`, ''])),
    );
    const table = assignPartitions(undefined, members, 3);
    t.equal(table.length, PARTITIONS, `${count} nodes: still 256 partitions`);
    const r = Math.min(3, count);
    t.ok(
      table.every((replicas) => replicas.length === r && new Set(replicas).size === r),
      `${count} nodes: every partition has ${r} distinct replicas`,
    );
    const counts = [...countsOf(table).values()];
    t.ok(
      Math.max(...counts) - Math.min(...counts) <= 1,
      `${count} nodes: shares within one (${counts.join(', ')})`,
    );
    t.same(assignPartitions(undefined, [...members].reverse(), 3), table, 'deterministic');
    const leaders = countsOf(table.map((replicas) => replicas.slice(0, 1)));
    t.ok(
      count < 3 || Math.min(...[...leaders.values()]) >= PARTITIONS / count / 2,
      `${count} nodes: the preferred leaders are spread (${[...leaders.values()].join(', ')})`,
    );
  }
  t.ok(partitionOf(1) >= 0 && partitionOf(1) < PARTITIONS);
  const spread = new Set([...Array(1000).keys()].map((id) => partitionOf(id)));
  t.equal(spread.size, PARTITIONS, 'bucket ids 0-999 reach every partition');
});

t.test('zone-aware first: a partition spans as many zones as there are', async (t) => {
  const members = nodes({ n1: 'a', n2: 'a', n3: 'b', n4: 'b', n5: 'c' });
  const table = assignPartitions(undefined, members, 3);
  const zoneOf = new Map(members.map((member) => [member.id, member.zone]));
  t.ok(
    table.every((replicas) => new Set(replicas.map((id) => zoneOf.get(id))).size === 3),
    'every partition has one replica in each of the three zones',
  );
  t.equal(countsOf(table).get('n5'), PARTITIONS, 'the lone node of zone c is in every partition');
  const two = assignPartitions(undefined, nodes({ n1: 'a', n2: 'a', n3: 'b' }), 2);
  t.ok(
    two.every((replicas) => replicas.includes('n3')),
    'with two zones and factor 2, each partition has zone b',
  );
});

t.test('capacity-weighted: shares follow the weights', async (t) => {
  const members = nodes({ n1: '', n2: '', n3: '', n4: '' }, { n1: 2, n2: 1, n3: 1, n4: 1 });
  const counts = countsOf(assignPartitions(undefined, members, 2));
  // 512 slots: n1 2/5 (205), the others 1/5 (102 or 103).
  t.ok(
    Math.abs((counts.get('n1') ?? 0) - 205) <= 1,
    `n1 takes twice the share (${counts.get('n1') ?? 0})`,
  );
  t.ok(
    Math.abs((counts.get('n2') ?? 0) - 102) <= 1,
    `n2 takes one share (${counts.get('n2') ?? 0})`,
  );
  const capped = countsOf(
    assignPartitions(undefined, nodes({ n1: '', n2: '', n3: '' }, { n1: 10, n2: 1, n3: 1 }), 2),
  );
  t.equal(capped.get('n1'), PARTITIONS, 'a heavy node holds at most one replica per partition');
  t.equal((capped.get('n2') ?? 0) + (capped.get('n3') ?? 0), PARTITIONS, 'the others the rest');
  // Capacities in bytes (cluster.capacity) where one node states none: it weighs the average of
  // the others, not 1 byte, so it still takes its share.
  const tib = 2 ** 40;
  const mixed = countsOf(
    assignPartitions(
      undefined,
      nodes({ n1: '', n2: '', n3: '', n4: '' }, { n1: 4 * tib, n2: 4 * tib, n3: 8 * tib }),
      2,
    ),
  );
  // Weights 4, 4, 8 and n4 the average of those (16/3): 512 slots.
  const share = (weight: number): number => (512 * weight) / (16 + 16 / 3);
  for (const [id, weight] of [
    ['n1', 4],
    ['n3', 8],
    ['n4', 16 / 3],
  ] as const)
    t.ok(
      Math.abs((mixed.get(id) ?? 0) - share(weight)) <= 1,
      `${id} takes its share (${mixed.get(id) ?? 0} of ${share(weight).toFixed(1)})`,
    );
});

t.test('a change moves only the partitions whose replica sets must change', async (t) => {
  const three = nodes({ n1: '', n2: '', n3: '' });
  const before = assignPartitions(undefined, three, 3);
  t.same(assignPartitions(before, three, 3), before, 'no change of members: no move');
  // A fourth node joins: it takes a quarter of the 768 slots, and nothing else moves.
  const after = assignPartitions(before, nodes({ n1: '', n2: '', n3: '', n4: '' }), 3);
  const moved = movedPartitions(before, after);
  t.equal(moved.length, 192, 'n4 takes 192 partitions');
  for (let p = 0; p < PARTITIONS; p += 1) {
    const added = (after[p] ?? []).filter((id) => !(before[p] ?? []).includes(id));
    const kept = (before[p] ?? []).filter((id) => (after[p] ?? []).includes(id));
    const sorted = (replicas: readonly string[] | undefined): string[] =>
      [...(replicas ?? [])].sort();
    if (!moved.includes(p)) t.same(sorted(after[p]), sorted(before[p]), `partition ${p} untouched`);
    else if (added.length !== 1 || added[0] !== 'n4' || kept.length !== 2)
      t.fail(`partition ${p}: ${(before[p] ?? []).join(',')} -> ${(after[p] ?? []).join(',')}`);
  }
  // n4 drains: only the partitions it held move, each back to one other node.
  const drained = assignPartitions(
    after,
    [...nodes({ n1: '', n2: '', n3: '' }), { id: 'n4', zone: '', draining: true }],
    3,
  );
  const back = movedPartitions(after, drained);
  t.same(back, moved, 'the drain moves exactly the partitions n4 held');
  t.ok(
    drained.every((replicas) => !replicas.includes('n4')),
    'n4 holds none',
  );
  // A node of five leaves (lost): its partitions, and no other, change.
  const five = nodes({ n1: '', n2: '', n3: '', n4: '', n5: '' });
  const full = assignPartitions(undefined, five, 3);
  const lost = assignPartitions(
    full,
    five.filter((member) => member.id !== 'n3'),
    3,
  );
  const held = full.flatMap((replicas, p) => (replicas.includes('n3') ? [p] : []));
  t.same(movedPartitions(full, lost), held, "only the lost node's partitions move");
});

t.test('a layout stores its table and keeps it when nothing changes', async (t) => {
  const first = nextLayout(undefined, [member('n1', 'voter'), member('n2', 'voter')], 'x', 3);
  t.equal(first?.partitions?.length, PARTITIONS);
  t.equal(first?.replicationFactor, 3);
  const old = { ...(first as NonNullable<typeof first>), v: 1 } as NonNullable<typeof first>;
  delete (old as { partitions?: unknown }).partitions;
  const upgraded = nextLayout(old, [member('n1', 'voter'), member('n2', 'voter')], 'table', 3);
  t.same(upgraded?.partitions, first?.partitions, 'a layout stored without a table gets one');
});

t.test('leaders spread in a cluster built by joins, and leave a draining node', async (t) => {
  // Each join stores a layout from the previous one, as membership.ts does.
  const ids = ['n1', 'n2', 'n3', 'n4'];
  let table: string[][] | undefined;
  const leadersOf = (of: ReadonlyArray<readonly string[]>, rank = 0): Map<string, number> =>
    countsOf(of.map((replicas) => replicas.slice(rank, rank + 1)));
  for (let count = 1; count <= 3; count += 1)
    table = assignPartitions(
      table,
      nodes(Object.fromEntries(ids.slice(0, count).map((id) => [id, '']))),
      3,
    );
  const three = table as string[][];
  for (const rank of [0, 1]) {
    const counts = [...leadersOf(three, rank).values()];
    t.same(counts.length, 3, `rank ${rank}: every node holds some`);
    t.ok(
      Math.max(...counts) - Math.min(...counts) <= 1,
      `rank ${rank}: three nodes share it within one (${counts.join(', ')})`,
    );
  }
  t.same(assignPartitions(three, nodes({ n1: '', n2: '', n3: '' }), 3), three, 'kept as it is');
  const four = assignPartitions(three, nodes({ n1: '', n2: '', n3: '', n4: '' }), 3);
  const led = leadersOf(four);
  t.ok(
    [...led.values()].every((n) => Math.abs(n - 64) <= 1) && led.size === 4,
    `four nodes lead 64 each (${[...led.values()].join(', ')})`,
  );
  const changed = four.filter((replicas, p) => replicas[0] !== three[p]?.[0]).length;
  t.ok(changed <= 80, `the join moves about a quarter of the leaderships (${changed})`);
  const drained = assignPartitions(
    four,
    [...nodes({ n1: '', n2: '', n3: '' }), { id: 'n4', zone: '', draining: true }],
    3,
  );
  t.notOk(leadersOf(drained).has('n4'), 'a draining node leads none');
  const back = [...leadersOf(drained).values()];
  t.ok(Math.max(...back) - Math.min(...back) <= 1, `the others share (${back.join(', ')})`);
  // Capacity-weighted: a node with twice the slots leads about twice the partitions.
  const weighted = assignPartitions(
    undefined,
    nodes({ n1: '', n2: '', n3: '', n4: '' }, { n1: 2, n2: 1, n3: 1, n4: 1 }),
    2,
  );
  const slots = countsOf(weighted);
  for (const [id, n] of leadersOf(weighted))
    t.ok(
      Math.abs(n - (slots.get(id) ?? 0) / 2) <= 1,
      `${id} leads half its ${slots.get(id) ?? 0} slots (${n})`,
    );
});
