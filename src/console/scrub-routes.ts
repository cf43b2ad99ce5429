// Console API routes of scrub jobs (scrub-jobs.ts): start (with a dry run that counts what the
// scrub would read), list, watch and cancel. A scrub only reads, so an operator may run one; a
// tenant-scoped token starts and sees only its tenant's jobs (403 for another tenant's job).
// Also the corrupt-chunk records the engine keeps of a tenant (src/engine/ops/corrupt-chunks.ts):
// every chunk a read or a scrub found damaged, for the operator to act on.

import type { Route } from '../http/router.js';
import type { Handler } from '../http/api.js';
import type { Exchange } from '../http/exchange.js';
import { DB, tenantKey, type TenantRecord } from '../engine/index/schema.js';
import { scrubTargets } from '../engine/ops/tenant-scrub.js';
import { validateBucketName, validateTenantId } from '../security/names.js';
import { BadRequest, NotFound } from '../util/errors.js';
import type { ConsoleServices } from './api.js';
import { ScrubJobs, scrubPass, type ScrubJob } from './scrub-jobs.js';
import { consoleSchemas as schemas, problems } from './schemas.js';
import { dryRunOf, readObject, reasonOf, requireTenantScope } from './request.js';

const bearer = 'bearer' as const;
/** The longest a dry run counts before it answers with `complete: false`. */
const PLAN_MS_MAX = 30_000;

function iso(ms: number | undefined): string | undefined {
  return ms === undefined ? undefined : new Date(ms).toISOString();
}

export function scrubJson(job: ScrubJob): Record<string, unknown> {
  const { planned, counts } = job;
  return {
    id: job.id,
    tenantId: job.tenantId,
    ...(job.bucket === undefined ? {} : { bucket: job.bucket }),
    state: job.state,
    startedBy: job.startedBy,
    startedAt: iso(job.startedAt),
    ...(job.finishedAt === undefined ? {} : { finishedAt: iso(job.finishedAt) }),
    progress:
      planned.chunkRefs === 0
        ? job.state === 'complete'
          ? 1
          : 0
        : counts.chunkRefs / planned.chunkRefs,
    planned,
    counts,
    corrupt: job.corrupt,
    ...(job.error === undefined ? {} : { error: job.error }),
  };
}

/** The job named by the path; 403 for a scoped token and another tenant's job, else 404. */
function jobOf(
  jobs: ScrubJobs,
  token: { tenant?: string | undefined },
  exchange: Exchange,
  id: string,
): ScrubJob {
  const job = jobs.get(id);
  if (job) requireTenantScope(exchange, token, job.tenantId);
  else throw NotFound(`scrub job ${id} not found (jobs are kept until the admin restarts)`);
  return job;
}

function liveTenant(services: ConsoleServices, tenantId: string): TenantRecord {
  const tenant = services.store.get<TenantRecord>(DB.tenants, tenantKey(tenantId));
  if (!tenant || tenant.state === 'deleted') throw NotFound(`tenant ${tenantId} not found`);
  return tenant;
}

