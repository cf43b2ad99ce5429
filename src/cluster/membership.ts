// Membership changes of a cluster (docs/cluster.md §2, §3, §11), run by the admin process of
// any member: join, drain, remove, replace, and the membership read.
//
// Every change holds the cluster's membership lock, reads the membership, computes its plan
// (quorum.ts) and refuses with 409 and the plan's blockers before touching anything; a dry run
// returns the plan. Each step is checked before it is done (a member already added to etcd is
// not added again), so a change interrupted half-way can be repeated.
//
// etcd's refusals that pass with time (a member that reconnected less than ~5 s ago, a learner
// not yet in sync) are retried for a bounded time; the others become 409 with etcd's message.

import { setTimeout as sleep } from 'node:timers/promises';
import { RELEASE } from '../engine/data-dir.js';
import { BadRequest, Conflict, NotFound } from '../util/errors.js';
import { parseListen } from '../util/config.js';
import { Registry, RECORD_VERSION, type MemberRecord, type Versioned } from './registry.js';
import { movedPartitions, nextLayout, tableOf, PARTITIONS } from './layout.js';
import { readLeaders, type LeaderRecord } from './leaders.js';
import { joinSecretBytes, validateNodeId, type NodeState } from './node-state.js';
import { callNode } from './transport.js';
import { sealWithJoinSecret } from './signing.js';
import {
  planQuorum,
  quorumBlockers,
  planStorage,
  storageFindings,
  type Finding,
  type QuorumPlan,
  type StoragePlan,
  type Voter,
} from './quorum.js';

/** How long a membership change retries etcd's transient refusals. */
export const CHANGE_RETRY_MS_MAX = 20_000;
/** How long a join waits for its learner to catch up before promoting it. */
export const PROMOTE_MS_MAX = 60_000;
const RETRY_MS = 250;
/**
 * How long a join waits, once the new member is a voter, for its liveness key: until then the
 * member counts as a voter that is down, and etcd-backed changes (the next join) are refused.
 */
export const JOIN_LIVE_MS_MAX = 30_000;

export interface JoinInput {
  readonly id: string;
  readonly address: string;
  readonly secret: string;
  readonly reason: string;
  readonly zone: string;
  readonly site: string;
  readonly name: string;
  readonly softwareVersion: string;
}

export interface Plan {
  readonly dryRun: boolean;
  readonly applied: boolean;
  readonly action: string;
  readonly target: string;
  readonly quorum: QuorumPlan;
  readonly storage: StoragePlan;
  readonly partitionsToMove: number;
  readonly bytesToMove: number;
  readonly blockers: Finding[];
  readonly warnings: Finding[];
}

/** The stored layout as the admin API shows it (docs/cluster.md §5). */
export interface PlacementView {
  readonly version: number;
  readonly partitionCount: number;
  readonly replicationFactor: number;
  /** Per partition, its replicas in order (the first the preferred leader). */
  readonly table: ReadonlyArray<readonly string[]>;
  readonly leaders: ReadonlyMap<number, LeaderRecord>;
}

export interface MemberView {
  readonly id: string;
  readonly name: string;
  readonly state: string;
  readonly zone: string;
  readonly site: string;
  readonly address: string;
  readonly live: boolean;
  readonly isLearner: boolean;
  readonly etcdMemberId?: string;
  readonly softwareVersion: string;
  readonly since: string;
}

export interface MembershipView {
  readonly clusterId: string;
  readonly leaderId: string;
  readonly members: MemberView[];
}

/** Storage members: they hold (or will hold) partitions. */
const STORAGE_STATES: ReadonlySet<string> = new Set(['learner', 'voter', 'draining']);

interface Snapshot {
  readonly records: Array<Versioned<MemberRecord>>;
  readonly live: Set<string>;
  /** etcd voters by Lightwell node id (empty with external etcd). */
  readonly voters: Voter[];
  readonly learners: string[];
  readonly etcdMembers: Array<{ id: string; name: string; peerURLs: string[]; isLearner: boolean }>;
}

export class Membership {
  constructor(
    private readonly registry: Registry,
    private readonly node: NodeState,
    private readonly secret: Buffer,
    private readonly replicationFactor: number,
  ) {}

