// Goal: a layout (src/cluster/layout.ts) holds the storage members placement reads, and a new
// version is made only when what placement reads changes (docs/cluster.md §8a, "Versioned
// layouts"). No etcd: the records are built here; the etcd transactions that publish a layout
// with its member change are exercised by test/cluster/layout-fencing.test.ts.
import t from 'tap';
import {
  layoutHistoryKey,
  layoutMembersOf,
  nextLayout,
  sameMembers,
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
  const first = nextLayout(undefined, [member('n1', 'voter')], 'bootstrap');
  t.match(first, { v: 1, version: 1, members: [{ id: 'n1' }], reason: 'bootstrap' });
  if (first === undefined) throw new Error('expected a layout');
  t.equal(
    nextLayout(first, [member('n1', 'voter'), member('n2', 'joining')], 'join'),
    undefined,
    'a join in progress changes no placement: no new version',
  );
  const second = nextLayout(first, [member('n1', 'voter'), member('n2', 'voter')], 'n2 voter');
  t.match(second, { version: 2, members: [{ id: 'n1' }, { id: 'n2' }] });
  if (second === undefined) throw new Error('expected a layout');
  const draining = nextLayout(
    second,
    [member('n1', 'voter'), member('n2', 'draining')],
    'n2 draining',
  );
  t.match(draining, { version: 3, members: [{ id: 'n1' }, { id: 'n2', draining: true }] });
  const moved = nextLayout(second, [member('n1', 'voter', 'z'), member('n2', 'voter')], 'zone');
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
