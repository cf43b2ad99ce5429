// Named KMS keys of a tenant: the ids SSE-KMS writes may name over S3
// (`x-amz-server-side-encryption-aws-kms-key-id`, engine/ops/kms-keys.ts). The tenant's own id
// is always a key id and is not listed here. A key is `{id, tenantId, description?, createdAt}`.
// Deleting a key refuses new writes that name it; versions already written under it stay
// readable (their bytes are under the tenant's data key, docs/s3-data-protection.md).

import type { Route } from '../http/router.js';
import type { Handler } from '../http/server.js';
import type { KmsKeyRecord } from '../engine/index/schema.js';
import {
  type AdminServices,
  readBody,
  requiredString,
  optionalReason,
  isDryRun,
  mutate,
  optionalText,
} from './request.js';
import { dropUndefined, iso, str } from './json.js';
import { answerMutation, createDoc, deleteDoc, listDoc } from './shapes.js';
import { liveTenant } from './tenant-routes.js';

const kmsKeySchema = {
  type: 'object',
  required: ['id', 'tenantId', 'createdAt'],
  properties: {
    id: str,
    tenantId: str,
    description: str,
    createdAt: { type: 'string', format: 'date-time' },
  },
} as const;

function kmsKeyJson(tenantId: string, key: KmsKeyRecord): Record<string, unknown> {
  return dropUndefined({
    id: key.id,
    tenantId,
    description: key.description,
    createdAt: iso(key.createdAt),
  });
}

export function kmsKeyRoutes(services: AdminServices): Route<Handler>[] {
  const { auth } = services;
  return [
    {
      method: 'GET',
      path: '/tenants/{id}/kms-keys',
      operationId: 'listTenantKmsKeys',
      doc: listDoc(
        "List the tenant's named KMS keys (SSE-KMS key ids)",
        'keys, in creation order',
        'keys',
        kmsKeySchema,
      ),
      handler: (exchange, params) => {
        auth.authenticate(exchange, 'viewer', params['id']);
        const tenant = liveTenant(services, params['id'] ?? '');
        const keys = (tenant.kmsKeys ?? []).map((key) => kmsKeyJson(tenant.id, key));
        exchange.sendJson(200, { keys });
      },
    },
    {
      method: 'POST',
      path: '/tenants/{id}/kms-keys',
      operationId: 'createTenantKmsKey',
      doc: createDoc({
        summary: 'Create a named KMS key that SSE-KMS writes of the tenant may name',
        idPattern: '^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$',
        text: 'description',
        record: kmsKeySchema,
        problems: [400, 404, 409],
      }),
      handler: async (exchange, params) => {
        auth.authenticate(exchange, 'operator', params['id']);
        const tenant = liveTenant(services, params['id'] ?? '');
        const body = await readBody(exchange);
        const id = requiredString(body, 'id');
        const description = optionalText(body, 'description');
        optionalReason(exchange, body);
        const dryRun = isDryRun(exchange);
        const key = await mutate(
          services,
          exchange,
          'createKmsKey',
          { tenantId: tenant.id, id, description, dryRun },
          dryRun ? 200 : 201,
        );
        const view = kmsKeyJson(tenant.id, key);
        const target = `tenants/${tenant.id}/kms-keys/${id}`;
        const plan = { action: 'createTenantKmsKey', target, counts: { kmsKeys: 1 } };
        answerMutation(exchange, dryRun, plan, view, () => exchange.sendJson(201, view));
      },
    },
    {
      method: 'DELETE',
      path: '/tenants/{id}/kms-keys/{keyId}',
      operationId: 'deleteTenantKmsKey',
      doc: deleteDoc(
        'Delete a named KMS key: new writes naming it are refused, old versions stay',
        'deleted',
      ),
      handler: async (exchange, params) => {
        auth.authenticate(exchange, 'operator', params['id']);
        const tenant = liveTenant(services, params['id'] ?? '');
        optionalReason(exchange, await readBody(exchange));
        const dryRun = isDryRun(exchange);
        const id = params['keyId'] ?? '';
        const result = await mutate(
          services,
          exchange,
          'deleteKmsKey',
          { tenantId: tenant.id, id, dryRun },
          dryRun ? 200 : 204,
        );
        const target = `tenants/${tenant.id}/kms-keys/${id}`;
        const plan = { action: 'deleteTenantKmsKey', target, counts: { kmsKeys: 1 } };
        const view = kmsKeyJson(tenant.id, result.deleted);
        answerMutation(exchange, dryRun, plan, view, () => exchange.send(204, {}));
      },
    },
  ];
}
