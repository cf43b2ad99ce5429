// The index store: Lightwell's only door to LMDB (no other module imports `lmdb`).
//
// One environment (`data/index/`) with a named database per record family (schema.ts). The
// engine opens it read-write and is its only writer; gateways, workers and the admin process
// open it read-only and see each commit from the next event-loop turn on.
//
// Writes happen only inside `transact`, which runs the callback as an LMDB child transaction
// inside lmdb-js's batched write transaction: every command queued in one event turn commits
// together (group commit), while a callback that throws rolls back only its own child
// transaction. `overlappingSync` is off, so a resolved `transact` promise means the commit is
// on disk.
//
// Options that fix the on-disk format are passed explicitly here and documented in
// docs/on-disk-format.md: binary keys, binary values (our own versioned msgpack records), no
// lmdb-js versions, no shared structures.

import { open, type RootDatabase, type Database } from 'lmdb';
import { decodeValue, encodeValue, VALUE_SCHEMA_VERSION } from '../../format/values.js';
import { DB, type DbName } from './schema.js';

export interface RangeOptions {
  readonly start?: Buffer;
  readonly end?: Buffer;
  readonly limit?: number;
  readonly reverse?: boolean;
}

export interface Entry<T> {
  readonly key: Buffer;
  readonly value: T;
}

const MAP_SIZE_BYTES = 1024 ** 4; // sparse; the file grows only as pages are used

export class IndexStore {
  private readonly root: RootDatabase;
  private readonly dbs = new Map<DbName, Database<Buffer, Buffer>>();
  readonly readOnly: boolean;

  private constructor(root: RootDatabase, readOnly: boolean) {
    this.root = root;
    this.readOnly = readOnly;
  }

  static open(options: { path: string; readOnly: boolean }): IndexStore {
    const root = open({
      path: options.path,
      readOnly: options.readOnly,
      maxDbs: 64,
      mapSize: MAP_SIZE_BYTES,
      overlappingSync: false,
      noSync: false,
      cache: false,
      useVersions: false,
      keyEncoding: 'binary',
      encoding: 'binary',
      compression: false,
    });
    const store = new IndexStore(root, options.readOnly);
    for (const name of Object.values(DB)) {
      store.dbs.set(name, root.openDB<Buffer, Buffer>({
        name,
        keyEncoding: 'binary',
        encoding: 'binary',
        useVersions: false,
        cache: false,
        compression: false,
      }));
    }
    return store;
  }

  private db(name: DbName): Database<Buffer, Buffer> {
    const db = this.dbs.get(name);
    if (!db) throw new TypeError(`unknown database ${name}`);
    return db;
  }

  get<T>(name: DbName, key: Buffer): T | undefined {
    const raw = this.db(name).getBinary(key);
    return raw === undefined ? undefined : (decodeValue(raw).value as T);
  }

  has(name: DbName, key: Buffer): boolean {
    return this.db(name).getBinary(key) !== undefined;
  }

  *range<T>(name: DbName, options: RangeOptions): Generator<Entry<T>> {
    const query: { start?: Buffer; end?: Buffer; limit?: number; reverse?: boolean } = {};
    if (options.start) query.start = options.start;
    if (options.end) query.end = options.end;
    if (options.limit !== undefined) query.limit = options.limit;
    if (options.reverse) query.reverse = true;
    for (const { key, value } of this.db(name).getRange(query)) {
      yield { key: key as Buffer, value: decodeValue(value as Buffer).value as T };
    }
  }

  /** Only inside `transact`. */
  put(name: DbName, key: Buffer, value: object): void {
    this.db(name).putSync(key, encodeValue(VALUE_SCHEMA_VERSION, value));
  }

  /** Only inside `transact`. */
  remove(name: DbName, key: Buffer): void {
    this.db(name).removeSync(key);
  }

  /** Runs `apply` atomically in the next group commit; resolves once durable. */
  transact<T>(apply: () => T): Promise<T> {
    return this.root.childTransaction(apply) as Promise<T>;
  }

  /** A synchronous durable transaction, for offline tools that run without the engine. */
  transactSync<T>(apply: () => T): T {
    return this.root.transactionSync(apply);
  }

  /** Forces the next read to see the newest commit (another process committed it). */
  refresh(): void {
    this.root.resetReadTxn();
  }

  async close(): Promise<void> {
    await this.root.close();
  }
}
