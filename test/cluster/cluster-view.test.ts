// Goal: what a member's view reads of the layout (src/cluster/cluster-view.ts). A layout stored
// before tables were (record version 1) is never placed by a table under its own version: its
// table is published as the next version first, so no two nodes place differently under one
// version. And a refresh asked while a read is under way waits for a read that starts after it,
// so a write refused as placed by a stale layout finds the newer one (sharing the read under way
// made it answer 503 with the newer layout already stored).
// Method: `EtcdClusterView.open` over a registry made here (its layout in memory, its reads held
// by the test where it needs them); no etcd.
import t from 'tap';
import { EtcdClusterView } from '../../src/cluster/cluster-view.js';
import { nextLayout, PARTITIONS, type Layout } from '../../src/cluster/layout.js';
import type { MemberRecord, Registry } from '../../src/cluster/registry.js';
import { componentLogger } from '../../src/util/log.js';

function member(id: string): MemberRecord {
  return {
    v: 1,
    id,
    state: 'voter',
    address: `127.0.0.1:${7000 + Number(id.slice(1))}`,
    name: id,
    zone: '',
    site: '',
    softwareVersion: 'test',
    joinedAt: '2026-01-01T00:00:00.000Z',
    stateSince: '2026-01-01T00:00:00.000Z',
    reason: 'test',
  };
}

const MEMBERS = [member('n1'), member('n2'), member('n3')];

/** A registry whose layout is `state.layout`; `state.hold` delays its next layout read. */
function registryOf(initial: Layout) {
  const state = {
    layout: initial,
    ensured: [] as string[],
    hold: undefined as Promise<void> | undefined,
  };
  const registry = {
    key: (name: string) => `lw/c/${name}`,
    members: () => Promise.resolve(MEMBERS.map((record) => ({ record, modRevision: '1' }))),
    layout: async () => {
      const read = state.layout;
      const hold = state.hold;
      state.hold = undefined;
      if (hold !== undefined) await hold;
      return { record: read, modRevision: '1' };
    },
    ensureLayout: (reason: string) => {
      state.ensured.push(reason);
      const next = nextLayout(state.layout, MEMBERS, reason, 3);
      if (next !== undefined) state.layout = next;
      return Promise.resolve(state.layout.version);
    },
    liveIds: () => Promise.resolve(new Set<string>()),
    client: {
      getAll: () => ({ prefix: () => ({ exec: () => Promise.resolve({ kvs: [] }) }) }),
      // This node's liveness key (its lease's time left): none here.
      get: () => ({ exec: () => Promise.resolve({ kvs: [] }) }),
    },
  } as unknown as Registry;
  return { registry, state };
}

async function open(registry: Registry): Promise<EtcdClusterView> {
  return EtcdClusterView.open({
    registry,
    nodeId: 'n1',
    saved: { nodeNum: 1, replicationFactor: 3 },
    save: () => Promise.resolve(),
    log: componentLogger('test'),
  });
}

t.test('a version 1 layout is placed by a table only under a new version', async (t) => {
  const tabled = nextLayout(undefined, MEMBERS, 'bootstrap', 3) as Layout;
  const v1 = { ...tabled, v: 1, version: 4 } as Layout & { partitions?: unknown };
  delete v1.partitions;
  const { registry, state } = registryOf(v1);
  const view = await open(registry);
  t.teardown(() => view.close());
  t.equal(state.ensured.length, 1, 'the table was published');
  t.equal(
    view.layoutVersion(),
    5,
    'placement reads the next version, never version 4 with a table',
  );
  t.equal(view.partitions().table.length, PARTITIONS);
  t.same(view.partitions().table, state.layout.partitions, 'and the table stored with it');
});

t.test('a refresh asked during a read waits for a read that starts after it', async (t) => {
  const first = nextLayout(undefined, MEMBERS, 'bootstrap', 3) as Layout;
  const { registry, state } = registryOf(first);
  const view = await open(registry);
  t.teardown(() => view.close());
  t.equal(view.layoutVersion(), 1);
  // A read is under way and has read layout 1 ...
  let release = (): void => undefined;
  state.hold = new Promise((resolve) => (release = resolve));
  const under = view.refresh();
  await new Promise((resolve) => setImmediate(resolve));
  // ... when a replica refuses a write, naming layout 2, which is in etcd by now.
  state.layout = { ...first, version: 2 };
  const asked = view.refresh();
  release();
  await under;
  await asked;
  t.equal(view.layoutVersion(), 2, 'the caller sees the layout stored before it asked');
});
