// Backup targets in the index: another S3 endpoint a backup is uploaded to (src/engine/
// backup.ts, s3-target.ts), named by the operator, and the commands that set and remove one.
//
// Invariants:
// - The secret access key is stored only sealed under the master key (PURPOSE_SECRET_SEAL, bound
//   to the target's name), re-sealed with everything else at a master-key rotation
//   (key-rotation.ts), and opened only by the backup runner as it signs a request. No answer,
//   listing, audit row or log line holds it: `targetJson` is the only view of a target.
// - The endpoint is an http(s) origin with no credentials, path or query; bucket and prefix are
//   S3 names without `..` (the keys a backup writes are `<prefix><backup>/<file>`).
//
// Persists: `meta` rows `backuptarget\0<name>` (docs/on-disk-format.md §5).

import { Buffer } from 'node:buffer';
import { DB } from '../index/schema.js';
import type { EngineContext } from './context.js';
import { backupJobs } from './backup.js';
import { PURPOSE_SECRET_SEAL, deriveKey, openSecret, sealSecret } from '../../security/keys.js';
import { BadRequest, Conflict, NotFound } from '../../util/errors.js';
import type { S3Endpoint } from '../s3-target.js';

export const TARGET_PREFIX = 'backuptarget\0';
const TARGET_NAME = /^[a-z0-9][a-z0-9._-]{0,62}$/;
const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const PREFIX = /^([A-Za-z0-9._-]{1,100}\/){0,8}$/;
const REGION = /^[a-z0-9-]{1,32}$/;
const ACCESS_KEY_ID = /^[\x21-\x7e]{1,128}$/;
const SECRET_CHARS_MAX = 256;

export interface BackupTargetRecord {
  name: string;
  endpoint: string;
  region: string;
  bucket: string;
  /** Prepended to every key: empty, or path segments each ending in `/`. */
  prefix: string;
  accessKeyId: string;
  /** The secret access key, sealed (see the header). */
  sealedSecret: Buffer;
  createdAt: number;
}

export function targetKey(name: string): Buffer {
  return Buffer.from(TARGET_PREFIX + name, 'utf8');
}

export function targetAad(name: string): string {
  return `backup-target:${name}`;
}

/** Every target, by name. */
export function backupTargets(context: Pick<EngineContext, 'store'>): BackupTargetRecord[] {
  const start = Buffer.from(TARGET_PREFIX, 'utf8');
  const end = Buffer.concat([start, Buffer.from([0xff])]);
  return [...context.store.range<BackupTargetRecord>(DB.meta, { start, end })].map(
    (entry) => entry.value,
  );
}

/** What the console shows of a target: everything but its secret. */
export function targetJson(target: BackupTargetRecord): Record<string, unknown> {
  return {
    name: target.name,
    endpoint: target.endpoint,
    region: target.region,
    bucket: target.bucket,
    prefix: target.prefix,
    accessKeyId: target.accessKeyId,
    createdAt: new Date(target.createdAt).toISOString(),
  };
}

function text(value: unknown, field: string, pattern: RegExp, says: string): string {
  if (typeof value !== 'string' || !pattern.test(value))
    throw BadRequest(`${field} must be ${says}`);
  return value;
}

function endpointOf(value: unknown): string {
  if (typeof value !== 'string' || value.length > 300)
    throw BadRequest('endpoint must be an http or https origin, such as https://s3.example.com');
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw BadRequest('endpoint must be an http or https origin, such as https://s3.example.com');
  }
  if (
    (url.protocol !== 'http:' && url.protocol !== 'https:') ||
    url.username !== '' ||
    url.password !== '' ||
    (url.pathname !== '/' && url.pathname !== '') ||
    url.search !== '' ||
    url.hash !== ''
  )
    throw BadRequest('endpoint must be an http or https origin: no credentials, path or query');
  return url.origin;
}

/**
 * Adds target `name` (409 when it exists: a target is removed and added again to change it, so
 * a backup's target never changes under it). A dry run answers the record without the secret.
 */
