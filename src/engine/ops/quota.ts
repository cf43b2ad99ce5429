// Tenant quotas, enforced inside the commit transaction so that concurrent writers cannot
// overshoot together. Usage (logical bytes, current objects) is the exact `usage` record that
// the same transactions keep.

import { DB, tenantKey, emptyUsage, type QuotaRecord, type UsageRecord } from '../index/schema.js';
import type { EngineContext } from './context.js';
import type { IndexStore } from '../index/store.js';
import { QuotaExceeded } from '../../util/errors.js';

export function quotaOf(store: IndexStore, tenantId: string): QuotaRecord | undefined {
  return store.get<QuotaRecord>(DB.quotas, tenantKey(tenantId));
}

/** Throws `quota_exceeded` (507) when adding would pass a limit; shrinking always passes. */
export function checkQuota(
  context: EngineContext,
  tenantId: string,
  addBytes: number,
  addObjects: number,
): void {
  checkQuotaIn(context.store, tenantId, addBytes, addObjects);
}

export function checkQuotaIn(
  store: IndexStore,
  tenantId: string,
  addBytes: number,
  addObjects: number,
): void {
  const quota = quotaOf(store, tenantId);
  if (!quota) return;
  const usage = store.peek<UsageRecord>(DB.usage, tenantKey(tenantId)) ?? emptyUsage(tenantId);
  if (
    quota.maxBytes !== undefined &&
    addBytes > 0 &&
    usage.logicalBytes + addBytes > quota.maxBytes
  ) {
    throw QuotaExceeded(`the tenant's storage quota of ${quota.maxBytes} bytes would be exceeded`, {
      maxBytes: quota.maxBytes,
      usedBytes: usage.logicalBytes,
    });
  }
  if (
    quota.maxObjects !== undefined &&
    addObjects > 0 &&
    usage.objects + addObjects > quota.maxObjects
  ) {
    throw QuotaExceeded(`the tenant's quota of ${quota.maxObjects} objects would be exceeded`, {
      maxObjects: quota.maxObjects,
      usedObjects: usage.objects,
    });
  }
}
