// How a cluster member's engine hands on the commands that change cluster-wide records
// (docs/cluster.md §6). The engine knows nothing of a cluster: `startEngine` takes a factory that
// may open a `CommandRouter` (a single node's has none), and the router is given a `LocalEngine`
// to run, capture and commit commands here. A command the router does not handle runs exactly
// as on a single node.

import type { IndexStore, StoreAccess } from './index/store.js';
import type { Counters } from './index/schema.js';
import type { AuditInput } from './ops/audit.js';
import type { Settings } from '../util/config.js';
import type { Registry } from 'prom-client';

/** In `meta` on a cluster member only: the etcd revision its shared records are at. */
export const META_CLUSTER_REVISION = Buffer.from('clusterRevision');

/** What a command runs with instead of this node's own counters and clock. */
export interface RunOptions {
  readonly reserved?: Partial<Counters>;
  /** The command's time (a replica's version keeps the time the coordinator gave it). */
  readonly now?: number;
  /** The id a replicated `createMultipartUpload` takes (its coordinator's). */
  readonly uploadId?: string;
}

/** One record to put (`value`) or remove, as `commit` applies it. */
export interface RecordWrite {
  readonly db: StoreAccess['db'];
  readonly key: Buffer;
  readonly value?: StoreAccess['value'];
}

export interface LocalEngine {
  readonly store: IndexStore;
  readonly masterKey: Buffer;
  readonly settings: Settings;
  /** The data directory's segment files. */
  readonly segmentsDir: string;
  /** The engine's metrics: a router's own figures are scraped with the engine's. */
  readonly metrics: Registry;
  /**
   * Runs command `name` in a transaction that is rolled back, with `reserved` counter values:
   * what it answers and every record it read and wrote. Its rules throw as they would for real.
   */
  capture(
    name: string,
    args: unknown,
    reserved: Partial<Counters>,
  ): Promise<{ result: unknown; accesses: StoreAccess[] }>;
  /** Runs command `name` as a single node does (with `options`' counters and time). */
  runLocal(name: string, args: unknown, options?: RunOptions): Promise<unknown>;
  /**
   * A segment writer of the node's own (the replica writer) reports a failed fdatasync of its
   * segment, and registers a new segment before its first record, as a gateway's writer does
   * with `segmentFailed` and `segmentOpened` (segment-syncer.ts).
   */
  segmentFailed?(segmentId: number): Promise<void>;
  segmentOpened?(segmentId: number): Promise<void>;
  /**
   * Writes records (decided elsewhere) and an audit row in one durable group commit. Given a
   * function, it is called inside the commit's transaction, so what it reads is what it writes
   * over (a read-modify-write no command can come between).
   */
  commit(
    writes: readonly RecordWrite[] | (() => readonly RecordWrite[]),
    audit?: AuditInput,
  ): Promise<void>;
}

export interface CommandRouter {
  /** Whether the router serves command `name`; the engine runs every other one itself. */
  handles(name: string): boolean;
  run(name: string, args: unknown): Promise<unknown>;
  close(): Promise<void>;
}

/**
 * Opens this data directory's router, or answers undefined (a single node, a waiting one);
 * `previous` is answered again when the node's cluster state has not changed.
 */
export type RouterFactory = (
  local: LocalEngine,
  previous: CommandRouter | undefined,
) => Promise<CommandRouter | undefined>;

/** The engine's current router: re-opened when the node's cluster state changes. */
export class RouterSlot {
  current: CommandRouter | undefined;
  private refreshing: Promise<void> = Promise.resolve();

  constructor(
    private readonly factory: RouterFactory | undefined,
    private readonly local: LocalEngine,
  ) {}

  refresh(): Promise<void> {
    this.refreshing = this.refreshing.then(async () => {
      if (this.factory === undefined) return;
      const previous = this.current;
      const next = await this.factory(this.local, previous);
      this.current = next;
      if (previous !== next) await previous?.close();
    });
    return this.refreshing;
  }

  async close(): Promise<void> {
    await this.refreshing.catch(() => undefined);
    const previous = this.current;
    this.current = undefined;
    await previous?.close();
  }
}
