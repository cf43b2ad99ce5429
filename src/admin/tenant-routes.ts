// Tenant routes: list, create, get, disable and delete.
//
// Disable (owner, reason) revokes the tenant's active keys in the engine transaction that
// disables it. Delete (owner, reason, confirm = id) needs a disabled tenant (409 `conflict`
// otherwise) with no version under retention or legal hold (412 `precondition_failed`,
// fail-closed). The admin process plans it from the read-only index; the engine then makes the
// tenant `deleted` in one transaction and purges its contents in the background, resuming after
// a crash. Both answer the plan (DECISIONS.md) with `dryRun`, and `applied` on the real call.

import type { Route } from '../http/router.js';
import type { Handler } from '../http/server.js';
import { DB, tenantKey, type TenantRecord } from '../engine/index/schema.js';
import { validateTenantId } from '../security/names.js';
import { NotFound, Conflict, PreconditionFailed } from '../util/errors.js';
import {
  type AdminServices,
  readBody,
  requiredString,
  requiredReason,
  optionalReason,
  requireConfirm,
  isDryRun,
  booleanQuery,
  mutate,
  dryRunQuery,
  optionalText,
  reasonSchema,
} from './request.js';
import { tenantJson, tenantSchema, tenantPlanSchema, problems } from './json.js';
import { tenantPlan } from './plan.js';
import { answerMutation, createDoc } from './shapes.js';

const bearer = 'bearer' as const;

/** The tenant record, including a deleted tenant's tombstone; 404 when there is none. */
export function tenantRecord(services: AdminServices, tenantId: string): TenantRecord {
  const tenant = services.store.get<TenantRecord>(DB.tenants, tenantKey(tenantId));
  if (!tenant) throw NotFound(`tenant ${tenantId} not found`);
  return tenant;
}

/** A tenant whose resources can be listed or changed: not deleted (404). */
export function liveTenant(services: AdminServices, tenantId: string): TenantRecord {
  const tenant = tenantRecord(services, tenantId);
  if (tenant.state === 'deleted') throw NotFound(`tenant ${tenantId} was deleted`);
  return tenant;
}

export function tenantRoutes(services: AdminServices): Route<Handler>[] {
  const { auth } = services;
  return [
    {
      method: 'GET',
      path: '/tenants',
      operationId: 'listTenants',
      doc: {
        summary: 'List tenants (a tenant-scoped token sees only its own)',
        auth: bearer,
        query: { includeDeleted: { type: 'boolean', description: 'also list deleted tenants' } },
        responses: {
          200: {
            description: 'tenants',
            schema: {
              type: 'object',
              required: ['tenants'],
              properties: { tenants: { type: 'array', items: tenantSchema } },
            },
          },
          ...problems(400),
        },
      },
      handler: (exchange) => {
        const caller = auth.authenticate(exchange, 'viewer');
        const withDeleted = booleanQuery(exchange, 'includeDeleted');
        const tenants = [...services.store.range<TenantRecord>(DB.tenants, {})]
          .map((entry) => entry.value)
          .filter(
            (tenant) =>
              (withDeleted || tenant.state !== 'deleted') &&
              (caller.tenant === undefined || caller.tenant === tenant.id),
          );
        exchange.sendJson(200, { tenants: tenants.map(tenantJson) });
      },
    },
    {
      method: 'POST',
      path: '/tenants',
      operationId: 'createTenant',
      doc: createDoc({
        summary: 'Create a tenant',
        idPattern: '^[a-z0-9-]{3,63}$',
        text: 'name',
        record: tenantSchema,
        problems: [400, 409],
      }),
      handler: async (exchange) => {
        const caller = auth.authenticate(exchange, 'operator');
        const body = await readBody(exchange);
        const id = requiredString(body, 'id');
        validateTenantId(id);
        caller.requireTenant(id);
        const name = optionalText(body, 'name');
        optionalReason(exchange, body);
        const dryRun = isDryRun(exchange);
        const tenant = await mutate(
          services,
          exchange,
          'createTenant',
          { id, name, dryRun },
          dryRun ? 200 : 201,
        );
        const plan = { action: 'createTenant', target: `tenants/${id}`, counts: { tenants: 1 } };
        answerMutation(exchange, dryRun, plan, tenantJson(tenant), () =>
          exchange.sendJson(201, tenantJson(tenant), { Location: `/admin/api/v1/tenants/${id}` }),
        );
      },
    },
    {
      method: 'GET',
      path: '/tenants/{id}',
      operationId: 'getTenant',
      doc: {
        summary: 'Get a tenant (a deleted tenant shows state "deleted" and its deletion progress)',
        auth: bearer,
        responses: { 200: { description: 'tenant', schema: tenantSchema }, ...problems(400, 404) },
      },
      handler: (exchange, params) => {
        const id = auth
          .authenticate(exchange, 'viewer', params['id'])
          .requireTenant(params['id'] ?? '');
        exchange.sendJson(200, tenantJson(tenantRecord(services, id)));
      },
    },
    disableRoute(services),
    deleteRoute(services),
  ];
}

