// `GET /audit?tenant=&since=&limit=`: audit events newest first (admin-api.md §4 rule 4).
//
// `limit` is clamped to 1..1000 (default 100); `since` is a duration in Go's syntax (`24h`,
// `1h30m`, `1.5h`, `300ms`; `d` and `w` too) and keeps events newer than now minus it;
// `tenant` selects one tenant's events through the `audit-by-tenant` index. A tenant-scoped token is forced to its own tenant and an
// explicit other tenant is 403. Rows of reads and refusals reach the index in batches (every
// 50 ms) and mutations' rows commit with them; the query first settles this listener's pending
// batch, so every admin request answered before it is in the answer. Rows of the public
// listener come from the gateways' own batches and may appear a moment later.

import type { Route } from '../http/router.js';
import type { Handler } from '../http/server.js';
import { DB, auditKey, auditTenantKey, type AuditEvent } from '../engine/index/schema.js';
import { parseDuration } from '../util/config.js';
import { validateTenantId } from '../security/names.js';
import { BadRequest, Forbidden } from '../util/errors.js';
import type { AdminServices } from './request.js';
import { auditEventJson, auditEventSchema, problems } from './json.js';

export const AUDIT_LIMIT_DEFAULT = 100;
export const AUDIT_LIMIT_MAX = 1000;
const TIME_MAX = 2 ** 53 - 1;

export function auditRoutes(services: AdminServices): Route<Handler>[] {
  const { auth } = services;
  return [
    {
      method: 'GET',
      path: '/audit',
      operationId: 'queryAuditLog',
      doc: {
        summary: 'Audit events, newest first',
        auth: 'bearer',
        query: {
          tenant: {
            type: 'string',
            description: "one tenant's events (a tenant-scoped token always gets its own)",
          },
          since: {
            type: 'string',
            description:
              "Go's duration syntax (24h, 90m, 1h30m, 1.5h, 300ms, 0), also 7d or 2w: only events newer than that",
          },
          // No minimum or maximum: a limit outside 1..1000 is clamped (admin-api.md §4 rule 4),
          // not refused, so the document must not call it invalid.
          limit: {
            type: 'integer',
            default: AUDIT_LIMIT_DEFAULT,
            description: 'clamped to 1..1000 (0 reads 1, 5000 reads 1000, 2.5 reads 2)',
          },
        },
        responses: {
          200: {
            description: 'events',
            schema: {
              type: 'object',
              required: ['events'],
              properties: { events: { type: 'array', items: auditEventSchema } },
            },
          },
          ...problems(400),
        },
      },
      handler: async (exchange) => {
        const caller = auth.authenticate(exchange, 'viewer');
        const asked = exchange.query.get('tenant');
        let tenant = asked === null || asked === '' ? undefined : asked;
        // A scoped token naming any other tenant is refused before the name is validated, as
        // on the /tenants/{id} paths: 403 whatever the name (admin-api.md §4 rules 4 and 5).
        if (caller.tenant !== undefined) {
          if (tenant !== undefined && tenant !== caller.tenant)
            throw Forbidden(`this token is limited to tenant ${caller.tenant}`);
          tenant = caller.tenant;
        } else if (tenant !== undefined) validateTenantId(tenant);
        if (tenant !== undefined) exchange.audit.tenantId = tenant;
        const since = exchange.query.get('since');
        const cutoff =
          since === null || since === '' ? 0 : Date.now() - parseDuration(since, 'since');
        await services.audit.settle();
        // A read earlier in this turn (the token's) may hold a snapshot from before those rows.
        services.store.refresh();
        const events = readEvents(services, {
          tenant,
          cutoff: Math.max(0, cutoff),
          limit: limitOf(exchange.query.get('limit')),
        });
        exchange.sendJson(200, { events: events.map(auditEventJson) });
      },
    },
  ];
}

/** Any number is clamped to 1..1000 (a fraction cut to its whole part); anything else is 400. */
function limitOf(text: string | null): number {
  if (text === null || text.trim() === '') return AUDIT_LIMIT_DEFAULT;
  // Decimal only: Number() would also read 0x10, 1e2 and Infinity, which an integer is not.
  if (!/^[+-]?\d+(\.\d+)?$/.test(text.trim()))
    throw BadRequest('limit must be a decimal integer (it is clamped to 1..1000)');
  const limit = Number(text);
  return Math.min(AUDIT_LIMIT_MAX, Math.max(1, Math.trunc(limit)));
}

function readEvents(
  services: AdminServices,
  query: { tenant: string | undefined; cutoff: number; limit: number },
): AuditEvent[] {
  const high = auditKey(TIME_MAX, 0);
  const low = auditKey(query.cutoff, 0);
  const range =
    query.tenant === undefined
      ? { start: high, end: low }
      : { start: auditTenantKey(query.tenant, high), end: auditTenantKey(query.tenant, low) };
  return [
    ...services.store.range<AuditEvent>(query.tenant === undefined ? DB.audit : DB.auditByTenant, {
      ...range,
      limit: query.limit,
      reverse: true,
    }),
  ].map((entry) => entry.value);
}
