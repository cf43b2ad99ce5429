// Cluster routes on a single node.
//
// - Membership: this node is the only member, a voter and the leader. Any valid token may read
//   it (tenant-scoped ones included).
// - join, drain, remove, replace (owner, unscoped token): the body is validated as the cluster
//   implementation will need it (strings, forceLost a boolean, reason required, confirm equal to
//   the member id: `id`, or `oldId` for replace), and then the answer is 409 `conflict`: a
//   single node has no consensus membership to change. Dry runs answer the same.
// - rebalance (owner; a scoped token only for its own tenant): on one node there is no replica
//   to move, so it runs the engine's checksum-verified scrub of the tenant's (or one bucket's)
//   chunks and reports what it verified and what it found corrupt. It calls the engine's
//   read-only `scrubTenantChunks` step by step until the tenant is done, however long that takes:
//   past ANSWER_MS_MAX the request answers 202 and the rebalance goes on as a job whose
//   `progress` shows the scrub's figures so far, then the replicas' phase (repair-jobs.ts). A dry
//   run counts what the scrub would read.

import { hostname } from 'node:os';
import type { Route } from '../http/router.js';
import type { Handler } from '../http/server.js';
import type { Exchange } from '../http/exchange.js';
import type { ScrubArgs, ScrubCursor, CorruptChunk } from '../engine/ops/tenant-scrub.js';
import { validateTenantId, validateBucketName } from '../security/names.js';
import { BadRequest, Conflict, Unavailable } from '../util/errors.js';
import { DB, type TenantRecord } from '../engine/index/schema.js';
import {
  type AdminServices,
  type Body,
  readBody,
  requiredString,
  optionalString,
  optionalBoolean,
  requiredReason,
  requireConfirm,
  isDryRun,
  dryRunQuery,
  reasonSchema,
} from './request.js';
import { membershipSchema, scrubReportSchema, problems, str } from './json.js';
import { liveTenant } from './tenant-routes.js';
import { ClusterAccess } from '../cluster/access.js';
import { RepairJobs } from './repair-jobs.js';
import type { Membership, MemberView } from '../cluster/membership.js';

const bearer = 'bearer' as const;

interface MembershipChange {
  readonly name: 'join' | 'drain' | 'remove' | 'replace';
  readonly operationId: string;
  readonly summary: string;
  readonly required: readonly string[];
  readonly optional: readonly string[];
  readonly confirmOf: 'id' | 'oldId';
}

const nodeFields = ['listenAddr', 'secret', 'name', 'softwareVersion', 'zone', 'site'];
const changes: readonly MembershipChange[] = [
  {
    name: 'join',
    operationId: 'joinConsensus',
    summary: 'Add a voter to the consensus membership',
    required: ['id', 'address', 'reason', 'confirm'],
    optional: nodeFields,
    confirmOf: 'id',
  },
  {
    name: 'drain',
    operationId: 'drainConsensus',
    summary: 'Demote a voter before shutdown (forceLost: mark an unreachable voter lost)',
    required: ['id', 'reason', 'confirm'],
    optional: [],
    confirmOf: 'id',
  },
  {
    name: 'remove',
    operationId: 'removeConsensus',
    summary: 'Remove a drained member',
    required: ['id', 'reason', 'confirm'],
    optional: [],
    confirmOf: 'id',
  },
  {
    name: 'replace',
    operationId: 'replaceConsensus',
    summary: 'Add a replacement voter, then remove the old member',
    required: ['oldId', 'id', 'address', 'reason', 'confirm'],
    optional: nodeFields,
    confirmOf: 'oldId',
  },
];

/** A drain's answer: the membership, and what the drained member reclaimed (§8a). */
const drainedSchema = {
  ...membershipSchema,
  properties: {
    ...(membershipSchema as { properties: Record<string, unknown> }).properties,
    reclaimed: {
      type: 'object',
      description:
        'what the drained member dropped of the copies it no longer holds (or {error}): ' +
        'buckets, keysDropped, keysKept, versionsDropped, logicalBytes, physicalBytes, ' +
        'tombstonesDropped',
      additionalProperties: true,
    },
  },
};

function changeBodySchema(change: MembershipChange): Record<string, unknown> {
  const properties: Record<string, unknown> = {};
  for (const field of [...change.required, ...change.optional]) properties[field] = str;
  properties['reason'] = reasonSchema;
  properties['confirm'] = { type: 'string', description: `must equal ${change.confirmOf}` };
  if (change.name === 'drain' || change.name === 'remove')
    properties['forceLost'] = { type: 'boolean' };
  return { type: 'object', required: change.required, properties };
}

