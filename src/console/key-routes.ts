// Console API routes of encryption keys: the master key's fingerprint and each tenant's data-key
// generation; master-key rotation (every tenant data key and stored secret re-sealed under a
// new master key); tenant data-key rotation (new chunks under a new key, older chunks read with
// the retired one). The engine does both (src/engine/master-key-rotation.ts and
// ops/key-rotation.ts), with the request's audit row in the same commit; a dry run answers the
// plan from the engine too and is audited as such.
//
// Roles (docs/console.md): rotating the master key touches every tenant, so it takes an owner
// token without a tenant scope; rotating a tenant's data key takes an operator of that tenant.

import type { Route } from '../http/router.js';
import type { Handler } from '../http/api.js';
import { auditRowOf } from '../http/audit.js';
import { DB, META_MASTER_KEY_CHECK, tenantKey, type TenantRecord } from '../engine/index/schema.js';
import type { MasterKeyCheckRecord } from '../engine/master-key-check.js';
import type { MasterKeyRotation } from '../engine/master-key-rotation.js';
import { keyGenerationOf } from '../engine/ops/key-rotation.js';
import { validateTenantId } from '../security/names.js';
import { Forbidden, NotFound } from '../util/errors.js';
import type { ConsoleServices } from './api.js';
import { consoleSchemas as schemas, problems } from './schemas.js';
import { dryRunOf, readObject, reasonOf, requireTenantScope } from './request.js';

const bearer = 'bearer' as const;
const FINGERPRINT_BYTES = 8;

const reasonBody = {
  contentType: 'application/json',
  required: false,
  schema: { type: 'object', properties: { reason: { type: 'string' } } },
} as const;
const dryRunQuery = {
  dryRun: { type: 'boolean', description: 'answer the plan; change nothing' },
} as const;

function iso(ms: number | undefined): string | undefined {
  return ms === undefined ? undefined : new Date(ms).toISOString();
}

/** A tenant's key state as the console shows it (never any key bytes). */
function tenantKeyJson(tenant: TenantRecord): Record<string, unknown> {
  const retired = tenant.retiredKeys ?? [];
  return {
    tenantId: tenant.id,
    state: tenant.state,
    keyGeneration: keyGenerationOf(tenant),
    retiredKeys: retired.length,
    rotatedAt: iso(retired[0]?.retiredAt) ?? null,
  };
}

function rotationJson(result: MasterKeyRotation): Record<string, unknown> {
  return {
    rotatedAt: iso(result.rotatedAt),
    fingerprint: result.fingerprint,
    previousFingerprint: result.previousFingerprint,
    counts: result.counts,
  };
}

export function keyRoutes(services: ConsoleServices): Route<Handler>[] {
  const { store } = services;
  return [
    {
      method: 'GET',
      path: '/keys',
      operationId: 'getConsoleKeys',
      doc: {
        summary:
          "The master key's fingerprint and when it was put in force; each tenant's data-key generation",
        auth: bearer,
        responses: { 200: { description: 'key state', schema: schemas.keyState }, ...problems() },
      },
      handler: (exchange) => {
        const { token } = services.authenticate(exchange, 'viewer');
        const check = store.get<MasterKeyCheckRecord>(DB.meta, META_MASTER_KEY_CHECK);
        const tenants: Record<string, unknown>[] = [];
        for (const { value } of store.range<TenantRecord>(DB.tenants, {}))
          if (value.state !== 'deleted' && (token.tenant ?? value.id) === value.id)
            tenants.push(tenantKeyJson(value));
        exchange.sendJson(200, {
          masterKey: {
            fingerprint: check
              ? Buffer.from(check.check).subarray(0, FINGERPRINT_BYTES).toString('hex')
              : null,
            since: iso(check?.recordedAt) ?? null,
          },
          tenants,
        });
      },
    },
    {
      method: 'POST',
      path: '/master-key/rotate',
      operationId: 'rotateConsoleMasterKey',
      doc: {
        summary:
          'Rotate the master key: a new key, every tenant data key and stored secret re-sealed under it in one commit, the old key destroyed',
        auth: bearer,
        query: dryRunQuery,
        requestBody: reasonBody,
        responses: {
          200: {
            description: 'the rotation done (or, with dryRun, what it would re-seal)',
            schema: { oneOf: [schemas.masterKeyRotation, schemas.keyPlan] },
          },
          ...problems(400, 409),
        },
      },
      handler: async (exchange) => {
        const { token } = services.authenticate(exchange, 'owner');
        if (token.tenant !== undefined)
          throw Forbidden(
            'the master key serves every tenant: a tenant-scoped token may not rotate it',
          );
        reasonOf(exchange, await readObject(exchange));
        const dryRun = dryRunOf(exchange);
        const result = await services.engine.call('rotateMasterKey', {
          dryRun,
          audit: auditRowOf(exchange, 200),
        });
        exchange.audit.written = true;
        if (!dryRun) {
          exchange.sendJson(200, rotationJson(result));
          return;
        }
        exchange.sendJson(200, {
          dryRun: true,
          applied: false,
          action: 'rotateConsoleMasterKey',
          target: 'master-key',
          counts: result.counts,
          blockers: [],
          result: { fingerprint: result.fingerprint },
        });
      },
    },
    {
      method: 'POST',
      path: '/tenants/{id}/data-key/rotate',
      operationId: 'rotateConsoleTenantDataKey',
      doc: {
        summary:
          "Rotate a tenant's data key: new chunks under a new key, older chunks read with the retired one",
        auth: bearer,
        query: dryRunQuery,
        requestBody: reasonBody,
        responses: {
          200: {
            description: "the tenant's key state after the rotation (or, with dryRun, the plan)",
            schema: { oneOf: [schemas.tenantKey, schemas.keyPlan] },
          },
          ...problems(400, 404, 409),
        },
      },
      handler: async (exchange, params) => {
        const tenantId = params['id'] ?? '';
        validateTenantId(tenantId);
        const { token } = services.authenticate(exchange, 'operator', tenantId);
        requireTenantScope(exchange, token, tenantId);
        const tenant = store.get<TenantRecord>(DB.tenants, tenantKey(tenantId));
        if (!tenant || tenant.state === 'deleted') throw NotFound(`tenant ${tenantId} not found`);
        reasonOf(exchange, await readObject(exchange));
        const dryRun = dryRunOf(exchange);
        const result = await services.engine.call('rotateTenantDataKey', {
          tenantId,
          dryRun,
          audit: auditRowOf(exchange, 200),
        });
        exchange.audit.written = true;
        if (!dryRun) {
          exchange.sendJson(200, {
            tenantId,
            state: tenant.state,
            keyGeneration: result.keyGeneration,
            retiredKeys: result.retiredKeys,
            rotatedAt: iso(result.rotatedAt) ?? null,
          });
          return;
        }
        exchange.sendJson(200, {
          dryRun: true,
          applied: false,
          action: 'rotateConsoleTenantDataKey',
          target: `tenants/${tenantId}/data-key`,
          counts: { tenantKeys: 1 },
          blockers: [],
          result: {
            tenantId,
            keyGeneration: result.keyGeneration,
            retiredKeys: result.retiredKeys,
          },
        });
      },
    },
  ];
}
