// Console API routes of backups (src/engine/backup.ts): the list with each backup's progress,
// and queueing a new one (whole store or one tenant, consistent snapshot, incremental over a
// `base`). The engine writes it under the operator's `backup.directory`. A whole-store backup is
// restored offline, into an empty data directory (`lightwell restore`), since a running store
// cannot swap its data under it; a tenant's backup is restored into a tenant of the running
// store (the same or another) by the engine, with a plan first (src/engine/tenant-restore.ts).
//
// Roles (docs/console.md): a backup holds every tenant's data and the master key, so only a
// token without a tenant scope sees backups, and only an owner starts one.

import type { Route } from '../http/router.js';
import type { Handler } from '../http/api.js';
import type { Exchange } from '../http/exchange.js';
import { auditRowOf } from '../http/audit.js';
import { DB, type SegmentRecord } from '../engine/index/schema.js';
import {
  backupJobs,
  restoreJobs,
  type BackupRecord,
  type RestoreRecord,
} from '../engine/ops/backup.js';
import { backupTargets, targetJson, type setBackupTarget } from '../engine/ops/backup-targets.js';
import { BadRequest, Conflict, Forbidden } from '../util/errors.js';
import type { ConsoleServices } from './api.js';
import { consoleSchemas as schemas, problems } from './schemas.js';
import { dryRunOf, readObject, reasonOf } from './request.js';

const bearer = 'bearer' as const;

function iso(ms: number | undefined): string | null {
  return ms === undefined ? null : new Date(ms).toISOString();
}

export function backupJson(job: BackupRecord): Record<string, unknown> {
  return {
    name: job.name,
    state: job.state,
    base: job.base ?? null,
    tenant: job.tenant ?? null,
    target: job.target ?? null,
    upload: job.upload ?? null,
    queuedAt: iso(job.queuedAt),
    startedAt: iso(job.startedAt),
    finishedAt: iso(job.finishedAt),
    snapshotAt: iso(job.snapshotAt),
    segmentsTotal: job.segmentsTotal,
    segmentsDone: job.segmentsDone,
    segmentsReused: job.segmentsReused,
    bytesTotal: job.bytesTotal,
    bytesDone: job.bytesDone,
    counts: job.counts ?? null,
    error: job.error ?? null,
  };
}

export function restoreJson(job: RestoreRecord): Record<string, unknown> {
  return {
    id: job.id,
    backup: job.backup,
    tenantId: job.tenantId,
    state: job.state,
    queuedAt: iso(job.queuedAt),
    startedAt: iso(job.startedAt),
    finishedAt: iso(job.finishedAt),
    objectsTotal: job.objectsTotal,
    objectsDone: job.objectsDone,
    objectsSkipped: job.objectsSkipped,
    bytesTotal: job.bytesTotal,
    bytesDone: job.bytesDone,
    bucketsCreated: job.bucketsCreated,
    error: job.error ?? null,
  };
}

function unscoped(services: ConsoleServices, exchange: Exchange, role: 'viewer' | 'owner'): void {
  const { token } = services.authenticate(exchange, role);
  if (token.tenant !== undefined)
    throw Forbidden('a backup holds every tenant: a tenant-scoped token has no access to backups');
}

