// The admin JSON API (/admin/api/v1): the route table that serves requests and generates the
// OpenAPI document. Reads come from the read-only index; every mutation, dry runs included, is a
// command to the engine carrying its audit row, so no gate of the data plane is bypassed and the
// row commits with the change.
//
// Every route authenticates first (401, then 429, then 403 for role or tenant scope) and only
// then looks anything up, so a tenant-scoped token gets 403, never 404, for another tenant.

import type { Route } from '../http/router.js';
import type { Handler } from '../http/server.js';
import type { AdminServices } from './request.js';
import { tenantRoutes } from './tenant-routes.js';
import { keyRoutes } from './key-routes.js';
import { quotaRoutes } from './quota-routes.js';
import { kmsKeyRoutes } from './kms-key-routes.js';
import { auditRoutes } from './audit-routes.js';
import { clusterRoutes } from './cluster-routes.js';

export { tenantJson } from './json.js';

export function adminRoutes(services: AdminServices): Route<Handler>[] {
  return [
    {
      method: 'GET',
      path: '/healthz',
      operationId: 'healthz',
      doc: {
        summary: 'Liveness',
        auth: 'none',
        responses: {
          200: {
            description: 'alive',
            schema: { type: 'object', properties: { status: { type: 'string', enum: ['ok'] } } },
          },
        },
      },
      handler: (exchange) => exchange.sendJson(200, { status: 'ok' }),
    },
    ...tenantRoutes(services),
    ...keyRoutes(services),
    ...quotaRoutes(services),
    ...kmsKeyRoutes(services),
    ...auditRoutes(services),
    ...clusterRoutes(services),
  ];
}
