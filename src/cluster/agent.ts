// The cluster agent: the part of `lightwell serve` that makes a node a cluster member
// (docs/cluster.md §1–§3, §7). It runs in the supervisor, before the engine, gateways and admin
// process start, and only in cluster mode (`cluster.listen` set), so a single node never loads
// it, etcd's client or gRPC.
//
// - A new node with `--cluster.bootstrap` makes the cluster: its id, secret, etcd member (or the
//   external etcd's records), and its own member record as `voter`.
// - A new node without it waits to be joined: it makes a join secret and serves `hello` and
//   `join` on the node-to-node transport, signed with that secret. `join` carries the cluster
//   id, the cluster secret (sealed under the join secret) and how to reach etcd; the node then
//   starts its etcd member (`--initial-cluster-state existing`: the joining admin has already
//   added it as a learner) and records that it is a member.
// - A member starts its etcd member (or connects to the external etcd), keeps its liveness lease,
//   and watches its own record: once it reads `removed`, its etcd member is stopped for good.
//
// Order of writes in a join, so that a crash at any point can be repeated: the cluster secret,
// then `node.json` (now `member`), then the join secret is deleted.

import { randomBytes } from 'node:crypto';
import type { Lease } from 'etcd3';
import { dirname } from 'node:path';
import { RELEASE, dataDirPaths } from '../engine/data-dir.js';
import { startControlMirror, type ControlMirror } from './control-mirror.js';
import { EngineClient } from '../engine/protocol.js';
import { BadRequest, Conflict } from '../util/errors.js';
import type { Logger } from '../util/log.js';
import type { Settings } from '../util/config.js';
import {
  clusterPaths,
  validateNodeId,
  readNodeState,
  writeNodeState,
  readClusterSecret,
  writeClusterSecret,
  ensureJoinSecret,
  joinSecretBytes,
  dropJoinSecret,
  SECRET_BYTES,
  type ClusterPaths,
  type NodeState,
  type EtcdPlacement,
} from './node-state.js';
import { EtcdMember } from './etcd-member.js';
import { Registry, PARTITIONS, RECORD_VERSION, type MemberRecord } from './registry.js';
import { dataForward } from './data-transport.js';
import { startTransport, type TransportRoute, type TransportServer } from './transport.js';
import { openWithJoinSecret } from './signing.js';
import { waitForEtcd } from './etcd-ready.js';
import { clusterEndpoints, type ClusterAddresses } from './addresses.js';

/** Member states whose capacity a layout weighs (layout.ts): the storage members. */
const STORAGE_STATES: ReadonlySet<string> = new Set(['voter', 'draining']);

export interface ClusterAgent {
  /** The line `serve` prints once everything is ready. */
  readyLine(): string;
  /**
   * The node is stopping: from now on an etcd member that exits stays down (a signal to the
   * whole process group reaches it before `stop`, which runs after the other children).
   */
  stopping(): void;
  /** The engine and the listeners run: records shared by the cluster can be mirrored now. */
  servicesReady(): void;
  stop(): Promise<void>;
}

export async function startClusterAgent(options: {
  settings: Settings;
  dataDir: string;
  log: Logger;
}): Promise<ClusterAgent> {
  const agent = new Agent(
    options.settings,
    clusterPaths(options.dataDir),
    dataDirPaths(options.dataDir).socket,
    options.log,
  );
  try {
    await agent.start();
  } catch (error) {
    await agent.stop();
    throw error;
  }
  return agent;
}

class Agent implements ClusterAgent {
  private state!: NodeState;
  private joinSecret: string | undefined;
  private secret: Buffer | undefined;
  private etcd: EtcdMember | undefined;
  private registry: Registry | undefined;
  private lease: Lease | undefined;
  private transport: TransportServer | undefined;
  private readonly addresses: ClusterAddresses;
  private readonly nodeId: string;
  private isStopping = false;
  private servicesUp = false;
  private mirror: ControlMirror | undefined;

  constructor(
    private readonly settings: Settings,
    private readonly paths: ClusterPaths,
    private readonly engineSocket: string,
    private readonly log: Logger,
  ) {
    this.nodeId = validateNodeId(settings.string('cluster.node_id'));
    this.addresses = clusterEndpoints(settings);
  }