export function backupRoutes(services: ConsoleServices): Route<Handler>[] {
  const { store } = services;
  return [
    {
      method: 'GET',
      path: '/backups',
      operationId: 'listConsoleBackups',
      doc: {
        summary: 'Backups of the whole store, newest first, with the progress of one running',
        auth: bearer,
        responses: { 200: { description: 'backups', schema: schemas.backupList }, ...problems() },
      },
      handler: (exchange) => {
        unscoped(services, exchange, 'viewer');
        const jobs = backupJobs({ store }).sort((a, b) => b.queuedAt - a.queuedAt);
        exchange.sendJson(200, { backups: jobs.map(backupJson) });
      },
    },
    {
      method: 'POST',
      path: '/backups',
      operationId: 'startConsoleBackup',
      doc: {
        summary:
          'Back up the whole store (or, with tenantId, one tenant) into backup.directory/<name>: a consistent snapshot, verified by checksums',
        auth: bearer,
        query: { dryRun: { type: 'boolean', description: 'answer the plan; start nothing' } },
        requestBody: { contentType: 'application/json', schema: schemas.backupBody },
        responses: {
          202: { description: 'the backup, queued', schema: schemas.backup },
          200: { description: 'with dryRun, the plan', schema: schemas.backupPlan },
          ...problems(400, 404, 409),
        },
      },
      handler: async (exchange) => {
        unscoped(services, exchange, 'owner');
        const body = await readObject(exchange);
        for (const name of Object.keys(body))
          if (!['name', 'base', 'tenantId', 'target', 'reason'].includes(name))
            throw BadRequest(`unknown field ${name}`);
        reasonOf(exchange, body);
        const dryRun = dryRunOf(exchange);
        const job = await services.engine.call('startBackup', {
          name: body['name'],
          ...(body['base'] === undefined ? {} : { base: body['base'] }),
          ...(body['tenantId'] === undefined ? {} : { tenantId: body['tenantId'] }),
          ...(body['target'] === undefined ? {} : { target: body['target'] }),
          dryRun,
          audit: auditRowOf(exchange, dryRun ? 200 : 202),
        });
        exchange.audit.written = true;
        if (!dryRun) {
          exchange.sendJson(202, backupJson(job));
          return;
        }
        let segments = 0;
        let bytes = 0;
        for (const { value } of store.range<SegmentRecord>(DB.segments, {}))
          if (value.state !== 'deleted') {
            segments += 1;
            bytes += value.size ?? 0;
          }
        exchange.sendJson(200, {
          dryRun: true,
          applied: false,
          action: 'startConsoleBackup',
          target: `backups/${job.name}`,
          counts: { segments, sealedBytes: bytes },
          blockers: [],
          result: backupJson(job),
        });
      },
    },
    ...restoreRoutes(services),
    ...targetRoutes(services),
  ];
}

const TARGET_FIELDS = [
  'name',
  'endpoint',
  'region',
  'bucket',
  'prefix',
  'accessKeyId',
  'secretAccessKey',
  'reason',
];

function targetPlan(action: string, target: Record<string, unknown>): Record<string, unknown> {
  return {
    dryRun: true,
    applied: false,
    action,
    target: `backup-targets/${String(target['name'])}`,
    counts: {},
    blockers: [],
    result: target,
  };
}

/** Backup targets: S3 endpoints a backup is uploaded to (src/engine/ops/backup-targets.ts). */
function targetRoutes(services: ConsoleServices): Route<Handler>[] {
  const { store } = services;
  return [
    {
      method: 'GET',
      path: '/backup-targets',
      operationId: 'listConsoleBackupTargets',
      doc: {
        summary: 'S3 endpoints backups are uploaded to (never their secret keys)',
        auth: bearer,
        responses: {
          200: { description: 'targets', schema: schemas.backupTargetList },
          ...problems(),
        },
      },
      handler: (exchange) => {
        unscoped(services, exchange, 'viewer');
        exchange.sendJson(200, { targets: backupTargets({ store }).map(targetJson) });
      },
    },
    {
      method: 'POST',
      path: '/backup-targets',
      operationId: 'addConsoleBackupTarget',
      doc: {
        summary:
          'Add an S3 endpoint backups may be uploaded to; its secret key is stored sealed and never shown again',
        auth: bearer,
        query: { dryRun: { type: 'boolean', description: 'check it; add nothing' } },
        requestBody: { contentType: 'application/json', schema: schemas.backupTargetBody },
        responses: {
          201: { description: 'the target', schema: schemas.backupTarget },
          200: { description: 'with dryRun, the plan', schema: schemas.backupTargetPlan },
          ...problems(400, 409),
        },
      },
      handler: async (exchange) => {
        unscoped(services, exchange, 'owner');
        const body = await readObject(exchange);
        for (const name of Object.keys(body))
          if (!TARGET_FIELDS.includes(name)) throw BadRequest(`unknown field ${name}`);
        reasonOf(exchange, body);
        const dryRun = dryRunOf(exchange);
        const { reason: _reason, ...fields } = body;
        const target = await services.engine.call('setBackupTarget', {
          ...(fields as Parameters<typeof setBackupTarget>[1]),
          dryRun,
          audit: auditRowOf(exchange, dryRun ? 200 : 201),
        });
        exchange.audit.written = true;
        if (dryRun) exchange.sendJson(200, targetPlan('addConsoleBackupTarget', target));
        else exchange.sendJson(201, target);
      },
    },
    {
      method: 'DELETE',
      path: '/backup-targets/{name}',
      operationId: 'deleteConsoleBackupTarget',
      doc: {
        summary:
          'Remove a backup target (what was uploaded stays at the endpoint; a backup uploaded there is then restored from its local copy only)',
        auth: bearer,
        query: { dryRun: { type: 'boolean', description: 'check it; remove nothing' } },
        responses: {
          200: {
            description: 'the target removed (with dryRun, the plan)',
            schema: { oneOf: [schemas.backupTarget, schemas.backupTargetPlan] },
          },
          ...problems(404, 409),
        },
      },
      handler: async (exchange, params) => {
        unscoped(services, exchange, 'owner');
        const dryRun = dryRunOf(exchange);
        const target = await services.engine.call('deleteBackupTarget', {
          name: params['name'] ?? '',
          dryRun,
          audit: auditRowOf(exchange, 200),
        });
        exchange.audit.written = true;
        exchange.sendJson(200, dryRun ? targetPlan('deleteConsoleBackupTarget', target) : target);
      },
    },
  ];
}

