// Cluster-wide control-plane records (docs/cluster.md §6): tenants, accounts, access keys,
// buckets with their global names, and quotas. etcd is their truth; every member's index holds a
// copy, so authentication and authorisation stay local reads.
//
// Runs in a member's engine process, as its `CommandRouter` (engine/command-router.ts):
//
// - A command that changes these records (ROUTED) is first run rolled back (`capture`), against
//   this node's copy, with the ids it would take reserved from etcd's counters (§4). Its rules
//   throw exactly as on a single node. What it read and wrote of the shared families becomes one
//   etcd transaction: every key it read or wrote must be unchanged since the revision this node
//   has applied (`mod < applied + 1`), each counter unchanged since it was read; then the writes
//   and the counters' next values. A lost race waits for this node to apply what beat it and runs
//   the command again, so two nodes creating one bucket name cannot both win.
// - Once etcd has the change, the command waits until this node's copy has applied that revision,
//   then commits its node-local writes (usage, say) with its audit row, and answers: a 2xx means
//   the change is in etcd and visible on this node.
// - The mirror applies every change under `shared/` from a watch, with the last applied revision
//   in `meta` in the same commit. At start it watches from that revision; with none, or once a
//   watch fails (etcd compacted past it, say), it reads the whole prefix at one revision and
//   replaces its copy.
//
// Records go to etcd as msgpack `{v, r}` under `shared/<db>/<hex of the index key>`. Sealed
// fields cannot travel sealed under a node's master key (each node has its own), so the tenant
// data key and the access-key secret are resealed under the cluster's control key, derived from
// the cluster secret, and sealed again under the local master key when applied.

import { pack, unpack } from 'msgpackr';
import type { IWatchResponse, Watcher } from 'etcd3';
import assert from 'node:assert/strict';
import {
  META_CLUSTER_REVISION,
  type CommandRouter,
  type LocalEngine,
  type RecordWrite,
} from '../engine/command-router.js';
import type { StoreAccess } from '../engine/index/store.js';
import {
  DB,
  META_COUNTERS,
  type AccessKeyRecord,
  type BucketNotificationsRecord,
  type Counters,
  type DbName,
  type TenantRecord,
} from '../engine/index/schema.js';
import type { AuditInput } from '../engine/ops/audit.js';
import { secretAad } from '../engine/ops/notifications.js';
import {
  deriveKey,
  openSecret,
  sealSecret,
  unwrapTenantKey,
  wrapTenantKey,
  PURPOSE_SECRET_SEAL,
} from '../security/keys.js';
import { Unavailable, FormatError } from '../util/errors.js';
import type { Logger } from '../util/log.js';
import { clusterPaths, readClusterSecret, readNodeState } from './node-state.js';
import { Registry } from './registry.js';
import { Replicator } from './replication.js';
import { CommandReplicator, REPLICATED_COMMANDS } from './replicated-commands.js';
import { FORWARDED_COMMANDS, Forwarder } from './forwarding.js';
import { ListingFreshener } from './listing.js';
import { VersionsLister } from './versions-listing.js';
import { UploadsLister } from './uploads-listing.js';
import { EtcdClusterView } from './cluster-view.js';
import { startDataTransport } from './data-transport.js';

