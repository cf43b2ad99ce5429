// Tenant quotas, enforced inside the commit transaction so that concurrent writers cannot
// overshoot together. Usage (logical bytes, current objects) is the exact `usage` record that
// the same transactions keep. The bytes measured against maxBytes are the versions' logical
// bytes plus the parts of uploads in progress (`partBytes`): a part holds storage from its
// upload on, so it counts from then, and complete only moves its bytes into the version.

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

/** The bytes that maxBytes limits and the quota reports as usedBytes. */
export function quotaBytesOf(usage: UsageRecord): number {
  return usage.logicalBytes + (usage.partBytes ?? 0);
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
  const usedBytes = quotaBytesOf(usage);
  if (quota.maxBytes !== undefined && addBytes > 0 && usedBytes + addBytes > quota.maxBytes) {
    throw QuotaExceeded(`the tenant's storage quota of ${quota.maxBytes} bytes would be exceeded`, {
      maxBytes: quota.maxBytes,
      usedBytes,
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
