// Key rotation in the index: re-sealing everything stored under the master key with a new one,
// and replacing a tenant's data key.
//
// Invariants:
// - A master-key re-seal is one transaction: every tenant data key (current and retired), every
//   access-key secret, every webhook signing secret, every backup target's secret access key,
//   every tenant backup chain's data key (backup-keys.ts) and the master key's check value change together, or nothing does. No record is ever under
//   the old key while another is under the new one in a committed index ("nothing
//   half-rotated"); the files that hold the keys are handled around this transaction by
//   src/engine/master-key-rotation.ts.
// - A record that the old key does not open fails the whole re-seal (`corrupt_data`): the index
//   is left as it was rather than holding a value that no key opens.
// - A tenant data-key rotation keeps the old key, re-sealed, in `retiredKeys` (newest first):
//   chunks already written stay under it and are read with it (src/engine/chunk-codec.ts tries
//   the retired keys when the current one does not authenticate a record). New chunks are
//   written under the new key, and their ids come from its dedup key, so they never
//   deduplicate against chunks under an old key. The rotation starts, in its own transaction, a
//   background re-encryption of the tenant's chunks (src/engine/reencryption.ts), which drops
//   the retired keys once no chunk is under them. Until then a tenant keeps at most
//   RETIRED_TENANT_KEYS_MAX of them and a further rotation is refused (docs/console.md).

import assert from 'node:assert/strict';
import {
  deriveKey,
  newTenantDataKey,
  openSecret,
  sealSecret,
  unwrapTenantKey,
  wrapTenantKey,
  PURPOSE_SECRET_SEAL,
} from '../../security/keys.js';
import { validateTenantId } from '../../security/names.js';
import {
  DB,
  META_MASTER_KEY_CHECK,
  tenantKey,
  type AccessKeyRecord,
  type BucketNotificationsRecord,
  type TenantRecord,
} from '../index/schema.js';
import type { IndexStore } from '../index/store.js';
import { Conflict, NotFound } from '../../util/errors.js';
import { masterKeyCheckOf, type MasterKeyCheckRecord } from '../master-key-check.js';
import type { EngineContext } from './context.js';
import { startReencryption } from './reencryption.js';
import { backupTargets, targetAad, targetKey } from './backup-targets.js';
import { rewrapBackupKeys } from './backup-keys.js';

/** Data keys a tenant keeps besides its current one (see the header). */
export const RETIRED_TENANT_KEYS_MAX = 16;

/** What a master-key rotation re-seals. */
export interface ResealCounts {
  tenants: number;
  tenantKeys: number;
  accessKeys: number;
  webhookSecrets: number;
}

/** Counts what a re-seal would touch, reading only (the dry run's plan). */
export function resealPlan(store: IndexStore): ResealCounts {
  const counts: ResealCounts = { tenants: 0, tenantKeys: 0, accessKeys: 0, webhookSecrets: 0 };
  for (const { value } of store.range<TenantRecord>(DB.tenants, {})) {
    counts.tenants += 1;
    counts.tenantKeys += 1 + (value.retiredKeys?.length ?? 0);
  }
  for (const _entry of store.range<AccessKeyRecord>(DB.accessKeys, {})) counts.accessKeys += 1;
  for (const { value } of store.range<BucketNotificationsRecord>(DB.notifications, {}))
    counts.webhookSecrets += value.configs.length;
  return counts;
}

function rewrap(oldKey: Buffer, newKey: Buffer, tenantId: string, wrapped: Buffer): Buffer {
  const dataKey = unwrapTenantKey(oldKey, tenantId, Buffer.from(wrapped));
  try {
    return wrapTenantKey(newKey, tenantId, dataKey);
  } finally {
    dataKey.fill(0);
  }
}

function reseal(oldSeal: Buffer, newSeal: Buffer, sealed: Buffer, aad: string): Buffer {
  const secret = openSecret(oldSeal, Buffer.from(sealed), aad);
  try {
    return sealSecret(newSeal, secret, aad);
  } finally {
    secret.fill(0);
  }
}

/**
 * Re-seals everything under `oldKey` with `newKey` and records `newKey`'s check value. Only
 * inside a transaction; the caller swaps the engine's key in the same transaction.
 */