  /**
   * The bytes a move of `partitions` copies, as the admin process estimates them from this
   * node's index (cluster-routes.ts sets it); 0 until set.
   */
  bytesOfPartitions: (partitions: readonly number[]) => number = () => 0;

  private bytesOf(partitions: readonly number[]): Promise<number> {
    return Promise.resolve(partitions.length === 0 ? 0 : this.bytesOfPartitions(partitions));
  }

  private get external(): boolean {
    return this.node.etcd?.mode === 'external';
  }

  async snapshot(): Promise<Snapshot> {
    const [records, live, etcdList] = await Promise.all([
      this.registry.members(),
      this.registry.liveIds(),
      this.external ? Promise.resolve([]) : this.registry.etcdMembers(),
    ]);
    const nodeOf = (etcdId: string, name: string): string =>
      records.find((entry) => entry.record.etcdMemberId === etcdId)?.record.id ?? name;
    const etcdMembers = etcdList.map((member) => ({
      id: member.ID,
      name: nodeOf(member.ID, member.name),
      peerURLs: member.peerURLs,
      isLearner: member.isLearner,
    }));
    const voters = etcdMembers
      .filter((member) => !member.isLearner)
      .map((member) => ({ id: member.name, live: live.has(member.name) }));
    const learners = etcdMembers.filter((member) => member.isLearner).map((member) => member.name);
    return { records, live, voters, learners, etcdMembers };
  }

  async view(): Promise<MembershipView> {
    const snapshot = await this.snapshot();
    const leaderEtcdId = await this.registry.etcdLeaderId();
    const leader =
      snapshot.records.find((entry) => entry.record.etcdMemberId === leaderEtcdId)?.record.id ??
      snapshot.records.find((entry) => entry.record.state === 'voter')?.record.id ??
      '';
    const members = snapshot.records.map(({ record }) => ({
      id: record.id,
      name: record.name,
      state: record.state,
      zone: record.zone,
      site: record.site,
      address: record.address,
      live: snapshot.live.has(record.id),
      isLearner: snapshot.learners.includes(record.id),
      ...(record.etcdMemberId === undefined ? {} : { etcdMemberId: record.etcdMemberId }),
      softwareVersion: record.softwareVersion,
      since: record.stateSince,
    }));
    return { clusterId: this.registry.clusterId, leaderId: leader, members };
  }

  /** The stored layout's table with every partition's leader and epoch. */
  async placement(): Promise<PlacementView> {
    const factor = await this.registry.replicationFactor();
    const [layout, leaders] = await Promise.all([
      this.registry.layout(),
      readLeaders(this.registry.client, (name) => this.registry.key(name)),
    ]);
    return {
      version: layout?.record.version ?? 0,
      partitionCount: PARTITIONS,
      replicationFactor: factor,
      table: layout === undefined ? [] : tableOf(layout.record, factor),
      leaders,
    };
  }

  /**
   * The partitions whose replica sets change when `changed` replaces its record: the table the
   * change would store against the current one (a dry run shows the move before it is made).
   */
  private async partitionsMoved(snapshot: Snapshot, changed: MemberRecord): Promise<number[]> {
    const factor = await this.registry.replicationFactor();
    const current = await this.registry.layout();
    const records = new Map(snapshot.records.map((entry) => [entry.record.id, entry.record]));
    const before = current === undefined ? undefined : tableOf(current.record, factor);
    const next = nextLayout(current?.record, records.values(), 'plan', factor);
    records.set(changed.id, changed);
    const after = nextLayout(current?.record, records.values(), 'plan', factor);
    const from = before ?? next?.partitions ?? [];
    return after?.partitions === undefined ? [] : movedPartitions(from, after.partitions);
  }

  private storageCount(snapshot: Snapshot): number {
    return snapshot.records.filter((entry) => STORAGE_STATES.has(entry.record.state)).length;
  }

  private plan(
    action: string,
    target: string,
    dryRun: boolean,
    parts: {
      quorum: QuorumPlan;
      storage: StoragePlan;
      blockers: Finding[];
      warnings?: Finding[];
      moved: readonly number[];
      bytesToMove?: number;
    },
  ): Plan {
    const storage = storageFindings(parts.storage);
    return {
      dryRun,
      applied: false,
      action,
      target,
      quorum: parts.quorum,
      storage: parts.storage,
      partitionsToMove: parts.moved.length,
      bytesToMove: parts.bytesToMove ?? 0,
      blockers: [...parts.blockers, ...quorumBlockers(parts.quorum), ...storage.blockers],
      warnings: [...(parts.warnings ?? []), ...storage.warnings],
    };
  }

