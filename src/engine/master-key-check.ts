// Proof that the master key a process loaded is the one this data directory's data is under.
//
// Without it, a data directory restored without its key file (the key is backed up apart from
// the data, docs/on-disk-format.md §1) started with a freshly made key, printed its ready
// lines, and then answered every token mint with a 500 and every earlier token with a 401; a
// wrong `LIGHTWELL_MASTER_KEY_FILE` did the same. The index records a check value of the key
// (`meta` / `masterKeyCheck`: 16 bytes derived from the key, which tells nothing about it), and
// every process that loads the key compares before it serves anything.
//
// Invariants:
// - Only tenants hold data under the master key (their wrapped data keys, and under those every
//   chunk, access-key secret and webhook secret of theirs). The engine makes a new master key
//   only for a directory without a tenant; otherwise a missing key file refuses the start.
// - A directory with a tenant starts only under a key that matches the recorded check value,
//   or, from before the check existed, that opens the tenant's wrapped data key (AES-GCM
//   authenticates it); the check is then recorded. A directory without a tenant takes any key
//   and records its check (nothing in it was under the old one).

import { timingSafeEqual } from 'node:crypto';
import type { IndexStore } from './index/store.js';
import { DB, META_MASTER_KEY_CHECK, type TenantRecord } from './index/schema.js';
import { deriveKey, unwrapTenantKey, PURPOSE_KEY_CHECK } from '../security/keys.js';
import { MasterKeyMismatch } from '../util/errors.js';

export const MASTER_KEY_CHECK_BYTES = 16;

export interface MasterKeyCheckRecord {
  readonly check: Buffer;
  readonly recordedAt: number;
}

export function masterKeyCheckOf(masterKey: Buffer): Buffer {
  return deriveKey(masterKey, PURPOSE_KEY_CHECK).subarray(0, MASTER_KEY_CHECK_BYTES);
}

/** The directory has data under its master key: a tenant. */
export function indexHoldsKeyedData(store: IndexStore): boolean {
  return firstTenant(store) !== undefined;
}

function firstTenant(store: IndexStore): TenantRecord | undefined {
  for (const { value } of store.range<TenantRecord>(DB.tenants, { limit: 1 })) return value;
  return undefined;
}

function mismatch(keyFile: string): Error {
  return MasterKeyMismatch(
    `the master key in ${keyFile} is not the key of this data directory (its check value ` +
      'differs): restore the right key file, or point LIGHTWELL_MASTER_KEY_FILE at it',
  );
}

/** Whether the recorded check value is `check`; undefined when none is recorded yet. */
function recordedCheckIs(store: IndexStore, check: Buffer): boolean | undefined {
  const recorded = store.get<MasterKeyCheckRecord>(DB.meta, META_MASTER_KEY_CHECK);
  if (!recorded) return undefined;
  const bytes = Buffer.from(recorded.check);
  return bytes.length === check.length && timingSafeEqual(bytes, check);
}

/** Refuses `masterKey` when the index has a check value it does not match (any process). */
export function verifyMasterKey(store: IndexStore, masterKey: Buffer, keyFile: string): void {
  if (recordedCheckIs(store, masterKeyCheckOf(masterKey)) === false) throw mismatch(keyFile);
}

/**
 * The engine's check at start: compares with the recorded value, or, where none matches yet,
 * records the key's once it has proved itself on a tenant's wrapped key (or there is no tenant).
 */
export async function settleMasterKeyCheck(
  store: IndexStore,
  masterKey: Buffer,
  keyFile: string,
): Promise<void> {
  const check = masterKeyCheckOf(masterKey);
  const matches = recordedCheckIs(store, check);
  if (matches) return;
  const tenant = firstTenant(store);
  if (tenant) {
    if (matches === false) throw mismatch(keyFile);
    try {
      unwrapTenantKey(masterKey, tenant.id, Buffer.from(tenant.wrappedKey));
    } catch {
      throw mismatch(keyFile);
    }
  }
  const record: MasterKeyCheckRecord = { check, recordedAt: Date.now() };
  await store.transact(() => store.put(DB.meta, META_MASTER_KEY_CHECK, record));
}
