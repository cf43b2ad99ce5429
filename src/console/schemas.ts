// JSON schemas of the console API's answers and bodies, as its OpenAPI document publishes them.

import type { JsonSchema } from '../http/router.js';
import { problemResponses } from '../http/openapi.js';

const str = { type: 'string' } as const;
const time = { type: 'string', format: 'date-time' } as const;
const int = { type: 'integer', minimum: 0 } as const;
const obj = (properties: Record<string, unknown>, required: readonly string[] = []): JsonSchema =>
  required.length === 0 ? { type: 'object', properties } : { type: 'object', required, properties };

const nullableStr = { type: 'string', nullable: true } as const;

const policy = obj(
  {
    version: { type: 'integer', enum: [1] },
    statements: {
      type: 'array',
      maxItems: 100,
      items: obj(
        {
          effect: { type: 'string', enum: ['Deny'] },
          actions: {
            type: 'array',
            items: { type: 'string', enum: ['read', 'write', 'delete', 'admin', '*'] },
          },
          principals: { type: 'array', items: str, description: 'access key ids or *' },
          prefix: str,
        },
        ['effect', 'actions', 'principals'],
      ),
    },
  },
  ['version', 'statements'],
);

const bucket = obj(
  {
    name: str,
    createdAt: time,
    versioning: { type: 'string', enum: ['Unversioned', 'Enabled', 'Suspended'] },
    objectLock: { type: 'boolean' },
    cors: { type: 'array', items: { type: 'object' } },
    notifications: {
      type: 'array',
      items: obj({
        id: str,
        type: str,
        url: str,
        events: { type: 'array', items: str },
        prefix: str,
        suffix: str,
      }),
    },
    policy: { ...policy, nullable: true },
  },
  ['name', 'versioning', 'objectLock', 'cors', 'notifications', 'policy'],
);

const scrubCounts = obj({
  buckets: int,
  versions: int,
  chunkRefs: int,
  logicalBytes: int,
  chunksVerified: int,
  bytesVerified: int,
  corruptChunks: int,
});