export const SHARED_PREFIX = 'shared/';
const SHARED_RECORD_VERSION = 1;
/** The index families that are cluster-wide. */
export const SHARED_DBS: ReadonlySet<DbName> = new Set<DbName>([
  DB.tenants,
  DB.accounts,
  DB.accessKeys,
  DB.buckets,
  DB.bucketNames,
  DB.quotas,
  DB.notifications,
]);
/** The engine commands that write them; every other command stays node-local. */
export const ROUTED: ReadonlySet<string> = new Set([
  'createTenant',
  'createAccount',
  'createAccessKey',
  'rotateAccessKey',
  'revokeAccessKey',
  'disableTenant',
  'deleteTenant',
  'setTenantQuota',
  'clearTenantQuota',
  'createKmsKey',
  'deleteKmsKey',
  'createBucket',
  'deleteBucket',
  'setVersioning',
  'setBucketPolicy',
  'putBucketCors',
  'deleteBucketCors',
  'putBucketLifecycle',
  'deleteBucketLifecycle',
  'setObjectLockConfig',
  'setBucketTags',
  'setBucketEncryption',
  'putBucketNotifications',
  'deleteBucketNotifications',
]);
/** The data-plane commands a member replicates (replication.ts, replicated-commands.ts). */
const REPLICATED: ReadonlySet<string> = new Set([
  'putObject',
  'deleteObject',
  'clusterFreshen',
  'clusterFreshenList',
  'clusterRepair',
  'clusterReclaim',
  'clusterRepairChunk',
  'clusterListVersions',
  'clusterListUploads',
  'clusterListParts',
  'clusterEnsureUpload',
  ...REPLICATED_COMMANDS,
]);
/** A member that starts catches up this long after (its listeners are up by then). */
const CATCH_UP_DELAY_MS = 5_000;
/** The etcd counter each allocating command takes its id from (§4). */
const COUNTER_OF: Readonly<Record<string, { name: keyof Counters; key: string }>> = {
  createTenant: { name: 'nextTenantNum', key: 'ids/tenantNum' },
  createBucket: { name: 'nextBucketId', key: 'ids/bucketId' },
};
const PURPOSE_CONTROL = 'cluster-control-v1';
/** Tries of one command against writers on other nodes before it answers 503. */
const ATTEMPTS_MAX = 8;
/** The longest a command waits for this node to apply a revision. */
export const APPLY_WAIT_MS_MAX = 10_000;
const RETRY_MS_MAX = 5_000;

interface SealKeys {
  readonly master: Buffer;
  readonly control: Buffer;
}

export function sharedKey(db: DbName, key: Buffer): string {
  return `${SHARED_PREFIX}${db}/${key.toString('hex')}`;
}

function parseSharedKey(name: string): { db: DbName; key: Buffer } {
  const rest = name.slice(name.indexOf(SHARED_PREFIX) + SHARED_PREFIX.length);
  const slash = rest.indexOf('/');
  const db = rest.slice(0, slash) as DbName;
  if (slash < 0 || !SHARED_DBS.has(db)) throw FormatError(`not a shared record key: ${name}`);
  return { db, key: Buffer.from(rest.slice(slash + 1), 'hex') };
}

/** A record as etcd holds it: sealed fields resealed under the cluster's control key. */
export function encodeShared(db: DbName, value: object, keys: SealKeys): Buffer {
  let record = value as Record<string, unknown>;
  if (db === DB.tenants) {
    const tenant = value as TenantRecord;
    if (tenant.wrappedKey.length > 0) {
      const dataKey = unwrapTenantKey(keys.master, tenant.id, tenant.wrappedKey);
      record = { ...tenant, wrappedKey: sealSecret(keys.control, dataKey, `tenant:${tenant.id}`) };
    }
  } else if (db === DB.accessKeys) {
    const key = value as AccessKeyRecord;
    if (key.sealedSecret.length > 0) {
      const aad = `access-key:${key.accessKeyId}`;
      const secret = openSecret(deriveKey(keys.master, PURPOSE_SECRET_SEAL), key.sealedSecret, aad);
      record = { ...key, sealedSecret: sealSecret(keys.control, secret, aad) };
    }
  } else if (db === DB.notifications) {
    record = resealWebhooks(value as BucketNotificationsRecord, (sealed, aad) =>
      sealSecret(
        keys.control,
        openSecret(deriveKey(keys.master, PURPOSE_SECRET_SEAL), sealed, aad),
        aad,
      ),
    );
  }
  return pack({ v: SHARED_RECORD_VERSION, r: record });
}

/** A notifications record with each config's signing secret sealed again by `reseal`. */
function resealWebhooks(
  record: BucketNotificationsRecord,
  reseal: (sealed: Buffer, aad: string) => Buffer,
): Record<string, unknown> {
  return {
    ...record,
    configs: record.configs.map((config) => ({
      ...config,
      sealedSecret: reseal(
        Buffer.from(config.sealedSecret),
        secretAad(record.tenantId, record.bucketId, config.id),
      ),
    })),
  };
}

