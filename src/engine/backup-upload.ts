// A backup's copy at another S3 endpoint (ops/backup-targets.ts): the runner uploads a backup
// once it is complete in `backup.directory`, and fetches one back before restoring it when its
// directory is gone. At the target a backup is `<prefix><name>/<file>` for every file of its
// directory, `manifest.json` last.
//
// Invariants:
// - Complete at the target only with its manifest: the manifest is uploaded after every other
//   file, so a copy cut by a crash or a failure holds no manifest and is never fetched back.
// - Verified: every request body's SHA-256 is signed (s3-target.ts), so the endpoint stores
//   nothing that changed on the way; a fetched file is checked against the size and SHA-256 its
//   manifest holds (the records) or its size (each version's sealed file, then authenticated
//   frame by frame and its SHA-256 checked by the restore before anything is written).
// - Incremental: over a base uploaded to the same target, a file the backup shares with its base
//   (a whole store's sealed segment of the same path, size and SHA-256; a tenant version's sealed
//   file linked from the base, found by walking both records files in index order) is copied on
//   the endpoint from the base's copy instead of sent again.
// - Bounded memory: files go a part at a time; records are streamed.
// - A fetch is written under `.<name>.fetch` and renamed into place once durable.
// - A whole-store backup's master key (`keys/master.key`, which opens every object) is never
//   uploaded: the endpoint's holder would read the whole store. Its manifest still lists it, so
//   `lightwell restore` of a copy fetched from the target wants the key file put back first.
//   A tenant backup holds no key that opens it, so all of it goes.

import { mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { EngineContext } from './ops/context.js';
import { openTarget } from './ops/backup-targets.js';
import { readManifest, type BackupManifest } from './backup.js';
import { S3Target } from './s3-target.js';
import { RECORDS_FILE, readRecords } from './tenant-backup-records.js';
import { BaseCursor } from './tenant-backup.js';
import { openTenantBackup } from './tenant-restore.js';
import { Conflict, CorruptData, NotFound } from '../util/errors.js';
import { nodeIo } from '../util/io.js';

const MANIFEST = 'manifest.json';
/** A whole-store backup's copy of the master key: not uploaded. */
const MASTER_KEY_FILE = 'keys/master.key';

/** One file to upload: from the backup's directory, or copied from the base's copy. */
interface Upload {
  path: string;
  bytes: number;
  /** The path of the same file in the base backup (at the target). */
  from?: string;
}

export interface UploadProgress {
  files: number;
  bytes: number;
  copied: number;
}

/** The files of a whole-store backup, each paired with the base's identical one. */
function* storeFiles(manifest: BackupManifest, base: BackupManifest | undefined) {
  const known = new Map((base?.files ?? []).map((file) => [file.path, file]));
  for (const file of manifest.files) {
    if (file.path === MASTER_KEY_FILE) continue; // never leaves the server (see the header)
    const same = known.get(file.path);
    const shared = same !== undefined && same.bytes === file.bytes && same.sha256 === file.sha256;
    yield { path: file.path, bytes: file.bytes, ...(shared ? { from: file.path } : {}) };
  }
}

/** The files of a tenant backup: its records, then each version's file (linked ones paired). */
async function* tenantFiles(
  context: EngineContext,
  dir: string,
  baseDir: string | undefined,
): AsyncGenerator<Upload> {
  const source = await openTenantBackup(context, dir);
  const records = source.manifest.files.find((file) => file.path === RECORDS_FILE);
  if (!records) throw CorruptData(`${dir} lists no ${RECORDS_FILE}`);
  yield { path: RECORDS_FILE, bytes: records.bytes };
  let cursor: BaseCursor | undefined;
  if (baseDir !== undefined) {
    const base = await readManifest(baseDir);
    // A base of the same chain (its data key) may share files; another chain shares none.
    if (base.encryption?.keyId === source.manifest.encryption.keyId && base.records)
      cursor = new BaseCursor(
        readRecords(
          join(baseDir, RECORDS_FILE),
          source.key,
          base.records.nonce,
          source.manifest.tenant,
        ),
      );
  }
  try {
    const own = readRecords(
      join(dir, RECORDS_FILE),
      source.key,
      source.manifest.records.nonce,
      source.manifest.tenant,
    );
    for await (const record of own) {
      if (record.type !== 'version' || !record.file) continue;
      const found = await cursor?.find(record);
      const shared = found?.file?.nonce === record.file.nonce;
      yield {
        path: record.file.path,
        bytes: record.file.bytes,
        ...(shared && found.file ? { from: found.file.path } : {}),
      };
    }
  } finally {
    await cursor?.close();
  }
}

/**
 * Uploads complete backup `name` (in `root`) to its target, over `base` when the base's copy
 * there is whole (its manifest is there); answers what it sent and copied.
 */
export async function uploadBackup(
  context: EngineContext,
  job: { name: string; target: string; base?: string; baseTarget?: string },
  root: string,
  options: { isStopped: () => boolean; progress: (done: UploadProgress) => Promise<void> },
): Promise<UploadProgress> {
  const target = openTarget(context, job.target);
  const client = new S3Target(target, () => context.now());
  const keyOf = (backup: string, path: string) => `${target.prefix}${backup}/${path}`;
  const dir = join(root, job.name);
  const manifest = await readManifest(dir);
  let base: string | undefined;
  if (job.base !== undefined && job.baseTarget === job.target) {
    if (await client.has(keyOf(job.base, MANIFEST))) base = job.base;
  }
  const baseDir = base === undefined ? undefined : join(root, base);
  const files =
    manifest.tenant === undefined
      ? storeFiles(manifest, baseDir === undefined ? undefined : await readManifest(baseDir))
      : tenantFiles(context, dir, baseDir);
  const done: UploadProgress = { files: 0, bytes: 0, copied: 0 };
  for await (const file of files) {
    if (options.isStopped()) throw Conflict('the engine is stopping');
    const key = keyOf(job.name, file.path);
    const copied =
      base !== undefined &&
      file.from !== undefined &&
      (await client.copy(key, keyOf(base, file.from), file.bytes));
    if (copied) done.copied += 1;
    else await client.putFile(key, join(dir, file.path), file.bytes);
    done.files += 1;
    done.bytes += file.bytes;
    if (done.files % 16 === 0) await options.progress(done);
  }
  await client.putBytes(keyOf(job.name, MANIFEST), await readFile(join(dir, MANIFEST)));
  done.files += 1;
  await options.progress(done);
  return done;
}

/** A path of a backup's file as its manifest or a record names it: inside the backup. */
function inside(path: string): string {
  if (path === '' || path.startsWith('/') || path.split('/').some((s) => s === '..' || s === ''))
    throw CorruptData(`the backup names a file outside it: ${path}`);
  return path;
}

/**
 * Fetches tenant backup `name` from its target into `root`/`name` (absent), checking every file
 * as it comes; with `recordsOnly`, into `into` and only its manifest and records (to plan).
 */
export async function fetchBackup(
  context: EngineContext,
  job: { name: string; target: string },
  root: string,
  options: { recordsOnly?: string; isStopped?: () => boolean } = {},
): Promise<string> {
  const target = openTarget(context, job.target);
  const client = new S3Target(target, () => context.now());
  const keyOf = (path: string) => `${target.prefix}${job.name}/${path}`;
  const partial = options.recordsOnly ?? join(root, `.${job.name}.fetch`);
  await rm(partial, { recursive: true, force: true });
  await mkdir(partial, { recursive: true, mode: 0o700 });
  try {
    const manifestBytes = await client.getBytes(keyOf(MANIFEST));
    if (manifestBytes === undefined)
      throw NotFound(`backup ${job.name} is not at target ${job.target} (no ${MANIFEST} there)`);
    await writeFile(join(partial, MANIFEST), manifestBytes, { mode: 0o600, flush: true });
    const manifest = await readManifest(partial);
    if (manifest.tenant === undefined || manifest.name !== job.name)
      throw CorruptData(`the manifest at target ${job.target} is not tenant backup ${job.name}`);
    for (const file of manifest.files) {
      const got = await client.getFile(
        keyOf(inside(file.path)),
        join(partial, file.path),
        file.bytes,
      );
      if (got.bytes !== file.bytes || got.sha256 !== file.sha256)
        throw CorruptData(`${file.path} of ${job.name} at target ${job.target} fails its checksum`);
    }
    if (options.recordsOnly !== undefined) return partial;
    await mkdir(join(partial, 'objects'), { mode: 0o700 });
    await fetchObjects(context, client, partial, keyOf, options.isStopped ?? (() => false));
    await nodeIo.syncDirectory(join(partial, 'objects'));
    await nodeIo.syncDirectory(partial);
    const dir = join(root, job.name);
    await rename(partial, dir);
    await nodeIo.syncDirectory(dirname(dir));
    return dir;
  } catch (error) {
    await rm(partial, { recursive: true, force: true });
    throw error;
  }
}

async function fetchObjects(
  context: EngineContext,
  client: S3Target,
  partial: string,
  keyOf: (path: string) => string,
  isStopped: () => boolean,
): Promise<void> {
  const source = await openTenantBackup(context, partial);
  const records = readRecords(
    join(partial, RECORDS_FILE),
    source.key,
    source.manifest.records.nonce,
    source.manifest.tenant,
  );
  for await (const record of records) {
    if (record.type !== 'version' || !record.file) continue;
    if (isStopped()) throw Conflict('the engine is stopping');
    const path = inside(record.file.path);
    // Two records never name one file, but a damaged list might: fetch each file once.
    if (
      await stat(join(partial, path)).then(
        () => true,
        () => false,
      )
    )
      continue;
    await mkdir(dirname(join(partial, path)), { recursive: true, mode: 0o700 });
    const got = await client.getFile(keyOf(path), join(partial, path), record.file.bytes);
    if (got.bytes !== record.file.bytes)
      throw CorruptData(`${path} of the backup at its target is ${String(got.bytes)} bytes`);
  }
}