  /** Throws 409 with the plan's blockers when it has any. */
  private static refuseBlocked(plan: Plan): void {
    if (plan.blockers.length === 0) return;
    const first = plan.blockers[0] as Finding;
    throw Conflict(`${plan.action} ${plan.target} refused: ${first.message}`, {
      blockers: plan.blockers,
      plan,
    });
  }

  // ---- join ------------------------------------------------------------------------------

  async join(input: JoinInput, dryRun: boolean): Promise<Plan | MembershipView> {
    validateNodeId(input.id, 'id');
    checkAddress(input.address);
    const joinKey = joinSecretBytes(input.secret);
    return this.registry.withMembershipLock(async () => {
      const snapshot = await this.snapshot();
      const existing = snapshot.records.find((entry) => entry.record.id === input.id);
      const blockers = joinBlockers(snapshot, input.id, existing?.record);
      const hello = await this.hello(input, joinKey, existing?.record, blockers);
      const moved = await this.partitionsMoved(snapshot, {
        ...(existing?.record ?? planned(input)),
        state: 'voter',
      });
      const plan = this.plan('join', `members/${input.id}`, dryRun, {
        moved,
        bytesToMove: await this.bytesOf(moved),
        quorum: planQuorum(snapshot.voters, { add: !this.external && existing === undefined }),
        storage: planStorage(
          this.storageCount(snapshot),
          existing === undefined ? 1 : 0,
          this.replicationFactor,
        ),
        blockers,
      });
      if (dryRun) return plan;
      Membership.refuseBlocked(plan);
      await this.carryOutJoin(input, joinKey, hello, existing);
      return this.view();
    });
  }

  /** The new node's own account of itself, over the transport, signed with its join secret. */
  private async hello(
    input: JoinInput,
    joinKey: Buffer,
    existing: MemberRecord | undefined,
    blockers: Finding[],
  ): Promise<Record<string, unknown>> {
    let hello: Record<string, unknown>;
    try {
      hello = await callNode({
        address: input.address,
        path: 'hello',
        body: {},
        key: joinKey,
        from: this.node.nodeId,
        timeoutMs: 10_000,
      });
    } catch (error) {
      const message = (error as Error).message;
      if (existing?.state !== 'learner')
        blockers.push({ code: 'node_unreachable', message: `the new node: ${message}` });
      return {};
    }
    if (hello['nodeId'] !== input.id)
      blockers.push({
        code: 'node_id_mismatch',
        message: `the node at ${input.address} is ${String(hello['nodeId'])}, not ${input.id}`,
      });
    else if (hello['state'] !== 'waiting' && existing?.state !== 'learner')
      blockers.push({
        code: 'node_not_waiting',
        message: `the node at ${input.address} is already a member of a cluster`,
      });
    return hello;
  }

  private async carryOutJoin(
    input: JoinInput,
    joinKey: Buffer,
    hello: Record<string, unknown>,
    existing: Versioned<MemberRecord> | undefined,
  ): Promise<void> {
    const now = new Date().toISOString();
    let current = existing;
    if (current === undefined) {
      const record: MemberRecord = {
        v: RECORD_VERSION,
        id: input.id,
        state: 'joining',
        address: input.address,
        name: input.name || input.id,
        zone: input.zone,
        site: input.site,
        softwareVersion:
          typeof hello['softwareVersion'] === 'string' ? hello['softwareVersion'] : RELEASE,
        ...capacityOf(hello),
        joinedAt: now,
        stateSince: now,
        reason: input.reason,
      };
      if (!(await this.registry.createMember(record)))
        throw Conflict(`member id ${input.id} is (or was) in use; ids are never reused`);
      current = await this.mustRead(input.id);
    }
    if (!this.external && current.record.state === 'joining')
      current = await this.addLearner(current, hello);
    if (current.record.state === 'joining' || current.record.state === 'learner') {
      if (hello['state'] === 'waiting') await this.sendJoin(input, joinKey);
      if (!this.external) await this.promote(current);
      current = await this.mustRead(input.id);
      await this.registry.updateMember(current, {
        ...current.record,
        state: 'voter',
        stateSince: new Date().toISOString(),
      });
    }
    await this.untilLive(input.id);
  }

