// A node's own cluster state, kept in `<data>/cluster/` (docs/cluster.md §1):
//
//   node.json      {v: 1, nodeId, state: waiting|member|removed, clusterId?, etcd?, joinedAt?}
//   secret         the cluster secret (32 bytes), mode 0600; present once the node is a member
//   join-secret    the join secret as text (`lwjoin_` + base64url), mode 0600; while waiting
//   etcd/          this node's etcd member's data directory (when it runs one)
//
// Each file is written whole (temporary name, fsync, rename), so a crash leaves the old or the
// new file. `node.json` is written last in a join, so a node that crashed half-way is still
// `waiting` and the join can be repeated. The node id is fixed by the first start: a later start
// with another `cluster.node_id` is refused, since the id names the node in etcd for good.

import { mkdir, readFile, unlink } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import assert from 'node:assert';
import { writeFileDurable } from '../engine/data-dir.js';
import { BadRequest, FormatError } from '../util/errors.js';

export const NODE_STATE_VERSION = 1;
export const SECRET_BYTES = 32;
export const JOIN_SECRET_PREFIX = 'lwjoin_';
/** Node ids: DNS-label-like, so that they fit etcd member names, file names and URLs. */
export const NODE_ID_PATTERN = /^[a-z][a-z0-9-]{0,62}$/;

export interface EtcdPlacement {
  /** `member`: this node runs an etcd member; `external`: it uses `endpoints` only. */
  readonly mode: 'member' | 'external';
  /** Client URLs this node's processes use, its own member's first. */
  readonly endpoints: readonly string[];
  /** With `member`: its peer and client URLs and the cluster to start it in. */
  readonly peerUrl?: string;
  readonly clientUrl?: string;
  /** `name=peerUrl,…` for etcd's `--initial-cluster` on a member's first start. */
  readonly initialCluster?: string;
  readonly initialState?: 'new' | 'existing';
  /** The member was demoted (drained: etcd has no demote, so it was removed from etcd). */
  readonly memberRetired?: boolean;
}

export interface NodeState {
  readonly v: number;
  readonly nodeId: string;
  readonly state: 'waiting' | 'member' | 'removed';
  readonly clusterId?: string;
  readonly etcd?: EtcdPlacement;
  readonly joinedAt?: string;
}

export interface ClusterPaths {
  readonly dir: string;
  readonly state: string;
  readonly secret: string;
  readonly joinSecret: string;
  readonly etcdData: string;
}

export function clusterPaths(dataDir: string): ClusterPaths {
  const dir = join(dataDir, 'cluster');
  return {
    dir,
    state: join(dir, 'node.json'),
    secret: join(dir, 'secret'),
    joinSecret: join(dir, 'join-secret'),
    etcdData: join(dir, 'etcd'),
  };
}

export function validateNodeId(id: string, what = 'cluster.node_id'): string {
  if (!NODE_ID_PATTERN.test(id))
    throw BadRequest(
      `${what} must be 1 to 63 characters of a-z, 0-9 and -, starting with a letter` +
        ` (got ${JSON.stringify(id)})`,
    );
  return id;
}

/** The node's state, or undefined before its first start in cluster mode. */
export async function readNodeState(paths: ClusterPaths): Promise<NodeState | undefined> {
  let text: string;
  try {
    text = await readFile(paths.state, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  return parseNodeState(text, paths.state);
}

function parseNodeState(text: string, file: string): NodeState {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (cause) {
    throw FormatError(`${file} is not JSON`, {}, { cause });
  }
  const state = value as Partial<NodeState> | null;
  if (
    state === null ||
    typeof state !== 'object' ||
    state.v !== NODE_STATE_VERSION ||
    typeof state.nodeId !== 'string' ||
    !['waiting', 'member', 'removed'].includes(state.state ?? '')
  )
    throw FormatError(`${file} is not a node state of version ${NODE_STATE_VERSION}`);
  return state as NodeState;
}

export async function writeNodeState(paths: ClusterPaths, state: NodeState): Promise<void> {
  assert(state.state !== 'member' || state.clusterId !== undefined, 'a member has a cluster');
  await mkdir(paths.dir, { recursive: true, mode: 0o700 });
  await writeFileDurable(paths.state, Buffer.from(JSON.stringify(state, null, 2) + '\n'));
}

export async function readClusterSecret(paths: ClusterPaths): Promise<Buffer> {
  const secret = await readFile(paths.secret);
  if (secret.length !== SECRET_BYTES)
    throw FormatError(`${paths.secret} must hold exactly ${SECRET_BYTES} bytes`);
  return secret;
}

/** The cluster secret when this node holds one (it is or was a member); at startup only. */
export function readClusterSecretSync(paths: ClusterPaths): Buffer | undefined {
  let secret: Buffer;
  try {
    secret = readFileSync(paths.secret);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  if (secret.length !== SECRET_BYTES)
    throw FormatError(`${paths.secret} must hold exactly ${SECRET_BYTES} bytes`);
  return secret;
}

export async function writeClusterSecret(paths: ClusterPaths, secret: Buffer): Promise<void> {
  assert.equal(secret.length, SECRET_BYTES);
  await mkdir(paths.dir, { recursive: true, mode: 0o700 });
  await writeFileDurable(paths.secret, secret, 0o600);
}

/** The waiting node's join secret, made on its first start in cluster mode. */
export async function ensureJoinSecret(paths: ClusterPaths): Promise<string> {
  const existing = await readJoinSecret(paths);
  if (existing !== undefined) return existing;
  const secret = JOIN_SECRET_PREFIX + randomBytes(SECRET_BYTES).toString('base64url');
  await mkdir(paths.dir, { recursive: true, mode: 0o700 });
  await writeFileDurable(paths.joinSecret, Buffer.from(secret + '\n'), 0o600);
  return secret;
}

export async function readJoinSecret(paths: ClusterPaths): Promise<string | undefined> {
  try {
    return parseJoinSecret((await readFile(paths.joinSecret, 'utf8')).trim(), paths.joinSecret);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/** The same, synchronously: `lightwell cluster join-secret` (a command, not a server). */
export function readJoinSecretSync(paths: ClusterPaths): string | undefined {
  try {
    return parseJoinSecret(readFileSync(paths.joinSecret, 'utf8').trim(), paths.joinSecret);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

export async function dropJoinSecret(paths: ClusterPaths): Promise<void> {
  await unlink(paths.joinSecret).catch((error: unknown) => {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  });
}

/** A join secret's 32 bytes; `what` names where it came from in the error. */
export function joinSecretBytes(secret: string, what = 'secret'): Buffer {
  const body = secret.startsWith(JOIN_SECRET_PREFIX) ? secret.slice(JOIN_SECRET_PREFIX.length) : '';
  const bytes = Buffer.from(body, 'base64url');
  if (bytes.length !== SECRET_BYTES || bytes.toString('base64url') !== body)
    throw BadRequest(`${what} is not a join secret (${JOIN_SECRET_PREFIX}…, as the node prints)`);
  return bytes;
}

function parseJoinSecret(text: string, file: string): string {
  try {
    joinSecretBytes(text);
  } catch (cause) {
    throw FormatError(`${file} does not hold a join secret`, {}, { cause });
  }
  return text;
}
