// The admin API's JSON shapes (spec/DECISIONS.md, "Shapes"): how records become responses, and
// the JSON schemas the OpenAPI document publishes for them. Times are RFC 3339 strings.
//
// A tenant whose delete has committed shows `state: "deleted"` at once; `deletion.state` says
// whether the engine is still removing its contents (`in_progress`), has finished
// (`complete`) or stopped at a protected version (`blocked`).

import type { JsonSchema } from '../http/router.js';
import { problemResponses } from '../http/openapi.js';
import type {
  TenantRecord,
  AccountRecord,
  AccessKeyRecord,
  AuditEvent,
  QuotaRecord,
  UsageRecord,
} from '../engine/index/schema.js';
import { isLiveKey } from '../engine/index/schema.js';
import { quotaBytesOf } from '../engine/ops/quota.js';

export const iso = (ms: number | undefined): string | undefined =>
  ms === undefined ? undefined : new Date(ms).toISOString();

export function dropUndefined(value: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(value).filter(([, field]) => field !== undefined));
}

export function tenantJson(tenant: TenantRecord): Record<string, unknown> {
  const deletion = tenant.deletion;
  return dropUndefined({
    id: tenant.id,
    name: tenant.name ?? tenant.id, // DECISIONS.md: a tenant always has a name; it defaults to its id
    state: tenant.state,
    createdAt: iso(tenant.createdAt),
    disabledAt: iso(tenant.disabledAt),
    deletedAt: iso(deletion?.startedAt),
    deletion:
      deletion === undefined
        ? undefined
        : dropUndefined({
            state:
              deletion.completedAt !== undefined
                ? 'complete'
                : deletion.blockedAt !== undefined
                  ? 'blocked'
                  : 'in_progress',
            startedAt: iso(deletion.startedAt),
            completedAt: iso(deletion.completedAt),
            blockedReason: deletion.blockedReason,
          }),
  });
}

export function accountJson(account: AccountRecord): Record<string, unknown> {
  return dropUndefined({
    id: account.id,
    tenantId: account.tenantId,
    name: account.name,
    createdAt: iso(account.createdAt),
  });
}

/** Key metadata; never the secret. `expired` is derived from expiresAt. */
export function keyJson(key: AccessKeyRecord, now = Date.now()): Record<string, unknown> {
  const expired = key.state === 'active' && !isLiveKey(key, now);
  return dropUndefined({
    accessKeyId: key.accessKeyId === '' ? undefined : key.accessKeyId,
    tenantId: key.tenantId,
    accountId: key.accountId,
    scopes: key.scopes,
    externalRef: key.externalRef,
    state: expired ? 'expired' : key.state,
    createdAt: iso(key.createdAt),
    expiresAt: iso(key.expiresAt),
    rotatedAt: iso(key.rotatedAt),
    revokedAt: iso(key.revokedAt),
  });
}

export function quotaJson(
  tenantId: string,
  quota: QuotaRecord | undefined,
  usage: UsageRecord,
): Record<string, unknown> {
  return dropUndefined({
    tenantId,
    maxBytes: quota?.maxBytes,
    maxObjects: quota?.maxObjects,
    usedBytes: quotaBytesOf(usage),
    usedObjects: usage.objects,
  });
}

export function auditEventJson(event: AuditEvent): Record<string, unknown> {
  return dropUndefined({
    id: event.id,
    time: iso(event.time),
    requestId: event.requestId,
    tenantId: event.tenantId,
    actor: event.actor,
    action: event.action,
    resource: event.resource,
    outcome: event.outcome,
    status: event.status,
    reason: event.reason,
    remoteAddr: event.remoteAddr,
    dryRun: event.dryRun === true ? true : undefined,
  });
}

// ---- schemas -------------------------------------------------------------------------------

export const str = { type: 'string' } as const;
const time = { type: 'string', format: 'date-time' } as const;
const int = { type: 'integer', minimum: 0 } as const;
const obj = (properties: Record<string, unknown>, required?: readonly string[]): JsonSchema =>
  required === undefined
    ? { type: 'object', properties }
    : { type: 'object', required, properties };