  /**
   * Waits for the new member's liveness key, so the join answers with a member that is up and a
   * next join is not refused for a voter that is merely still starting. A member that does not
   * come up in time stays joined; the answer's membership shows it `live: false`.
   */
  private async untilLive(id: string): Promise<void> {
    const deadline = Date.now() + JOIN_LIVE_MS_MAX;
    // A failed read (an etcd hiccup) is read again: the join is done, and an error here would
    // make its caller's retry meet `id_in_use`.
    const live = (): Promise<boolean> =>
      this.registry.liveIds().then(
        (ids) => ids.has(id),
        () => false,
      );
    while (!(await live()) && Date.now() < deadline) await sleep(RETRY_MS);
  }

  private async addLearner(
    current: Versioned<MemberRecord>,
    hello: Record<string, unknown>,
  ): Promise<Versioned<MemberRecord>> {
    const peerUrl = hello['etcdPeerUrl'];
    const clientUrl = hello['etcdClientUrl'];
    if (typeof peerUrl !== 'string' || typeof clientUrl !== 'string')
      throw BadRequest('the new node did not say where its etcd member listens');
    const members = await this.registry.etcdMembers();
    let etcdId = members.find((member) => member.peerURLs.includes(peerUrl))?.ID;
    if (etcdId === undefined) {
      const added = await retryEtcd('add the etcd learner', () =>
        this.registry.client.cluster.memberAdd({ peerURLs: [peerUrl], isLearner: true }),
      );
      etcdId = added.member.ID;
    }
    await this.registry.updateMember(current, {
      ...current.record,
      state: 'learner',
      etcdMemberId: etcdId,
      etcdPeerUrl: peerUrl,
      etcdClientUrl: clientUrl,
      stateSince: new Date().toISOString(),
    });
    return this.mustRead(current.record.id);
  }

  /** Tells the new node its cluster: id, sealed secret, and how to reach etcd. */
  private async sendJoin(input: JoinInput, joinKey: Buffer): Promise<void> {
    const records = await this.registry.members();
    const etcdMembers = this.external ? [] : await this.registry.etcdMembers();
    const endpoints = this.external
      ? [...(this.node.etcd?.endpoints ?? [])]
      : etcdMembers.filter((member) => !member.isLearner).flatMap((member) => member.clientURLs);
    const nameOf = (etcdId: string, fallback: string): string =>
      records.find((entry) => entry.record.etcdMemberId === etcdId)?.record.id ?? fallback;
    const initialCluster = etcdMembers
      .map((member) => `${nameOf(member.ID, member.name)}=${member.peerURLs[0] ?? ''}`)
      .join(',');
    const clusterId = this.registry.clusterId;
    await callNode({
      address: input.address,
      path: 'join',
      body: {
        clusterId,
        sealedSecret: sealWithJoinSecret(
          joinKey,
          this.secret,
          `cluster-secret:${clusterId}:${input.id}`,
        ),
        etcdEndpoints: endpoints,
        ...(this.external ? {} : { initialCluster }),
      },
      key: joinKey,
      from: this.node.nodeId,
    });
  }

  /** Promotes the learner once etcd says it has caught up. */
  private async promote(current: Versioned<MemberRecord>): Promise<void> {
    const etcdId = current.record.etcdMemberId;
    if (etcdId === undefined) return;
    const members = await this.registry.etcdMembers();
    const member = members.find((entry) => entry.ID === etcdId);
    if (member === undefined)
      throw Conflict(`the etcd member of ${current.record.id} is gone; remove the member`);
    if (!member.isLearner) return;
    await retryEtcd(
      `promote ${current.record.id} once it has caught up`,
      () => this.registry.client.cluster.memberPromote({ ID: etcdId }),
      PROMOTE_MS_MAX,
    );
  }

