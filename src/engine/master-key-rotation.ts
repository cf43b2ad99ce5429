// Master-key rotation: a new master key, everything sealed under the old one re-sealed, and the
// old key destroyed once nothing in the index depends on it. Crash-safe at every step.
//
// Steps (the key file is `keys/master.key` or LIGHTWELL_MASTER_KEY_FILE; `<file>.next` beside it):
//   1. a new random key is written durably to `<file>.next` (temporary name, fsync, rename,
//      directory fsync);
//   2. one index transaction re-seals every tenant data key, access-key secret and webhook secret
//      under the new key and records its check value (ops/key-rotation.ts); the engine's own key
//      is swapped inside that transaction, so no later command seals anything under the old one;
//   3. `<file>.next` is renamed over `<file>` and the directory fsynced: the old key is gone.
// Invariant: at every instant one of the two files holds the key whose check value the index
// records. A crash before step 2's commit leaves the index under the old key (`<file>` matches);
// the engine's next start deletes the stale `.next`. A crash after it leaves the index under
// the new key, held by `.next`; the next start finishes step 3 (`settleMasterKeyRotation`), and
// a process that reads the key meanwhile takes whichever file matches (`readCurrentMasterKey`).
//
// Other processes notice a rotation by the check value in the index (src/service/auth.ts reads
// it on each request) and load the new key. Everything derived from the master key changes with
// it: bearer tokens, signed URLs and listing continuation tokens made before the rotation no
// longer verify (clients mint new tokens with their unchanged access keys). Backups of the key
// file made before a rotation do not open the index after it (docs/console.md).

import { randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { writeFileDurable, type DataDirPaths } from './data-dir.js';
import { masterKeyCheckOf, type MasterKeyCheckRecord } from './master-key-check.js';
import { DB, META_MASTER_KEY_CHECK } from './index/schema.js';
import type { IndexStore, CommandBatch } from './index/store.js';
import type { EngineContext } from './ops/context.js';
import * as audit from './ops/audit.js';
import { resealPlan, resealUnderNewMasterKey, type ResealCounts } from './ops/key-rotation.js';
import { MASTER_KEY_BYTES } from '../security/keys.js';
import { BadRequest, Conflict, MasterKeyUnusable } from '../util/errors.js';
import type { Logger } from '../util/log.js';
import { nodeIo, type Io } from '../util/io.js';

/** Where step 1 puts the new key. */
export function nextMasterKeyFile(paths: DataDirPaths): string {
  return `${paths.masterKey}.next`;
}

/** A short, stable name of a key for people: the first 8 bytes of its check value, in hex. */
export function masterKeyFingerprint(masterKey: Buffer): string {
  return masterKeyCheckOf(masterKey).subarray(0, 8).toString('hex');
}

function recordedCheck(store: IndexStore): Buffer | undefined {
  const recorded = store.get<MasterKeyCheckRecord>(DB.meta, META_MASTER_KEY_CHECK);
  return recorded ? Buffer.from(recorded.check) : undefined;
}

function matches(key: Buffer, check: Buffer | undefined): boolean {
  if (check === undefined || key.length !== MASTER_KEY_BYTES) return false;
  const own = masterKeyCheckOf(key);
  return own.length === check.length && timingSafeEqual(own, check);
}

/**
 * The key a process other than the engine loads: the key file, or while a rotation is between
 * its commit and its rename, the `.next` file when that is the one the index records. Anything
 * else is left to the caller's own check (`verifyMasterKey`), which names the file.
 */
export function pickCurrentMasterKey(
  store: IndexStore,
  keyFile: Buffer,
  nextFile: Buffer | undefined,
): Buffer {
  const check = recordedCheck(store);
  if (nextFile !== undefined && !matches(keyFile, check) && matches(nextFile, check))
    return nextFile;
  return keyFile;
}

function readIfThere(file: string): Buffer | undefined {
  try {
    return readFileSync(file);
  } catch {
    return undefined;
  }
}

/** `pickCurrentMasterKey` for a process starting (synchronously, before it serves). */
export function readCurrentMasterKeySync(
  paths: DataDirPaths,
  store: IndexStore,
  keyFile: Buffer,
): Buffer {
  const next = nextMasterKeyFile(paths);
  return pickCurrentMasterKey(store, keyFile, existsSync(next) ? readIfThere(next) : undefined);
}

/** `pickCurrentMasterKey` for a process that serves (after it saw the check value change). */
export async function readCurrentMasterKey(
  paths: DataDirPaths,
  store: IndexStore,
): Promise<Buffer> {
  const read = (file: string): Promise<Buffer | undefined> => readFile(file).catch(() => undefined);
  const [keyFile, nextFile] = await Promise.all([
    read(paths.masterKey),
    read(nextMasterKeyFile(paths)),
  ]);
  if (keyFile === undefined && nextFile === undefined)
    throw MasterKeyUnusable(`cannot read the master key ${paths.masterKey}`);
  return pickCurrentMasterKey(store, keyFile ?? Buffer.alloc(0), nextFile);
}

/**
 * At engine start, before the key is loaded: finishes a rotation that committed (step 3) or
 * discards the new key of one that did not (and any temporary file of step 1).
 */
export async function settleMasterKeyRotation(
  paths: DataDirPaths,
  store: IndexStore,
  log: Logger,
  io: Io = nodeIo,
): Promise<void> {
  const next = nextMasterKeyFile(paths);
  const directory = dirname(next);
  const temporary = `${basename(next)}.tmp-`;
  const strays = (await io.readdir(directory).catch(() => [] as string[])).filter((name) =>
    name.startsWith(temporary),
  );
  for (const name of strays) await io.unlink(join(directory, name));
  let changed = strays.length > 0;
  if (existsSync(next)) {
    changed = true;
    if (matches(await readFile(next), recordedCheck(store))) {
      await io.rename(next, paths.masterKey);
      log.warn({ file: paths.masterKey }, 'master-key rotation finished: the new key is in place');
    } else {
      await io.unlink(next);
      log.warn({ file: next }, 'master-key rotation did not commit: its new key was discarded');
    }
  }
  if (changed) await io.syncDirectory(directory);
}

export interface MasterKeyRotation {
  dryRun?: true;
  rotatedAt?: number;
  /** The fingerprint of the key in force afterwards (of the current one for a dry run). */
  fingerprint: string;
  previousFingerprint?: string;
  counts: ResealCounts;
}

interface RotationDeps {
  readonly context: EngineContext;
  readonly batch: CommandBatch;
  readonly paths: DataDirPaths;
  readonly log: Logger;
  readonly io?: Io;
}

let rotating = false;

/** The engine command: `{dryRun?, audit?}`. One rotation at a time (409 for a second). */
export async function rotateMasterKey(
  deps: RotationDeps,
  args: unknown,
): Promise<MasterKeyRotation> {
  const input = (args ?? {}) as { dryRun?: unknown; audit?: audit.AuditInput };
  if (input.dryRun !== undefined && typeof input.dryRun !== 'boolean')
    throw BadRequest('rotateMasterKey takes {dryRun?: boolean, audit?}');
  const { context } = deps;
  if (input.dryRun === true) {
    const plan: MasterKeyRotation = {
      dryRun: true,
      fingerprint: masterKeyFingerprint(context.masterKey),
      counts: resealPlan(context.store),
    };
    const row = input.audit;
    if (row) await deps.batch.submit(() => audit.writeAudit(context, row));
    return plan;
  }
  if (rotating) throw Conflict('a master-key rotation is already running');
  rotating = true;
  try {
    return await rotate(deps, input.audit);
  } finally {
    rotating = false;
  }
}

async function rotate(
  deps: RotationDeps,
  row: audit.AuditInput | undefined,
): Promise<MasterKeyRotation> {
  const { context, paths, log } = deps;
  const io = deps.io ?? nodeIo;
  const next = nextMasterKeyFile(paths);
  const oldKey = context.masterKey;
  const previousFingerprint = masterKeyFingerprint(oldKey);
  const newKey = randomBytes(MASTER_KEY_BYTES);
  try {
    await writeFileDurable(next, newKey, 0o600, io); // step 1
  } catch (cause) {
    throw MasterKeyUnusable(
      `cannot write the new master key beside ${paths.masterKey}: its directory must be ` +
        'writable by the engine to rotate the key',
      {},
      { cause },
    );
  }
  const state = { swapped: false };
  let counts: ResealCounts;
  try {
    counts = await deps.batch.submit(() => {
      const resealed = resealUnderNewMasterKey(context, oldKey, newKey); // step 2
      if (row) audit.writeAudit(context, row);
      context.masterKey = newKey;
      state.swapped = true;
      return resealed;
    });
  } catch (error) {
    if (state.swapped) {
      // The commit failed after the swap: whether it reached the disk is unknown, and the
      // engine must not seal anything more under a key it cannot name. The next start
      // settles it from the files and the index (serve restarts the engine).
      log.fatal({ err: error }, 'the master-key rotation commit failed; the engine stops');
      process.abort();
    }
    await io.unlink(next).catch(() => undefined);
    throw error;
  }
  await io.rename(next, paths.masterKey); // step 3
  await io.syncDirectory(dirname(paths.masterKey));
  oldKey.fill(0);
  const rotatedAt = context.now();
  log.warn({ counts }, 'master key rotated');
  return { rotatedAt, fingerprint: masterKeyFingerprint(newKey), previousFingerprint, counts };
}
