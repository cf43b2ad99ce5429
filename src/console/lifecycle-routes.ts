// Console API routes of bucket lifecycle: a bucket's rules as JSON, their replacement or removal,
// and a dry run that lists what the new rules would expire or abort now. The rules go through the
// service's validation (src/service/lifecycle.ts, S3's checks, the same as
// PutBucketLifecycleConfiguration) and are stored by the engine's `putBucketLifecycle` and
// `deleteBucketLifecycle` commands with the request's audit row, so the S3 API and the console
// read and write one configuration, executed by one executor (src/engine/lifecycle.ts).
//
// The dry run's list comes from the engine's own due-time functions (`chainPlaceOf`,
// `versionDue`, `uploadAbortDue`) applied to the proposed rules, so it names what the executor
// would act on once the rules are stored; object lock, which the executor checks when it acts,
// is reported per version (`locked`), not subtracted. It reads the index only, and at most
// PREVIEW_SCAN_MAX versions and uploads (`truncated` says when it stopped early), so a dry run
// on a bucket of millions of objects answers in bounded time.
//
// Roles (docs/console.md): a viewer of the tenant reads; an operator of the tenant changes.

import type { Route } from '../http/router.js';
import type { Handler } from '../http/api.js';
import type { Exchange } from '../http/exchange.js';
import { auditRowOf } from '../http/audit.js';
import type { IndexStore } from '../engine/index/store.js';
import {
  DB,
  prefixRange,
  tenantChildKey,
  tenantKey,
  type BucketRecord,
  type MultipartUploadRecord,
  type ObjectVersionRecord,
  type TenantRecord,
} from '../engine/index/schema.js';
import { jobKey, type LifecycleRuleRecord } from '../engine/index/lifecycle-schema.js';
import { chainPlaceOf, versionDue } from '../engine/ops/lifecycle-index.js';
import { lockHoldsUntil } from '../engine/ops/lifecycle.js';
import { uploadAbortDue, newerNoncurrentMax, DAY_MS, type Due } from '../engine/lifecycle-rules.js';
import {
  lifecycleDayOf,
  putLifecycleArgs,
  validateLifecycle,
  type LifecycleRuleInput,
} from '../service/lifecycle.js';
import { refuseUnknownFields, validateBucketName, validateTenantId } from '../security/names.js';
import { BadRequest, Conflict, NotFound } from '../util/errors.js';
import type { ConsoleServices } from './api.js';
import { problems } from './schemas.js';
import { lifecycleSchemas, ruleInputOf, ruleJson } from './lifecycle-json.js';
import { dryRunOf, readObject, reasonOf, requireTenantScope } from './request.js';

const bearer = 'bearer' as const;
/** The fields the body of a change may hold; any other is refused. */
const BODY_FIELDS: ReadonlySet<string> = new Set(['rules', 'reason']);
const path = '/tenants/{id}/buckets/{bucket}/lifecycle';
/** Versions plus uploads a dry run reads at most. */
export const PREVIEW_SCAN_MAX = 10_000;
/** Entries a dry run lists at most (it counts all it found). */
export const PREVIEW_LIST_MAX = 200;

interface DueEntry {
  key: string;
  versionId?: string;
  uploadId?: string;
  action: Due['action'];
  ruleId: string;
  dueAt: string;
  size?: number;
  locked?: boolean;
}

export interface LifecyclePreview {
  scanned: number;
  truncated: boolean;
  counts: { versions: number; deleteMarkers: number; uploads: number; logicalBytes: number };
  due: DueEntry[];
}

function bucketOf(
  services: ConsoleServices,
  exchange: Exchange,
  params: Record<string, string | undefined>,
  role: 'viewer' | 'operator',
): { tenant: TenantRecord; bucket: BucketRecord } {
  const tenantId = params['id'] ?? '';
  validateTenantId(tenantId);
  const { token } = services.authenticate(exchange, role, tenantId);
  requireTenantScope(exchange, token, tenantId);
  const tenant = services.store.get<TenantRecord>(DB.tenants, tenantKey(tenantId));
  if (!tenant || tenant.state === 'deleted') throw NotFound(`tenant ${tenantId} not found`);
  const name = params['bucket'] ?? '';
  validateBucketName(name);
  const bucket = services.store.get<BucketRecord>(DB.buckets, tenantChildKey(tenantId, name));
  if (!bucket) throw NotFound(`bucket ${name} not found in tenant ${tenantId}`);
  return { tenant, bucket };
}

/** Every version (or upload) key of the bucket: UTF-8 never holds the byte 0xff. */
function bucketKeyRange(bucket: BucketRecord): { start: Buffer; end: Buffer } {
  return prefixRange(bucket.id, '');
}