const scrubJob = obj(
  {
    id: str,
    tenantId: str,
    bucket: str,
    state: { type: 'string', enum: ['counting', 'running', 'complete', 'cancelled', 'failed'] },
    startedBy: str,
    startedAt: time,
    finishedAt: time,
    progress: { type: 'number', minimum: 0, description: 'chunk references verified / planned' },
    planned: obj({ versions: int, chunkRefs: int, logicalBytes: int }),
    counts: scrubCounts,
    corrupt: {
      type: 'array',
      description: 'the corrupt chunks found, with the objects they belong to (at most 1000)',
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
    error: str,
  },
  ['id', 'tenantId', 'state', 'startedBy', 'startedAt', 'progress', 'planned', 'counts', 'corrupt'],
);

const resealCounts = obj({ tenants: int, tenantKeys: int, accessKeys: int, webhookSecrets: int }, [
  'tenants',
  'tenantKeys',
  'accessKeys',
  'webhookSecrets',
]);

const tenantKey = obj(
  {
    tenantId: str,
    state: str,
    keyGeneration: { type: 'integer', minimum: 1, description: '1 for the key it was made with' },
    retiredKeys: { ...int, description: 'earlier data keys kept to read older chunks' },
    rotatedAt: { ...time, nullable: true },
  },
  ['tenantId', 'keyGeneration', 'retiredKeys', 'rotatedAt'],
);

const reencryption = obj(
  {
    tenantId: str,
    state: {
      type: 'string',
      enum: ['none', 'running', 'paused', 'settling', 'complete'],
      description:
        'settling: every chunk was looked at; waiting for uploads in flight, then dropping keys',
    },
    keyGeneration: { type: 'integer', minimum: 1 },
    retiredKeys: int,
    startedAt: { ...time, nullable: true },
    updatedAt: { ...time, nullable: true },
    finishedAt: { ...time, nullable: true },
    chunksTotal: { ...int, nullable: true, description: "the tenant's chunks when the pass began" },
    chunksScanned: int,
    chunksRewritten: int,
    bytesRewritten: int,
    chunksUnreadable: int,
    unreadable: {
      type: 'array',
      maxItems: 20,
      items: obj({ chunkId: str, problem: str }, ['chunkId', 'problem']),
    },
    keysDropped: { ...int, nullable: true },
  },
  ['tenantId', 'state', 'keyGeneration', 'retiredKeys', 'chunksScanned', 'chunksRewritten'],
);

const backupTarget = obj(
  {
    name: str,
    endpoint: str,
    region: str,
    bucket: str,
    prefix: str,
    accessKeyId: str,
    createdAt: time,
  },
  ['name', 'endpoint', 'region', 'bucket', 'prefix', 'accessKeyId', 'createdAt'],
);

const backup = obj(
  {
    name: str,
    state: { type: 'string', enum: ['queued', 'running', 'complete', 'failed'] },
    base: { ...str, nullable: true, description: 'the backup whose sealed segments it links' },
    tenant: {
      ...str,
      nullable: true,
      description:
        'the tenant backed up (its objects; segments* then count objects); null: the whole store',
    },
    target: {
      ...str,
      nullable: true,
      description: 'the backup target (an S3 endpoint) it is uploaded to once complete',
    },
    upload: {
      ...obj({ files: int, bytes: int, copied: int }, ['files', 'bytes', 'copied']),
      nullable: true,
      description: 'files sent to the target so far, and those copied there from its base',
    },
    queuedAt: time,
    startedAt: { ...time, nullable: true },
    finishedAt: { ...time, nullable: true },
    snapshotAt: { ...time, nullable: true },
    segmentsTotal: int,
    segmentsDone: int,
    segmentsReused: int,
    bytesTotal: int,
    bytesDone: int,
    counts: {
      ...obj({ tenants: int, buckets: int, versions: int, chunks: int }),
      nullable: true,
    },
    error: { ...str, nullable: true },
  },
  ['name', 'state', 'queuedAt', 'segmentsTotal', 'segmentsDone', 'bytesTotal', 'bytesDone'],
);

const corruptChunk = obj(
  {
    chunkId: { ...str, description: '64 hex digits' },
    segmentId: int,
    offset: int,
    length: int,
    reason: {
      ...str,
      description:
        'checksum, authentication (under no key of the tenant), or the check a scrub failed',
    },
    foundBy: { type: 'string', enum: ['read', 'scrub'] },
    action: {
      type: 'string',
      enum: ['read-refused', 'reported'],
      description: 'what was done: a read refused (nothing sent), or a scrub reported it',
    },
    firstSeenAt: time,
    lastSeenAt: time,
    seen: int,
  },
  [
    'chunkId',
    'segmentId',
    'offset',
    'length',
    'reason',
    'foundBy',
    'action',
    'firstSeenAt',
    'lastSeenAt',
    'seen',
  ],
);

const restore = obj(
  {
    id: str,
    backup: str,
    tenantId: str,
    state: { type: 'string', enum: ['queued', 'running', 'complete', 'failed'] },
    queuedAt: time,
    startedAt: { ...time, nullable: true },
    finishedAt: { ...time, nullable: true },
    objectsTotal: int,
    objectsDone: int,
    objectsSkipped: int,
    bytesTotal: int,
    bytesDone: int,
    bucketsCreated: int,
    error: { ...str, nullable: true },
  },
  ['id', 'backup', 'tenantId', 'state', 'queuedAt', 'objectsTotal', 'objectsDone'],
);

const accessBlock = obj(
  {
    blockPublicAcls: { type: 'boolean' },
    ignorePublicAcls: { type: 'boolean' },
    blockPublicPolicy: { type: 'boolean' },
    restrictPublicBuckets: { type: 'boolean' },
  },
  ['blockPublicAcls', 'ignorePublicAcls', 'blockPublicPolicy', 'restrictPublicBuckets'],
);

const publicAccess = obj(
  {
    tenantId: str,
    block: { ...accessBlock, nullable: true },
    buckets: {
      type: 'array',
      items: obj({ name: str, block: { ...accessBlock, nullable: true }, effective: accessBlock }, [
        'name',
        'block',
        'effective',
      ]),
    },
  },
  ['tenantId', 'block', 'buckets'],
);

const fingerprint = {
  type: 'string',
  description: "16 hex digits: the start of the key's check value (never key bytes)",
} as const;

const scheduledRun = obj(
  {
    state: { type: 'string', enum: ['complete', 'failed', 'stopped'] },
    startedAt: time,
    finishedAt: time,
    tenants: int,
    versions: int,
    chunksVerified: int,
    bytesVerified: int,
    corruptChunks: int,
    corrupt: { type: 'array', maxItems: 100, items: { type: 'object' } },
    error: str,
  },
  ['state', 'startedAt', 'finishedAt', 'chunksVerified', 'corruptChunks', 'corrupt'],
);

const schedule = obj(
  {
    target: { type: 'string', description: 'a tenant id, or * for every active tenant' },
    intervalHours: { type: 'integer', minimum: 1, maximum: 8784 },
    nextRunAt: time,
    createdAt: time,
    updatedAt: time,
    lastRun: { ...scheduledRun, nullable: true },
  },
  ['target', 'intervalHours', 'nextRunAt', 'lastRun'],
);

export const consoleSchemas = {
  scheduleList: obj({ schedules: { type: 'array', items: schedule } }, ['schedules']),
  scheduleBody: {
    type: 'object',
    required: ['intervalHours'],
    additionalProperties: false,
    properties: {
      intervalHours: {
        type: 'integer',
        minimum: 1,
        maximum: 8784,
        nullable: true,
        description: 'null removes the schedule',
      },
      runNow: { type: 'boolean', description: 'the first run is due now, not one interval on' },
      reason: { type: 'string', description: 'noted in the audit log' },
    },
  },
  scheduleAnswer: obj(
    {
      dryRun: { type: 'boolean', enum: [true] },
      applied: { type: 'boolean', enum: [false] },
      target: str,
      schedule: { ...schedule, nullable: true },
    },
    ['target', 'schedule'],
  ),
  tenantKey,
  publicAccess,
  publicAccessBody: {
    type: 'object',
    required: ['block'],
    additionalProperties: false,
    properties: {
      block: {
        type: 'object',
        nullable: true,
        additionalProperties: false,
        description: 'absent switches are off; null removes the block',
        properties: {
          blockPublicAcls: { type: 'boolean' },
          ignorePublicAcls: { type: 'boolean' },
          blockPublicPolicy: { type: 'boolean' },
          restrictPublicBuckets: { type: 'boolean' },
        },
      },
      reason: { type: 'string', description: 'noted in the audit log' },
    },
  },
  publicAccessPlan: obj(
    {
      dryRun: { type: 'boolean', enum: [true] },
      applied: { type: 'boolean', enum: [false] },
      action: str,
      target: str,
      counts: obj({ buckets: int }),
      blockers: { type: 'array', items: { type: 'object' } },
      result: publicAccess,
    },
    ['dryRun', 'applied', 'action', 'target', 'counts', 'blockers', 'result'],
  ),
  backup,
  backupList: obj({ backups: { type: 'array', items: backup } }, ['backups']),
  backupBody: {
    type: 'object',
    required: ['name'],
    additionalProperties: false,
    properties: {
      name: {
        type: 'string',
        pattern: '^[a-z0-9][a-z0-9._-]{0,62}$',
        description: 'the directory under backup.directory; used once',
      },
      base: { type: 'string', description: 'a complete backup whose sealed segments are linked' },
      tenantId: {
        type: 'string',
        description: "back up this tenant's objects only (restored into a running store)",
      },
      target: {
        type: 'string',
        description: 'a backup target: the backup is also uploaded to that S3 endpoint',
      },
      reason: { type: 'string', description: 'noted in the audit log' },
    },
  },
  backupTarget,
  backupTargetList: obj({ targets: { type: 'array', items: backupTarget } }, ['targets']),
  backupTargetPlan: obj(
    {
      dryRun: { type: 'boolean', enum: [true] },
      applied: { type: 'boolean', enum: [false] },
      action: str,
      target: str,
      counts: { type: 'object' },
      blockers: { type: 'array', items: { type: 'object' } },
      result: backupTarget,
    },
    ['dryRun', 'applied', 'action', 'target', 'counts', 'blockers', 'result'],
  ),
  backupTargetBody: {
    type: 'object',
    required: ['name', 'endpoint', 'bucket', 'accessKeyId', 'secretAccessKey'],
    additionalProperties: false,
    properties: {
      name: { type: 'string', pattern: '^[a-z0-9][a-z0-9._-]{0,62}$' },
      endpoint: { type: 'string', description: 'an http(s) origin: no path, query or credentials' },
      region: { type: 'string', description: 'us-east-1 unless given' },
      bucket: { type: 'string' },
      prefix: { type: 'string', description: 'empty, or path segments each ending in "/"' },
      accessKeyId: { type: 'string' },
      secretAccessKey: {
        type: 'string',
        description: 'stored sealed under the master key; never answered, logged or shown again',
      },
      reason: { type: 'string', description: 'noted in the audit log' },
    },
  },
  corruptChunkList: obj(
    {
      tenantId: str,
      chunks: { type: 'array', items: corruptChunk },
      truncated: { type: 'boolean' },
    },
    ['tenantId', 'chunks', 'truncated'],
  ),
  restore,
  restoreList: obj({ restores: { type: 'array', items: restore } }, ['restores']),
  restoreBody: {
    type: 'object',
    required: ['tenantId'],
    additionalProperties: false,
    properties: {
      tenantId: {
        type: 'string',
        description: 'the active tenant the objects go into: the one backed up, or another',
      },
      reason: { type: 'string', description: 'noted in the audit log' },
    },
  },
  restorePlan: obj(
    {
      dryRun: { type: 'boolean', enum: [true] },
      applied: { type: 'boolean', enum: [false] },
      action: str,
      target: str,
      counts: obj({
        objects: int,
        logicalBytes: int,
        buckets: int,
        bucketsToCreate: int,
        skipped: int,
      }),
      blockers: { type: 'array', items: { type: 'object' } },
      result: restore,
    },
    ['dryRun', 'applied', 'action', 'target', 'counts', 'blockers', 'result'],
  ),
  backupPlan: obj(
    {
      dryRun: { type: 'boolean', enum: [true] },
      applied: { type: 'boolean', enum: [false] },
      action: str,
      target: str,
      counts: obj({ segments: int, sealedBytes: int }),
      blockers: { type: 'array', items: { type: 'object' } },
      result: backup,
    },
    ['dryRun', 'applied', 'action', 'target', 'counts', 'blockers', 'result'],
  ),
  reencryption,
  reencryptionBody: {
    type: 'object',
    required: ['paused'],
    additionalProperties: false,
    properties: {
      paused: {
        type: 'boolean',
        description: 'false starts a pass (when none is active) or resumes one; true pauses it',
      },
      reason: { type: 'string', description: 'noted in the audit log' },
    },
  },
  reencryptionPlan: obj(
    {
      dryRun: { type: 'boolean', enum: [true] },
      applied: { type: 'boolean', enum: [false] },
      action: str,
      target: str,
      counts: obj({ retiredKeys: int }),
      blockers: { type: 'array', items: { type: 'object' } },
      result: reencryption,
    },
    ['dryRun', 'applied', 'action', 'target', 'counts', 'blockers', 'result'],
  ),
  keyState: obj(
    {
      masterKey: obj(
        { fingerprint: { ...fingerprint, nullable: true }, since: { ...time, nullable: true } },
        ['fingerprint', 'since'],
      ),
      tenants: { type: 'array', items: tenantKey },
    },
    ['masterKey', 'tenants'],
  ),
  masterKeyRotation: obj(
    { rotatedAt: time, fingerprint, previousFingerprint: fingerprint, counts: resealCounts },
    ['rotatedAt', 'fingerprint', 'previousFingerprint', 'counts'],
  ),
  keyPlan: obj(
    {
      dryRun: { type: 'boolean', enum: [true] },
      applied: { type: 'boolean', enum: [false] },
      action: str,
      target: str,
      counts: { type: 'object', description: 'what the rotation would re-seal or replace' },
      blockers: { type: 'array', items: { type: 'object' } },
      result: { type: 'object' },
    },
    ['dryRun', 'applied', 'action', 'target', 'counts', 'blockers'],
  ),
  scrubJob,
  scrubList: obj({ jobs: { type: 'array', items: scrubJob } }, ['jobs']),
  scrubBody: {
    type: 'object',
    required: ['tenantId'],
    properties: {
      tenantId: str,
      bucket: { type: 'string', description: 'only this bucket' },
      reason: { type: 'string', description: 'noted in the audit log' },
    },
  },
  scrubPlan: obj(
    {
      dryRun: { type: 'boolean', enum: [true] },
      applied: { type: 'boolean', enum: [false] },
      action: str,
      target: str,
      complete: { type: 'boolean', description: 'false when counting ran out of time' },
      counts: obj({ buckets: int, versions: int, chunkRefs: int, logicalBytes: int }),
      blockers: { type: 'array', items: { type: 'object' } },
    },
    ['dryRun', 'applied', 'action', 'target', 'complete', 'counts', 'blockers'],
  ),
  session: obj(
    {
      tokenId: str,
      role: { type: 'string', enum: ['viewer', 'operator', 'owner'] },
      tenant: { ...nullableStr, description: 'the one tenant the token is limited to' },
      name: nullableStr,
      expiresAt: { ...time, nullable: true },
    },
    ['tokenId', 'role', 'tenant'],
  ),
  bucket,
  bucketList: obj({ tenantId: str, buckets: { type: 'array', items: bucket } }, [
    'tenantId',
    'buckets',
  ]),
  policyBody: {
    type: 'object',
    required: ['policy'],
    additionalProperties: false,
    properties: {
      policy: { ...policy, nullable: true, description: 'null removes the policy' },
      reason: { type: 'string', description: 'noted in the audit log' },
    },
  },
  policyPlan: obj(
    {
      dryRun: { type: 'boolean', enum: [true] },
      applied: { type: 'boolean', enum: [false] },
      action: str,
      target: str,
      counts: obj({ policies: int }),
      blockers: { type: 'array', items: { type: 'object' } },
      result: bucket,
    },
    ['dryRun', 'applied', 'action', 'target', 'counts', 'blockers', 'result'],
  ),
} as const;

/** Problem answers every authenticated operation can give, plus the ones it names. */
export const problems = problemResponses({
  400: 'malformed request or an invalid policy (the message names the field)',
  401: 'missing, invalid, revoked or expired admin token',
  403: 'role too low, or the token is limited to another tenant',
  404: 'no such tenant or bucket',
  409: 'the tenant is disabled, or a scrub of it is already running',
  429: 'per-token rate limit exceeded (see Retry-After)',
});
