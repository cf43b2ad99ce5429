// The data directory: where every file lives, the FORMAT marker check, the master key, and the
// single-engine lock.
//
// Layout (docs/on-disk-format.md, Inventory):
//   FORMAT                 marker: magic, format version, creating release
//   index/                 the LMDB environment (single writer: the engine)
//   segments/<id>.seg      append-only segment files
//   keys/master.key        32-byte master key, mode 0600 (or LIGHTWELL_MASTER_KEY_FILE)
//   reserve                space kept for reclaiming on a full disk (space-reserve.ts)
//   engine.sock            the engine's command socket (runtime only)
//   engine.lock            pid of the engine that holds the directory (runtime only)

import assert from 'node:assert/strict';
import { mkdir, readFile, writeFile, unlink } from 'node:fs/promises';
import { accessSync, constants, existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { decodeMarker, encodeMarker, FORMAT_VERSION } from '../format/marker.js';
import {
  DataDirLocked,
  FormatTooNew,
  DataDirUnusable,
  MasterKeyUnusable,
  EngineUnavailable,
  isLightwellError,
} from '../util/errors.js';
import { nodeIo, type Io } from '../util/io.js';

export const RELEASE = '0.1.0';
export const MASTER_KEY_BYTES = 32;

export interface DataDirPaths {
  readonly root: string;
  readonly marker: string;
  readonly index: string;
  readonly segments: string;
  readonly keys: string;
  readonly masterKey: string;
  readonly socket: string;
  readonly lock: string;
}

export function dataDirPaths(root: string): DataDirPaths {
  const dir = resolve(root);
  return {
    root: dir,
    marker: join(dir, 'FORMAT'),
    index: join(dir, 'index'),
    segments: join(dir, 'segments'),
    keys: join(dir, 'keys'),
    // An empty variable counts as unset, as for every setting.
    masterKey: process.env['LIGHTWELL_MASTER_KEY_FILE'] || join(dir, 'keys', 'master.key'),
    socket: join(dir, 'engine.sock'),
    lock: join(dir, 'engine.lock'),
  };
}

/** Whether `paths.root` holds a Lightwell data directory: its FORMAT marker exists. */
export function isDataDir(paths: DataDirPaths): boolean {
  return existsSync(paths.marker);
}

/**
 * Refuses a data directory whose FORMAT names a newer format than this release reads. Every
 * process reads it before anything else: a gateway or admin process started on its own on such
 * a directory had waited 30 s for an engine that refuses it, then blamed the engine's socket.
 * A directory without a marker yet passes (its engine may not have created it yet).
 */
export async function checkDataDirFormat(paths: DataDirPaths): Promise<void> {
  if (!existsSync(paths.marker)) return;
  const marker = decodeMarker(await readFile(paths.marker));
  if (marker.formatVersion > FORMAT_VERSION) {
    throw FormatTooNew(
      `data directory format ${marker.formatVersion} is newer than this release supports (${FORMAT_VERSION})`,
    );
  }
}

/**
 * For a gateway or admin process started on its own: refuses at once a path that holds no data
 * directory and no running engine, which had waited 30 s and then blamed the engine's socket.
 */
export function requireStore(paths: DataDirPaths, role: string): void {
  if (isDataDir(paths) || engineLockOwner(paths) !== undefined) return;
  throw EngineUnavailable(
    `no Lightwell data directory at ${paths.root} and no engine running on it: ` +
      `the ${role} serves the store of an engine, so start lightwell-engine --data-dir ` +
      `${paths.root} first (or run everything with lightwell serve)`,
  );
}

/** A wait for the engine that ran out: says which data directory has no engine. */
export function noEngineError(paths: DataDirPaths, waitedMs: number, cause: unknown): unknown {
  if (!isLightwellError(cause) || cause.code !== 'engine_unavailable') return cause;
  const running = engineLockOwner(paths);
  const state =
    running === undefined
      ? 'no engine is running on it'
      : `its engine (process ${running}) does not answer`;
  return EngineUnavailable(
    `no engine answered within ${Math.round(waitedMs / 1000)} s on data directory ` +
      `${paths.root}: ${state} (start lightwell-engine --data-dir ${paths.root}, ` +
      'or run everything with lightwell serve)',
    {},
    { cause },
  );
}

/**
 * Creates the directory tree on first use, or checks the FORMAT marker of an existing one.
 * A marker of a newer format version refuses to open (`format_too_new`); a directory with an
 * index but no marker is not ours and is refused too. `created` tells the caller a new store
 * was made, which it must say out loud: a typo in `--data-dir` would otherwise start an empty
 * store, with a new master key, without a word.
 */
export async function prepareDataDir(
  paths: DataDirPaths,
  io: Io = nodeIo,
): Promise<{ created: boolean }> {
  checkDataDirUsable(paths);
  checkDataDirParent(paths);
  await mkdir(paths.root, { recursive: true });
  let created = false;
  if (existsSync(paths.marker)) {
    await checkDataDirFormat(paths);
  } else {
    if (existsSync(paths.index)) {
      throw DataDirUnusable(`${paths.root} has an index but no FORMAT marker; refusing to open it`);
    }
    await writeFileDurable(
      paths.marker,
      encodeMarker({ createdBy: RELEASE, createdAtMs: Date.now() }),
      0o644,
      io,
    );
    created = true;
  }
  await mkdir(paths.index, { recursive: true });
  await mkdir(paths.segments, { recursive: true });
  await mkdir(paths.keys, { recursive: true, mode: 0o700 });
  // The new directories' entries in the root, and the root's in its parent, are made durable:
  // a crash must not leave a marker whose segments/ or keys/ vanished.
  if (created) {
    await io.syncDirectory(paths.root);
    await io.syncDirectory(dirname(paths.root));
  }
  return { created };
}

/**
 * Refuses a new data directory whose parent does not exist: a new store is made only in a
 * directory that is there, never with a whole tree of directories that a typo named.
 */
export function checkDataDirParent(paths: DataDirPaths): void {
  if (existsSync(paths.root)) return;
  const parent = dirname(paths.root);
  if (!existsSync(parent))
    throw DataDirUnusable(
      `${parent} does not exist, so no data directory is created at ${paths.root}: ` +
        'check --data-dir, or create the parent directory first',
    );
}

/** The notice of a new store, for stderr and the log. */
export function newStoreNotice(paths: DataDirPaths): string {
  return (
    `created a new, empty data directory at ${paths.root} (a new store, with a new master ` +
    'key); if you meant an existing one, stop and check --data-dir'
  );
}

/**
 * Refuses, in one line, a data directory that cannot be used, before anything is created: the
 * path, or the nearest part of it that exists, must be a directory this process can write.
 * Without this, mkdir answered `EEXIST` for a regular file and the engine failed later on an
 * unwritable directory with raw errno text.
 */
export function checkDataDirUsable(paths: DataDirPaths): void {
  let path = paths.root;
  for (;;) {
    let stats;
    try {
      stats = statSync(path);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      // ENOTDIR: a part of the path above is a file, which the walk up reaches.
      if ((code === 'ENOENT' || code === 'ENOTDIR') && dirname(path) !== path) {
        path = dirname(path);
        continue;
      }
      throw DataDirUnusable(`${path} cannot be read (${code ?? String(error)})`);
    }
    if (!stats.isDirectory()) throw DataDirUnusable(`${path} is not a directory`);
    requireAccess(path, constants.W_OK | constants.X_OK, 'writable');
    if (path === paths.root) checkDataDirParts(paths);
    return;
  }
}

/**
 * The parts of an existing data directory that every start reads or writes: one owned by
 * another user (an `admin-token create` run as root before the service's first start) failed
 * later with raw errno text or LMDB's stack trace.
 */
function checkDataDirParts(paths: DataDirPaths): void {
  const dirs = [paths.index, paths.segments, paths.keys];
  const files = [
    { path: paths.marker, mode: constants.R_OK },
    { path: join(paths.index, 'data.mdb'), mode: constants.R_OK | constants.W_OK },
    { path: join(paths.index, 'lock.mdb'), mode: constants.R_OK | constants.W_OK },
    { path: paths.masterKey, mode: constants.R_OK },
  ];
  for (const dir of dirs) {
    if (existsSync(dir))
      requireAccess(dir, constants.R_OK | constants.W_OK | constants.X_OK, 'writable');
  }
  for (const file of files) {
    if (existsSync(file.path))
      requireAccess(file.path, file.mode, file.mode & constants.W_OK ? 'writable' : 'readable');
  }
}

function requireAccess(path: string, mode: number, what: string): void {
  try {
    accessSync(path, mode);
  } catch {
    const owner = statSync(path, { throwIfNoEntry: false })?.uid;
    throw DataDirUnusable(
      `${path} is not ${what} by uid ${process.getuid?.() ?? 'unknown'}` +
        (owner === undefined ? '' : ` (owned by uid ${owner})`) +
        ': the whole data directory must belong to the user the service runs as (chown -R)',
    );
  }
}

/** Reads the master key, creating it (0600) on first start unless a key file is configured. */
export async function loadMasterKey(
  paths: DataDirPaths,
  options: { readonly dataUnderKey: boolean },
  io: Io = nodeIo,
): Promise<Buffer> {
  if (existsSync(paths.masterKey))
    return checkMasterKey(readKeyFile(paths.masterKey), paths.masterKey);
  if (process.env['LIGHTWELL_MASTER_KEY_FILE']) {
    throw MasterKeyUnusable(
      `LIGHTWELL_MASTER_KEY_FILE names ${paths.masterKey}, which does not exist`,
    );
  }
  // A new key only for a new directory: data under a lost key would be unreadable with it.
  if (options.dataUnderKey)
    throw MasterKeyUnusable(
      `${paths.masterKey} is missing, but this data directory holds data under a master key: ` +
        'restore the key file, or point LIGHTWELL_MASTER_KEY_FILE at it',
    );
  const key = randomBytes(MASTER_KEY_BYTES);
  await writeFileDurable(paths.masterKey, key, 0o600, io);
  return key;
}

/** Synchronous read for processes that start after the engine created the key. */
export function readMasterKeySync(paths: DataDirPaths): Buffer {
  return checkMasterKey(readKeyFile(paths.masterKey), paths.masterKey);
}

/** The key file's bytes; a failure names the file and what to do, in one line. */
function readKeyFile(file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? String(error);
    const hint =
      code === 'ENOENT'
        ? ': the engine makes it at its first start; where the engine is given ' +
          'LIGHTWELL_MASTER_KEY_FILE, every process needs the same'
        : '';
    throw MasterKeyUnusable(`cannot read the master key ${file} (${code})${hint}`);
  }
}