export function resealUnderNewMasterKey(
  context: EngineContext,
  oldKey: Buffer,
  newKey: Buffer,
): ResealCounts {
  assert.ok(!oldKey.equals(newKey), 'a rotation needs a new key');
  const { store } = context;
  const counts: ResealCounts = { tenants: 0, tenantKeys: 0, accessKeys: 0, webhookSecrets: 0 };
  for (const { key, value } of [...store.range<TenantRecord>(DB.tenants, {})]) {
    const tenant = { ...value };
    tenant.wrappedKey = rewrap(oldKey, newKey, tenant.id, tenant.wrappedKey);
    if (tenant.retiredKeys)
      tenant.retiredKeys = tenant.retiredKeys.map((retired) => ({
        ...retired,
        wrappedKey: rewrap(oldKey, newKey, tenant.id, retired.wrappedKey),
      }));
    store.put(DB.tenants, Buffer.from(key), tenant);
    counts.tenants += 1;
    counts.tenantKeys += 1 + (tenant.retiredKeys?.length ?? 0);
  }
  const oldSeal = deriveKey(oldKey, PURPOSE_SECRET_SEAL);
  const newSeal = deriveKey(newKey, PURPOSE_SECRET_SEAL);
  for (const { key, value } of [...store.range<AccessKeyRecord>(DB.accessKeys, {})]) {
    const aad = `access-key:${value.accessKeyId}`;
    const sealedSecret = reseal(oldSeal, newSeal, value.sealedSecret, aad);
    store.put(DB.accessKeys, Buffer.from(key), { ...value, sealedSecret });
    counts.accessKeys += 1;
  }
  for (const { key, value } of [...store.range<BucketNotificationsRecord>(DB.notifications, {})]) {
    const configs = value.configs.map((config) => ({
      ...config,
      sealedSecret: reseal(
        oldSeal,
        newSeal,
        config.sealedSecret,
        `webhook:${value.tenantId}:${value.bucketId}:${config.id}`,
      ),
    }));
    store.put(DB.notifications, Buffer.from(key), { ...value, configs });
    counts.webhookSecrets += configs.length;
  }
  rewrapBackupKeys(store, oldKey, newKey);
  for (const target of backupTargets(context)) {
    const sealedSecret = reseal(oldSeal, newSeal, target.sealedSecret, targetAad(target.name));
    store.put(DB.meta, targetKey(target.name), { ...target, sealedSecret });
  }
  const check: MasterKeyCheckRecord = {
    check: masterKeyCheckOf(newKey),
    recordedAt: context.now(),
  };
  store.put(DB.meta, META_MASTER_KEY_CHECK, check);
  return counts;
}

/** What a tenant data-key rotation answers. */
export interface TenantKeyRotation {
  tenantId: string;
  /** 1 for the key a tenant was created with, one more per rotation. */
  keyGeneration: number;
  rotatedAt?: number;
  retiredKeys: number;
  dryRun?: true;
}

/** The generation of the tenant's current key: its retired and dropped keys plus one. */
export function keyGenerationOf(tenant: TenantRecord): number {
  return (tenant.retiredKeys?.length ?? 0) + (tenant.droppedKeys ?? 0) + 1;
}

/**
 * A new data key for the tenant; the current one joins `retiredKeys`. New writes use the new
 * key once the gateways read the new record (each request reads it); reads of older chunks use
 * the retired key they were written under.
 */
export function rotateTenantDataKey(
  context: EngineContext,
  args: { tenantId: string; dryRun?: boolean },
): TenantKeyRotation {
  validateTenantId(args.tenantId);
  const tenant = context.store.get<TenantRecord>(DB.tenants, tenantKey(args.tenantId));
  if (!tenant || tenant.state === 'deleted') throw NotFound(`tenant ${args.tenantId} not found`);
  const retired = tenant.retiredKeys ?? [];
  if (retired.length >= RETIRED_TENANT_KEYS_MAX)
    throw Conflict(
      `tenant ${tenant.id} already keeps ${RETIRED_TENANT_KEYS_MAX} retired data keys, the most ` +
        'it may: rotate again once its re-encryption has finished and dropped them',
      { blockers: [{ kind: 'retiredKeys', count: retired.length }] },
    );
  if (args.dryRun === true)
    return {
      tenantId: tenant.id,
      keyGeneration: keyGenerationOf(tenant) + 1,
      retiredKeys: retired.length + 1,
      dryRun: true,
    };
  const now = context.now();
  const rotated: TenantRecord = {
    ...tenant,
    wrappedKey: wrapTenantKey(context.masterKey, tenant.id, newTenantDataKey()),
    retiredKeys: [{ wrappedKey: Buffer.from(tenant.wrappedKey), retiredAt: now }, ...retired],
  };
  context.store.put(DB.tenants, tenantKey(tenant.id), rotated);
  startReencryption(context, rotated);
  return {
    tenantId: tenant.id,
    keyGeneration: keyGenerationOf(rotated),
    rotatedAt: now,
    retiredKeys: rotated.retiredKeys?.length ?? 0,
  };
}
