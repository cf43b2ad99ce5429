// Console API routes of scheduled scrubs (src/engine/scrub-schedule.ts): list the schedules with
// their last runs, and set, change or remove one. The target is a tenant id or `*` (every active
// tenant). The engine runs them in the background; these routes only read the rows and send the
// change, with its audit row, to the engine.
//
// Scope: a tenant-scoped token sees and sets only its tenant's schedule; of the global schedule
// it sees the interval and the findings in its own tenant, and it cannot change it.

import { refuseUnknownFields } from '../security/names.js';
import type { Route } from '../http/router.js';
import type { Handler } from '../http/api.js';
import type { Exchange } from '../http/exchange.js';
import { auditRowOf } from '../http/audit.js';
import {
  ALL_TENANTS,
  scrubSchedules,
  type ScheduledScrubRun,
  type ScrubScheduleRecord,
} from '../engine/scrub-schedule.js';
import { validateTenantId } from '../security/names.js';
import { BadRequest, Forbidden } from '../util/errors.js';
import type { ConsoleServices } from './api.js';
import { consoleSchemas as schemas, problems } from './schemas.js';
import { dryRunOf, readObject, reasonOf, requireTenantScope } from './request.js';

/** The fields the body of this page's write may hold; any other is refused. */
const BODY_FIELDS: ReadonlySet<string> = new Set(['intervalHours', 'runNow', 'reason']);

const bearer = 'bearer' as const;

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function runJson(run: ScheduledScrubRun, tenant: string | undefined): Record<string, unknown> {
  const corrupt = run.corrupt.filter((entry) => tenant === undefined || entry.tenantId === tenant);
  return {
    state: run.state,
    startedAt: iso(run.startedAt),
    finishedAt: iso(run.finishedAt),
    tenants: run.tenants,
    versions: run.versions,
    chunksVerified: run.chunksVerified,
    bytesVerified: run.bytesVerified,
    corruptChunks: tenant === undefined ? run.corruptChunks : corrupt.length,
    corrupt,
    ...(run.error === undefined ? {} : { error: run.error }),
  };
}

/** A schedule as the console shows it; a scoped token sees only its tenant's findings. */
export function scheduleJson(
  schedule: ScrubScheduleRecord,
  tenant?: string,
): Record<string, unknown> {
  return {
    target: schedule.target,
    intervalHours: schedule.intervalHours,
    nextRunAt: iso(schedule.nextRunAt),
    createdAt: iso(schedule.createdAt),
    updatedAt: iso(schedule.updatedAt),
    lastRun: schedule.lastRun === undefined ? null : runJson(schedule.lastRun, tenant),
  };
}

function targetOf(exchange: Exchange, token: { tenant?: string | undefined }, raw: string): string {
  if (raw === ALL_TENANTS) {
    if (token.tenant !== undefined)
      throw Forbidden('the schedule of every tenant is not for a tenant-scoped token');
    return raw;
  }
  validateTenantId(raw);
  requireTenantScope(exchange, token, raw);
  return raw;
}

export function scheduleRoutes(services: ConsoleServices): Route<Handler>[] {
  return [
    {
      method: 'GET',
      path: '/scrub-schedules',
      operationId: 'listConsoleScrubSchedules',
      doc: {
        summary:
          'Scheduled scrubs with their last runs (a scoped token: its tenant and the global one)',
        auth: bearer,
        responses: {
          200: { description: 'schedules', schema: schemas.scheduleList },
          ...problems(),
        },
      },
      handler: (exchange) => {
        const { token } = services.authenticate(exchange, 'viewer');
        const scope = token.tenant;
        const shown = scrubSchedules(services)
          .filter((s) => scope === undefined || s.target === scope || s.target === ALL_TENANTS)
          .map((s) => scheduleJson(s, scope));
        exchange.sendJson(200, { schedules: shown });
      },
    },
    {
      method: 'PUT',
      path: '/scrub-schedules/{target}',
      operationId: 'putConsoleScrubSchedule',
      doc: {
        summary:
          'Scrub a tenant (or, with target *, every tenant) every intervalHours; null removes the schedule',
        auth: bearer,
        query: { dryRun: { type: 'boolean', description: 'validate and answer; change nothing' } },
        requestBody: { contentType: 'application/json', schema: schemas.scheduleBody },
        responses: {
          200: { description: 'the schedule (null once removed)', schema: schemas.scheduleAnswer },
          ...problems(400, 404),
        },
      },
      handler: async (exchange, params) => {
        const { token } = services.authenticate(exchange, 'operator');
        const target = targetOf(exchange, token, params['target'] ?? '');
        const body = await readObject(exchange);
        refuseUnknownFields(body, BODY_FIELDS);
        if (!('intervalHours' in body))
          throw BadRequest('intervalHours is required (null removes the schedule)');
        if (body['runNow'] !== undefined && typeof body['runNow'] !== 'boolean')
          throw BadRequest('runNow must be true or false');
        reasonOf(exchange, body);
        const dryRun = dryRunOf(exchange);
        const saved = await services.engine.call('setScrubSchedule', {
          target,
          intervalHours: body['intervalHours'],
          runNow: body['runNow'] === true,
          dryRun,
          audit: auditRowOf(exchange, 200),
        });
        exchange.audit.written = true;
        exchange.sendJson(200, {
          ...(dryRun ? { dryRun: true, applied: false } : {}),
          target,
          schedule: saved === null ? null : scheduleJson(saved, token.tenant),
        });
      },
    },
  ];
}