function validateChange(exchange: Exchange, change: MembershipChange, body: Body): void {
  for (const field of change.required) {
    if (field === 'reason') requiredReason(exchange, body);
    else if (field !== 'confirm') requiredString(body, field);
  }
  for (const field of change.optional) optionalString(body, field);
  optionalBoolean(body, 'forceLost');
  requireConfirm(body, 'confirm', String(body[change.confirmOf]));
}

export function clusterRoutes(services: AdminServices): Route<Handler>[] {
  const { auth, node } = services;
  const membership = (): object => ({
    members: [{ id: node.id, name: hostname(), address: services.address(), state: 'voter' }],
    leaderId: node.id,
  });
  // Cluster mode (docs/cluster.md §11): the same routes act on the cluster's membership.
  const cluster =
    services.settings.string('cluster.listen') === ''
      ? undefined
      : new ClusterAccess(
          services.settings.string('data_dir'),
          services.settings.int('cluster.replication_factor'),
        );
  const routes: Route<Handler>[] = [
    {
      method: 'GET',
      path: '/cluster/consensus/membership',
      operationId: 'getConsensusMembership',
      doc: {
        summary: 'The committed consensus membership (a single node: itself, as voter and leader)',
        auth: bearer,
        responses: { 200: { description: 'membership', schema: membershipSchema }, ...problems() },
      },
      handler: async (exchange) => {
        auth.authenticate(exchange, 'viewer');
        if (cluster === undefined) exchange.sendJson(200, membership());
        else exchange.sendJson(200, contractMembership(await (await cluster.membership()).view()));
      },
    },
  ];
  for (const change of changes) {
    routes.push({
      method: 'POST',
      path: `/cluster/consensus/${change.name}`,
      operationId: change.operationId,
      doc: {
        summary: `${change.summary}. A single node answers 409 conflict (not clustered).`,
        auth: bearer,
        query: dryRunQuery,
        requestBody: { contentType: 'application/json', schema: changeBodySchema(change) },
        responses: {
          200: {
            description: 'membership change committed (clustered nodes only)',
            schema: change.name === 'drain' ? drainedSchema : membershipSchema,
          },
          ...problems(400, 409),
        },
      },
      handler: async (exchange) => {
        const caller = auth.authenticate(exchange, 'owner');
        caller.requireGlobal();
        const body = await readBody(exchange);
        validateChange(exchange, change, body);
        const dryRun = isDryRun(exchange);
        if (cluster !== undefined) {
          const answer = await changeMembership(
            await cluster.membership(),
            change,
            body,
            dryRun,
            () => moveReplicas(services),
            (id) => services.engine.call('clusterReclaim', { nodeId: id }),
          );
          exchange.sendJson(200, contractMembership(answer));
          return;
        }
        throw Conflict(
          `this node is not clustered: it runs as a single node with no consensus membership to ${change.name}; start the service in cluster mode to change membership`,
        );
      },
    });
  }
  const jobs = new RepairJobs();
  routes.push(rebalanceRoute(services, jobs), repairJobRoute(services, jobs));
  return routes;
}

/**
 * A member as DECISIONS.md's cluster section gives it (docs/cluster.md §2, "At the API"): the
 * states are voter, learner, draining, drained, lost and removed, so a join in progress
 * (`joining`) is a `learner`; an empty zone or site is absent.
 */
export function contractMember(member: MemberView): Record<string, unknown> {
  const { zone, site, state, ...rest } = member;
  return {
    ...rest,
    state: state === 'joining' ? 'learner' : state,
    ...(zone === '' ? {} : { zone }),
    ...(site === '' ? {} : { site }),
  };
}

/** Any answer that carries the membership (a dry run's plan does not) in the contract's shape. */
function contractMembership(answer: unknown): unknown {
  if (answer === null || typeof answer !== 'object' || !('members' in answer)) return answer;
  const members = answer.members;
  if (!Array.isArray(members)) return answer;
  return { ...answer, members: (members as MemberView[]).map(contractMember) };
}

