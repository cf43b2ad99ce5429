// Goal: repair's GC of the tombstones of versions deleted by id and of uploads ended, and of the
// stamps of versions gone (src/cluster/repair.ts `collectEndTombstones`), and its copy of a delete
// marker: a tombstone past its grace period is collected once every other replica answered that
// it holds no live copy of what it ended; one a replica still holds (the stale replica that could
// bring it back), one a member that is no replica now still holds (an old replica before its
// reclaim), one too young, or one whose replica did not answer is kept, so a collected
// tombstone leaves no replica that could resurrect what it ended; a dry run collects nothing. A
// current delete marker a replica lacks is sent to it as a replicated delete with its sequence
// and its time (the marker's LastModified on the replica is the original one).
// Method: `repairTenant` against a peer made here (its index, replicas and answers in memory);
// no etcd, no cluster. The collected tombstones are removed from the peer's own list, and a
// second repair shows that what a replica still holds keeps its tombstone until it is gone there.
import t from 'tap';
import {
  repairTenant,
  TOMBSTONE_GRACE_MS,
  type EndTombstone,
  type RepairPeer,
} from '../../src/cluster/repair.js';
import {
  DB,
  prefixRange,
  type BucketRecord,
  type ObjectVersionRecord,
  type TenantRecord,
} from '../../src/engine/index/schema.js';
import type { IndexStore } from '../../src/engine/index/store.js';
import { componentLogger } from '../../src/util/log.js';

const NOW = Date.now();
const OLD = NOW - TOMBSTONE_GRACE_MS - 60_000;
const YOUNG = NOW - 60_000;
const tenant = { id: 'acme', num: 1 } as TenantRecord;
const bucket = { id: 7, name: 'b', tenantId: 'acme' } as BucketRecord;

/** A peer whose replicas hold live copies of the ids in `live` (by replica address). */
function peerOf(options: {
  tombs: EndTombstone[];
  live: Record<string, string[]>;
  unreachable?: string;
  current?: ObjectVersionRecord[];
  heads?: Record<string, number>;
  orphanStamps?: number;
  /** Live copies on members that are no replica now (an old replica, a read's copy). */
  elsewhere?: Record<string, string[]>;
}) {
  const state = {
    tombs: [...options.tombs],
    live: options.live,
    deletes: [] as Array<{ address: string; key: string; seq: number; time: number }>,
    stampsDropped: 0,
  };
  const store = {
    range: (db: string, range: { start?: Buffer }) => {
      if (db === DB.buckets) return [{ key: Buffer.from('b'), value: bucket }];
      // One page of current versions: the scan's first.
      if (db === DB.objects && range.start?.equals(prefixRange(bucket.id, '').start) === true)
        return (options.current ?? []).map((value) => ({ key: Buffer.from(value.key), value }));
      return [];
    },
  } as unknown as IndexStore;
  const peer: RepairPeer = {
    log: componentLogger('test'),
    store,
    otherReplicas: () => Object.keys(state.live),
    holders: () => [...Object.keys(state.live), ...Object.keys(options.elsewhere ?? {})],
    heads: (_address, args) =>
      Promise.resolve(args.keys.map((key) => ({ seq: options.heads?.[key] ?? 0, deleted: false }))),
    copyVersion: () => Promise.resolve(0),
    versionsHeld: () => Promise.resolve([]),
    copyOldVersion: () => Promise.resolve(0),
    stampOf: () => 0,
    sendMetadata: () => Promise.resolve(),
    sendDelete: (address, _bucket, key, seq, time) => {
      state.deletes.push({ address, key, seq, time });
      return Promise.resolve();
    },
    tombstones: () => [],
    timeOfSeq: (seq) => seq,
    dropTombstones: () => Promise.resolve(),
    endTombstones: (_bucket, kind, after) =>
      after === undefined ? state.tombs.filter((tomb) => tomb.kind === kind) : [],
    holdsLive: (address, args) => {
      if (address === options.unreachable) return Promise.reject(new Error('down'));
      const held = state.live[address] ?? options.elsewhere?.[address] ?? [];
      return Promise.resolve(args.items.map((item) => held.includes(item.id)));
    },
    dropEndTombstones: (_bucket, tombs) => {
      state.tombs = state.tombs.filter((tomb) => !tombs.some((gone) => gone.at === tomb.at));
      return Promise.resolve();
    },
    dropOrphanStamps: (_bucket, before) => {
      assert(before <= NOW - TOMBSTONE_GRACE_MS + 5_000, 'stamps younger than the grace stay');
      state.stampsDropped += options.orphanStamps ?? 0;
      return Promise.resolve(options.orphanStamps ?? 0);
    },
  };
  return { peer, state };
}

