// The data keys of tenant backups, kept in the index so that a master-key rotation re-wraps
// them (src/engine/backup-seal.ts; docs/console.md, "Backups: threat model").
//
// A tenant backup's manifest holds its data key wrapped under the master key it was taken
// under. The files of a backup never change once it is complete (a backup at another S3
// endpoint may not even be reachable), so a rotation does not rewrite manifests: the index keeps
// a copy of every chain's data key, wrapped under the current master key, and a rotation
// re-wraps those copies in the same transaction as every other sealed value
// (key-rotation.ts). That transaction is the whole of it, so it is crash-safe as the rest of the
// re-seal is: before its commit every copy is under the old key (which the key file still
// holds), after it every copy is under the new one. A backup whose manifest names an earlier
// master key is opened with the index's copy of its chain's key.
//
// Invariants:
// - A row is written (if the chain has none) before the backup is renamed into place, so every
//   complete tenant backup taken by this version has its key here.
// - Rows stay when backups are deleted (32 bytes each, one per chain): a chain's backups may
//   live on elsewhere (at an S3 target, or copied by the operator).
//
// Persists: `meta` rows `backupkey\0<keyId>` (docs/on-disk-format.md §5).

import { Buffer } from 'node:buffer';
import { DB } from '../index/schema.js';
import type { IndexStore } from '../index/store.js';
import type { EngineContext } from './context.js';
import { unwrapBackupKey, wrapBackupKey, type BackupKeyRecord } from '../backup-seal.js';
import { masterKeyCheckOf } from '../master-key-check.js';

export const BACKUP_KEY_PREFIX = 'backupkey\0';

function ringKey(keyId: string): Buffer {
  return Buffer.from(BACKUP_KEY_PREFIX + keyId, 'utf8');
}

/** As master-key-rotation.ts's `masterKeyFingerprint` (not imported: that module imports us). */
function fingerprintOf(master: Buffer): string {
  return masterKeyCheckOf(master).subarray(0, 8).toString('hex');
}

/** Keeps chain `keyId`'s data key, wrapped under the engine's key; in a transaction. */
export function keepBackupKey(
  context: Pick<EngineContext, 'store' | 'masterKey'>,
  keyId: string,
  key: Buffer,
): void {
  if (context.store.get(DB.meta, ringKey(keyId)) !== undefined) return;
  const master = context.masterKey;
  context.store.put(
    DB.meta,
    ringKey(keyId),
    wrapBackupKey(master, fingerprintOf(master), keyId, key),
  );
}

/** Chain `keyId`'s data key from `store` (under `master`), or undefined when it has none. */
export function backupKeyFromIndex(
  store: IndexStore,
  master: Buffer,
  keyId: string,
): Buffer | undefined {
  const found = store.get<BackupKeyRecord>(DB.meta, ringKey(keyId));
  return found === undefined ? undefined : unwrapBackupKey(master, fingerprintOf(master), found);
}

/** Re-wraps every chain's key under `newKey`; inside the rotation's transaction. */
export function rewrapBackupKeys(store: IndexStore, oldKey: Buffer, newKey: Buffer): number {
  const start = Buffer.from(BACKUP_KEY_PREFIX, 'utf8');
  const end = Buffer.concat([start, Buffer.from([0xff])]);
  const oldPrint = fingerprintOf(oldKey);
  const newPrint = fingerprintOf(newKey);
  let count = 0;
  for (const { key, value } of [...store.range<BackupKeyRecord>(DB.meta, { start, end })]) {
    const dataKey = unwrapBackupKey(oldKey, oldPrint, value);
    try {
      store.put(DB.meta, Buffer.from(key), wrapBackupKey(newKey, newPrint, value.keyId, dataKey));
    } finally {
      dataKey.fill(0);
    }
    count += 1;
  }
  return count;
}
