// What the backup tests share: waiting for a backup to end (through the console API), running
// `lightwell restore`, and checking that a restored store serves every object byte-exact with
// the same access keys.
import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { spawnSync } from 'node:child_process';
import { CLI, DataClient, Service } from '../helpers/service.js';
import type { ConsoleCall } from './console-call.js';

export interface Backup {
  name: string;
  state: string;
  segmentsTotal: number;
  segmentsDone: number;
  segmentsReused: number;
  counts: { tenants: number; buckets: number; versions: number } | null;
  error: string | null;
}

/** An object the tests wrote: who wrote it, where, and the SHA-256 of its bytes. */
export interface Written {
  client: DataClient;
  bucket: string;
  key: string;
  digest: string;
}

export const sha = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');
const WAIT_MS = 120_000;

/**
 * The backup named `name` as the console lists it, or undefined (also after a pause, when the
 * token's rate limit answered 429: a poll without pauses of its own meets it).
 */
export async function backupNamed(
  call: ConsoleCall,
  token: string,
  name: string,
): Promise<Backup | undefined> {
  const answer = await call('GET', '/backups', token);
  if (answer.status === 429) {
    await sleep(RATE_LIMITED_PAUSE_MS);
    return undefined;
  }
  if (answer.status !== 200)
    throw new Error(`GET /backups answered ${answer.status}: ${JSON.stringify(answer.json)}`);
  return (answer.json as { backups: Backup[] }).backups.find((b) => b.name === name);
}
const RATE_LIMITED_PAUSE_MS = 100;

/** Polls until `name` is complete or failed; a time-out says what it saw last. */
export async function waitForBackup(call: ConsoleCall, token: string, name: string) {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const found = await backupNamed(call, token, name);
    if (found && (found.state === 'complete' || found.state === 'failed')) return found;
    if (Date.now() > deadline)
      throw new Error(
        `waited ${WAIT_MS / 1000} s for backup ${name}; last: ${JSON.stringify(found)}`,
      );
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** `lightwell restore --from <from> --data-dir <dataDir>`, as a child process. */
export function restore(from: string, dataDir: string): { status: number | null; out: string } {
  const run = spawnSync(process.execPath, [CLI, 'restore', '--from', from, '--data-dir', dataDir], {
    encoding: 'utf8',
  });
  return { status: run.status, out: run.stdout + run.stderr };
}

/**
 * Serves `dataDir` (a restored store) and answers, for each written object, whether it reads
 * back byte-exact with its writer's access key: `bucket/key` → problem, or nothing when all do.
 */
export async function unreadable(dataDir: string, written: readonly Written[]) {
  const restored = await Service.start({ dataDir });
  const problems: string[] = [];
  try {
    const clients = new Map<string, DataClient>();
    for (const object of written) {
      const { accessKeyId, secretKey } = object.client;
      let client = clients.get(accessKeyId);
      if (!client) {
        client = new DataClient(restored.publicUrl, accessKeyId, secretKey);
        await client.login();
        clients.set(accessKeyId, client);
      }
      const answer = await client.get(object.bucket, object.key);
      if (answer.status !== 200)
        problems.push(`${object.bucket}/${object.key}: ${String(answer.status)}`);
      else if (sha(answer.bytes) !== object.digest)
        problems.push(`${object.bucket}/${object.key}: other bytes`);
    }
  } finally {
    await restored.close();
  }
  return problems;
}

export interface Restore {
  id: string;
  backup: string;
  tenantId: string;
  state: string;
  objectsTotal: number;
  objectsDone: number;
  objectsSkipped: number;
  bucketsCreated: number;
  error: string | null;
}

/** Polls until the restore `id` is complete or failed; a time-out says what it saw last. */
export async function waitForRestore(call: ConsoleCall, token: string, id: string) {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const answer = await call('GET', '/restores', token);
    const found = (answer.json as { restores: Restore[] }).restores.find((r) => r.id === id);
    if (found && (found.state === 'complete' || found.state === 'failed')) return found;
    if (Date.now() > deadline)
      throw new Error(
        `waited ${WAIT_MS / 1000} s for restore ${id}; last: ${JSON.stringify(found)}`,
      );
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
