// Goal: repair of every version (src/cluster/repair.ts `repairVersions`): in a versioned bucket,
// each version a replica lacks (a non-current one, a delete marker) is copied to it with its own
// version, and only those; a replica that does not answer is counted and skipped; a dry run
// counts without sending; an unversioned bucket is not scanned for versions.
// Method: `repairTenant` against a peer made here (its index, replicas and answers in memory);
// no etcd, no cluster.
import t from 'tap';
import { repairTenant, type RepairPeer } from '../../src/cluster/repair.js';
import {
  DB,
  type BucketRecord,
  type ObjectVersionRecord,
  type TenantRecord,
} from '../../src/engine/index/schema.js';
import type { IndexStore } from '../../src/engine/index/store.js';
import { componentLogger } from '../../src/util/log.js';

const tenant = { id: 'acme', num: 1 } as TenantRecord;

function versionOf(key: string, seq: number, deleteMarker = false): ObjectVersionRecord {
  return { key, seq, versionId: `v${seq}`, deleteMarker } as unknown as ObjectVersionRecord;
}

function peerOf(options: {
  versioning: BucketRecord['versioning'];
  versions: ObjectVersionRecord[];
  /** Per replica, the sequences it holds; undefined: it does not answer. */
  held: Record<string, number[] | undefined>;
}): { peer: RepairPeer; copied: Array<{ address: string; seq: number }>; asked: string[] } {
  const bucket = { id: 7, name: 'b', tenantId: 'acme', versioning: options.versioning };
  const copied: Array<{ address: string; seq: number }> = [];
  const asked: string[] = [];
  let served = false;
  const store = {
    range: (db: string) => {
      if (db === DB.buckets) return [{ key: Buffer.from('b'), value: bucket }];
      if (db !== DB.versions || served) return [];
      served = true;
      return options.versions.map((value) => ({ key: Buffer.from(`${value.seq}`), value }));
    },
  } as unknown as IndexStore;
  const peer: RepairPeer = {
    log: componentLogger('test'),
    store,
    otherReplicas: () => Object.keys(options.held),
    holders: () => Object.keys(options.held),
    heads: (_address, args) => Promise.resolve(args.keys.map(() => ({ seq: 0, deleted: false }))),
    versionsHeld: (address, args) => {
      asked.push(address);
      const held = options.held[address];
      if (held === undefined) return Promise.reject(new Error('down'));
      return Promise.resolve(args.items.map((item) => held.includes(item.seq)));
    },
    copyOldVersion: (address, _tenant, _bucket, version) => {
      copied.push({ address, seq: version.seq });
      return Promise.resolve(version.deleteMarker === true ? 0 : 100);
    },
    copyVersion: () => Promise.resolve(0),
    stampOf: () => 0,
    sendMetadata: () => Promise.resolve(),
    sendDelete: () => Promise.resolve(),
    tombstones: () => [],
    timeOfSeq: (seq) => seq,
    dropTombstones: () => Promise.resolve(),
    endTombstones: () => [],
    holdsLive: () => Promise.resolve([]),
    dropEndTombstones: () => Promise.resolve(),
    dropOrphanStamps: () => Promise.resolve(0),
  };
  return { peer, copied, asked };
}

const versions = [versionOf('a', 30), versionOf('a', 20, true), versionOf('a', 10)];

t.test('each missing version is copied to the replica that lacks it', async (t) => {
  const { peer, copied } = peerOf({
    versioning: 'Enabled',
    versions,
    held: { r2: [30], r3: [30, 20, 10], r4: undefined },
  });
  const counts = await repairTenant(peer, tenant, undefined, false);
  t.same(copied, [
    { address: 'r2', seq: 20 },
    { address: 'r2', seq: 10 },
  ]);
  t.match(counts, { copiesSent: 1, deletesSent: 1, bytesSent: 100, replicasUnreachable: 1 });
});

t.test('a dry run counts and sends nothing', async (t) => {
  const { peer, copied } = peerOf({ versioning: 'Suspended', versions, held: { r2: [] } });
  const counts = await repairTenant(peer, tenant, undefined, true);
  t.same(copied, []);
  t.match(counts, { copiesSent: 2, deletesSent: 1, bytesSent: 0 });
});

t.test('an unversioned bucket is not scanned for versions', async (t) => {
  const { peer, asked } = peerOf({ versioning: 'Unversioned', versions, held: { r2: [] } });
  await repairTenant(peer, tenant, undefined, false);
  t.same(asked, []);
});