/** The record as this node's index holds it: sealed fields sealed under its master key. */
export function decodeShared(db: DbName, bytes: Buffer, keys: SealKeys): object {
  const decoded = unpack(bytes) as { v?: unknown; r?: unknown };
  if (decoded.v !== SHARED_RECORD_VERSION || typeof decoded.r !== 'object' || decoded.r === null)
    throw FormatError(`shared record of ${db} has an unknown version ${String(decoded.v)}`);
  const record = decoded.r as Record<string, unknown>;
  if (db === DB.tenants) {
    const tenant = record as unknown as TenantRecord;
    if (tenant.wrappedKey.length === 0) return tenant;
    const dataKey = openSecret(keys.control, tenant.wrappedKey, `tenant:${tenant.id}`);
    return { ...tenant, wrappedKey: wrapTenantKey(keys.master, tenant.id, dataKey) };
  }
  if (db === DB.notifications)
    return resealWebhooks(record as unknown as BucketNotificationsRecord, (sealed, aad) =>
      sealSecret(
        deriveKey(keys.master, PURPOSE_SECRET_SEAL),
        openSecret(keys.control, sealed, aad),
        aad,
      ),
    );
  if (db === DB.accessKeys) {
    const key = record as unknown as AccessKeyRecord;
    if (key.sealedSecret.length === 0) return key;
    const aad = `access-key:${key.accessKeyId}`;
    const secret = openSecret(keys.control, key.sealedSecret, aad);
    return {
      ...key,
      sealedSecret: sealSecret(deriveKey(keys.master, PURPOSE_SECRET_SEAL), secret, aad),
    };
  }
  return record;
}

/** The last write of each record, in order of first write. */
function lastWrites(accesses: readonly StoreAccess[]): RecordWrite[] {
  const byKey = new Map<string, RecordWrite>();
  for (const access of accesses) {
    if (!access.write) continue;
    const id = `${access.db}\0${access.key.toString('latin1')}`;
    byKey.delete(id);
    byKey.set(id, { db: access.db, key: access.key, value: access.value });
  }
  return [...byKey.values()];
}

/** This node's copy of the shared records, kept up to date from an etcd watch. */
export class SharedMirror {
  applied = 0;
  private readonly waiters = new Set<{ revision: number; wake: () => void }>();
  private watcher: Watcher | undefined;
  private queue: Promise<void> = Promise.resolve();
  private stopped = false;
  private loaded: Promise<void>;
  private markLoaded!: () => void;

  constructor(
    private readonly registry: Registry,
    private readonly local: LocalEngine,
    private readonly keys: SealKeys,
    private readonly log: Logger,
  ) {
    this.loaded = new Promise((resolve) => (this.markLoaded = resolve));
  }

  start(): void {
    const stored = this.local.store.get<{ revision: number }>(DB.meta, META_CLUSTER_REVISION);
    this.applied = stored?.revision ?? 0;
    void this.follow(this.applied === 0);
  }

  /** Resolves once this node has applied `revision` (or a later one). */
  async waitFor(revision: number): Promise<void> {
    await this.loaded;
    if (this.applied >= revision) return;
    await new Promise<void>((resolve, reject) => {
      const waiter = { revision, wake: () => resolve() };
      const timer = setTimeout(() => {
        this.waiters.delete(waiter);
        reject(Unavailable(`this node did not apply cluster revision ${revision} in time`));
      }, APPLY_WAIT_MS_MAX);
      waiter.wake = () => {
        clearTimeout(timer);
        resolve();
      };
      this.waiters.add(waiter);
    });
  }

  ready(): Promise<void> {
    return this.loaded;
  }

  /** Read through a call: `stopped` changes while a loop awaits. */
  private isStopped(): boolean {
    return this.stopped;
  }

