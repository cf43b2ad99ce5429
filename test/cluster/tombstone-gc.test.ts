// Goal: tombstone GC in a repair (src/cluster/repair.ts): a tombstone past its grace period is
// collected once every other replica answered that it holds no older version of the key; one
// still needed (a replica holds an older live version), one too young, or one whose replica did
// not answer is kept; a dry run collects nothing.
// Method: `repairTenant` against a peer made here (its index, replicas and answers in memory);
// no etcd, no cluster.
import t from 'tap';
import { repairTenant, TOMBSTONE_GRACE_MS, type RepairPeer } from '../../src/cluster/repair.js';
import { DB, type BucketRecord, type TenantRecord } from '../../src/engine/index/schema.js';
import type { IndexStore } from '../../src/engine/index/store.js';
import { componentLogger } from '../../src/util/log.js';

const NOW = Date.now();
/** Sequences are their write's time here (the peer's timeOfSeq is the identity). */
const OLD = NOW - TOMBSTONE_GRACE_MS - 60_000;
const YOUNG = NOW - 60_000;

function peerOf(options: {
  tombs: Array<{ key: string; seq: number }>;
  heads: Record<string, Record<string, number>>;
  unreachable?: string;
}): { peer: RepairPeer; dropped: string[] } {
  const bucket = { id: 7, name: 'b', tenantId: 'acme' } as BucketRecord;
  const dropped: string[] = [];
  const store = {
    range: (db: string) => (db === DB.buckets ? [{ key: Buffer.from('b'), value: bucket }] : []),
  } as unknown as IndexStore;
  const peer: RepairPeer = {
    log: componentLogger('test'),
    store,
    otherReplicas: () => Object.keys(options.heads),
    holders: () => Object.keys(options.heads),
    heads: (address, args) => {
      if (address === options.unreachable) return Promise.reject(new Error('down'));
      const held = options.heads[address] ?? {};
      return Promise.resolve(
        args.keys.map((key) => ({ seq: held[key] ?? 0, deleted: (held[key] ?? 0) < 0 })),
      );
    },
    copyVersion: () => Promise.resolve(0),
    versionsHeld: () => Promise.resolve([]),
    copyOldVersion: () => Promise.resolve(0),
    stampOf: () => 0,
    sendMetadata: () => Promise.resolve(),
    sendDelete: () => Promise.resolve(),
    tombstones: (_bucket, after) => (after === undefined ? options.tombs : []),
    timeOfSeq: (seq) => seq,
    dropTombstones: (_bucket, tombs) => {
      dropped.push(...tombs.map((tomb) => tomb.key));
      return Promise.resolve();
    },
    endTombstones: () => [],
    holdsLive: () => Promise.resolve([]),
    dropEndTombstones: () => Promise.resolve(),
    dropOrphanStamps: () => Promise.resolve(0),
  };
  return { peer, dropped };
}

const tenant = { id: 'acme', num: 1 } as TenantRecord;

t.test('collected only where no replica needs it', async (t) => {
  const { peer, dropped } = peerOf({
    tombs: [
      { key: 'gone-everywhere', seq: OLD },
      { key: 'older-live-on-r2', seq: OLD },
      { key: 'newer-on-r3', seq: OLD },
      { key: 'young', seq: YOUNG },
    ],
    heads: {
      r2: { 'gone-everywhere': OLD, 'older-live-on-r2': OLD - 5, 'newer-on-r3': OLD },
      r3: { 'newer-on-r3': OLD + 5, young: YOUNG },
    },
  });
  const counts = await repairTenant(peer, tenant, undefined, false);
  t.same(dropped.sort(), ['gone-everywhere', 'newer-on-r3']);
  t.equal(counts.tombstonesCollected, 2);
});

t.test('kept when a replica does not answer, and in a dry run', async (t) => {
  const tombs = [{ key: 'k', seq: OLD }];
  const down = peerOf({ tombs, heads: { r2: { k: OLD }, r3: {} }, unreachable: 'r3' });
  t.equal((await repairTenant(down.peer, tenant, undefined, false)).tombstonesCollected, 0);
  t.same(down.dropped, []);
  const dry = peerOf({ tombs, heads: { r2: { k: OLD } } });
  t.equal((await repairTenant(dry.peer, tenant, undefined, true)).tombstonesCollected, 0);
  t.same(dry.dropped, []);
});
