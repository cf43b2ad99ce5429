// Batch delete: up to BATCH_DELETE_KEYS_MAX keys of one bucket, each deleted on its own and
// answered on its own. Each key is authorized for itself (scope and bucket policy, as a single
// DELETE), so one refused key fails only its entry. An entry's failure says what a whole request
// would: a failure of the service is `internal` or `unavailable`, never its own code and message,
// and it is logged.

import type { BucketRecord } from '../engine/index/schema.js';
import type { EngineClient } from '../engine/protocol.js';
import { toProblem } from '../http/error-answer.js';
import { validateObjectKey } from '../security/names.js';
import { BadRequest } from '../util/errors.js';
import { componentLogger } from '../util/log.js';
import type { Access } from './access.js';
import type { RequestContext } from './context.js';

export const BATCH_DELETE_KEYS_MAX = 1000;

export interface BatchDeleteEntry {
  readonly key: string;
  readonly versionId?: string;
}

export interface BatchDeleted {
  readonly key: string;
  readonly versionId?: string;
  readonly deleteMarker?: true;
}

export interface BatchDeleteError {
  readonly key: string;
  readonly versionId?: string;
  readonly code: string;
  readonly message: string;
}

export interface BatchDeleteResult {
  readonly deleted: BatchDeleted[];
  readonly errors: BatchDeleteError[];
}

export interface BatchDeleteDeps {
  readonly engine: Pick<EngineClient, 'call'>;
  readonly access: Pick<Access, 'bucket'>;
}

/** The entries of a request: a non-empty array of `{key, versionId?}`, at most the maximum. */
export function parseBatchEntries(value: unknown): BatchDeleteEntry[] {
  if (!Array.isArray(value) || value.length === 0)
    throw BadRequest('objects must be a non-empty array of {key, versionId?}');
  if (value.length > BATCH_DELETE_KEYS_MAX)
    throw BadRequest(`at most ${BATCH_DELETE_KEYS_MAX} keys per batch`);
  return value.map((entry: unknown) => {
    const { key, versionId } = (entry ?? {}) as Record<string, unknown>;
    if (typeof key !== 'string') throw BadRequest('every entry needs a key');
    if (versionId !== undefined && typeof versionId !== 'string')
      throw BadRequest('versionId must be a string');
    return versionId === undefined ? { key } : { key, versionId };
  });
}

/** Deletes every entry of `bucket` (found, not yet authorized); results in the entries' order. */
export async function batchDelete(
  deps: BatchDeleteDeps,
  ctx: RequestContext,
  bucket: BucketRecord,
  entries: readonly BatchDeleteEntry[],
): Promise<BatchDeleteResult> {
  const results = await Promise.all(entries.map((entry) => deleteOne(deps, ctx, bucket, entry)));
  const deleted: BatchDeleted[] = [];
  const errors: BatchDeleteError[] = [];
  for (const result of results) {
    if ('code' in result) errors.push(result);
    else deleted.push(result);
  }
  return { deleted, errors };
}

async function deleteOne(
  deps: BatchDeleteDeps,
  ctx: RequestContext,
  bucket: BucketRecord,
  entry: BatchDeleteEntry,
): Promise<BatchDeleted | BatchDeleteError> {
  const { principal } = ctx;
  try {
    validateObjectKey(entry.key);
    deps.access.bucket(principal, bucket.name, { verb: 'delete', key: entry.key });
    const result = await deps.engine.call('deleteObject', {
      tenantId: principal.tenant.id,
      bucket: bucket.name,
      ...entry,
      caller: principal.accessKeyId,
    });
    const deleted: { key: string; versionId?: string; deleteMarker?: true } = { key: entry.key };
    if (result.versionId !== undefined) deleted.versionId = result.versionId;
    if (result.deleteMarker) deleted.deleteMarker = true;
    return deleted;
  } catch (error) {
    const problem = toProblem(error);
    if (problem.code === 'internal')
      componentLogger('gateway.batch-delete').error(
        { err: error, key: entry.key },
        'batch delete entry failed',
      );
    const base: { key: string; versionId?: string } = { key: entry.key };
    if (entry.versionId !== undefined) base.versionId = entry.versionId;
    return { ...base, code: problem.code, message: problem.message };
  }
}
