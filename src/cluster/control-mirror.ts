// Cluster-wide control-plane records (docs/cluster.md §6), the first family: admin tokens.
//
// etcd is their truth, under `lw/<clusterId>/admin-tokens/<tokenId>` (the record as the index
// keeps it: the SHA-256 hash of the token, never the token). `lightwell admin-token create` and
// `revoke` on a member write there first (`publishAdminToken`), then to the local index. Every
// member's agent mirrors the family into its own index through the engine (`putAdminToken`), so
// authentication stays a local read: it reads the whole prefix at one revision, applies it, then
// watches from the next revision. A failed apply (the engine restarting) is retried with backoff;
// applying a record twice is harmless, since `putAdminToken` is a put by the token's hash.
//
// `admin-token create|revoke` works whether or not the service runs (DECISIONS.md): when etcd
// cannot be reached (the member is stopped, so its etcd member is too), the record is kept in an
// outbox in the data directory (`cluster/admin-token-outbox/<tokenId>.json`, written durably)
// besides the local index, and the mirror publishes the outbox to etcd when the member starts.

import { EngineClient } from '../engine/protocol.js';
import type { AdminTokenRecord } from '../engine/index/schema.js';
import type { Logger } from '../util/log.js';
import { mkdir, readdir, readFile, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileDurable } from '../engine/data-dir.js';
import { Registry } from './registry.js';
import { clusterPaths, readNodeState } from './node-state.js';

export const ADMIN_TOKENS_PREFIX = 'admin-tokens/';
const RETRY_MS_MAX = 5_000;

export interface ControlMirror {
  stop(): void;
}

/** Where records wait for etcd when it could not be reached. */
export function adminTokenOutbox(dataDir: string): string {
  return join(clusterPaths(dataDir).dir, 'admin-token-outbox');
}

/** Puts the outbox's records to etcd, each removed once etcd has it. */
async function publishOutbox(registry: Registry, dataDir: string, log: Logger): Promise<void> {
  const dir = adminTokenOutbox(dataDir);
  const names = await readdir(dir).catch(() => [] as string[]);
  for (const name of names.filter((entry) => entry.endsWith('.json'))) {
    const value = await readFile(join(dir, name), 'utf8');
    const record = JSON.parse(value) as AdminTokenRecord;
    await registry.client.put(registry.key(ADMIN_TOKENS_PREFIX + record.tokenId)).value(value);
    await unlink(join(dir, name));
    log.info({ tokenId: record.tokenId }, 'admin token from the outbox published to the cluster');
  }
}

export function startControlMirror(options: {
  registry: Registry;
  socketPath: string;
  dataDir: string;
  log: Logger;
}): ControlMirror {
  const engine = new EngineClient(options.socketPath, 30_000);
  let stopped = false;
  let cancel: (() => void) | undefined;
  const apply = async (record: AdminTokenRecord): Promise<void> => {
    for (let delay = 100; !stopped; delay = Math.min(delay * 2, RETRY_MS_MAX)) {
      try {
        await engine.call('putAdminToken', { record });
        return;
      } catch (error) {
        options.log.warn({ err: error, tokenId: record.tokenId }, 'admin token not mirrored yet');
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  };
  const run = async (): Promise<void> => {
    const { registry } = options;
    await publishOutbox(registry, options.dataDir, options.log);
    const prefix = registry.key(ADMIN_TOKENS_PREFIX);
    const response = await registry.client.getAll().prefix(prefix).exec();
    // Applied in order, one at a time: a revocation never lands before its creation.
    let queue = Promise.resolve();
    const enqueue = (value: Buffer): void => {
      const record = JSON.parse(value.toString()) as AdminTokenRecord;
      queue = queue.then(() => apply(record));
    };
    for (const kv of response.kvs) enqueue(kv.value);
    const watcher = await registry.client
      .watch()
      .prefix(prefix)
      .startRevision(String(BigInt(response.header.revision) + 1n))
      .create();
    watcher.on('put', (kv) => enqueue(kv.value));
    watcher.on('error', (error) => options.log.warn({ err: error }, 'admin token watch failed'));
    cancel = () => void watcher.cancel();
  };
  run().catch((error: unknown) => options.log.error({ err: error }, 'admin token mirror failed'));
  return {
    stop: () => {
      stopped = true;
      cancel?.();
      engine.stopWaiting();
      engine.close();
    },
  };
}

/**
 * Writes an admin token's record to the cluster when this data directory is a cluster member:
 * `cluster`, or `outbox` when etcd cannot be reached now (published at the member's next start);
 * `local` for a single node (or one that waits to be joined), which keeps it local.
 */
export async function publishAdminToken(
  dataDir: string,
  record: AdminTokenRecord,
): Promise<'cluster' | 'outbox' | 'local'> {
  const node = await readNodeState(clusterPaths(dataDir));
  if (node?.state !== 'member' || node.clusterId === undefined || node.etcd === undefined)
    return 'local';
  const registry = await Registry.connect(node.etcd.endpoints, node.clusterId);
  try {
    await registry.client
      .put(registry.key(ADMIN_TOKENS_PREFIX + record.tokenId))
      .value(JSON.stringify(record));
    return 'cluster';
  } catch {
    const dir = adminTokenOutbox(dataDir);
    await mkdir(dir, { recursive: true });
    await writeFileDurable(
      join(dir, `${record.tokenId}.json`),
      Buffer.from(JSON.stringify(record)),
    );
    return 'outbox';
  } finally {
    registry.close();
  }
}