export function setBackupTarget(
  context: EngineContext,
  args: {
    name: unknown;
    endpoint: unknown;
    region?: unknown;
    bucket: unknown;
    prefix?: unknown;
    accessKeyId: unknown;
    secretAccessKey: unknown;
    dryRun?: boolean;
  },
): Record<string, unknown> {
  const name = text(args.name, 'name', TARGET_NAME, '1 to 63 of a-z, 0-9, ".", "_" and "-"');
  const endpoint = endpointOf(args.endpoint);
  const region = text(args.region ?? 'us-east-1', 'region', REGION, 'an S3 region name');
  const bucket = text(args.bucket, 'bucket', BUCKET_NAME, 'an S3 bucket name');
  const prefix = text(
    args.prefix ?? '',
    'prefix',
    PREFIX,
    'empty, or up to 8 segments of A-Z, a-z, 0-9, ".", "_" and "-", each ending in "/"',
  );
  if (prefix.split('/').some((segment) => segment === '..' || segment === '.'))
    throw BadRequest('prefix must not hold a "." or ".." segment');
  const accessKeyId = text(args.accessKeyId, 'accessKeyId', ACCESS_KEY_ID, 'an access key id');
  const secret = args.secretAccessKey;
  if (typeof secret !== 'string' || secret.length === 0 || secret.length > SECRET_CHARS_MAX)
    throw BadRequest(`secretAccessKey must be 1 to ${String(SECRET_CHARS_MAX)} characters`);
  if (context.store.get(DB.meta, targetKey(name)) !== undefined)
    throw Conflict(`a backup target named ${name} exists already; remove it to change it`);
  const record: BackupTargetRecord = {
    name,
    endpoint,
    region,
    bucket,
    prefix,
    accessKeyId,
    sealedSecret: sealSecret(
      deriveKey(context.masterKey, PURPOSE_SECRET_SEAL),
      Buffer.from(secret, 'utf8'),
      targetAad(name),
    ),
    createdAt: context.now(),
  };
  if (args.dryRun !== true) context.store.put(DB.meta, targetKey(name), record);
  return targetJson(record);
}

/** Removes target `name`; 409 while a backup uploads to it (its uploads stay at the target). */
export function deleteBackupTarget(
  context: EngineContext,
  args: { name: unknown; dryRun?: boolean },
): Record<string, unknown> {
  const found = targetNamed(context, args.name);
  const busy = backupJobs(context).find(
    (job) => job.target === found.name && (job.state === 'queued' || job.state === 'running'),
  );
  if (busy) throw Conflict(`backup ${busy.name} is ${busy.state} to target ${found.name}`);
  if (args.dryRun !== true) context.store.remove(DB.meta, targetKey(found.name));
  return targetJson(found);
}

export function targetNamed(
  context: Pick<EngineContext, 'store'>,
  name: unknown,
): BackupTargetRecord {
  if (typeof name !== 'string' || !TARGET_NAME.test(name))
    throw BadRequest('target must be the name of a backup target');
  const found = context.store.get<BackupTargetRecord>(DB.meta, targetKey(name));
  if (!found) throw NotFound(`no backup target named ${name}`);
  return found;
}

/** The target's endpoint with its secret opened, for the runner to sign with. */
export function openTarget(
  context: Pick<EngineContext, 'store' | 'masterKey'>,
  name: string,
): S3Endpoint & { prefix: string } {
  const found = targetNamed(context, name);
  const secret = openSecret(
    deriveKey(context.masterKey, PURPOSE_SECRET_SEAL),
    Buffer.from(found.sealedSecret),
    targetAad(found.name),
  );
  return {
    endpoint: found.endpoint,
    region: found.region,
    bucket: found.bucket,
    prefix: found.prefix,
    accessKeyId: found.accessKeyId,
    secretAccessKey: secret.toString('utf8'),
  };
}
