// Versioned layouts (docs/cluster.md §5 and §9): a fixed number of partitions (PARTITIONS, 256,
// never a function of the node count), each mapped to an ordered list of replica nodes, stored
// explicitly in etcd with a version that grows by one at every change, so that every node
// places from the same table and a replica can tell a write placed under an older layout
// (fencing, replication.ts).
//
//   layout/current         the current Layout (JSON)              with the member change, one txn
//   layout/v/<16 digits>   every version ever stored, never rewritten (history, for operators)
//
// A bucket lives in one partition, `partitionOf(bucketId)`, so a listing stays a scan of one
// replica's index. The table is computed once per change (`assignPartitions`) from the previous
// one and the storage members: each node's share of the `PARTITIONS × r` replica slots follows
// its weight (capacity-weighted; `capacityBytes` on the member record, 1 when absent), a
// partition takes a node of a zone it lacks before a second node of a zone it has (zone-aware
// first, as Garage's layouts are), and a partition keeps every replica that is still a member
// and within its share, so a change moves only the partitions whose replica set must change.
// Ties are broken by a hash of (partition, node); then each partition's replicas are ordered so
// that every node is first (the preferred leader, leaders.ts) in its share of the partitions,
// and second in as many (`orderReplicas`). The result is deterministic for a given input, so a dry run shows
// exactly the table a change will store.
//
// A layout is published in the same etcd transaction as the member record whose change alters
// the storage set (registry.ts `createMember`, `updateMember`): a join that makes a voter, a drain,
// forceLost, a removal. So no node ever sees a member's new state with the old layout or the
// reverse at one revision, and two changes cannot publish one version twice (the transaction
// compares `layout/current`'s mod revision). A layout stored before tables were (record version
// 1, members only, whose nodes placed by rendezvous hashing) is never placed by a table under its
// own version: a node that reads one publishes its table as the next version first
// (cluster-view.ts), so placement never changes without a new version. A plan still reads the
// table `tableOf` gives it (its members alone), as the starting point of the next table.
//
// A cluster made before layouts were stored has none until its first membership change, or the
// first rebalance (`ensureLayout`); until then placement is read from the membership (version 0).

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import type { MemberRecord } from './registry.js';

/** Record version 2: members with weights, the replication factor and the partition table. */
export const LAYOUT_RECORD_VERSION = 2;
export const LAYOUT_CURRENT = 'layout/current';
/** Partitions of every cluster, for its whole life (a power of two: `partitionOf`). */
export const PARTITIONS = 256;
/** Member states that hold data (as cluster-view.ts places them). */
const STORAGE_STATES: ReadonlySet<string> = new Set(['voter', 'draining']);

export interface LayoutMember {
  readonly id: string;
  readonly zone: string;
  /** Takes no new replicas; its data is moving off (membership.ts drain). */
  readonly draining: boolean;
  /** Its share of the replicas, relative to the others' (capacityBytes; 1 when not given). */
  readonly weight?: number;
}

export interface Layout {
  readonly v: number;
  /** 1 and up; every change stores the next one. */
  readonly version: number;
  /** The storage members, by id. */
  readonly members: readonly LayoutMember[];
  /** The replicas each partition asks for (the effective factor is at most the members). */
  readonly replicationFactor?: number;
  /** PARTITIONS lists of node ids, the first the preferred leader (absent in version 1). */
  readonly partitions?: ReadonlyArray<readonly string[]>;
  readonly createdAt: string;
  readonly reason: string;
}

export function layoutHistoryKey(version: number): string {
  return `layout/v/${String(version).padStart(16, '0')}`;
}

/** The partition of a bucket: a multiplicative hash of its id, its top 8 bits (PARTITIONS). */
export function partitionOf(bucketId: number): number {
  return Math.imul(bucketId >>> 0, 0x9e3779b1) >>> 24;
}

/** The storage members of a membership, as a layout holds them (sorted by id). */
export function layoutMembersOf(records: Iterable<MemberRecord>): LayoutMember[] {
  return [...records]
    .filter((record) => STORAGE_STATES.has(record.state))
    .map((record) => ({
      id: record.id,
      zone: record.zone,
      draining: record.state === 'draining',
      ...(record.capacityBytes === undefined ? {} : { weight: record.capacityBytes }),
    }))
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
}

export function sameMembers(a: readonly LayoutMember[], b: readonly LayoutMember[]): boolean {
  return (
    a.length === b.length &&
    a.every((member, index) => {
      const other = b[index];
      return (
        other !== undefined &&
        member.id === other.id &&
        member.zone === other.zone &&
        member.draining === other.draining &&
        member.weight === other.weight
      );
    })
  );
}

/** The layout after `previous` for `members`; undefined when nothing placement reads changed. */
export function nextLayout(
  previous: Layout | undefined,
  members: Iterable<MemberRecord>,
  reason: string,
  replicationFactor: number,
): Layout | undefined {
  const next = layoutMembersOf(members);
  if (
    previous !== undefined &&
    sameMembers(previous.members, next) &&
    previous.partitions !== undefined &&
    previous.replicationFactor === replicationFactor
  )
    return undefined;
  return {
    v: LAYOUT_RECORD_VERSION,
    version: (previous?.version ?? 0) + 1,
    members: next,
    replicationFactor,
    partitions: assignPartitions(
      previous === undefined ? undefined : tableOf(previous, replicationFactor),
      next,
      replicationFactor,
    ),
    createdAt: new Date().toISOString(),
    reason,
  };
}

