// Console API routes of public access: a tenant's public access block (every bucket of the
// tenant, src/security/public-access.ts) and, per bucket, its own block and the block in force
// (the OR of both, switch by switch). The block is set through the service
// (`putTenantPublicAccessBlock`), which the engine applies with the request's audit row; the
// S3 API's ACL and policy checks read it on every request.
//
// Roles (docs/console.md): a viewer of the tenant reads; an operator of the tenant sets.

import { refuseUnknownFields } from '../security/names.js';
import type { Route } from '../http/router.js';
import type { Handler } from '../http/api.js';
import type { Exchange } from '../http/exchange.js';
import { auditRowOf } from '../http/audit.js';
import {
  DB,
  tenantChildRange,
  tenantKey,
  type BucketRecord,
  type TenantRecord,
} from '../engine/index/schema.js';
import { putTenantPublicAccessBlock } from '../service/bucket-access.js';
import { effectiveBlock, parsePublicAccessBlock } from '../security/public-access.js';
import { validateTenantId } from '../security/names.js';
import { BadRequest, NotFound } from '../util/errors.js';
import type { ConsoleServices } from './api.js';
import { consoleSchemas as schemas, problems } from './schemas.js';
import { dryRunOf, readObject, reasonOf, requireTenantScope } from './request.js';

/** The fields the body of this page's write may hold; any other is refused. */
const BODY_FIELDS: ReadonlySet<string> = new Set(['block', 'reason']);

const bearer = 'bearer' as const;
const path = '/tenants/{id}/public-access-block';

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

/** The tenant's block and each bucket's own and effective block. */
function accessJson(
  services: ConsoleServices,
  tenant: TenantRecord,
  block: TenantRecord['publicAccessBlock'] | null,
): Record<string, unknown> {
  const buckets = [...services.store.range<BucketRecord>(DB.buckets, tenantChildRange(tenant.id))];
  return {
    tenantId: tenant.id,
    block: block ?? null,
    buckets: buckets.map(({ value }) => ({
      name: value.name,
      block: value.publicAccessBlock ?? null,
      effective: effectiveBlock(value.publicAccessBlock, block ?? undefined),
    })),
  };
}

export function accessRoutes(services: ConsoleServices): Route<Handler>[] {
  return [
    {
      method: 'GET',
      path,
      operationId: 'getConsolePublicAccessBlock',
      doc: {
        summary:
          "A tenant's public access block, and each bucket's own block and the block in force",
        auth: bearer,
        responses: {
          200: { description: 'the blocks', schema: schemas.publicAccess },
          ...problems(400, 404),
        },
      },
      handler: (exchange, params) => {
        const tenant = tenantOf(services, exchange, params['id'] ?? '', 'viewer');
        exchange.sendJson(200, accessJson(services, tenant, tenant.publicAccessBlock));
      },
    },
    {
      method: 'PUT',
      path,
      operationId: 'putConsolePublicAccessBlock',
      doc: {
        summary:
          'Set (or, with block null, remove) the public access block of every bucket of a tenant',
        auth: bearer,
        query: { dryRun: { type: 'boolean', description: 'validate and answer the plan' } },
        requestBody: { contentType: 'application/json', schema: schemas.publicAccessBody },
        responses: {
          200: {
            description: 'the blocks now in force (or, with dryRun, the plan)',
            schema: { oneOf: [schemas.publicAccess, schemas.publicAccessPlan] },
          },
          ...problems(400, 404, 409),
        },
      },
      handler: async (exchange, params) => {
        const tenant = tenantOf(services, exchange, params['id'] ?? '', 'operator');
        const body = await readObject(exchange);
        refuseUnknownFields(body, BODY_FIELDS);
        if (!('block' in body)) throw BadRequest('block is required (null removes the block)');
        const block = body['block'] === null ? null : parsePublicAccessBlock(body['block']);
        reasonOf(exchange, body);
        if (dryRunOf(exchange)) {
          const answer = accessJson(services, tenant, block);
          exchange.sendJson(200, {
            dryRun: true,
            applied: false,
            action: 'putConsolePublicAccessBlock',
            target: `tenants/${tenant.id}/public-access-block`,
            counts: { buckets: (answer['buckets'] as unknown[]).length },
            blockers: [],
            result: answer,
          });
          return;
        }
        const saved = await putTenantPublicAccessBlock(services.engine, {
          tenantId: tenant.id,
          block,
          audit: auditRowOf(exchange, 200),
        });
        exchange.audit.written = true;
        exchange.sendJson(200, accessJson(services, tenant, saved ?? null));
      },
    },
  ];
}
