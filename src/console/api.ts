// The console's own API (/admin/console/api/): what the HTML console needs beyond the admin API
// (DECISIONS.md, "HTML admin console"). It has its own OpenAPI document, the admin token's RBAC
// and tenant scope (checked by the admin process's authenticator, passed in), one audit row per
// request and `?dryRun=true` on every mutation. Reads come from the read-only index; a
// mutation is a command to the engine carrying its audit row, so the row commits with the
// change and the admin process never writes the index.
//
// Operations: who the token is (role and scope, so the page shows only what the token may do);
// the buckets of a tenant with their settings (versioning, object lock, CORS, notifications,
// policy); the bucket policy editor's validate (dry run) and save; scrubs (scrub-routes.ts) and
// their schedules (schedule-routes.ts);
// and encryption keys: master-key and tenant data-key rotation (key-routes.ts) and the background
// re-encryption that follows a data-key rotation (reencrypt-routes.ts); backups of the whole store
// (backup-routes.ts); a tenant's public access block (access-routes.ts); a bucket's lifecycle
// rules with a dry run of what they would expire now (lifecycle-routes.ts); where a tenant's
// buckets live, single node or cluster (placement-routes.ts). Policies are today's
// explicit denials (src/security/bucket-policy.ts), validated by the same parser the engine
// runs when it stores them.

import type { Route } from '../http/router.js';
import type { Handler } from '../http/api.js';
import type { Exchange } from '../http/exchange.js';
import { auditRowOf } from '../http/audit.js';
import type { IndexStore } from '../engine/index/store.js';
import type { EngineClient } from '../engine/protocol.js';
import {
  DB,
  bucketKeyPrefix,
  tenantChildKey,
  tenantChildRange,
  tenantKey,
  type AdminRole,
  type AdminTokenRecord,
  type BucketNotificationsRecord,
  type BucketRecord,
  type TenantRecord,
} from '../engine/index/schema.js';
import { parseBucketPolicy } from '../security/bucket-policy.js';
import { validateBucketName } from '../security/names.js';
import { BadRequest, NotFound } from '../util/errors.js';
import { consoleSchemas as schemas, problems } from './schemas.js';
import { dryRunOf, readObject, reasonOf } from './request.js';
import { scrubRoutes } from './scrub-routes.js';
import { keyRoutes } from './key-routes.js';
import { reencryptRoutes } from './reencrypt-routes.js';
import { backupRoutes } from './backup-routes.js';
import { accessRoutes } from './access-routes.js';
import { scheduleRoutes } from './schedule-routes.js';
import { lifecycleRoutes } from './lifecycle-routes.js';
import { placementRoutes } from './placement-routes.js';
import type { Settings } from '../util/config.js';
import type { ScrubJobs } from './scrub-jobs.js';

export const CONSOLE_API_PREFIX = '/admin/console/api';

/** What the admin process lends the console: its index, its engine and its authenticator. */
export interface ConsoleServices {
  readonly store: IndexStore;
  readonly engine: EngineClient;
  /** The service's settings (lifecycle.day, cluster mode); absent: defaults, a single node. */
  readonly settings?: Settings;
  /** 401, 429, then 403 for role and tenant scope, as on the admin API (admin/auth.ts). */
  authenticate(
    exchange: Exchange,
    role: AdminRole,
    tenantId?: string,
  ): { readonly token: AdminTokenRecord };
}

const bearer = 'bearer' as const;
const dryRunQuery = {
  dryRun: { type: 'boolean', description: 'validate and return the plan; apply nothing' },
} as const;

function iso(ms: number | undefined): string | undefined {
  return ms === undefined ? undefined : new Date(ms).toISOString();
}

/** The tenant, not deleted; 404 otherwise. */
function liveTenant(store: IndexStore, tenantId: string): TenantRecord {
  const tenant = store.get<TenantRecord>(DB.tenants, tenantKey(tenantId));
  if (!tenant || tenant.state === 'deleted') throw NotFound(`tenant ${tenantId} not found`);
  return tenant;
}

function bucketOf(store: IndexStore, tenantId: string, name: string): BucketRecord {
  validateBucketName(name);
  const bucket = store.get<BucketRecord>(DB.buckets, tenantChildKey(tenantId, name));
  if (!bucket) throw NotFound(`bucket ${name} not found in tenant ${tenantId}`);
  return bucket;
}