/** What `rules` would act on in `bucket` at `now` (see the header). Reads the index only. */
export function previewLifecycle(
  store: IndexStore,
  bucket: BucketRecord,
  rules: LifecycleRuleRecord[],
  options: { now: number; dayMs: number },
): LifecyclePreview {
  const preview: LifecyclePreview = {
    scanned: 0,
    truncated: false,
    counts: { versions: 0, deleteMarkers: 0, uploads: 0, logicalBytes: 0 },
    due: [],
  };
  const proposed = { lifecycle: rules };
  const countMax = newerNoncurrentMax(rules) + 1;
  const found = (entry: DueEntry): void => {
    if (preview.due.length < PREVIEW_LIST_MAX) preview.due.push(entry);
  };
  for (const { value } of store.range<ObjectVersionRecord>(DB.versions, bucketKeyRange(bucket))) {
    if (preview.scanned >= PREVIEW_SCAN_MAX) return { ...preview, truncated: true };
    preview.scanned += 1;
    const place = chainPlaceOf(store, bucket.id, value, countMax);
    const due = versionDue(proposed, value, place, options.dayMs);
    if (due === undefined || due.due > options.now) continue;
    if (value.deleteMarker) preview.counts.deleteMarkers += 1;
    else {
      preview.counts.versions += 1;
      preview.counts.logicalBytes += value.size;
    }
    found({
      key: value.key,
      versionId: value.versionId,
      action: due.action,
      ruleId: due.ruleId,
      dueAt: new Date(due.due).toISOString(),
      ...(value.deleteMarker ? {} : { size: value.size }),
      ...(lockHoldsUntil(value, options.now, options.dayMs) === undefined ? {} : { locked: true }),
    });
  }
  for (const { value } of store.range<MultipartUploadRecord>(
    DB.multipart,
    bucketKeyRange(bucket),
  )) {
    if (preview.scanned >= PREVIEW_SCAN_MAX) return { ...preview, truncated: true };
    preview.scanned += 1;
    const due = uploadAbortDue(rules, value, options.dayMs);
    if (due === undefined || due.due > options.now) continue;
    preview.counts.uploads += 1;
    found({
      key: value.key,
      uploadId: value.uploadId,
      action: due.action,
      ruleId: due.ruleId,
      dueAt: new Date(due.due).toISOString(),
    });
  }
  return preview;
}

function lifecycleJson(
  store: IndexStore,
  tenant: TenantRecord,
  bucket: BucketRecord,
  rules: LifecycleRuleRecord[] | undefined,
): Record<string, unknown> {
  return {
    tenantId: tenant.id,
    bucket: bucket.name,
    rules: (rules ?? []).map(ruleJson),
    // A reindex after a change is walking the bucket: the new rules reach every version soon.
    reindexing: store.get(DB.lifecycleJobs, jobKey(bucket.id)) !== undefined,
  };
}

/** The body's `rules`: a list of rules (validated by the service), or null to remove them. */
function rulesOf(body: Record<string, unknown>): LifecycleRuleRecord[] | null {
  refuseUnknownFields(body, BODY_FIELDS);
  const rules = body['rules'];
  if (rules === null) return null;
  if (!Array.isArray(rules)) throw BadRequest('rules must be a list of rules, or null');
  const inputs: LifecycleRuleInput[] = rules.map((rule, index) => ruleInputOf(rule, index));
  return validateLifecycle(inputs);
}

export function lifecycleRoutes(services: ConsoleServices): Route<Handler>[] {
  const { store } = services;
  return [
    {
      method: 'GET',
      path,
      operationId: 'getConsoleBucketLifecycle',
      doc: {
        summary: "A bucket's lifecycle rules (the S3 lifecycle configuration), as JSON",
        auth: bearer,
        responses: {
          200: { description: 'the rules', schema: lifecycleSchemas.lifecycle },
          ...problems(400, 404),
        },
      },
      handler: (exchange, params) => {
        const { tenant, bucket } = bucketOf(services, exchange, params, 'viewer');
        exchange.sendJson(200, lifecycleJson(store, tenant, bucket, bucket.lifecycle));
      },
    },
    {
      method: 'PUT',
      path,
      operationId: 'putConsoleBucketLifecycle',
      doc: {
        summary:
          "Replace a bucket's lifecycle rules (null removes them); with dryRun, validate them and list what they would expire now",
        auth: bearer,
        query: { dryRun: { type: 'boolean', description: 'answer the plan; change nothing' } },
        requestBody: { contentType: 'application/json', schema: lifecycleSchemas.body },
        responses: {
          200: {
            description: 'the rules now in force, or with dryRun the plan',
            schema: { oneOf: [lifecycleSchemas.lifecycle, lifecycleSchemas.plan] },
          },
          ...problems(400, 404, 409),
        },
      },
      handler: async (exchange, params) => {
        const { tenant, bucket } = bucketOf(services, exchange, params, 'operator');
        const body = await readObject(exchange);
        reasonOf(exchange, body);
        const rules = rulesOf(body);
        if (dryRunOf(exchange)) {
          if (tenant.state !== 'active') throw Conflict(`tenant ${tenant.id} is ${tenant.state}`);
          const dayMs = services.settings ? lifecycleDayOf(services.settings) : DAY_MS;
          const preview = previewLifecycle(store, bucket, rules ?? [], { now: Date.now(), dayMs });
          exchange.sendJson(200, {
            dryRun: true,
            applied: false,
            action: 'putConsoleBucketLifecycle',
            target: `tenants/${tenant.id}/buckets/${bucket.name}/lifecycle`,
            counts: { rules: rules?.length ?? 0, ...preview.counts },
            blockers: [],
            result: { ...lifecycleJson(store, tenant, bucket, rules ?? undefined), preview },
          });
          return;
        }
        const audit = auditRowOf(exchange, 200);
        if (rules === null)
          await services.engine.call('deleteBucketLifecycle', {
            tenantId: tenant.id,
            bucket: bucket.name,
            audit,
          });
        else
          await services.engine.call('putBucketLifecycle', {
            ...putLifecycleArgs(bucket, rules),
            audit,
          });
        exchange.audit.written = true;
        exchange.sendJson(200, lifecycleJson(store, tenant, bucket, rules ?? undefined));
      },
    },
  ];
}
