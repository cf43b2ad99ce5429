// Versioned layouts (docs/cluster.md §5 and §9, as built): the storage members that hold data,
// stored explicitly in etcd with a version that grows by one at every change, so that every node
// places buckets from the same input and a replica can tell a write placed under an older layout
// (fencing, replication.ts).
//
//   layout/current         the current Layout (JSON)              with the member change, one txn
//   layout/v/<16 digits>   every version ever stored, never rewritten (history, for operators)
//
// A layout is published in the same etcd transaction as the member record whose change alters
// the storage set (registry.ts `createMember`, `updateMember`): a join that makes a voter, a drain,
// forceLost, a removal. So no node ever sees a member's new state with the old layout or the
// reverse at one revision, and two changes cannot publish one version twice (the transaction
// compares `layout/current`'s mod revision). The layout holds the placement input only (ids,
// zones, draining); a bucket's replicas are still chosen from it by rendezvous hashing
// (replication.ts `replicasOf`), which is deterministic for a given layout.
//
// A cluster made before layouts were stored has none until its first membership change, or the
// first rebalance (`ensureLayout`); until then placement is read from the membership (version 0).

import type { MemberRecord } from './registry.js';

export const LAYOUT_RECORD_VERSION = 1;
export const LAYOUT_CURRENT = 'layout/current';
/** Member states that hold data (as cluster-view.ts places them). */
const STORAGE_STATES: ReadonlySet<string> = new Set(['voter', 'draining']);

export interface LayoutMember {
  readonly id: string;
  readonly zone: string;
  /** Takes no new replicas; its data is moving off (membership.ts drain). */
  readonly draining: boolean;
}

export interface Layout {
  readonly v: number;
  /** 1 and up; every change stores the next one. */
  readonly version: number;
  /** The storage members, by id. */
  readonly members: readonly LayoutMember[];
  readonly createdAt: string;
  readonly reason: string;
}

export function layoutHistoryKey(version: number): string {
  return `layout/v/${String(version).padStart(16, '0')}`;
}

/** The storage members of a membership, as a layout holds them (sorted by id). */
export function layoutMembersOf(records: Iterable<MemberRecord>): LayoutMember[] {
  return [...records]
    .filter((record) => STORAGE_STATES.has(record.state))
    .map((record) => ({ id: record.id, zone: record.zone, draining: record.state === 'draining' }))
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
        member.draining === other.draining
      );
    })
  );
}

/** The layout after `previous` for `members`; undefined when nothing placement reads changed. */
export function nextLayout(
  previous: Layout | undefined,
  members: Iterable<MemberRecord>,
  reason: string,
): Layout | undefined {
  const next = layoutMembersOf(members);
  if (previous !== undefined && sameMembers(previous.members, next)) return undefined;
  return {
    v: LAYOUT_RECORD_VERSION,
    version: (previous?.version ?? 0) + 1,
    members: next,
    createdAt: new Date().toISOString(),
    reason,
  };
}