/**
 * A layout's table; one stored before tables were gets the one its members alone give (the
 * input of the next table and of plans only: placement reads a stored table, cluster-view.ts).
 */
export function tableOf(
  layout: Layout,
  replicationFactor: number,
): ReadonlyArray<readonly string[]> {
  return (
    layout.partitions ??
    assignPartitions(undefined, layout.members, layout.replicationFactor ?? replicationFactor)
  );
}

/**
 * The partition table for `members` (see the header): a draining member takes no replica unless
 * every member drains; each partition gets `min(replicationFactor, candidates)` distinct nodes.
 */
export function assignPartitions(
  previous: ReadonlyArray<readonly string[]> | undefined,
  members: readonly LayoutMember[],
  replicationFactor: number,
): string[][] {
  const staying = members.filter((member) => !member.draining);
  const chosen = staying.length > 0 ? staying : members;
  // A member whose capacity was not given weighs the average of those given (1 when none is),
  // so that a cluster where only some nodes state theirs still gives every node a share.
  const given = chosen.flatMap((member) =>
    member.weight !== undefined && member.weight > 0 ? [member.weight] : [],
  );
  const fallback = given.length === 0 ? 1 : given.reduce((a, b) => a + b, 0) / given.length;
  const nodes = chosen.map((member) => ({
    id: member.id,
    zone: member.zone,
    weight: member.weight !== undefined && member.weight > 0 ? member.weight : fallback,
  }));
  const r = Math.min(replicationFactor, nodes.length);
  const zoneOf = new Map(nodes.map((node) => [node.id, node.zone]));
  const table: string[][] = [];
  const count = new Map(nodes.map((node) => [node.id, 0]));
  for (let p = 0; p < PARTITIONS; p += 1) {
    const kept = [...new Set(previous?.[p] ?? [])].filter((id) => zoneOf.has(id)).slice(0, r);
    for (const id of kept) count.set(id, (count.get(id) ?? 0) + 1);
    table.push(kept);
  }
  const target = targetsOf(nodes, r);
  shed(table, count, target, zoneOf, r);
  for (let p = 0; p < PARTITIONS; p += 1) fill(p, table[p] as string[], r, count, target, zoneOf);
  orderReplicas(table, count, r);
  return table;
}

/**
 * Each node's share of the `PARTITIONS × r` slots, proportional to its weight and at most one
 * per partition (a node capped at PARTITIONS leaves the rest to the others); whole numbers by
 * the largest remainder, ties by id.
 */
function targetsOf(
  nodes: ReadonlyArray<{ id: string; weight: number }>,
  r: number,
): Map<string, number> {
  const target = new Map<string, number>();
  let open = [...nodes].sort((a, b) => (a.id < b.id ? -1 : 1));
  let slots = PARTITIONS * r;
  for (let capped = true; capped && open.length > 0;) {
    const total = open.reduce((sum, node) => sum + node.weight, 0);
    const full = open.filter((node) => (slots * node.weight) / total >= PARTITIONS);
    capped = full.length > 0;
    for (const node of full) target.set(node.id, PARTITIONS);
    slots -= full.length * PARTITIONS;
    open = open.filter((node) => !full.includes(node));
  }
  const total = open.reduce((sum, node) => sum + node.weight, 0);
  const exact = open.map((node) => ({ id: node.id, share: (slots * node.weight) / total }));
  let left = slots;
  for (const entry of exact) {
    target.set(entry.id, Math.floor(entry.share));
    left -= Math.floor(entry.share);
  }
  const byRemainder = [...exact].sort(
    (a, b) =>
      b.share - Math.floor(b.share) - (a.share - Math.floor(a.share)) || (a.id < b.id ? -1 : 1),
  );
  for (const entry of byRemainder.slice(0, Math.max(0, left)))
    target.set(entry.id, (target.get(entry.id) ?? 0) + 1);
  return target;
}

/**
 * Takes each node above its share out of partitions until it is at its share: first where no
 * other node left a hole yet (so one newcomer can fill each hole), then where its zone is held
 * twice, then where it is not the first replica; ties in the partitions' fixed pseudo-random
 * order.
 */
function shed(
  table: string[][],
  count: Map<string, number>,
  target: ReadonlyMap<string, number>,
  zoneOf: ReadonlyMap<string, string>,
  r: number,
): void {
  for (const [id, want] of [...target].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
    let excess = (count.get(id) ?? 0) - want;
    if (excess <= 0) continue;
    const zone = zoneOf.get(id);
    const score = (replicas: readonly string[]): number => {
      const twice = replicas.filter((other) => zoneOf.get(other) === zone).length > 1;
      return (replicas.length >= r ? 4 : 0) + (twice ? 2 : 0) + (replicas[0] === id ? 0 : 1);
    };
    const holding = table
      .map((replicas, p) => ({ p, replicas, score: score(replicas), tie: tieOf(p, id) }))
      .filter((entry) => entry.replicas.includes(id))
      .sort((a, b) => b.score - a.score || (a.tie < b.tie ? -1 : a.tie > b.tie ? 1 : 0));
    for (const entry of holding) {
      if (excess <= 0) break;
      entry.replicas.splice(entry.replicas.indexOf(id), 1);
      excess -= 1;
    }
    count.set(id, want);
  }
}

