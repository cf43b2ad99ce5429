// Named KMS keys of a tenant: the ids SSE-KMS writes may name (x-amz-server-side-encryption-aws-
// kms-key-id), created and deleted by an operator through the admin API. The tenant's own id
// names its data key and is always a key id; named keys are records on the tenant, so a key id
// is checked with the tenant record a request already holds (service/encryption.ts).
//
// A named key carries no key material of its own: the bytes of every object stay encrypted
// under the tenant's data key (docs/on-disk-format.md); the key id is what S3 reports and what
// a policy or an audit can tell apart. Deleting a key refuses new writes that name it; versions
// written under it stay readable and keep reporting it (docs/s3-data-protection.md).
//
// Persists: TenantRecord.kmsKeys.

import { DB, tenantKey, type KmsKeyRecord, type TenantRecord } from '../index/schema.js';
import type { EngineContext } from './context.js';
import { BadRequest, Conflict, NotFound } from '../../util/errors.js';
import { refuseControlChars } from '../../security/names.js';

/** Named keys a tenant may hold: a bound on the tenant record's size. */
export const KMS_KEYS_PER_TENANT_MAX = 100;
/** AWS's key ids, aliases (`alias/…`) and the test rigs' names (`testkey-1`) all fit. */
const KMS_KEY_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$/;
const DESCRIPTION_CHARS_MAX = 256;

/** A key id as a named key may have it, or a 400. */
export function validateKmsKeyId(id: unknown): string {
  if (typeof id !== 'string' || !KMS_KEY_ID_PATTERN.test(id))
    throw BadRequest(
      'a KMS key id is 1 to 128 of A-Z a-z 0-9 _ . : / -, starting with a letter or digit',
    );
  return id;
}

/** The tenant unless it does not exist or was deleted (as control.ts's requireTenant). */
function liveTenant(context: EngineContext, tenantId: string): TenantRecord {
  const tenant = context.store.get<TenantRecord>(DB.tenants, tenantKey(tenantId));
  if (!tenant || tenant.state === 'deleted') throw NotFound(`tenant ${tenantId} not found`);
  return tenant;
}

/**
 * The keys every new tenant starts with (`kms.new_tenant_keys`, comma-separated ids): test rigs
 * such as ceph/s3-tests expect named keys to exist before their first write.
 */
export function addPresetKmsKeys(tenant: TenantRecord, preset: string, now: number): void {
  for (const id of preset.split(',')) {
    const trimmed = id.trim();
    if (trimmed !== '' && !tenant.kmsKeys?.some((key) => key.id === trimmed))
      addKmsKey(tenant, trimmed, now, 'kms.new_tenant_keys');
  }
}

/** Creates a named key (409 if the tenant has one of that id, or the id is the tenant's own). */
export function createKmsKey(
  context: EngineContext,
  args: { tenantId: string; id: string; description?: string; dryRun?: boolean },
): KmsKeyRecord {
  const tenant = liveTenant(context, args.tenantId);
  if (tenant.state !== 'active') throw Conflict(`tenant ${tenant.id} is ${tenant.state}`);
  const key = addKmsKey(tenant, args.id, context.now(), args.description);
  if (args.dryRun !== true) context.store.put(DB.tenants, tenantKey(tenant.id), tenant);
  return key;
}

/** Adds a named key to a tenant record in memory (createKmsKey, and createTenant's presets). */
export function addKmsKey(
  tenant: TenantRecord,
  id: string,
  createdAt: number,
  description?: string,
): KmsKeyRecord {
  validateKmsKeyId(id);
  if (id === tenant.id) throw Conflict(`${id} is the tenant's own key id`);
  const keys = (tenant.kmsKeys ??= []);
  if (keys.some((key) => key.id === id)) throw Conflict(`the KMS key ${id} already exists`);
  if (keys.length >= KMS_KEYS_PER_TENANT_MAX)
    throw Conflict(`a tenant holds at most ${KMS_KEYS_PER_TENANT_MAX} KMS keys`);
  const key: KmsKeyRecord = { id, createdAt };
  if (description !== undefined) {
    if (typeof description !== 'string' || description.length > DESCRIPTION_CHARS_MAX)
      throw BadRequest(`description is text of at most ${DESCRIPTION_CHARS_MAX} characters`);
    refuseControlChars(description, 'description');
    key.description = description;
  }
  keys.push(key);
  return key;
}

/** Deletes a named key (404 if the tenant has none of that id). */
export function deleteKmsKey(
  context: EngineContext,
  args: { tenantId: string; id: string; dryRun?: boolean },
): { deleted: KmsKeyRecord } {
  const tenant = liveTenant(context, args.tenantId);
  const keys = tenant.kmsKeys ?? [];
  const index = keys.findIndex((key) => key.id === args.id);
  const deleted = keys[index];
  if (deleted === undefined) throw NotFound(`no KMS key ${args.id.slice(0, 128)}`);
  keys.splice(index, 1);
  if (keys.length === 0) delete tenant.kmsKeys;
  if (args.dryRun !== true) context.store.put(DB.tenants, tenantKey(tenant.id), tenant);
  return { deleted };
}