  async start(): Promise<void> {
    const existing = await readNodeState(this.paths);
    if (existing !== undefined && existing.nodeId !== this.nodeId)
      throw BadRequest(
        `this data directory belongs to cluster node ${existing.nodeId}; a node's id never ` +
          `changes (cluster.node_id is ${this.nodeId})`,
      );
    this.state = existing ?? { v: 1, nodeId: this.nodeId, state: 'waiting' };
    if (this.state.state === 'waiting' && this.settings.bool('cluster.bootstrap'))
      await this.bootstrap();
    else if (this.state.state === 'member') await this.resume();
    else if (this.state.state === 'waiting') this.joinSecret = await ensureJoinSecret(this.paths);
    this.transport = await startTransport({
      host: this.addresses.listen.host,
      port: this.addresses.listen.port,
      routes: this.routes(),
      forward: dataForward(this.paths.dataSocket),
      log: this.log,
    });
  }

  readyLine(): string {
    const where = `node ${this.nodeId} on ${this.addresses.listenText}`;
    if (this.state.state === 'waiting')
      return `lightwell: cluster: waiting to be joined, secret ${this.joinSecret ?? ''} (${where})\n`;
    if (this.state.state === 'removed')
      return `lightwell: cluster: removed from cluster ${this.state.clusterId ?? ''} (${where})\n`;
    return `lightwell: cluster: member of cluster ${this.state.clusterId ?? ''} (${where})\n`;
  }

  private routes(): Map<string, TransportRoute> {
    const clusterKey = (): Buffer | undefined => this.secret;
    const joinKey = (): Buffer | undefined =>
      this.state.state === 'waiting' && this.joinSecret !== undefined
        ? joinSecretBytes(this.joinSecret)
        : undefined;
    return new Map<string, TransportRoute>([
      ['/cluster/v1/hello', { key: () => joinKey() ?? clusterKey(), handler: () => this.hello() }],
      ['/cluster/v1/join', { key: joinKey, handler: ({ body }) => this.acceptJoin(body) }],
    ]);
  }

  private hello(): Promise<Record<string, unknown>> {
    return Promise.resolve({
      nodeId: this.nodeId,
      state: this.state.state,
      ...(this.state.clusterId === undefined ? {} : { clusterId: this.state.clusterId }),
      softwareVersion: RELEASE,
      etcdPeerUrl: this.addresses.peerUrl,
      etcdClientUrl: this.addresses.clientUrl,
      runsEtcdMember: this.addresses.external.length === 0,
      ...this.capacity(),
    });
  }

  /** `cluster.capacity` as a member record holds it (absent when not given: layout.ts). */
  private capacity(): { capacityBytes?: number } {
    const bytes = this.settings.bytes('cluster.capacity');
    return bytes > 0 ? { capacityBytes: bytes } : {};
  }

  /** The first node of a new cluster. */
  private async bootstrap(): Promise<void> {
    const clusterId = 'c' + randomBytes(8).toString('hex');
    const etcd = this.placement({ initialCluster: undefined, initialState: 'new' });
    const secret = randomBytes(SECRET_BYTES);
    await this.connect(etcd, clusterId);
    const registry = this.registry as Registry;
    const now = new Date().toISOString();
    await registry.createCluster({
      v: RECORD_VERSION,
      id: clusterId,
      createdAt: now,
      partitions: PARTITIONS,
      replicationFactor: this.settings.int('cluster.replication_factor'),
    });
    const own = (await registry.etcdMembers()).find((member) => member.name === this.nodeId);
    const record: MemberRecord = {
      v: RECORD_VERSION,
      id: this.nodeId,
      state: 'voter',
      address: this.addresses.listenText,
      name: this.nodeId,
      zone: '',
      site: '',
      softwareVersion: RELEASE,
      ...this.capacity(),
      ...(own === undefined
        ? {}
        : {
            etcdMemberId: own.ID,
            etcdPeerUrl: this.addresses.peerUrl,
            etcdClientUrl: this.addresses.clientUrl,
          }),
      joinedAt: now,
      stateSince: now,
      reason: 'bootstrap',
    };
    if (!(await registry.createMember(record)))
      throw Conflict(`node id ${this.nodeId} is already a member of cluster ${clusterId}`);
    await writeClusterSecret(this.paths, secret);
    this.secret = secret;
    await this.becomeMember(clusterId, etcd);
    this.log.info({ clusterId, nodeId: this.nodeId }, 'cluster bootstrapped');
  }

  /** A member restarting: its etcd member (or the external etcd), its lease and its watch. */
  private async resume(): Promise<void> {
    const { clusterId, etcd } = this.state;
    if (clusterId === undefined || etcd === undefined)
      throw BadRequest(`${this.paths.state} names no cluster; the node state is damaged`);
    this.secret = await readClusterSecret(this.paths);
    await this.connect(etcd, clusterId);
    await this.recordCapacity().catch((error: unknown) =>
      this.log.warn({ err: error }, 'cluster.capacity not taken into the member record'),
    );
    await this.startLiveness();
  }