/** Completes partition `p` to `r` replicas: a zone it lacks first, then the node furthest below its share. */
function fill(
  p: number,
  replicas: string[],
  r: number,
  count: Map<string, number>,
  target: ReadonlyMap<string, number>,
  zoneOf: ReadonlyMap<string, string>,
): void {
  while (replicas.length < r) {
    const zones = new Set(replicas.map((id) => zoneOf.get(id)));
    let best: { id: string; key: [number, number, string] } | undefined;
    for (const [id, zone] of zoneOf) {
      if (replicas.includes(id)) continue;
      const key: [number, number, string] = [
        zones.has(zone) ? 0 : 1,
        (target.get(id) ?? 0) - (count.get(id) ?? 0),
        tieOf(p, id),
      ];
      if (best === undefined || compareKeys(key, best.key) > 0) best = { id, key };
    }
    assert.ok(best !== undefined, 'a partition finds a replica among the members');
    replicas.push(best.id);
    count.set(best.id, (count.get(best.id) ?? 0) + 1);
  }
}

/**
 * Orders each partition's replicas so that every rank, the first (the preferred leader) above
 * all, is spread over the nodes by their share of the slots: a node holding `n` slots is first
 * in about `n / r` partitions, and second in as many (a failed leader's partitions then spread
 * over the others too). A partition keeps a node at a rank while that node is within its share
 * of the rank, so a change moves only the leaderships it must; the others take, in partition
 * order, the replica furthest below its share, ties in the partitions' pseudo-random order. A
 * replica set is never changed here, only its order (movedPartitions ignores order).
 */
function orderReplicas(table: string[][], slots: ReadonlyMap<string, number>, r: number): void {
  const share = (id: string): number => (slots.get(id) ?? 0) / r;
  for (let rank = 0; rank < r - 1; rank += 1) {
    const held = new Map<string, number>();
    const over = (id: string): number => (held.get(id) ?? 0) - share(id);
    const open: number[] = [];
    table.forEach((replicas, p) => {
      const at = replicas[rank];
      if (at === undefined) return;
      if ((held.get(at) ?? 0) < Math.ceil(share(at))) held.set(at, (held.get(at) ?? 0) + 1);
      else open.push(p);
    });
    for (const p of open) {
      const replicas = table[p] as string[];
      let best: { id: string; key: [number, number, string] } | undefined;
      for (const id of replicas.slice(rank)) {
        const key: [number, number, string] = [0, -over(id), tieOf(p, id)];
        if (best === undefined || compareKeys(key, best.key) > 0) best = { id, key };
      }
      assert.ok(best !== undefined, 'a rank finds a replica');
      swap(replicas, rank, replicas.indexOf(best.id));
      held.set(best.id, (held.get(best.id) ?? 0) + 1);
    }
    // The greedy pass can strand a node whose partitions came early: swap a rank with a later
    // replica while that narrows the gap between the two nodes' excess (strictly, so it ends).
    for (let changed = true, passes = 0; changed && passes < 16; passes += 1) {
      changed = false;
      for (const replicas of table) {
        const at = replicas[rank];
        if (at === undefined) continue;
        const later = replicas.slice(rank + 1).find((id) => over(at) - over(id) > 1);
        if (later === undefined) continue;
        swap(replicas, rank, replicas.indexOf(later));
        held.set(at, (held.get(at) ?? 0) - 1);
        held.set(later, (held.get(later) ?? 0) + 1);
        changed = true;
      }
    }
  }
}

function swap(replicas: string[], a: number, b: number): void {
  const first = replicas[a] as string;
  replicas[a] = replicas[b] as string;
  replicas[b] = first;
}

function compareKeys(a: [number, number, string], b: [number, number, string]): number {
  return a[0] - b[0] || a[1] - b[1] || (a[2] > b[2] ? 1 : a[2] < b[2] ? -1 : 0);
}

/** A fixed pseudo-random order of the nodes per partition (spreads the first replicas). */
function tieOf(p: number, id: string): string {
  return createHash('sha256').update(`${p}:${id}`).digest('hex').slice(0, 16);
}

/** The partitions whose replica sets (ignoring order) differ between two tables. */
export function movedPartitions(
  before: ReadonlyArray<readonly string[]>,
  after: ReadonlyArray<readonly string[]>,
): number[] {
  const moved: number[] = [];
  for (let p = 0; p < PARTITIONS; p += 1) {
    const a = new Set(before[p] ?? []);
    const b = after[p] ?? [];
    if (a.size !== b.length || b.some((id) => !a.has(id))) moved.push(p);
  }
  return moved;
}