function assert(condition: boolean, message: string): void {
  if (!condition) throw new Error(message);
}

const version = (id: string, time = OLD): EndTombstone => ({
  kind: 'version',
  at: Buffer.from(id).toString('hex'),
  time,
  id,
  key: `k-${id}`,
});
const upload = (id: string, time = OLD): EndTombstone => ({
  kind: 'upload',
  at: Buffer.from(id).toString('hex'),
  time,
  id,
  key: `u-${id}`,
});

t.test('collected only once no replica holds what it ended', async (t) => {
  const { peer, state } = peerOf({
    tombs: [version('v-gone'), version('v-stale-on-r3'), version('v-young', YOUNG)],
    live: { r2: [], r3: ['v-stale-on-r3'] },
  });
  const counts = await repairTenant(peer, tenant, undefined, false);
  t.equal(counts.tombstonesCollected, 1, 'one collected');
  t.same(
    state.tombs.map((tomb) => tomb.id),
    ['v-stale-on-r3', 'v-young'],
    'kept: one a stale replica still holds (it could bring the version back), one too young',
  );
  // The stale replica drops its copy (it applied the delete): the tombstone may go now.
  state.live['r3'] = [];
  t.equal((await repairTenant(peer, tenant, undefined, false)).tombstonesCollected, 1);
  t.same(
    state.tombs.map((tomb) => tomb.id),
    ['v-young'],
    'collected once no replica holds it',
  );
});

t.test('kept while a member that is no replica now holds what it ended', async (t) => {
  // r4 was a replica under the previous layout and has not reclaimed its copies yet.
  const { peer, state } = peerOf({
    tombs: [version('v-on-r4'), upload('cc01')],
    live: { r2: [], r3: [] },
    elsewhere: { r4: ['v-on-r4', 'cc01'] },
  });
  t.equal((await repairTenant(peer, tenant, undefined, false)).tombstonesCollected, 0);
  t.equal(state.tombs.length, 2, 'both kept: r4 could bring them back');
  const down = peerOf({
    tombs: [version('v1')],
    live: { r2: [] },
    elsewhere: { r4: [] },
    unreachable: 'r4',
  });
  t.equal((await repairTenant(down.peer, tenant, undefined, false)).tombstonesCollected, 0);
  t.equal(down.state.tombs.length, 1, 'kept while that member does not answer');
});

t.test('upload tombstones: kept while a replica holds the upload open', async (t) => {
  const { peer, state } = peerOf({
    tombs: [upload('aa01'), upload('aa02')],
    live: { r2: ['aa02'], r3: [] },
  });
  t.equal((await repairTenant(peer, tenant, undefined, false)).tombstonesCollected, 1);
  t.same(
    state.tombs.map((tomb) => tomb.id),
    ['aa02'],
    'the upload still open on r2 keeps its tombstone',
  );
});

t.test('kept when a replica does not answer, and in a dry run', async (t) => {
  const down = peerOf({
    tombs: [version('v1'), upload('bb01')],
    live: { r2: [], r3: [] },
    unreachable: 'r3',
  });
  t.equal((await repairTenant(down.peer, tenant, undefined, false)).tombstonesCollected, 0);
  t.equal(down.state.tombs.length, 2, 'both kept');
  const dry = peerOf({ tombs: [version('v1')], live: { r2: [] }, orphanStamps: 3 });
  t.equal((await repairTenant(dry.peer, tenant, undefined, true)).tombstonesCollected, 0);
  t.equal(dry.state.tombs.length, 1, 'a dry run collects nothing');
  t.equal(dry.state.stampsDropped, 0, 'nor stamps');
});

t.test('stamps of versions gone are counted with the tombstones', async (t) => {
  const { peer } = peerOf({ tombs: [], live: { r2: [] }, orphanStamps: 2 });
  t.equal((await repairTenant(peer, tenant, undefined, false)).tombstonesCollected, 2);
});

t.test('a current delete marker a replica lacks is sent as a delete', async (t) => {
  const made = OLD;
  const marker = {
    key: 'm',
    seq: 900,
    deleteMarker: true,
    lastModified: made,
  } as ObjectVersionRecord;
  const held = { key: 'same', seq: 500, deleteMarker: true } as ObjectVersionRecord;
  const { peer, state } = peerOf({
    tombs: [],
    live: { r2: [] },
    current: [marker, held],
    heads: { m: 400, same: 500 },
  });
  const counts = await repairTenant(peer, tenant, undefined, false);
  t.same(
    state.deletes,
    [{ address: 'r2', key: 'm', seq: 900, time: made }],
    'only the missing one is sent, with the time the marker was made, not the repair time',
  );
  t.equal(counts.deletesSent, 1);
  t.equal(counts.copiesSent, 0, 'not counted as a copy');
});