  private async mustRead(id: string): Promise<Versioned<MemberRecord>> {
    const entry = await this.registry.member(id);
    if (entry === undefined) throw NotFound(`no member ${id}`);
    return entry;
  }

  // ---- drain, remove, replace --------------------------------------------------------------

  /**
   * Drains a voter, or (forceLost) marks a member that is down lost. `moveData` runs once the
   * member is `draining` (or `lost`), before it is demoted: it copies what the member held onto
   * the replicas that now take its place (a cluster-wide repair). When it fails the member stays
   * `draining`, and a drain of it again resumes; a lost member stays lost, to be rebuilt by a
   * rebalance.
   */
  async drain(
    input: {
      id: string;
      reason: string;
      forceLost: boolean;
      moveData?: () => Promise<void>;
      /** Once drained: the member drops what it no longer holds; answers what it freed. */
      reclaim?: (id: string) => Promise<unknown>;
    },
    dryRun: boolean,
  ): Promise<Plan | MembershipView | (MembershipView & { reclaimed: unknown })> {
    return this.registry.withMembershipLock(async () => {
      const snapshot = await this.snapshot();
      const entry = findMember(snapshot, input.id);
      const record = entry.record;
      const blockers: Finding[] = [];
      if (input.forceLost) {
        if (snapshot.live.has(record.id))
          blockers.push({ code: 'member_live', message: `${record.id} is live; drain it instead` });
        if (record.state === 'removed' || record.state === 'lost')
          blockers.push({ code: 'bad_state', message: `${record.id} is ${record.state}` });
      } else if (record.state !== 'voter' && record.state !== 'draining')
        blockers.push({
          code: 'bad_state',
          message: `${record.id} is ${record.state}; only a voter (or a draining member) can be drained`,
        });
      const holds = STORAGE_STATES.has(record.state) ? 1 : 0;
      const moved = await this.partitionsMoved(snapshot, {
        ...record,
        state: input.forceLost ? 'lost' : 'draining',
      });
      const plan = this.plan(
        input.forceLost ? 'markLost' : 'drain',
        `members/${record.id}`,
        dryRun,
        {
          moved,
          bytesToMove: await this.bytesOf(moved),
          // Marking lost changes no etcd membership; a drain demotes the voter.
          quorum: planQuorum(snapshot.voters, input.forceLost ? {} : { removeId: record.id }),
          storage: planStorage(this.storageCount(snapshot), -holds, this.replicationFactor),
          blockers,
        },
      );
      if (dryRun) return plan;
      Membership.refuseBlocked(plan);
      if (input.forceLost) {
        await this.setState(entry, 'lost', input.reason);
        await input.moveData?.();
        return this.view();
      }
      await this.carryOutDrain(entry, input.reason, input.moveData);
      if (input.reclaim === undefined) return this.view();
      // The member is drained whatever this answers: a failure is only reported (its copies then
      // stay until it is removed and its data directory wiped).
      const reclaimed = await reclaimSoon(input.reclaim, record.id).catch((error: unknown) => ({
        error: (error as Error).message,
      }));
      return { ...(await this.view()), reclaimed };
    });
  }

  /**
   * Draining: the member leaves every replica set, its data is moved onto the members that take
   * its place (`moveData`), then the etcd voter is demoted, which in etcd means removed.
   */
  private async carryOutDrain(
    entry: Versioned<MemberRecord>,
    reason: string,
    moveData: (() => Promise<void>) | undefined,
  ): Promise<void> {
    if (entry.record.state !== 'draining') await this.setState(entry, 'draining', reason);
    await moveData?.();
    await this.removeEtcdMember(await this.mustRead(entry.record.id));
    await this.setState(await this.mustRead(entry.record.id), 'drained', reason);
  }

