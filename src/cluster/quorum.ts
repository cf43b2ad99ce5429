// The plan of a membership change (docs/cluster.md §11): etcd's quorum before and after, the
// storage nodes before and after, and what blocks the change or deserves a warning. Pure
// functions of the membership as read, so that a dry run and the change itself decide alike.

import assert from 'node:assert';

export interface Voter {
  readonly id: string;
  readonly live: boolean;
}

export interface QuorumPlan {
  readonly votersBefore: number;
  readonly votersAfter: number;
  readonly liveVotersBefore: number;
  readonly liveVotersAfter: number;
  readonly quorumAfter: number;
}

export interface Finding {
  readonly code: string;
  readonly message: string;
}

export function quorumOf(voters: number): number {
  assert(voters >= 0);
  return Math.floor(voters / 2) + 1;
}

/** The quorum after adding a (live) voter or removing one. */
export function planQuorum(
  voters: readonly Voter[],
  change: { add?: boolean; removeId?: string },
): QuorumPlan {
  const removed = voters.find((voter) => voter.id === change.removeId);
  const liveBefore = voters.filter((voter) => voter.live).length;
  const votersAfter = voters.length + (change.add === true ? 1 : 0) - (removed ? 1 : 0);
  const liveAfter = liveBefore + (change.add === true ? 1 : 0) - (removed?.live === true ? 1 : 0);
  assert(liveAfter >= 0 && liveAfter <= votersAfter);
  return {
    votersBefore: voters.length,
    votersAfter,
    liveVotersBefore: liveBefore,
    liveVotersAfter: liveAfter,
    quorumAfter: quorumOf(votersAfter),
  };
}

/**
 * A change after which the live voters could not form a quorum is refused. A cluster without
 * etcd voters of its own (external etcd) has nothing to lose here.
 */
export function quorumBlockers(plan: QuorumPlan): Finding[] {
  if (plan.votersBefore === 0) return [];
  if (plan.votersAfter === 0)
    return [{ code: 'quorum_loss', message: 'the change would remove the last etcd voter' }];
  if (plan.liveVotersAfter < plan.quorumAfter)
    return [
      {
        code: 'quorum_loss',
        message:
          `after the change ${plan.liveVotersAfter} of ${plan.votersAfter} etcd voters would ` +
          `be live, fewer than the quorum of ${plan.quorumAfter}: bring the down members back, ` +
          'or mark them lost and remove them first',
      },
    ];
  return [];
}

export interface StoragePlan {
  readonly nodesBefore: number;
  readonly nodesAfter: number;
  readonly replicationFactor: number;
  readonly effectiveFactorAfter: number;
}

export function planStorage(nodesBefore: number, delta: number, factor: number): StoragePlan {
  const nodesAfter = nodesBefore + delta;
  assert(nodesAfter >= 0);
  return {
    nodesBefore,
    nodesAfter,
    replicationFactor: factor,
    effectiveFactorAfter: Math.min(factor, nodesAfter),
  };
}

/** Fewer storage nodes than the factor is allowed; the plan says what it costs. */
export function storageFindings(plan: StoragePlan): { blockers: Finding[]; warnings: Finding[] } {
  if (plan.nodesAfter === 0)
    return {
      blockers: [{ code: 'last_storage_node', message: 'no storage node would be left' }],
      warnings: [],
    };
  if (plan.nodesAfter < plan.replicationFactor)
    return {
      blockers: [],
      warnings: [
        {
          code: 'replication_reduced',
          message:
            `${plan.nodesAfter} storage node(s) would be left, fewer than ` +
            `cluster.replication_factor ${plan.replicationFactor}: every partition keeps ` +
            `${plan.effectiveFactorAfter} cop${plan.effectiveFactorAfter === 1 ? 'y' : 'ies'}`,
        },
      ],
    };
  return { blockers: [], warnings: [] };
}