const reasonBody = {
  type: 'object',
  required: ['reason'],
  properties: { reason: reasonSchema },
} as const;

function disableRoute(services: AdminServices): Route<Handler> {
  return {
    method: 'POST',
    path: '/tenants/{id}/disable',
    operationId: 'disableTenant',
    doc: {
      summary:
        'Disable a tenant: its active access keys are revoked and its tokens stop working at once',
      auth: bearer,
      query: dryRunQuery,
      requestBody: { contentType: 'application/json', schema: reasonBody },
      responses: {
        200: { description: 'the disable plan (applied unless dryRun)', schema: tenantPlanSchema },
        ...problems(400, 404, 409),
      },
    },
    handler: async (exchange, params) => {
      const id = services.auth
        .authenticate(exchange, 'owner', params['id'])
        .requireTenant(params['id'] ?? '');
      const body = await readBody(exchange);
      const reason = requiredReason(exchange, body);
      const dryRun = isDryRun(exchange);
      const tenant = tenantRecord(services, id);
      if (tenant.state === 'deleted') throw Conflict(`tenant ${id} is deleted`);
      const plan = await tenantPlan(services.store, tenant, 'disableTenant', dryRun);
      const result = await mutate(
        services,
        exchange,
        'disableTenant',
        { tenantId: id, reason, dryRun },
        200,
      );
      plan.counts.accessKeys = result.keysRevoked;
      exchange.sendJson(200, {
        ...plan,
        applied: !dryRun,
        tenant: tenantJson(result.tenant),
      });
    },
  };
}

function deleteRoute(services: AdminServices): Route<Handler> {
  return {
    method: 'POST',
    path: '/tenants/{id}/delete',
    operationId: 'deleteTenant',
    doc: {
      summary: 'Delete a disabled tenant and everything it stores',
      auth: bearer,
      query: dryRunQuery,
      requestBody: {
        contentType: 'application/json',
        schema: {
          type: 'object',
          required: ['reason', 'confirm'],
          properties: {
            reason: reasonSchema,
            confirm: { type: 'string', description: 'must equal the tenant id' },
          },
        },
      },
      responses: {
        200: {
          description:
            'the delete plan (applied unless dryRun; a dry run is refused as the real call would be, 409 or 412 naming every blocker)',
          schema: tenantPlanSchema,
        },
        ...problems(400, 404, 409, 412),
      },
    },
    handler: async (exchange, params) => {
      const id = services.auth
        .authenticate(exchange, 'owner', params['id'])
        .requireTenant(params['id'] ?? '');
      const body = await readBody(exchange);
      const reason = requiredReason(exchange, body);
      requireConfirm(body, 'confirm', id);
      const dryRun = isDryRun(exchange);
      const tenant = tenantRecord(services, id);
      if (!dryRun) checkDeletable(tenant);
      const plan = await tenantPlan(services.store, tenant, 'deleteTenant', dryRun);
      // A dry run answers as the real call would (admin-api.md §3): refused for the same
      // blockers, all of them named in the problem's message, with the whole plan.
      refuseBlocked(plan);
      if (dryRun) {
        exchange.sendJson(200, { ...plan, applied: false, tenant: tenantJson(tenant) });
        return;
      }
      const deleted = await mutate(
        services,
        exchange,
        'deleteTenant',
        { tenantId: id, reason },
        200,
      );
      exchange.sendJson(200, { ...plan, applied: true, tenant: tenantJson(deleted) });
    },
  };
}

function checkDeletable(tenant: TenantRecord): void {
  if (tenant.state === 'deleted') throw Conflict(`tenant ${tenant.id} is already deleted`);
  if (tenant.state !== 'disabled')
    throw Conflict(`tenant ${tenant.id} is ${tenant.state}; disable it before deleting it`);
}

/**
 * 409 if the tenant's state forbids the delete, else 412 if object lock gates it. The problem
 * carries the plan's `counts` (all eight) and `blockers` (http/error-answer.ts), so that a
 * refused dry run still shows what the delete would touch.
 */
function refuseBlocked(plan: {
  readonly counts: object;
  readonly blockers: ReadonlyArray<{ code: string; message: string }>;
}): void {
  const { blockers, counts } = plan;
  if (blockers.length === 0) return;
  const all = blockers.map((blocker) => blocker.message).join('; ');
  const conflict = blockers.some(
    (blocker) => blocker.code === 'not_disabled' || blocker.code === 'already_deleted',
  );
  if (conflict) throw Conflict(all, { counts, blockers });
  throw PreconditionFailed(`the delete is gated by object lock: ${all}`, { counts, blockers });
}
