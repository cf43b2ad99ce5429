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
// - The engine makes a new master key only for a directory whose index holds no check value
//   and no tenant (a new one); otherwise a missing key file refuses the start.
// - A directory from before the check existed is recorded at its first start once the key has
//   opened a tenant's wrapped data key (AES-GCM authenticates it), or at once when it has no
//   tenant: a key that opens nothing of the directory's is refused, never recorded.

import { timingSafeEqual } from 'node:crypto';
import type { IndexStore } from './index/store.js';
import { DB, META_MASTER_KEY_CHECK, type TenantRecord } from './index/schema.js';
import { deriveKey, unwrapTenantKey, PURPOSE_KEY_CHECK } from '../security/keys.js';
import { BadRequest } from '../util/errors.js';

export const MASTER_KEY_CHECK_BYTES = 16;

export interface MasterKeyCheckRecord {
  readonly check: Buffer;
  readonly recordedAt: number;
}

export function masterKeyCheckOf(masterKey: Buffer): Buffer {
  return deriveKey(masterKey, PURPOSE_KEY_CHECK).subarray(0, MASTER_KEY_CHECK_BYTES);
}

/** The directory has data under some master key: a recorded check, or a tenant. */
export function indexHoldsKeyedData(store: IndexStore): boolean {
  if (store.get(DB.meta, META_MASTER_KEY_CHECK) !== undefined) return true;
  for (const _ of store.range(DB.tenants, { limit: 1 })) return true;
  return false;
}

function mismatch(keyFile: string): Error {
  return BadRequest(
    `the master key in ${keyFile} is not the key of this data directory (its check value ` +
      'differs): restore the right key file, or point LIGHTWELL_MASTER_KEY_FILE at it',
  );
}

/** Refuses `masterKey` when the index has a check value it does not match (any process). */
export function verifyMasterKey(store: IndexStore, masterKey: Buffer, keyFile: string): void {
  const recorded = store.get<MasterKeyCheckRecord>(DB.meta, META_MASTER_KEY_CHECK);
  if (recorded && !timingSafeEqual(Buffer.from(recorded.check), masterKeyCheckOf(masterKey)))
    throw mismatch(keyFile);
}

/**
 * The engine's check at start: compares with the recorded value, or records one for a
 * directory that has none yet, once the key has proved itself on a tenant's wrapped key.
 */
export async function settleMasterKeyCheck(
  store: IndexStore,
  masterKey: Buffer,
  keyFile: string,
): Promise<void> {
  if (store.get(DB.meta, META_MASTER_KEY_CHECK) !== undefined) {
    verifyMasterKey(store, masterKey, keyFile);
    return;
  }
  for (const { value } of store.range<TenantRecord>(DB.tenants, { limit: 1 })) {
    try {
      unwrapTenantKey(masterKey, value.id, Buffer.from(value.wrappedKey));
    } catch {
      throw mismatch(keyFile);
    }
  }
  const record: MasterKeyCheckRecord = {
    check: masterKeyCheckOf(masterKey),
    recordedAt: Date.now(),
  };
  await store.transact(() => store.put(DB.meta, META_MASTER_KEY_CHECK, record));
}