  async remove(
    input: { id: string; reason: string; forceLost: boolean },
    dryRun: boolean,
  ): Promise<Plan | MembershipView> {
    return this.registry.withMembershipLock(async () => {
      const snapshot = await this.snapshot();
      const entry = findMember(snapshot, input.id);
      const record = entry.record;
      const blockers: Finding[] = [];
      const down = !snapshot.live.has(record.id);
      const removable =
        record.state === 'drained' ||
        record.state === 'lost' ||
        record.state === 'joining' ||
        (input.forceLost && down && record.state !== 'removed');
      if (!removable)
        blockers.push({
          code: record.state === 'removed' ? 'bad_state' : 'not_drained',
          message:
            record.state === 'removed'
              ? `${record.id} is removed already`
              : `${record.id} is ${record.state}: drain it first` +
                (down ? ', or mark it lost (forceLost: true)' : ''),
        });
      const holds = STORAGE_STATES.has(record.state) ? 1 : 0;
      const moved = await this.partitionsMoved(snapshot, { ...record, state: 'removed' });
      const plan = this.plan('remove', `members/${record.id}`, dryRun, {
        moved,
        bytesToMove: await this.bytesOf(moved),
        quorum: planQuorum(snapshot.voters, { removeId: record.id }),
        storage: planStorage(this.storageCount(snapshot), -holds, this.replicationFactor),
        blockers,
      });
      if (dryRun) return plan;
      Membership.refuseBlocked(plan);
      await this.removeEtcdMember(entry);
      await this.setState(await this.mustRead(record.id), 'removed', input.reason);
      return this.view();
    });
  }

  /**
   * Replace: a live old member is drained and removed after the new one has joined; a down one
   * is marked lost and removed first, since etcd refuses to add a member while a voter is down.
   * Each step takes the membership lock on its own; a failure stops the sequence where it is,
   * and the answer names the steps that were done. A dry run plans the first step.
   */
  async replace(
    input: { oldId: string; join: JoinInput },
    dryRun: boolean,
  ): Promise<Record<string, unknown>> {
    const snapshot = await this.snapshot();
    const old = findMember(snapshot, input.oldId).record;
    const down = !snapshot.live.has(old.id);
    const reason = input.join.reason;
    const order = down ? ['remove', 'join'] : ['join', 'drain', 'remove'];
    if (dryRun) {
      const first = down
        ? await this.remove({ id: old.id, reason, forceLost: true }, true)
        : await this.join(input.join, true);
      return {
        dryRun: true,
        applied: false,
        action: 'replace',
        steps: order,
        firstStep: first,
        blockers: (first as Plan).blockers,
        warnings: (first as Plan).warnings,
      };
    }
    const done: string[] = [];
    for (const step of order) {
      if (step === 'join') await this.join(input.join, false);
      else if (step === 'drain') await this.drain({ id: old.id, reason, forceLost: false }, false);
      else await this.remove({ id: old.id, reason, forceLost: down }, false);
      done.push(step);
    }
    return { dryRun: false, applied: true, action: 'replace', steps: done, ...(await this.view()) };
  }

  private async removeEtcdMember(entry: Versioned<MemberRecord>): Promise<void> {
    const etcdId = entry.record.etcdMemberId;
    if (this.external || etcdId === undefined) return;
    const members = await this.registry.etcdMembers();
    if (!members.some((member) => member.ID === etcdId)) return;
    await retryEtcd(`remove the etcd member of ${entry.record.id}`, () =>
      this.registry.client.cluster.memberRemove({ ID: etcdId }),
    );
  }

  private async setState(
    entry: Versioned<MemberRecord>,
    state: MemberRecord['state'],
    reason: string,
  ): Promise<void> {
    await this.registry.updateMember(entry, {
      ...entry.record,
      state,
      reason,
      stateSince: new Date().toISOString(),
    });
  }
}

function joinBlockers(
  snapshot: Snapshot,
  id: string,
  existing: MemberRecord | undefined,
): Finding[] {
  const blockers: Finding[] = [];
  if (existing !== undefined && existing.state !== 'joining' && existing.state !== 'learner')
    blockers.push({
      code: 'id_in_use',
      message:
        `member id ${id} is ${existing.state === 'removed' ? 'was' : 'is'} in use` +
        (existing.state === 'removed' ? ' (a removed id is never reused)' : ''),
    });
  const otherLearner = snapshot.learners.find((learner) => learner !== id);
  if (otherLearner !== undefined)
    blockers.push({
      code: 'learner_in_progress',
      message: `${otherLearner} is an etcd learner still; etcd allows one learner at a time`,
    });
  const down = snapshot.voters.filter((voter) => !voter.live).map((voter) => voter.id);
  if (down.length > 0)
    blockers.push({
      code: 'voter_down',
      message:
        `etcd voter(s) ${down.join(', ')} down: etcd refuses to add a member while a voter ` +
        'is down; bring it back, or mark it lost and remove it first',
    });
  return blockers;
}