/** One membership change in cluster mode; bodies were validated by `validateChange`. */
async function changeMembership(
  membership: Membership,
  change: MembershipChange,
  body: Body,
  dryRun: boolean,
  moveData: () => Promise<void>,
  reclaim: (id: string) => Promise<unknown>,
): Promise<unknown> {
  const text = (field: string): string => optionalString(body, field) ?? '';
  const reason = text('reason');
  const forceLost = optionalBoolean(body, 'forceLost') === true;
  const joinInput = () => {
    if (text('secret') === '') throw BadRequest('secret is required: the new node prints it');
    return {
      id: text('id'),
      address: text('address'),
      secret: text('secret'),
      reason,
      zone: text('zone'),
      site: text('site'),
      name: text('name'),
      softwareVersion: text('softwareVersion'),
    };
  };
  switch (change.name) {
    case 'join':
      return membership.join(joinInput(), dryRun);
    case 'drain':
      return membership.drain({ id: text('id'), reason, forceLost, moveData, reclaim }, dryRun);
    case 'remove':
      return membership.remove({ id: text('id'), reason, forceLost }, dryRun);
    case 'replace':
      return membership.replace({ oldId: text('oldId'), join: joinInput() }, dryRun);
  }
}

/**
 * A drain's or forceLost's data move: every tenant rebalanced on every member, so that each
 * bucket's new replica set holds all of it again (docs/cluster.md §11). Any member that could
 * not take part fails the move: a drained member must not be demoted while it may hold the only
 * copy of something.
 */
async function moveReplicas(services: AdminServices): Promise<void> {
  for (const { value: tenant } of services.store.range<TenantRecord>(DB.tenants, {})) {
    if (tenant.state === 'deleted') continue;
    const result = await services.engine.call('clusterRepair', {
      tenantId: tenant.id,
      dryRun: false,
      reclaim: false,
    });
    if (result === null) return;
    const failed = Object.entries(result.nodes).filter(
      ([, counts]) => typeof counts === 'object' && counts !== null && 'error' in counts,
    );
    if (failed.length > 0 || result.counts.replicasUnreachable > 0)
      throw Unavailable(
        `the data of tenant ${tenant.id} could not be moved: ` +
          (failed.map(([id, counts]) => `${id}: ${JSON.stringify(counts)}`).join('; ') ||
            `${result.counts.replicasUnreachable} replicas unreachable`),
      );
  }
}

const repairJobSchema = {
  type: 'object',
  required: ['jobId', 'state'],
  properties: {
    jobId: str,
    state: { type: 'string', enum: ['queued', 'running', 'succeeded', 'failed'] },
    tenantId: str,
    startedAt: str,
    finishedAt: str,
    result: { ...scrubReportSchema, description: 'the report, once succeeded' },
    error: {
      type: 'object',
      description: 'why it failed',
      properties: { code: str, message: str },
    },
    progress: {
      type: 'object',
      description: "what it has done so far: the phase, and the scrub's figures",
      properties: {
        phase: { type: 'string', enum: ['scrub', 'replicas', 'done'] },
        scrub: { type: 'object', additionalProperties: { type: 'integer' } },
      },
    },
  },
};

function repairJobRoute(services: AdminServices, jobs: RepairJobs): Route<Handler> {
  return {
    method: 'GET',
    path: '/cluster/repair/jobs/{jobId}',
    operationId: 'getRepairJob',
    doc: {
      summary:
        "A rebalance job's state and, once done, its report (kept in this node's memory: not across a restart)",
      auth: bearer,
      responses: {
        200: { description: 'the job', schema: repairJobSchema },
        ...problems(400, 404),
      },
    },
    handler: (exchange, params) => {
      const caller = services.auth.authenticate(exchange, 'viewer');
      const job = jobs.get(params['jobId'] ?? '');
      caller.requireTenant(job.tenantId);
      exchange.sendJson(200, job);
    },
  };
}