  /**
   * A member restarted with another `cluster.capacity` than its record holds: the record takes
   * it, and with it the next layout (registry.ts `updateMember` stores both in one transaction,
   * layout.ts weighs the node by it). A start that states none keeps the recorded capacity.
   */
  private async recordCapacity(): Promise<void> {
    const registry = this.registry as Registry;
    const wanted = this.capacity().capacityBytes;
    const current = await registry.member(this.nodeId);
    if (wanted === undefined || current === undefined) return;
    if (!STORAGE_STATES.has(current.record.state)) return;
    if (current.record.capacityBytes === wanted) return;
    await registry.updateMember(current, { ...current.record, capacityBytes: wanted });
    this.log.info(
      { from: current.record.capacityBytes ?? null, to: wanted },
      'cluster.capacity changed: taken into the member record and the next layout',
    );
  }

  /** `join`, from a member's admin: become a member of its cluster. */
  private async acceptJoin(body: Record<string, unknown>): Promise<Record<string, unknown>> {
    if (this.state.state !== 'waiting' || this.joinSecret === undefined)
      throw Conflict(`node ${this.nodeId} is already a member of a cluster`);
    const clusterId = stringField(body, 'clusterId');
    const endpoints = stringList(body, 'etcdEndpoints');
    const initialCluster = body['initialCluster'];
    const secret = openWithJoinSecret(
      joinSecretBytes(this.joinSecret),
      stringField(body, 'sealedSecret'),
      `cluster-secret:${clusterId}:${this.nodeId}`,
    );
    if (secret.length !== SECRET_BYTES) throw BadRequest('the cluster secret has a bad length');
    const etcd: EtcdPlacement =
      typeof initialCluster === 'string' && this.addresses.external.length === 0
        ? {
            ...this.placement({ initialCluster, initialState: 'existing' }),
            endpoints: [this.addresses.clientUrl, ...endpoints],
          }
        : { mode: 'external', endpoints };
    await writeClusterSecret(this.paths, secret);
    this.secret = secret;
    // Through the members that were there before: this node's own member is a learner until the
    // joining admin promotes it, and a learner refuses linearizable reads.
    await this.connect(etcd, clusterId, endpoints);
    await this.becomeMember(clusterId, etcd);
    this.joinSecret = undefined;
    await dropJoinSecret(this.paths);
    this.log.info({ clusterId, nodeId: this.nodeId }, 'joined the cluster');
    return { nodeId: this.nodeId, clusterId, etcdClientUrl: this.addresses.clientUrl };
  }

  private placement(options: {
    initialCluster: string | undefined;
    initialState: 'new' | 'existing';
  }): EtcdPlacement {
    if (this.addresses.external.length > 0)
      return { mode: 'external', endpoints: this.addresses.external };
    return {
      mode: 'member',
      endpoints: [this.addresses.clientUrl],
      peerUrl: this.addresses.peerUrl,
      clientUrl: this.addresses.clientUrl,
      initialCluster: options.initialCluster ?? `${this.nodeId}=${this.addresses.peerUrl}`,
      initialState: options.initialState,
    };
  }

  /** Starts this node's etcd member when it runs one, and waits until etcd answers. */
  private async connect(
    etcd: EtcdPlacement,
    clusterId: string,
    via: readonly string[] = etcd.endpoints,
  ): Promise<void> {
    if (etcd.mode === 'member' && etcd.memberRetired !== true) {
      this.etcd = new EtcdMember({
        bin: this.settings.string('cluster.etcd_bin'),
        name: this.nodeId,
        dataDir: this.paths.etcdData,
        clientUrl: etcd.clientUrl ?? this.addresses.clientUrl,
        peerUrl: etcd.peerUrl ?? this.addresses.peerUrl,
        initialCluster: etcd.initialCluster ?? `${this.nodeId}=${this.addresses.peerUrl}`,
        initialState: etcd.initialState ?? 'existing',
        token: clusterId,
        log: this.log.child({ component: 'cluster.etcd' }),
      });
      await this.etcd.start();
    }
    this.registry = await Registry.connect(via, clusterId);
    await waitForEtcd(this.registry, `etcd at ${via.join(', ')}`);
  }

  private async becomeMember(clusterId: string, etcd: EtcdPlacement): Promise<void> {
    this.state = {
      v: 1,
      nodeId: this.nodeId,
      state: 'member',
      clusterId,
      etcd,
      joinedAt: new Date().toISOString(),
    };
    await writeNodeState(this.paths, this.state);
    await this.startLiveness();
  }