  /** Loads everything when asked to (or when the watch cannot resume), then watches. */
  private async follow(reload: boolean): Promise<void> {
    for (let delay = 100; !this.stopped; delay = Math.min(delay * 2, RETRY_MS_MAX)) {
      try {
        if (reload) await this.reload();
        this.markLoaded();
        await this.watch();
        return;
      } catch (error) {
        if (this.isStopped()) return;
        this.log.warn({ err: error }, 'shared records not followed yet; retrying');
        reload = true;
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }

  /** Replaces this node's copy with etcd's, read at one revision. */
  private async reload(): Promise<void> {
    const response = await this.registry.client
      .getAll()
      .prefix(this.registry.key(SHARED_PREFIX))
      .exec();
    const revision = Number(response.header.revision);
    const writes: RecordWrite[] = [];
    const present = new Set<string>();
    for (const kv of response.kvs) {
      const { db, key } = parseSharedKey(kv.key.toString());
      present.add(`${db}\0${key.toString('hex')}`);
      writes.push({ db, key, value: decodeShared(db, kv.value, this.keys) });
    }
    for (const db of SHARED_DBS)
      for (const { key } of this.local.store.range(db, {}))
        if (!present.has(`${db}\0${key.toString('hex')}`)) writes.push({ db, key });
    await this.apply(writes, revision);
    this.log.info({ records: response.kvs.length, revision }, 'shared records loaded');
  }

  private async watch(): Promise<void> {
    const watcher = await this.registry.client
      .watch()
      .prefix(this.registry.key(SHARED_PREFIX))
      .startRevision(String(this.applied + 1))
      .create();
    this.watcher = watcher;
    watcher.on('data', (response: IWatchResponse) => {
      this.queue = this.queue.then(() => this.applyEvents(response));
    });
    watcher.on('error', (error: unknown) => {
      if (this.stopped || this.watcher !== watcher) return;
      this.log.warn({ err: error }, 'shared records watch failed; reloading');
      this.watcher = undefined;
      void watcher.cancel().catch(() => undefined);
      this.queue = this.queue.then(() => this.follow(true));
    });
  }

  private async applyEvents(response: IWatchResponse): Promise<void> {
    if (this.stopped || response.events.length === 0) return;
    let revision = this.applied;
    const writes = response.events.map((event) => {
      const kv = event.kv;
      revision = Math.max(revision, Number(kv.mod_revision));
      const { db, key } = parseSharedKey(kv.key.toString());
      return event.type === 'Put'
        ? { db, key, value: decodeShared(db, kv.value, this.keys) }
        : { db, key };
    });
    for (let delay = 100; !this.isStopped(); delay = Math.min(delay * 2, RETRY_MS_MAX)) {
      try {
        await this.apply(writes, revision);
        return;
      } catch (error) {
        this.log.warn({ err: error, revision }, 'shared records not applied yet; retrying');
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }

  private async apply(writes: RecordWrite[], revision: number): Promise<void> {
    assert.ok(Number.isSafeInteger(revision), 'etcd revision is a safe integer');
    if (revision < this.applied) return;
    await this.local.commit([
      ...writes,
      { db: DB.meta, key: META_CLUSTER_REVISION, value: { revision } },
    ]);
    this.applied = revision;
    for (const waiter of this.waiters)
      if (waiter.revision <= revision) {
        this.waiters.delete(waiter);
        waiter.wake();
      }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.markLoaded();
    await this.watcher?.cancel().catch(() => undefined);
  }
}

/** A member's router: runs ROUTED commands through etcd (see the header). */
export class SharedStateRouter implements CommandRouter {
  constructor(
    readonly stateKey: string,
    private readonly registry: Registry,
    private readonly local: LocalEngine,
    private readonly mirror: SharedMirror,
    private readonly keys: SealKeys,
    private readonly data: {
      replicator: Replicator;
      commands: CommandReplicator;
      forwarder: Forwarder;
      listings: ListingFreshener;
      versions: VersionsLister;
      uploads: UploadsLister;
      view: EtcdClusterView;
      transport: { close(): Promise<void> };
    },
  ) {}

  handles(name: string): boolean {
    return ROUTED.has(name) || REPLICATED.has(name);
  }

  async run(name: string, args: unknown): Promise<unknown> {
    if (REPLICATED.has(name)) return this.replicate(name, args as Record<string, unknown>);
    // A dry run writes only its audit row: nothing to agree on.
    if ((args as { dryRun?: unknown } | undefined)?.dryRun === true)
      return this.local.runLocal(name, args);
    await this.mirror.ready();
    for (let attempt = 0; attempt < ATTEMPTS_MAX; attempt += 1) {
      const counter = await this.readCounter(name);
      const reserved: Partial<Counters> = counter ? { [counter.name]: counter.value } : {};
      // The revision the capture's reads are at least as new as: read before the capture, since
      // the mirror may apply more while it runs, and a compare against that later revision would
      // pass a change (another tenant's bucket of the same name, say) the capture never saw.
      const applied = this.mirror.applied;
      const { result, accesses } = await this.local.capture(name, args, reserved);
      const shared = accesses.filter((access) => SHARED_DBS.has(access.db));
      const writes = lastWrites(shared);
      if (writes.length === 0) return this.local.runLocal(name, args);
      const client = this.registry.client;
      const compared = [...new Set(shared.map((access) => sharedKey(access.db, access.key)))];
      const [first, ...others] = compared.map((key) => this.registry.key(key));
      let txn = client.if(first as string, 'Mod', '<', applied + 1);
      for (const key of others) txn = txn.and(key, 'Mod', '<', applied + 1);
      if (counter) txn = txn.and(counter.etcdKey, 'Mod', '==', counter.modRevision);
      const response = await txn
        .then(
          ...writes.map((write) => {
            const key = this.registry.key(sharedKey(write.db, write.key));
            if (write.value === undefined) return client.delete().key(key);
            assert.ok(!Buffer.isBuffer(write.value), 'shared records are objects');
            return client.put(key).value(encodeShared(write.db, write.value, this.keys));
          }),
          ...(counter ? [client.put(counter.etcdKey).value(String(counter.value + 1))] : []),
        )
        .commit();
      if (response.succeeded) {
        await this.mirror.waitFor(Number(response.header.revision));
        const localWrites = lastWrites(
          accesses.filter((access) => !SHARED_DBS.has(access.db) && access.db !== DB.meta),
        );
        const row = (args as { audit?: AuditInput } | undefined)?.audit;
        await this.local.commit(localWrites, row);
        return result;
      }
      await this.mirror.waitFor(await this.newestOf(compared));
    }
    throw Unavailable(`${name} lost to concurrent changes on other nodes ${ATTEMPTS_MAX} times`);
  }

  /** The counter an allocating command takes its id from, with the revision it was read at. */
  private async readCounter(
    name: string,
  ): Promise<
    { name: keyof Counters; etcdKey: string; value: number; modRevision: string } | undefined
  > {
    const counter = COUNTER_OF[name];
    if (counter === undefined) return undefined;
    const etcdKey = this.registry.key(counter.key);
    const response = await this.registry.client.get(etcdKey).exec();
    const kv = response.kvs[0];
    if (kv === undefined) {
      // The first id: above every one this node took while it was a single node.
      const local = this.local.store.get<Counters>(DB.meta, META_COUNTERS);
      return { name: counter.name, etcdKey, value: local?.[counter.name] ?? 1, modRevision: '0' };
    }
    const value = Number(kv.value.toString());
    assert.ok(Number.isSafeInteger(value) && value > 0, `etcd counter ${counter.key}`);
    return { name: counter.name, etcdKey, value, modRevision: kv.mod_revision };
  }

  /** The newest revision among `keys` (what beat this node's transaction). */
  private async newestOf(keys: readonly string[]): Promise<number> {
    let newest = 0;
    for (const key of keys) {
      const response = await this.registry.client.get(this.registry.key(key)).exec();
      for (const kv of response.kvs) newest = Math.max(newest, Number(kv.mod_revision));
    }
    return newest;
  }

  private async replicate(name: string, args: Record<string, unknown>): Promise<unknown> {
    const { replicator, commands, listings } = this.data;
    if (FORWARDED_COMMANDS.has(name)) return this.data.forwarder.run(name, args);
    if (name === 'clusterEnsureUpload') {
      await commands.ensureUploadOf(args);
      return null;
    }
    if (name === 'clusterFreshenList') {
      await listings.freshen(args);
      return null;
    }
    if (name === 'clusterReclaim') return replicator.reclaimOn(String(args['nodeId']));
    if (name === 'clusterListVersions') return this.data.versions.list(args);
    if (name === 'clusterListUploads') return this.data.uploads.uploads(args);
    if (name === 'clusterListParts') return this.data.uploads.parts(args);
    if (name === 'clusterRepairChunk')
      return replicator.repairChunkOf(args as { tenantNum: number; chunkId: string });
    if (name === 'clusterRepair')
      return replicator.repair(
        args as {
          tenantId: string;
          bucket?: string;
          dryRun: boolean;
          corrupt?: string[];
          reclaim?: boolean;
        },
      );
    await replicator.freshen(args as { tenantId: string; bucket: string; key: string });
    return null;
  }

  /** A write run here as its partition's writer (forwarding.ts sends others to the leader). */
  coordinate(name: string, args: Record<string, unknown>): Promise<unknown> {
    const { replicator, commands } = this.data;
    if (name === 'putObject') return replicator.put(args);
    if (name === 'deleteObject') return replicator.delete(args);
    assert.ok(REPLICATED_COMMANDS.has(name), `${name} is a replicated command`);
    return commands.run(name, args);
  }

  private closed = false;

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.data.transport.close();
    this.data.view.close();
    await this.data.replicator.close();
    await this.mirror.stop();
    this.registry.close();
  }
}

/**
 * The router of this data directory's engine: none for a single node or one that waits to be
 * joined; `previous` again while the node's cluster state is unchanged.
 */
export async function openSharedState(
  dataDir: string,
  local: LocalEngine,
  previous: CommandRouter | undefined,
  log: Logger,
): Promise<CommandRouter | undefined> {
  const paths = clusterPaths(dataDir);
  const node = await readNodeState(paths);
  if (node?.state !== 'member' || node.clusterId === undefined || node.etcd === undefined)
    return undefined;
  const stateKey = JSON.stringify([node.clusterId, node.etcd.endpoints]);
  if (previous instanceof SharedStateRouter && previous.stateKey === stateKey) return previous;
  const keys = {
    master: local.masterKey,
    control: deriveKey(await readClusterSecret(paths), PURPOSE_CONTROL),
  };
  const secret = await readClusterSecret(paths);
  const registry = await Registry.connect(node.etcd.endpoints, node.clusterId);
  const mirror = new SharedMirror(registry, local, keys, log);
  mirror.start();
  const identityKey = Buffer.from('clusterNode');
  const view = await EtcdClusterView.open({
    registry,
    nodeId: node.nodeId,
    saved: local.store.get(DB.meta, identityKey),
    save: (identity) => local.commit([{ db: DB.meta, key: identityKey, value: identity }]),
    log,
    layoutPollMs: local.settings.duration('cluster.layout_poll'),
  });
  const replicator = new Replicator(local, view, secret, log);
  const commands = new CommandReplicator(replicator, local);
  // The router that runs coordinated writes is made below; the forwarder reaches it through this.
  const made: { router?: SharedStateRouter } = {};
  const forwarder = new Forwarder(
    replicator,
    view,
    async (name, args) => {
      if (made.router === undefined) throw Unavailable('this node is starting; retry');
      return made.router.coordinate(name, args);
    },
    log,
    local.metrics,
  );
  const listings = new ListingFreshener(replicator, local);
  const versions = new VersionsLister(replicator, local);
  const uploads = new UploadsLister(replicator, local);
  // The previous router's listener must be closed before this one binds the same port.
  await previous?.close();
  const transport = await startDataTransport({
    socketPath: paths.dataSocket,
    secret,
    handlers: new Map([
      ...replicator.handlers(),
      ...commands.handlers(),
      ...forwarder.handlers(),
      ...listings.handlers(),
      ...versions.handlers(),
      ...uploads.handlers(),
    ]),
    log,
  });
  setTimeout(() => {
    replicator.catchUp().catch((error: unknown) => log.warn({ err: error }, 'catch-up failed'));
  }, CATCH_UP_DELAY_MS).unref();
  const router = new SharedStateRouter(stateKey, registry, local, mirror, keys, {
    replicator,
    commands,
    forwarder,
    listings,
    versions,
    uploads,
    view,
    transport,
  });
  made.router = router;
  return router;
}