function rebalanceRoute(services: AdminServices, jobs: RepairJobs): Route<Handler> {
  return {
    method: 'POST',
    path: '/cluster/repair/rebalance',
    operationId: 'rebalanceRepair',
    doc: {
      summary:
        "Checksum-verified rebalance of a tenant's or bucket's chunks; on a single node, a scrub that reports corrupt chunks",
      auth: bearer,
      query: dryRunQuery,
      requestBody: {
        contentType: 'application/json',
        schema: {
          type: 'object',
          required: ['tenantId', 'reason', 'confirmTenant'],
          properties: {
            tenantId: str,
            bucketName: str,
            reason: reasonSchema,
            confirmTenant: { type: 'string', description: 'must equal tenantId' },
            confirmBucket: {
              type: 'string',
              description: 'must equal bucketName when it is given',
            },
          },
        },
      },
      responses: {
        200: {
          description: 'completed scrub report (or the dry-run plan)',
          schema: scrubReportSchema,
        },
        202: {
          description: 'still running: follow it at GET /cluster/repair/jobs/{jobId}',
          schema: {
            type: 'object',
            required: ['jobId', 'state'],
            properties: { jobId: str, state: { type: 'string', enum: ['queued', 'running'] } },
          },
        },
        ...problems(400, 404),
      },
    },
    handler: async (exchange) => {
      const caller = services.auth.authenticate(exchange, 'owner');
      const body = await readBody(exchange);
      const tenantId = requiredString(body, 'tenantId');
      validateTenantId(tenantId);
      caller.requireTenant(tenantId);
      const bucket = optionalString(body, 'bucketName');
      if (bucket !== undefined) validateBucketName(bucket);
      requiredReason(exchange, body);
      requireConfirm(body, 'confirmTenant', tenantId);
      if (bucket !== undefined) requireConfirm(body, 'confirmBucket', bucket);
      else if (body['confirmBucket'] !== undefined)
        throw BadRequest('confirmBucket is only for a rebalance of one bucket (give bucketName)');
      const dryRun = isDryRun(exchange);
      liveTenant(services, tenantId);
      const progress: RebalanceProgress = { phase: 'scrub', scrub: emptyScrubCounts() };
      const work = rebalance(services, { tenantId, bucket, dryRun }, progress);
      const outcome = await jobs.run(tenantId, work, undefined, progress);
      if ('done' in outcome) exchange.sendJson(200, outcome.done);
      else exchange.sendJson(202, { jobId: outcome.job.jobId, state: outcome.job.state });
    },
  };
}

type ScrubCounts = ReturnType<typeof emptyScrubCounts>;

/** What a running rebalance job shows: its phase, and the scrub's figures so far. */
interface RebalanceProgress extends Record<string, unknown> {
  phase: 'scrub' | 'replicas' | 'done';
  scrub: ScrubCounts;
}

function emptyScrubCounts() {
  return {
    buckets: 0,
    versions: 0,
    chunkRefs: 0,
    logicalBytes: 0,
    chunksVerified: 0,
    bytesVerified: 0,
    corruptChunks: 0,
  };
}

/** The scrub, then (on a cluster member) the replicas' repair: the rebalance's report. */
async function rebalance(
  services: AdminServices,
  args: { tenantId: string; bucket: string | undefined; dryRun: boolean },
  progress: RebalanceProgress,
): Promise<Record<string, unknown>> {
  const { tenantId, bucket, dryRun } = args;
  const report = await runScrub(services, { tenantId, bucket, verify: !dryRun }, progress.scrub);
  progress.phase = 'replicas';
  // On a cluster member the engine then copies what any replica lacks (cluster/repair.ts).
  // and replaces the corrupt chunks the scrub found with good copies from other members.
  const corrupt = (report['corrupt'] as CorruptChunk[]).map((entry) => entry.chunkId);
  const replication = await services.engine.call('clusterRepair', {
    tenantId,
    dryRun,
    corrupt,
    ...(bucket === undefined ? {} : { bucket }),
  });
  const target =
    bucket === undefined ? `tenants/${tenantId}` : `tenants/${tenantId}/buckets/${bucket}`;
  progress.phase = 'done';
  return {
    dryRun,
    applied: !dryRun,
    action: 'rebalanceRepair',
    target,
    mode: replication === null ? 'single-node-scrub' : 'cluster-rebalance',
    ...report,
    ...(replication === null ? {} : { replication }),
    blockers: [],
  };
}

/**
 * The scrub of the tenant's (or bucket's) chunks, step by step to its end; `counts` is updated
 * after every step (a running job shows it). At most 1000 corrupt chunks are listed (all are
 * counted), so the report stays bounded.
 */
async function runScrub(
  services: AdminServices,
  args: { tenantId: string; bucket: string | undefined; verify: boolean },
  counts: ScrubCounts,
): Promise<Record<string, unknown>> {
  const corrupt: CorruptChunk[] = [];
  let cursor: ScrubCursor | undefined;
  do {
    const request: ScrubArgs = { tenantId: args.tenantId, verify: args.verify };
    if (args.bucket !== undefined) request.bucket = args.bucket;
    if (cursor !== undefined) request.cursor = cursor;
    const step = await services.engine.call('scrubTenantChunks', request);
    for (const field of Object.keys(counts) as Array<keyof ScrubCounts>)
      counts[field] += step[field];
    for (const entry of step.corrupt) if (corrupt.length < 1000) corrupt.push(entry);
    cursor = step.cursor ?? undefined;
  } while (cursor !== undefined);
  return { complete: true, counts: { ...counts }, corrupt };
}