function restoreRoutes(services: ConsoleServices): Route<Handler>[] {
  const { store } = services;
  return [
    {
      method: 'GET',
      path: '/restores',
      operationId: 'listConsoleRestores',
      doc: {
        summary: 'Restores of tenant backups into the running store, newest first, with progress',
        auth: bearer,
        responses: { 200: { description: 'restores', schema: schemas.restoreList }, ...problems() },
      },
      handler: (exchange) => {
        unscoped(services, exchange, 'viewer');
        const jobs = restoreJobs({ store }).sort((a, b) => b.queuedAt - a.queuedAt);
        exchange.sendJson(200, { restores: jobs.map(restoreJson) });
      },
    },
    {
      method: 'POST',
      path: '/backups/{name}/restore',
      operationId: 'restoreConsoleBackup',
      doc: {
        summary:
          "Restore a tenant's backup into an active tenant of the running store (the same or another): missing buckets are made, every object written and checked against the backup's checksums",
        auth: bearer,
        query: { dryRun: { type: 'boolean', description: 'answer the plan; start nothing' } },
        requestBody: { contentType: 'application/json', schema: schemas.restoreBody },
        responses: {
          202: { description: 'the restore, queued', schema: schemas.restore },
          200: { description: 'with dryRun, the plan', schema: schemas.restorePlan },
          ...problems(400, 404, 409),
        },
      },
      handler: async (exchange, params) => {
        unscoped(services, exchange, 'owner');
        const body = await readObject(exchange);
        for (const name of Object.keys(body))
          if (!['tenantId', 'reason'].includes(name)) throw BadRequest(`unknown field ${name}`);
        reasonOf(exchange, body);
        const tenantId = body['tenantId'];
        if (typeof tenantId !== 'string') throw BadRequest('tenantId is required');
        const backup = params['name'] ?? '';
        const dryRun = dryRunOf(exchange);
        const plan = await services.engine.call('planRestore', { backup, tenantId });
        const blockers = plan.bucketsHeld.map((bucket) => ({
          code: 'bucket_name_taken',
          bucket,
          message: `bucket ${bucket} belongs to another tenant`,
        }));
        if (!dryRun && blockers.length > 0)
          throw Conflict(
            `buckets held by another tenant: ${plan.bucketsHeld.join(', ')}; delete or rename ` +
              'them, or restore into the tenant that holds them',
          );
        const job = await services.engine.call('startRestore', {
          backup,
          tenantId,
          dryRun,
          audit: auditRowOf(exchange, dryRun ? 200 : 202),
        });
        exchange.audit.written = true;
        const result = restoreJson({ ...job, objectsTotal: plan.objects, bytesTotal: plan.bytes });
        if (!dryRun) {
          exchange.sendJson(202, result);
          return;
        }
        exchange.sendJson(200, {
          dryRun: true,
          applied: false,
          action: 'restoreConsoleBackup',
          target: `tenants/${tenantId}`,
          counts: {
            objects: plan.objects,
            logicalBytes: plan.bytes,
            buckets: plan.buckets,
            bucketsToCreate: plan.bucketsToCreate.length,
            skipped: plan.skipped,
          },
          blockers,
          result,
        });
      },
    },
  ];
}