  private async startLiveness(): Promise<void> {
    const registry = this.registry;
    if (registry === undefined) return;
    this.mirrorControlPlane();
    const onError = (error: unknown): void => {
      if (!this.isStopping) this.log.warn({ err: error }, 'liveness lease not written');
    };
    const lease = registry.keepAlive(this.nodeId, { softwareVersion: RELEASE }, onError);
    this.lease = lease;
    lease.on('lost', () => {
      if (this.isStopping || this.lease !== lease) return;
      this.log.warn('liveness lease lost; granting a new one');
      void this.startLiveness();
    });
    const watcher = await registry.client
      .watch()
      .key(registry.key(`members/${this.nodeId}`))
      .create();
    watcher.on('put', (kv) => {
      const record = JSON.parse(kv.value.toString()) as MemberRecord;
      if (record.state === 'removed') void this.leave();
      else if (record.state === 'drained') void this.retireMember(registry);
    });
    watcher.on('error', onError);
  }

  /**
   * This node was drained: its etcd member was removed (etcd has no demote) and stops for good;
   * the node stays a client of the other members, so it stays readable until it is removed.
   */
  private async retireMember(registry: Registry): Promise<void> {
    const etcd = this.state.etcd;
    if (etcd === undefined || etcd.mode !== 'member' || etcd.memberRetired === true) return;
    const others = (await registry.members())
      .map((entry) => entry.record)
      .filter((record) => record.id !== this.nodeId && record.etcdClientUrl !== undefined)
      .filter((record) => record.state === 'voter' || record.state === 'draining')
      .map((record) => record.etcdClientUrl as string);
    if (others.length === 0) return;
    this.log.warn({ nodeId: this.nodeId }, 'drained: stopping the etcd member of this node');
    this.state = { ...this.state, etcd: { ...etcd, endpoints: others, memberRetired: true } };
    await writeNodeState(this.paths, this.state);
    await this.etcd?.retire();
    const lease = this.lease;
    this.lease = undefined;
    await lease?.revoke().catch(() => undefined);
    registry.close();
    this.registry = await Registry.connect(others, registry.clusterId);
    await this.startLiveness();
  }

  /** This node was removed: its etcd member stops for good; the node serves no cluster. */
  private async leave(): Promise<void> {
    if (this.state.state === 'removed') return;
    this.log.warn({ nodeId: this.nodeId }, 'removed from the cluster; stopping the etcd member');
    this.state = { ...this.state, state: 'removed' };
    await writeNodeState(this.paths, this.state);
    await this.lease?.revoke().catch(() => undefined);
    await this.etcd?.retire();
  }

  servicesReady(): void {
    this.servicesUp = true;
    this.mirrorControlPlane();
  }

  /** Mirrors the cluster's control-plane records into this node's index (once a member). */
  private mirrorControlPlane(): void {
    if (!this.servicesUp || this.isStopping || this.registry === undefined) return;
    if (this.state.state !== 'member') return;
    this.mirror?.stop();
    this.mirror = startControlMirror({
      registry: this.registry,
      socketPath: this.engineSocket,
      // The data directory holds the cluster directory (node-state.ts `clusterPaths`).
      dataDir: dirname(this.paths.dir),
      log: this.log.child({ component: 'cluster.mirror' }),
    });
    void this.refreshEngine();
  }

  /** Tells the engine that this node's cluster state changed (it follows the cluster's records). */
  private async refreshEngine(): Promise<void> {
    const engine = new EngineClient(this.engineSocket, 30_000);
    try {
      await engine.call('clusterRefresh', {});
    } catch (error) {
      if (!this.isStopping) this.log.warn({ err: error }, 'engine not told of the cluster state');
    } finally {
      engine.close();
    }
  }

  stopping(): void {
    this.isStopping = true;
    this.mirror?.stop();
    this.etcd?.hold();
  }

  async stop(): Promise<void> {
    this.stopping();
    await this.transport?.close();
    await this.lease?.revoke().catch(() => undefined);
    this.registry?.close();
    await this.etcd?.stop();
  }
}

function stringField(body: Record<string, unknown>, field: string): string {
  const value = body[field];
  if (typeof value !== 'string' || value === '') throw BadRequest(`${field} must be a string`);
  return value;
}

function stringList(body: Record<string, unknown>, field: string): string[] {
  const value = body[field];
  if (!Array.isArray(value) || value.length === 0 || !value.every((v) => typeof v === 'string'))
    throw BadRequest(`${field} must be a list of URLs`);
  return value;
}
