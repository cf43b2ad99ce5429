// Quotas and usage of a tenant.
//
// A quota is `{maxBytes?, maxObjects?}`: maxBytes limits logical bytes (every version's size,
// noncurrent versions included), maxObjects limits current objects. The engine enforces it in
// the commit transaction of each write (507 `quota_exceeded`); a quota set below the current
// usage refuses new growth and removes nothing. PUT replaces the whole quota (an absent field
// means no limit, so `{}` lifts both) and refuses unknown fields, so a misspelt field cannot
// silently lift a limit; a PUT without a body is refused.
//
// Usage totals and per-bucket numbers come from the engine's exact `usage` record (a scan only
// for buckets written before per-bucket counters existed); formerly per-bucket numbers were counted by a
// scan of the bucket's versions in this process (see plan.ts for the cost).

import type { Route } from '../http/router.js';
import type { Handler } from '../http/server.js';
import { quotaOf } from '../engine/ops/quota.js';
import { BadRequest } from '../util/errors.js';
import {
  type AdminServices,
  type Body,
  readBody,
  isDryRun,
  mutate,
  dryRunAnswer,
  dryRunQuery,
  optionalReason,
  reasonSchema,
} from './request.js';
import { quotaJson, quotaSchema, usageSchema, dryRunSchema, problems } from './json.js';
import { answerMutation, deleteDoc } from './shapes.js';
import { liveTenant } from './tenant-routes.js';
import { usageOf, bucketsOf, bucketUsage } from './plan.js';

const bearer = 'bearer' as const;

function limitOf(body: Body, field: string): number | undefined {
  const value = body[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0)
    throw BadRequest(`${field} must be a whole number of at least 0, or null for no limit`);
  return value;
}

export function quotaRoutes(services: AdminServices): Route<Handler>[] {
  const { auth, store } = services;
  return [
    {
      method: 'GET',
      path: '/tenants/{id}/quota',
      operationId: 'getTenantQuota',
      doc: {
        summary: 'The tenant quota and current usage',
        auth: bearer,
        responses: { 200: { description: 'quota', schema: quotaSchema }, ...problems(400, 404) },
      },
      handler: (exchange, params) => {
        auth.authenticate(exchange, 'viewer', params['id']);
        const tenant = liveTenant(services, params['id'] ?? '');
        exchange.sendJson(
          200,
          quotaJson(tenant.id, quotaOf(store, tenant.id), usageOf(store, tenant.id)),
        );
      },
    },
    {
      method: 'PUT',
      path: '/tenants/{id}/quota',
      operationId: 'setTenantQuota',
      doc: {
        summary: 'Set the tenant quota (replaces it; an absent field means no limit)',
        auth: bearer,
        query: dryRunQuery,
        requestBody: {
          contentType: 'application/json',
          schema: {
            type: 'object',
            additionalProperties: false,
            properties: {
              maxBytes: { type: 'integer', minimum: 0, nullable: true },
              maxObjects: { type: 'integer', minimum: 0, nullable: true },
              reason: reasonSchema,
            },
          },
        },
        responses: {
          200: {
            description: 'the quota now in force with usage (or the dry-run answer)',
            schema: { oneOf: [quotaSchema, dryRunSchema] },
          },
          ...problems(400, 404),
        },
      },
      handler: async (exchange, params) => {
        auth.authenticate(exchange, 'operator', params['id']);
        const tenant = liveTenant(services, params['id'] ?? '');
        // `{}` sets no limits, as DECISIONS.md's `{maxBytes?, maxObjects?}` reads; no body at all
        // is more likely a client that lost it than one that meant to lift both limits.
        if (Number(exchange.header('content-length') ?? '0') === 0)
          throw BadRequest('the body must be a JSON object: {"maxBytes": …, "maxObjects": …}');
        const body = await readBody(exchange);
        optionalReason(exchange, body);
        const dryRun = isDryRun(exchange);
        const args = {
          tenantId: tenant.id,
          maxBytes: limitOf(body, 'maxBytes'),
          maxObjects: limitOf(body, 'maxObjects'),
          dryRun,
        };
        const quota = await mutate(services, exchange, 'setTenantQuota', args, 200);
        const view = quotaJson(tenant.id, quota ?? undefined, usageOf(store, tenant.id));
        exchange.sendJson(
          200,
          dryRun
            ? dryRunAnswer('setTenantQuota', `tenants/${tenant.id}/quota`, view, { quotas: 1 })
            : view,
        );
      },
    },
    {
      method: 'DELETE',
      path: '/tenants/{id}/quota',
      operationId: 'deleteTenantQuota',
      doc: deleteDoc('Clear the tenant quota (no limits)', 'cleared'),
      handler: async (exchange, params) => {
        auth.authenticate(exchange, 'operator', params['id']);
        const tenant = liveTenant(services, params['id'] ?? '');
        // Optional, as on every admin mutation: `{"reason": …}` for the audit row.
        optionalReason(exchange, await readBody(exchange));
        const dryRun = isDryRun(exchange);
        const result = await mutate(
          services,
          exchange,
          'clearTenantQuota',
          { tenantId: tenant.id, dryRun },
          dryRun ? 200 : 204,
        );
        const plan = {
          action: 'deleteTenantQuota',
          target: `tenants/${tenant.id}/quota`,
          counts: { quotas: result.cleared ? 1 : 0 },
        };
        const view = {
          ...quotaJson(tenant.id, undefined, usageOf(store, tenant.id)),
          cleared: result.cleared,
        };
        answerMutation(exchange, dryRun, plan, view, () => exchange.send(204, {}));
      },
    },
    {
      method: 'GET',
      path: '/tenants/{id}/usage',
      operationId: 'getTenantUsage',
      doc: {
        summary:
          'Storage usage: logical and physical bytes, objects, versions, delete markers, per bucket',
        auth: bearer,
        responses: { 200: { description: 'usage', schema: usageSchema }, ...problems(400, 404) },
      },
      handler: async (exchange, params) => {
        auth.authenticate(exchange, 'viewer', params['id']);
        const tenant = liveTenant(services, params['id'] ?? '');
        const usage = usageOf(store, tenant.id);
        const buckets = [];
        for (const bucket of bucketsOf(store, tenant.id)) {
          // Exact counters kept by the engine; a scan only for data written before they existed.
          const kept = usage.buckets?.[bucket.name];
          buckets.push(kept ? { name: bucket.name, ...kept } : await bucketUsage(store, bucket));
        }
        const { logicalBytes, physicalBytes, objects, versions, deleteMarkers } = usage;
        exchange.sendJson(200, {
          tenantId: tenant.id,
          logicalBytes,
          physicalBytes,
          objects,
          versions,
          deleteMarkers,
          buckets,
        });
      },
    },
  ];
}