function findMember(snapshot: Snapshot, id: string): Versioned<MemberRecord> {
  validateNodeId(id, 'id');
  const entry = snapshot.records.find((candidate) => candidate.record.id === id);
  if (entry === undefined) throw NotFound(`no member ${id} in this cluster`);
  return entry;
}

function checkAddress(address: string): void {
  const parsed = parseListen(address, 'address');
  if (parsed.host === '0.0.0.0' || parsed.host === '::' || parsed.port === 0)
    throw BadRequest(`address must be the new node's cluster.listen HOST:PORT, got ${address}`);
}

/** Transient etcd refusals (a member reconnected < 5 s ago, a learner behind) pass: retry. */
const TRANSIENT =
  /unhealthy cluster|not in sync|in sync with leader|circuit breaker|not enough started members|leader changed|no leader|timed out|Unavailable/i;

async function retryEtcd<T>(what: string, step: () => Promise<T>, limitMs = CHANGE_RETRY_MS_MAX) {
  const deadline = Date.now() + limitMs;
  for (;;) {
    try {
      return await step();
    } catch (error) {
      const message = (error as Error).message;
      if (!TRANSIENT.test(message))
        throw Conflict(`etcd refused to ${what}: ${message}`, {
          blockers: [{ code: 'etcd_refused', message }],
        });
      if (Date.now() > deadline)
        throw Conflict(`etcd still refused to ${what} after ${limitMs} ms: ${message}`, {
          blockers: [{ code: 'etcd_refused', message }],
        });
    }
    await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
  }
}

/** The capacity a waiting node's `hello` gives (its `cluster.capacity`), as its record holds it. */
function capacityOf(hello: Record<string, unknown>): { capacityBytes?: number } {
  const bytes = hello['capacityBytes'];
  return typeof bytes === 'number' && Number.isSafeInteger(bytes) && bytes > 0
    ? { capacityBytes: bytes }
    : {};
}

/** The record a join would create, as far as a plan reads it (its id, zone, capacity). */
function planned(input: JoinInput): MemberRecord {
  const now = new Date().toISOString();
  return {
    v: RECORD_VERSION,
    id: input.id,
    state: 'joining',
    address: input.address,
    name: input.name || input.id,
    zone: input.zone,
    site: input.site,
    softwareVersion: input.softwareVersion || RELEASE,
    joinedAt: now,
    stateSince: now,
    reason: input.reason,
  };
}

/** Opens the membership of the cluster this node belongs to (admin process, cluster mode). */
export async function openMembership(options: {
  node: NodeState;
  secret: Buffer;
  replicationFactor: number;
}): Promise<{ membership: Membership; registry: Registry }> {
  const { node } = options;
  if (node.state !== 'member' || node.clusterId === undefined || node.etcd === undefined)
    throw Conflict(
      node.state === 'removed'
        ? `node ${node.nodeId} was removed from its cluster`
        : `node ${node.nodeId} waits to be joined: join it from a member of the cluster`,
    );
  const registry = await Registry.connect(node.etcd.endpoints, node.clusterId);
  return {
    membership: new Membership(registry, node, options.secret, options.replicationFactor),
    registry,
  };
}

/** Tries of a drained member's reclaim, and the pause before the second (growing after it). */
const RECLAIM_TRIES = 5;
const RECLAIM_PAUSE_MS = 500;

/**
 * The drained member's reclaim, tried again while it answers `unavailable`: the drain has just
 * changed the member's state, and its engine may be restarting the data transport the message
 * goes to (a reset or refused connection). Reclaiming twice drops nothing more.
 */
async function reclaimSoon(
  reclaim: (id: string) => Promise<unknown>,
  id: string,
): Promise<unknown> {
  for (let tried = 1; ; tried += 1) {
    try {
      return await reclaim(id);
    } catch (error) {
      const code = (error as { code?: unknown } | null)?.code;
      if (code !== 'unavailable' || tried >= RECLAIM_TRIES) throw error;
      await sleep(RECLAIM_PAUSE_MS * tried);
    }
  }
}