export function scrubRoutes(services: ConsoleServices, jobs: ScrubJobs): Route<Handler>[] {
  return [
    {
      method: 'POST',
      path: '/scrubs',
      operationId: 'startConsoleScrub',
      doc: {
        summary:
          "Start a checksum scrub of a tenant's (or one bucket's) chunks; with dryRun, count what it would read",
        auth: bearer,
        query: { dryRun: { type: 'boolean', description: 'count what the scrub would read' } },
        requestBody: { contentType: 'application/json', schema: schemas.scrubBody },
        responses: {
          202: { description: 'the job, started', schema: schemas.scrubJob },
          200: { description: 'the dry-run plan', schema: schemas.scrubPlan },
          ...problems(400, 404, 409),
        },
      },
      handler: async (exchange) => {
        const { token } = services.authenticate(exchange, 'operator');
        const body = await readObject(exchange);
        const tenantId = body['tenantId'];
        if (typeof tenantId !== 'string') throw BadRequest('tenantId is required');
        validateTenantId(tenantId);
        requireTenantScope(exchange, token, tenantId);
        const bucket = body['bucket'];
        if (bucket !== undefined) validateBucketName(bucket);
        reasonOf(exchange, body);
        const dryRun = dryRunOf(exchange);
        liveTenant(services, tenantId);
        scrubTargets(services.store, tenantId, bucket); // 404 for an unknown bucket
        const target = { tenantId, bucket };
        if (dryRun) {
          const planned = { buckets: 0, versions: 0, chunkRefs: 0, logicalBytes: 0 };
          const deadline = Date.now() + PLAN_MS_MAX;
          const complete = await scrubPass(services.engine, target, false, (step) => {
            for (const field of Object.keys(planned) as Array<keyof typeof planned>)
              planned[field] += step[field];
            return Date.now() < deadline;
          });
          exchange.sendJson(200, {
            dryRun: true,
            applied: false,
            action: 'startConsoleScrub',
            target: `tenants/${tenantId}${bucket === undefined ? '' : `/buckets/${bucket}`}`,
            complete,
            counts: planned,
            blockers: [],
          });
          return;
        }
        const job = jobs.start(target, `admin:${token.tokenId}`);
        exchange.sendJson(202, scrubJson(job), {
          Location: `/admin/console/api/scrubs/${job.id}`,
        });
      },
    },
    {
      method: 'GET',
      path: '/scrubs',
      operationId: 'listConsoleScrubs',
      doc: {
        summary: 'Scrub jobs, newest first (a tenant-scoped token sees only its tenant)',
        auth: bearer,
        query: { tenant: { type: 'string', description: 'only this tenant' } },
        responses: {
          200: { description: 'jobs', schema: schemas.scrubList },
          ...problems(400),
        },
      },
      handler: (exchange) => {
        const wanted = exchange.query.get('tenant') ?? undefined;
        const { token } = services.authenticate(exchange, 'viewer', wanted);
        const tenant = token.tenant ?? wanted;
        exchange.sendJson(200, { jobs: jobs.list(tenant).map(scrubJson) });
      },
    },
    {
      method: 'GET',
      path: '/scrubs/{jobId}',
      operationId: 'getConsoleScrub',
      doc: {
        summary: 'One scrub job: state, progress, counts and the corrupt chunks found so far',
        auth: bearer,
        responses: {
          200: { description: 'the job', schema: schemas.scrubJob },
          ...problems(400, 404),
        },
      },
      handler: (exchange, params) => {
        const { token } = services.authenticate(exchange, 'viewer');
        exchange.sendJson(200, scrubJson(jobOf(jobs, token, exchange, params['jobId'] ?? '')));
      },
    },
    {
      method: 'POST',
      path: '/scrubs/{jobId}/cancel',
      operationId: 'cancelConsoleScrub',
      doc: {
        summary: 'Cancel a running scrub after its current step (a finished job stays as it is)',
        auth: bearer,
        query: { dryRun: { type: 'boolean', description: 'apply nothing' } },
        requestBody: {
          contentType: 'application/json',
          required: false,
          schema: { type: 'object', properties: { reason: { type: 'string' } } },
        },
        responses: {
          200: { description: 'the job', schema: schemas.scrubJob },
          ...problems(400, 404),
        },
      },
      handler: async (exchange, params) => {
        const { token } = services.authenticate(exchange, 'operator');
        const job = jobOf(jobs, token, exchange, params['jobId'] ?? '');
        reasonOf(exchange, await readObject(exchange));
        if (dryRunOf(exchange)) {
          exchange.sendJson(200, scrubJson(job));
          return;
        }
        exchange.sendJson(200, scrubJson(jobs.cancel(job)));
      },
    },
    corruptChunksRoute(services),
  ];
}

function corruptChunksRoute(services: ConsoleServices): Route<Handler> {
  return {
    method: 'GET',
    path: '/tenants/{id}/corrupt-chunks',
    operationId: 'listConsoleCorruptChunks',
    doc: {
      summary:
        "The tenant's chunks a read or a scrub found damaged, as the engine records them (at most 1000)",
      auth: bearer,
      responses: {
        200: { description: 'the records', schema: schemas.corruptChunkList },
        ...problems(400, 404),
      },
    },
    handler: async (exchange, params) => {
      const tenantId = params['id'] ?? '';
      services.authenticate(exchange, 'viewer', tenantId);
      const tenant = liveTenant(services, tenantId);
      const found = await services.engine.call('listCorruptChunks', { tenantNum: tenant.num });
      exchange.sendJson(200, {
        tenantId: tenant.id,
        chunks: found.chunks.map((chunk) => ({
          chunkId: chunk.chunkId,
          segmentId: chunk.segmentId,
          offset: chunk.offset,
          length: chunk.length,
          reason: chunk.reason,
          foundBy: chunk.foundBy,
          action: chunk.action,
          firstSeenAt: iso(chunk.firstSeenAt),
          lastSeenAt: iso(chunk.lastSeenAt),
          seen: chunk.seen,
        })),
        truncated: found.truncated,
      });
    },
  };
}
