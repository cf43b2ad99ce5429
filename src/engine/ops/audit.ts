// Audit rows: one per request on both planes. A mutation's row is written in the same
// transaction as the mutation (so it is durable exactly when the change is); rows of reads and
// refusals arrive in batches from the listeners. Rows older than `audit.retention` are removed
// by the engine's background pass.

import { DB, auditKey, auditTenantKey, type AuditEvent } from '../index/schema.js';
import type { EngineContext } from './context.js';
import type { IndexStore } from '../index/store.js';
import { isTenantId } from '../../security/names.js';
import { writeAccessLog, type AccessLogInput } from './access-log.js';

/**
 * An audit row as the listeners send it: id and time are assigned here. `accessLog`: the S3
 * access-log record of a request to a logged bucket, stored beside the row (access-log.ts).
 */
export type AuditInput = Omit<AuditEvent, 'id' | 'time'> & {
  time?: number;
  accessLog?: AccessLogInput;
};

// Unique across restarts: starts from the clock in microseconds and only grows.
let sequence = Date.now() * 1000;

/** The longest text a row keeps of each field; more is cut and marked with an ellipsis. */
const FIELD_CHARS_MAX: ReadonlyArray<readonly [keyof AuditInput, number]> = [
  ['requestId', 64],
  ['actor', 128],
  ['action', 64],
  ['resource', 2048],
  ['reason', 1024],
  ['remoteAddr', 64],
];

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/**
 * The row as stored (and as listeners send it): every text field bounded, whatever a request
 * put in it, and `tenantId` kept only when it is a tenant id (it becomes part of an index key,
 * whose size LMDB limits; a request that named no real tenant, such as a 404 for a malformed
 * id, has its path in `resource`). So a row can always be written: one that could not would
 * hold back every row batched with it. A row that already is so is answered as it is (every
 * request makes one, on both sides); any other is copied, never changed in place.
 */
export function boundedAuditRow(input: AuditInput): AuditInput {
  let row = input;
  for (const [field, max] of FIELD_CHARS_MAX) {
    const value = input[field];
    if (typeof value === 'string' && value.length > max) {
      if (row === input) row = { ...input };
      (row as Record<string, unknown>)[field] = clip(value, max);
    }
  }
  if (row.tenantId !== undefined && !isTenantId(row.tenantId)) {
    if (row === input) row = { ...input };
    delete row.tenantId;
  }
  return row;
}

/** An `AuditEvent` whose optional fields may be present as undefined (they are not stored). */
type AuditRowToStore = { [F in keyof AuditEvent]-?: AuditEvent[F] | undefined };

export function writeAudit(context: EngineContext, input: AuditInput): void {
  const time = input.time ?? context.now();
  const key = auditKey(time, sequence++);
  const row = boundedAuditRow(input);
  // One literal in the order of docs/on-disk-format.md: every row has the same shape, which
  // encodes in about half the time of a spread of the listener's row (fields left undefined
  // are not stored).
  const event: AuditRowToStore = {
    id: key.toString('hex'),
    time,
    requestId: row.requestId,
    tenantId: row.tenantId,
    actor: row.actor,
    action: row.action,
    resource: row.resource,
    outcome: row.outcome,
    status: row.status,
    reason: row.reason,
    remoteAddr: row.remoteAddr,
    dryRun: row.dryRun,
  };
  const encoded = context.store.encode(event);
  context.store.put(DB.audit, key, encoded);
  if (event.tenantId !== undefined)
    context.store.put(DB.auditByTenant, auditTenantKey(event.tenantId, key), encoded);
  if (input.accessLog !== undefined) writeAccessLog(context, input.accessLog, time, key);
}

export function appendAudit(
  context: EngineContext,
  args: { events: AuditInput[] },
): { written: number } {
  for (const event of args.events) writeAudit(context, event);
  return { written: args.events.length };
}

/** Deletes rows older than the cutoff; at most `limit` per call so one transaction stays small. */
export function expireAudit(store: IndexStore, cutoffMs: number, limit: number): number {
  const doomed: Array<{ key: Buffer; tenantId?: string }> = [];
  for (const { key, value } of store.range<AuditEvent>(DB.audit, {
    end: auditKey(cutoffMs, 0),
    limit,
  })) {
    doomed.push(
      value.tenantId === undefined
        ? { key: Buffer.from(key) }
        : { key: Buffer.from(key), tenantId: value.tenantId },
    );
  }
  for (const row of doomed) {
    store.remove(DB.audit, row.key);
    if (row.tenantId !== undefined)
      store.remove(DB.auditByTenant, auditTenantKey(row.tenantId, row.key));
  }
  return doomed.length;
}