/** A bucket's settings as the console shows them; notification secrets never leave the index. */
function bucketJson(store: IndexStore, bucket: BucketRecord): Record<string, unknown> {
  const notifications = store.get<BucketNotificationsRecord>(
    DB.notifications,
    bucketKeyPrefix(bucket.id),
  );
  return {
    name: bucket.name,
    createdAt: iso(bucket.createdAt),
    versioning: bucket.versioning,
    objectLock: bucket.objectLock,
    cors: bucket.cors ?? [],
    notifications: (notifications?.configs ?? []).map((config) => ({
      id: config.id,
      type: config.type,
      url: config.url,
      events: config.events,
      ...(config.prefix === undefined ? {} : { prefix: config.prefix }),
      ...(config.suffix === undefined ? {} : { suffix: config.suffix }),
    })),
    policy: bucket.policy ?? null,
  };
}

export function consoleApiRoutes(services: ConsoleServices, jobs: ScrubJobs): Route<Handler>[] {
  const { store } = services;
  return [
    {
      method: 'GET',
      path: '/session',
      operationId: 'getConsoleSession',
      doc: {
        summary: "The token's role and tenant scope, which shape what the console shows",
        auth: bearer,
        responses: { 200: { description: 'the session', schema: schemas.session }, ...problems() },
      },
      handler: (exchange) => {
        const { token } = services.authenticate(exchange, 'viewer');
        exchange.sendJson(200, {
          tokenId: token.tokenId,
          role: token.role,
          tenant: token.tenant ?? null,
          name: token.name ?? null,
          expiresAt: iso(token.expiresAt) ?? null,
        });
      },
    },
    {
      method: 'GET',
      path: '/tenants/{id}/buckets',
      operationId: 'listConsoleBuckets',
      doc: {
        summary:
          'The buckets of a tenant with their settings: versioning, object lock, CORS, notifications, policy',
        auth: bearer,
        responses: {
          200: { description: 'buckets', schema: schemas.bucketList },
          ...problems(400, 404),
        },
      },
      handler: (exchange, params) => {
        services.authenticate(exchange, 'viewer', params['id']);
        const tenant = liveTenant(store, params['id'] ?? '');
        const buckets = [...store.range<BucketRecord>(DB.buckets, tenantChildRange(tenant.id))];
        exchange.sendJson(200, {
          tenantId: tenant.id,
          buckets: buckets.map((entry) => bucketJson(store, entry.value)),
        });
      },
    },
    putPolicyRoute(services),
    ...scrubRoutes(services, jobs),
    ...keyRoutes(services),
    ...reencryptRoutes(services),
    ...backupRoutes(services),
    ...accessRoutes(services),
    ...scheduleRoutes(services),
    ...lifecycleRoutes(services),
    ...placementRoutes(services),
  ];
}

function putPolicyRoute(services: ConsoleServices): Route<Handler> {
  const { store } = services;
  return {
    method: 'PUT',
    path: '/tenants/{id}/buckets/{bucket}/policy',
    operationId: 'putConsoleBucketPolicy',
    doc: {
      summary:
        'Replace (or, with policy null, remove) the bucket policy; with dryRun, validate it only',
      auth: bearer,
      query: dryRunQuery,
      requestBody: { contentType: 'application/json', schema: schemas.policyBody },
      responses: {
        200: {
          description: 'the bucket with its policy now in force (or the dry-run plan)',
          schema: { oneOf: [schemas.bucket, schemas.policyPlan] },
        },
        ...problems(400, 404, 409),
      },
    },
    handler: async (exchange, params) => {
      services.authenticate(exchange, 'operator', params['id']);
      const tenant = liveTenant(store, params['id'] ?? '');
      const bucket = bucketOf(store, tenant.id, params['bucket'] ?? '');
      const body = await readObject(exchange);
      reasonOf(exchange, body);
      if (!('policy' in body)) throw BadRequest('policy is required (null removes the policy)');
      const policy = body['policy'] === null ? null : parseBucketPolicy(body['policy']);
      if (dryRunOf(exchange)) {
        exchange.sendJson(200, {
          dryRun: true,
          applied: false,
          action: 'putConsoleBucketPolicy',
          target: `tenants/${tenant.id}/buckets/${bucket.name}/policy`,
          counts: { policies: policy === null && bucket.policy === undefined ? 0 : 1 },
          blockers: [],
          result: { ...bucketJson(store, bucket), policy },
        });
        return;
      }
      const saved = await services.engine.call('setBucketPolicy', {
        tenantId: tenant.id,
        bucket: bucket.name,
        policy,
        audit: auditRowOf(exchange, 200),
      });
      exchange.audit.written = true;
      exchange.sendJson(200, bucketJson(store, saved));
    },
  };
}