export const tenantSchema = obj(
  {
    id: str,
    name: { type: 'string', description: 'the id when none was given' },
    state: { type: 'string', enum: ['active', 'disabled', 'deleted'] },
    createdAt: time,
    disabledAt: time,
    deletedAt: time,
    deletion: obj({
      state: { type: 'string', enum: ['in_progress', 'complete', 'blocked'] },
      startedAt: time,
      completedAt: time,
      blockedReason: str,
    }),
  },
  ['id', 'name', 'state', 'createdAt'],
);
export const accountSchema = obj({ id: str, tenantId: str, name: str, createdAt: time }, [
  'id',
  'tenantId',
  'createdAt',
]);
const keyProperties = {
  accessKeyId: str,
  tenantId: str,
  accountId: str,
  scopes: str,
  externalRef: str,
  state: { type: 'string', enum: ['active', 'revoked', 'expired'] },
  createdAt: time,
  expiresAt: time,
  rotatedAt: time,
  revokedAt: time,
  secretKey: { type: 'string', description: 'only in create and rotate responses, exactly once' },
};
const keyRequired = ['accessKeyId', 'tenantId', 'accountId', 'scopes', 'state', 'createdAt'];
export const keySchema = obj(keyProperties, keyRequired);
/** A key as create and rotate answer it: with its secret, shown this once. */
export const keyWithSecretSchema = obj(keyProperties, [...keyRequired, 'secretKey']);
export const quotaSchema = obj(
  { tenantId: str, maxBytes: int, maxObjects: int, usedBytes: int, usedObjects: int },
  ['tenantId', 'usedBytes', 'usedObjects'],
);
export const usageSchema = obj(
  {
    tenantId: str,
    logicalBytes: int,
    physicalBytes: int,
    objects: int,
    versions: int,
    deleteMarkers: int,
    buckets: {
      type: 'array',
      items: obj({ name: str, logicalBytes: int, objects: int, versions: int, deleteMarkers: int }),
    },
  },
  ['tenantId', 'logicalBytes', 'physicalBytes', 'objects', 'versions', 'deleteMarkers', 'buckets'],
);
export const auditEventSchema = obj(
  {
    id: str,
    time,
    requestId: str,
    tenantId: str,
    actor: str,
    action: str,
    resource: str,
    outcome: { type: 'string', enum: ['allowed', 'denied', 'error'] },
    status: { type: 'integer' },
    reason: str,
    remoteAddr: str,
    dryRun: { type: 'boolean', description: 'present and true for a dry run' },
  },
  ['id', 'time', 'requestId', 'actor', 'action', 'resource', 'outcome', 'status'],
);
const countsSchema = obj({
  buckets: int,
  objects: int,
  versions: int,
  deleteMarkers: int,
  legalHeldVersions: int,
  retainedVersions: int,
  accessKeys: int,
  physicalBytes: int,
});
const blockerSchema = obj({ code: str, message: str, count: int }, ['code', 'message']);
export const tenantPlanSchema = obj(
  {
    dryRun: { type: 'boolean' },
    applied: { type: 'boolean' },
    action: str,
    target: str,
    counts: countsSchema,
    blockers: { type: 'array', items: blockerSchema },
    tenant: tenantSchema,
  },
  ['dryRun', 'applied', 'action', 'target', 'counts', 'blockers'],
);
/** The answer of a dry run of a simple mutation: what it would produce. */
export const dryRunSchema = obj(
  {
    dryRun: { type: 'boolean', enum: [true] },
    applied: { type: 'boolean', enum: [false] },
    action: str,
    target: str,
    counts: {
      ...countsSchema,
      additionalProperties: int,
      description:
        "the plan's eight counts (zero where they do not apply), and what the call would create or change by kind: tenants, accounts, accessKeys or quotas",
    },
    blockers: { type: 'array', items: blockerSchema },
    result: {
      type: 'object',
      description: 'the response the real call would give, without generated ids or secrets',
    },
  },
  ['dryRun', 'applied', 'action', 'target', 'counts', 'blockers'],
);
export const membershipSchema = obj(
  {
    members: {
      type: 'array',
      items: obj(
        {
          id: str,
          name: str,
          address: str,
          state: {
            type: 'string',
            enum: ['voter', 'learner', 'draining', 'drained', 'lost', 'removed'],
            description: 'drained: its data has all moved off; readable until it is removed',
          },
          zone: str,
          site: str,
        },
        ['id', 'name', 'address', 'state'],
      ),
    },
    leaderId: str,
  },
  ['members', 'leaderId'],
);
export const scrubReportSchema = obj(
  {
    dryRun: { type: 'boolean' },
    applied: { type: 'boolean' },
    action: str,
    target: str,
    mode: { type: 'string', enum: ['single-node-scrub', 'cluster-rebalance'] },
    complete: { type: 'boolean', description: 'false when the time budget ran out before the end' },
    counts: obj({
      buckets: int,
      versions: int,
      chunkRefs: int,
      logicalBytes: int,
      chunksVerified: int,
      bytesVerified: int,
      corruptChunks: int,
    }),
    corrupt: {
      type: 'array',
      items: obj({
        bucket: str,
        key: str,
        versionId: str,
        chunkIndex: int,
        chunkId: str,
        segmentId: int,
        offset: int,
        problem: str,
      }),
    },
    replication: obj(
      {
        counts: obj({
          buckets: int,
          objectsChecked: int,
          copiesSent: int,
          deletesSent: int,
          bytesSent: int,
          replicasUnreachable: int,
        }),
        nodes: { type: 'object', description: "each member's counts, and the seconds taken" },
      },
      ['counts'],
    ),
    partitions: {
      ...obj({ partitionCount: int, partitionsToMove: int, bytesToMove: int }),
      description:
        "a cluster dry run: the partitions whose buckets have copies to send, and those buckets' bytes",
    },
    blockers: { type: 'array', items: blockerSchema },
  },
  ['dryRun', 'applied', 'action', 'target', 'counts', 'blockers'],
);

/** Problem answers every authenticated operation can give, plus the ones it names. */
export const problems = problemResponses({
  400: 'malformed request (missing reason, bad confirm, invalid field, a path that is not UTF-8, a query value of the wrong type)',
  401: 'missing, invalid, revoked or expired admin token',
  403: 'role too low, or the token is limited to another tenant',
  404: 'not found',
  409: 'conflict with the current state',
  412: 'a retention window or legal hold gates the delete (fail-closed)',
  429: 'per-token rate limit exceeded (see Retry-After)',
});
