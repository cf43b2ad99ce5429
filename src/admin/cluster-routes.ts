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
import { componentLogger } from '../util/log.js';
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
import { RepairJobs, type StoredJob } from './repair-jobs.js';
import { EtcdJobStore } from '../cluster/jobs.js';
import {
  newCheckpoint,
  runRebalance,
  type RebalanceArgs,
  type RebalanceCheckpoint,
} from './rebalance-job.js';
import { bytesOfPartitions, layoutRoute } from './layout-routes.js';
import { retryUntilDone } from '../util/retry.js';
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
          const opened = await cluster.membership();
          opened.bytesOfPartitions = (partitions) => bytesOfPartitions(services.store, partitions);
          const answer = await changeMembership(
            opened,
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
  const jobs = new RepairJobs(
    cluster === undefined
      ? undefined
      : {
          store: new EtcdJobStore<StoredJob>(() => cluster.registry()),
          nodeId: services.settings.string('cluster.node_id'),
          log: componentLogger('repair-jobs'),
        },
  );
  if (cluster !== undefined) services.onClose?.(resumeJobs(services, jobs));
  routes.push(
    rebalanceRoute(services, jobs),
    repairJobRoute(services, jobs),
    layoutRoute(services, cluster),
  );
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
      description: "what it has done so far: the phase, the scrub's figures, the buckets repaired",
      properties: {
        phase: { type: 'string', enum: ['scrub', 'replicas', 'done'] },
        scrub: { type: 'object', additionalProperties: { type: 'integer' } },
        bucketsDone: { type: 'integer', minimum: 0 },
        bucketsTotal: { type: 'integer', minimum: 0 },
      },
    },
    runner: { ...str, description: 'the member that runs it (cluster)' },
    resumed: {
      type: 'integer',
      minimum: 0,
      description: 'how often its member resumed it from its checkpoint after a restart',
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
        "A rebalance job's state, progress and, once done, its report (in a cluster: kept in etcd, answered by any member, resumed by its node after a restart)",
      auth: bearer,
      responses: {
        200: { description: 'the job', schema: repairJobSchema },
        ...problems(400, 404),
      },
    },
    handler: async (exchange, params) => {
      const caller = services.auth.authenticate(exchange, 'viewer');
      const job = await jobs.find(params['jobId'] ?? '');
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
      const args: RebalanceArgs = { tenantId, dryRun, ...(bucket === undefined ? {} : { bucket }) };
      const checkpoint = newCheckpoint();
      const { checkpointed, bind } = jobs.checkpointer();
      const work = runRebalance(services, args, checkpoint, checkpointed);
      const outcome = await jobs.run(tenantId, work, undefined, checkpoint.progress, {
        args,
        checkpoint,
        bind,
      });
      if ('done' in outcome) exchange.sendJson(200, outcome.done);
      else exchange.sendJson(202, { jobId: outcome.job.jobId, state: outcome.job.state });
    },
  };
}

/**
 * Resumes the rebalance jobs this node was running when it stopped (repair-jobs.ts), once etcd
 * answers (a node waiting to be joined has none); answers what stops the retries.
 */
function resumeJobs(services: AdminServices, jobs: RepairJobs): () => void {
  return retryUntilDone(
    () =>
      jobs
        .resume((job, checkpointed) =>
          runRebalance(
            services,
            job.args as RebalanceArgs,
            job.checkpoint as RebalanceCheckpoint,
            checkpointed,
          ),
        )
        .then(() => undefined),
    { log: componentLogger('repair-jobs'), what: 'rebalance jobs not resumed yet' },
  );
}