function checkMasterKey(key: Buffer, file: string): Buffer {
  if (key.length !== MASTER_KEY_BYTES)
    throw MasterKeyUnusable(`${file} must hold exactly ${MASTER_KEY_BYTES} bytes`);
  return key;
}

/**
 * Write to a temporary name, fsync, rename, fsync the directory: a reader sees the old file or
 * the whole new one, and once this resolves a crash cannot lose the new name.
 */
export async function writeFileDurable(
  file: string,
  data: Buffer,
  mode = 0o644,
  io: Io = nodeIo,
): Promise<void> {
  const temp = `${file}.tmp-${process.pid}`;
  const handle = await io.open(temp, 'w', mode);
  try {
    for (let done = 0; done < data.length;) {
      const { bytesWritten } = await handle.write(data, done, data.length - done, done);
      assert(bytesWritten > 0, 'a write to a regular file wrote nothing');
      done += bytesWritten;
    }
    await handle.sync();
  } finally {
    await handle.close();
  }
  await io.rename(temp, file);
  await io.syncDirectory(dirname(file));
}

/**
 * Takes the engine lock: `engine.lock` holds the owner's pid. A lock whose pid is alive refuses
 * the start (`data_dir_locked`); a stale one (its process gone) is taken over.
 */
export async function acquireEngineLock(paths: DataDirPaths): Promise<() => Promise<void>> {
  for (let attempt = 0; attempt < 3; attempt += 1) {
    try {
      await writeFile(paths.lock, `${process.pid}\n`, { flag: 'wx' });
      return async () => {
        await unlink(paths.lock).catch(() => undefined);
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const owner = Number((await readFile(paths.lock, 'utf8').catch(() => '')).trim());
      if (owner > 0 && owner !== process.pid && processAlive(owner)) {
        const hint = `${paths.lock}; if that process is not a Lightwell engine, remove the file`;
        throw DataDirLocked(
          `data directory ${paths.root} is in use by process ${owner} (${hint})`,
          {
            pid: owner,
          },
        );
      }
      await unlink(paths.lock).catch(() => undefined);
    }
  }
  throw DataDirLocked(`could not take the lock on ${paths.root}`);
}

/** The pid in the lock file when its process is alive. */
export function engineLockOwner(paths: DataDirPaths): number | undefined {
  try {
    const owner = Number(readFileSync(paths.lock, 'utf8').trim());
    return owner > 0 && processAlive(owner) ? owner : undefined;
  } catch {
    return undefined;
  }
}

export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  // A zombie (exited, not yet reaped) still answers signal 0 but holds nothing.
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return true;
  }
}
