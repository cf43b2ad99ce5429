// Console API routes of the background re-encryption that follows a tenant data-key rotation
// (src/engine/reencryption.ts): its progress, and pausing, resuming or starting it again (a
// pass that ended with unreadable chunks keeps the retired keys; once they are repaired, a new
// pass can drop them). The engine runs the job; the change is a command carrying its audit row.
//
// Roles (docs/console.md): a viewer of the tenant reads the progress; an operator of the tenant
// pauses, resumes or starts it.

import { refuseUnknownFields } from '../security/names.js';
import type { Route } from '../http/router.js';
import type { Handler } from '../http/api.js';
import type { Exchange } from '../http/exchange.js';
import { auditRowOf } from '../http/audit.js';
import { DB, tenantKey, type TenantRecord } from '../engine/index/schema.js';
import { keyGenerationOf } from '../engine/ops/key-rotation.js';
import { reencryptionOf, type ReencryptionRecord } from '../engine/ops/reencryption.js';
import { validateTenantId } from '../security/names.js';
import { BadRequest, NotFound } from '../util/errors.js';
import type { ConsoleServices } from './api.js';
import { consoleSchemas as schemas, problems } from './schemas.js';
import { dryRunOf, readObject, reasonOf, requireTenantScope } from './request.js';

/** The fields the body of this page's write may hold; any other is refused. */
const BODY_FIELDS: ReadonlySet<string> = new Set(['paused', 'reason']);

const bearer = 'bearer' as const;
const path = '/tenants/{id}/data-key/reencryption';

function iso(ms: number | undefined): string | null {
  return ms === undefined ? null : new Date(ms).toISOString();
}

/** The job as the console shows it; `state: none` for a tenant that never had one. */
export function reencryptionJson(
  tenant: TenantRecord,
  job: ReencryptionRecord | null | undefined,
): Record<string, unknown> {
  return {
    tenantId: tenant.id,
    state: job?.state ?? 'none',
    keyGeneration: keyGenerationOf(tenant),
    retiredKeys: tenant.retiredKeys?.length ?? 0,
    startedAt: iso(job?.startedAt),
    updatedAt: iso(job?.updatedAt),
    finishedAt: iso(job?.finishedAt),
    chunksTotal: job?.chunksTotal ?? null,
    chunksScanned: job?.chunksScanned ?? 0,
    chunksRewritten: job?.chunksRewritten ?? 0,
    bytesRewritten: job?.bytesRewritten ?? 0,
    chunksUnreadable: job?.chunksUnreadable ?? 0,
    unreadable: job?.unreadable ?? [],
    keysDropped: job?.keysDropped ?? null,
  };
}

function tenantOf(
  services: ConsoleServices,
  exchange: Exchange,
  tenantId: string,
  role: 'viewer' | 'operator',
): TenantRecord {
  validateTenantId(tenantId);
  const { token } = services.authenticate(exchange, role, tenantId);
  requireTenantScope(exchange, token, tenantId);
  const tenant = services.store.get<TenantRecord>(DB.tenants, tenantKey(tenantId));
  if (!tenant || tenant.state === 'deleted') throw NotFound(`tenant ${tenantId} not found`);
  return tenant;
}

export function reencryptRoutes(services: ConsoleServices): Route<Handler>[] {
  const { store } = services;
  return [
    {
      method: 'GET',
      path,
      operationId: 'getConsoleReencryption',
      doc: {
        summary: "Progress of the re-encryption of a tenant's chunks under its current data key",
        auth: bearer,
        responses: {
          200: {
            description: 'the job (state none when there is none)',
            schema: schemas.reencryption,
          },
          ...problems(400, 404),
        },
      },
      handler: (exchange, params) => {
        const tenant = tenantOf(services, exchange, params['id'] ?? '', 'viewer');
        exchange.sendJson(200, reencryptionJson(tenant, reencryptionOf({ store }, tenant.num)));
      },
    },
    {
      method: 'PUT',
      path,
      operationId: 'putConsoleReencryption',
      doc: {
        summary:
          "Pause or resume the re-encryption of a tenant's chunks, or start a new pass when none is active",
        auth: bearer,
        query: { dryRun: { type: 'boolean', description: 'answer the plan; change nothing' } },
        requestBody: { contentType: 'application/json', schema: schemas.reencryptionBody },
        responses: {
          200: {
            description: 'the job after the change (or, with dryRun, the plan)',
            schema: { oneOf: [schemas.reencryption, schemas.reencryptionPlan] },
          },
          ...problems(400, 404, 409),
        },
      },
      handler: async (exchange, params) => {
        const tenant = tenantOf(services, exchange, params['id'] ?? '', 'operator');
        const body = await readObject(exchange);
        refuseUnknownFields(body, BODY_FIELDS);
        if (typeof body['paused'] !== 'boolean') throw BadRequest('paused must be true or false');
        reasonOf(exchange, body);
        const dryRun = dryRunOf(exchange);
        const job = await services.engine.call('setReencryption', {
          tenantId: tenant.id,
          paused: body['paused'],
          dryRun,
          audit: auditRowOf(exchange, 200),
        });
        exchange.audit.written = true;
        const answer = reencryptionJson(tenant, job);
        if (!dryRun) {
          exchange.sendJson(200, answer);
          return;
        }
        exchange.sendJson(200, {
          dryRun: true,
          applied: false,
          action: 'putConsoleReencryption',
          target: `tenants/${tenant.id}/data-key/reencryption`,
          counts: { retiredKeys: tenant.retiredKeys?.length ?? 0 },
          blockers: [],
          result: answer,
        });
      },
    },
  ];
}
