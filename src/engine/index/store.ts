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
// A child transaction costs about 100 µs (LMDB copies the parent's dirty-page bookkeeping), so
// the engine's commands go through a `CommandBatch` instead: all commands that arrive while
// the previous commit is being written share one child transaction. A command that throws
// before its first write (the rule for every command: preconditions first) fails alone; one
// that throws after writing rolls the shared child transaction back, and then each command of
// that batch runs again in its own.
//
// Inside a batch, the records that nearly every command reads and writes again (the counters,
// the tenant's usage, the live bytes of the open segments: `BATCH_CACHED`) are kept decoded and
// written once when the batch's last command has run, instead of being decoded, encoded and put
// by each command. A command sees the record as the previous command left it, as it would in
// LMDB. Handing out the cached object counts as a write (the command may change it in place), so
// a command that throws after reading one rolls the batch back like one that wrote; `peek` is
// the read for a command that only looks (a quota check), which does not count. A range scan of
// such a database first writes what the batch holds of it. The rule every command already
// follows matters more here: a record changed is put back. A change left in a held record
// without a put would be written with the batch if a later command put the same record.
//
// A commit that finds the disk full fails with `disk_full` and nothing of it applied; the engine
// goes on (see `failed` and `absorbCommitRejections`), and a `CommandBatch` given `makeRoom`
// commits its group once more when the space reserve gave room back (space-reserve.ts).
//
// `faults` is a seam for the storage simulation (test/fault/simulation.test.ts): asked once per
// child transaction, after its callback ran (returned, aborted or threw), an error it answers
// fails that child transaction as LMDB's own failed commit would (rolled back, nothing of it
// applies, and its caller gets the commit's error, whatever its callback did) and takes the same
// path to the caller (`failed`). LMDB fails a whole write batch, every child transaction grouped
// into the commit: the seam answers the same for all of them. Production passes none: one
// optional call per child transaction.
//
// Options that fix the on-disk format are passed explicitly here and documented in
// docs/on-disk-format.md: binary keys, binary values (our own versioned msgpack records), no
// lmdb-js versions, no shared structures.
//
// Listings scan through a second handle of each database (`scanRaw`) that hands out views of
// lmdb-js's shared read buffers instead of a copy of every key and value; it reads the same
// raw key bytes and never writes.

import { open, ABORT, type RootDatabase, type Database } from 'lmdb';
import assert from 'node:assert/strict';
import { statfs } from 'node:fs/promises';
import { DiskFull, errorCode } from '../../util/errors.js';
import { encodeValue, VALUE_SCHEMA_VERSION } from '../../format/values.js';
import { CURRENT_VERSIONS, decodeRecord } from './migrate.js';

const ALL_AT_FIRST_VERSION = Object.values(CURRENT_VERSIONS).every(
  (version) => version === VALUE_SCHEMA_VERSION,
);
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

/**
 * One entry of `scanRaw`, seen in place: the key is `keyBytes[keyStart, keyEnd)`, the value
 * `valueBytes[0, valueLength)`. Both buffers are LMDB's shared read buffers: they hold this
 * entry only until the visit returns (the next read overwrites them), and may be longer than
 * the entry. The object itself is reused for every entry.
 */
/** A record that `capture` saw read (`write: false`), put (`value`) or removed. */
export interface StoreAccess {
  readonly db: DbName;
  readonly key: Buffer;
  readonly write: boolean;
  readonly value?: object | EncodedRecord;
}

export interface RawEntry {
  keyBytes: Buffer;
  keyStart: number;
  keyEnd: number;
  valueBytes: Buffer;
  valueLength: number;
}

export class EncodedRecord {
  constructor(readonly bytes: Buffer) {}
}

export type Settled =
  { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: unknown };

/** Databases whose records a batch keeps decoded and writes once (see the header). */
const BATCH_CACHED: ReadonlySet<DbName> = new Set<DbName>([DB.meta, DB.usage, DB.segments]);

/** A record a batch holds: its decoded value (undefined: there is none), and whether it changed. */
interface BatchRecord {
  value: object | undefined;
  dirty: boolean;
}

/**
 * The longest key LMDB stores (lmdb-js builds it for 4 KiB pages). A longer key cannot have a
 * record, so look-ups answer "none" without asking: lmdb-js throws a RangeError for keys over
 * 4 KiB, and an id in a request path can be any length.
 */
export const INDEX_KEY_BYTES_MAX = 1978;

/** A record kept decoded by `getShared`: its bytes, its value and the key it was read under. */
interface SharedRecord {
  readonly raw: Buffer;
  readonly value: unknown;
  readonly key: Buffer;
}

/** Records kept decoded by `getShared`; the cache starts over when full. */
const SHARED_RECORDS_MAX = 4096;

/** Whether LMDB can hold a record under `key` at all. */
function storable(key: Buffer): boolean {
  return key.length > 0 && key.length <= INDEX_KEY_BYTES_MAX;
}

function deepFreeze<T>(value: T): T {
  if (
    value === null ||
    typeof value !== 'object' ||
    ArrayBuffer.isView(value) ||
    Object.isFrozen(value)
  )
    return value;
  for (const child of Object.values(value)) deepFreeze(child);
  return Object.freeze(value);
}

const MAP_SIZE_BYTES = 1024 ** 4; // sparse; the file grows only as pages are used
const ENOSPC_ERRNO = 28;
const EIO_ERRNO = 5;
/** Free bytes under which an EIO of a commit is taken for a full disk. */
const NEARLY_FULL_BYTES = 16 * 1024 * 1024;

function noRoom(error: unknown, cause: unknown): Error {
  return DiskFull('no room on the data filesystem for the index commit', undefined, {
    cause: cause ?? error,
  });
}

let absorbing = false;

/**
 * When a commit fails, lmdb-js also rejects promises of its own that nobody holds (the batch's
 * and `commitError`), which would end the process as unhandled rejections; the failure itself
 * reaches the commit's caller (`transact`). Those two are let go; any other unhandled
 * rejection is thrown on, ending the process as it would without this listener.
 */
function absorbCommitRejections(): void {
  if (absorbing) return;
  absorbing = true;
  process.on('unhandledRejection', (reason) => {
    const stack = (reason as { stack?: unknown } | undefined)?.stack;
    if (typeof stack === 'string' && /[\\/]lmdb[\\/]write\.js/.test(stack)) return;
    throw reason;
  });
}
/**
 * Faults injected into commits (see the header): `commit` answers the system error the LMDB
 * commit that the running child transaction is part of meets (ENOSPC, EIO), or undefined to let
 * it commit; the same for every child transaction of one commit.
 */
export interface IndexFaults {
  commit(): NodeJS.ErrnoException | undefined;
}

/**
 * `apply`, then the commit's fault, which wins over what `apply` did: the caller of a child
 * transaction in a failed commit gets the commit's error, also when its callback threw or
 * aborted.
 */
function withCommitFault<T>(faults: IndexFaults, apply: () => T): T {
  let result: T;
  try {
    result = apply();
  } catch (error) {
    throw faults.commit() ?? error;
  }
  const fault = faults.commit();
  if (fault) throw fault;
  return result;
}

/** The lowest key (LMDB keys are never empty). */
const RANGE_LOW = Buffer.from([0]);

export class IndexStore {
  private readonly root: RootDatabase;
  private readonly dbs = new Map<DbName, Database<Buffer, Buffer>>();
  /** Read-only handles of the same databases for `scanRaw`, which fill `rawEntry` in place. */
  private readonly rawDbs = new Map<DbName, Database<RawEntry, Buffer>>();
  private readonly rawEntry: RawEntry = {
    keyBytes: Buffer.alloc(0),
    keyStart: 0,
    keyEnd: 0,
    valueBytes: Buffer.alloc(0),
    valueLength: 0,
  };
  readonly readOnly: boolean;
  /** Decoded records of `getShared` by database and id, with the bytes they were decoded from. */
  private readonly shared = new Map<DbName, Map<string, SharedRecord>>();
  /** Puts and removes so far; tells a batch whether a failed command wrote anything. */
  private writes = 0;
  /** The records of BATCH_CACHED databases that the running batch holds, by database and key. */
  private batchRecords: Map<DbName, Map<string, BatchRecord>> | undefined;
  /** While `capture` runs its callback: every record read and written, in order. */
  private recorder: StoreAccess[] | undefined;

  private constructor(
    root: RootDatabase,
    readOnly: boolean,
    private readonly path: string,
    private readonly faults: IndexFaults | undefined,
  ) {
    this.root = root;
    this.readOnly = readOnly;
  }

  static open(options: { path: string; readOnly: boolean; faults?: IndexFaults }): IndexStore {
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
    if (!options.readOnly) absorbCommitRejections();
    const store = new IndexStore(root, options.readOnly, options.path, options.faults);
    for (const name of Object.values(DB)) {
      store.dbs.set(
        name,
        root.openDB<Buffer, Buffer>({
          name,
          keyEncoding: 'binary',
          encoding: 'binary',
          useVersions: false,
          cache: false,
          compression: false,
        }),
      );
      store.rawDbs.set(name, store.openRawDb(name));
    }
    return store;
  }

  /**
   * A second handle of database `name` whose key and value "codecs" only note where lmdb-js's
   * shared read buffers hold the entry (lmdb-js's documented `keyEncoder` and `encoder`
   * interfaces; `needsStableBuffer` unset lets it pass the shared buffer instead of a copy).
   * Keys stay the plain bytes that `keyEncoding: 'binary'` reads and writes, so the format is
   * the same; this handle never writes.
   */
  private openRawDb(name: DbName): Database<RawEntry, Buffer> {
    const entry = this.rawEntry;
    const options = {
      name,
      encoding: 'binary',
      useVersions: false,
      cache: false,
      compression: false,
      keyEncoder: {
        writeKey: (key: unknown, target: Uint8Array, start: number): number => {
          // Only range bounds come here: a scan runs to its end or stops within one call, so
          // lmdb-js never repositions a cursor from a key that readKey returned.
          if (!(key instanceof Uint8Array)) throw new TypeError('raw scans take byte keys');
          target.set(key, start);
          return start + key.length;
        },
        readKey: (bytes: Buffer, start: number, end: number): RawEntry => {
          entry.keyBytes = bytes;
          entry.keyStart = start;
          entry.keyEnd = end;
          return entry;
        },
      },
      encoder: {
        encode: (): never => {
          throw new TypeError(`the raw handle of ${name} is read-only`);
        },
        decode: (bytes: Uint8Array, length: number): RawEntry => {
          entry.valueBytes = Buffer.isBuffer(bytes)
            ? bytes
            : Buffer.from(bytes.buffer, bytes.byteOffset, length);
          entry.valueLength = length;
          return entry;
        },
      },
    } as const;
    return this.root.openDB<RawEntry, Buffer>(options);
  }

  private db(name: DbName): Database<Buffer, Buffer> {
    const db = this.dbs.get(name);
    if (!db) throw new TypeError(`unknown database ${name}`);
    return db;
  }

  /* eslint-disable @typescript-eslint/no-unnecessary-type-parameters -- T is the record type of
     the database `name`, which only the caller knows */
  /**
   * The record under `key`; undefined when there is none (an empty key, or one over
   * INDEX_KEY_BYTES_MAX, never has one: LMDB throws on them, and clients can send them).
   */
  get<T>(name: DbName, key: Buffer): T | undefined {
    if (!storable(key)) return undefined;
    this.recorder?.push({ db: name, key: Buffer.from(key), write: false });
    const held = this.batchRecordOf(name, key);
    if (held) {
      if (held.value !== undefined) this.writes += 1; // the caller may change it in place
      return held.value as T | undefined;
    }
    // lmdb-js's shared read buffer, decoded before the next read: no copy of the bytes, since
    // the decoded record shares none of them (values are unpacked with `copyBuffers`).
    const fast = this.db(name).getBinaryFast(key);
    return fast === undefined
      ? undefined
      : (decodeRecord(name, fast.subarray(0, fast.length)) as T);
  }

  /**
   * Like `get`, for a caller that only reads the record and does not change it: inside a batch
   * it does not count as a write (see the header), so a command that fails after it fails alone.
   */
  peek<T>(name: DbName, key: Buffer): T | undefined {
    if (!storable(key)) return undefined;
    const held = this.batchRecordOf(name, key);
    if (held) return held.value as T | undefined;
    return this.get<T>(name, key);
  }

  /**
   * Like `get`, for the records read on every request (access keys, tenants, buckets): the
   * decoded value is kept with its bytes and handed out again, frozen, while the stored bytes
   * are unchanged. Callers must not (and cannot) modify it. `id` names the record among its
   * database's (the key's bytes by default); a caller that holds the key as text passes that,
   * and spares decoding the bytes for each look-up.
   */
  getShared<T>(name: DbName, key: Buffer, id = key.toString('latin1')): T | undefined {
    const db = this.db(name);
    if (!storable(key)) return undefined;
    this.recorder?.push({ db: name, key: Buffer.from(key), write: false });
    const fast = db.getBinaryFast(key);
    let records = this.shared.get(name);
    if (!records) {
      records = new Map();
      this.shared.set(name, records);
    }
    if (fast === undefined) {
      records.delete(id);
      return undefined;
    }
    // lmdb-js may hand out its shared read buffer with `length` set to the value's size.
    const raw = fast.subarray(0, fast.length);
    const cached = records.get(id);
    if (cached && cached.raw.equals(raw)) return cached.value as T;
    const copy = Buffer.from(raw);
    const value = deepFreeze(decodeRecord(name, copy));
    if (records.size >= SHARED_RECORDS_MAX) records.clear();
    records.set(id, { raw: copy, value, key });
    return value as T;
  }

  /**
   * `getShared` by the record's id: the key's bytes are made by `keyOf` only when the id has no
   * record kept, and kept with it, so a look-up repeated on every request allocates nothing.
   * `keyOf(id)` must answer the same bytes for the same id, and a Buffer no one changes.
   */
  getSharedById<T>(name: DbName, id: string, keyOf: (id: string) => Buffer): T | undefined {
    const key = this.shared.get(name)?.get(id)?.key ?? keyOf(id);
    return this.getShared<T>(name, key, id);
  }
  /* eslint-enable @typescript-eslint/no-unnecessary-type-parameters */

  has(name: DbName, key: Buffer): boolean {
    if (!storable(key)) return false;
    this.recorder?.push({ db: name, key: Buffer.from(key), write: false });
    const held = this.batchRecordOf(name, key);
    if (held) return held.value !== undefined;
    return this.db(name).getBinary(key) !== undefined;
  }

  /**
   * The batch's entry for a record of a BATCH_CACHED database, read from LMDB on first use;
   * undefined outside a batch and for other databases.
   */
  private batchRecordOf(name: DbName, key: Buffer): BatchRecord | undefined {
    const records =
      this.batchRecords && BATCH_CACHED.has(name) ? this.batchRecordsOf(name) : undefined;
    if (!records) return undefined;
    const id = key.toString('latin1');
    let held = records.get(id);
    if (!held) {
      const raw = this.db(name).getBinary(key);
      held = { value: raw === undefined ? undefined : decodeRecord(name, raw), dirty: false };
      records.set(id, held);
    }
    return held;
  }

  private batchRecordsOf(name: DbName): Map<string, BatchRecord> | undefined {
    const all = this.batchRecords;
    if (!all) return undefined;
    let records = all.get(name);
    if (!records) {
      records = new Map();
      all.set(name, records);
    }
    return records;
  }

  /** Writes the changed records the batch holds (of database `name` only, when given). */
  private flushBatchRecords(name?: DbName): void {
    const all = this.batchRecords;
    if (!all) return;
    for (const [db, records] of all) {
      if (name !== undefined && db !== name) continue;
      for (const [id, held] of records) {
        if (!held.dirty) continue;
        held.dirty = false;
        const key = Buffer.from(id, 'latin1');
        if (held.value === undefined) this.db(db).removeSync(key);
        else this.db(db).putSync(key, encodeValue(CURRENT_VERSIONS[db], held.value));
      }
    }
  }

  *range<T>(name: DbName, options: RangeOptions): Generator<Entry<T>> {
    this.flushBatchRecords(name);
    const query: { start?: Buffer; end?: Buffer; limit?: number; reverse?: boolean } = {};
    if (options.start) query.start = options.start;
    if (options.end) query.end = options.end;
    if (options.limit !== undefined) query.limit = options.limit;
    if (options.reverse) query.reverse = true;
    for (const { key, value } of this.db(name).getRange(query)) {
      yield { key, value: decodeRecord(name, value) as T };
    }
  }

  /**
   * Visits the entries of a range in key order without copying or decoding them, until `visit`
   * returns false. The entry is valid only during its visit (see `RawEntry`), and `visit` must
   * not read the index itself. Listing a bucket reads its records this way (about 1 µs per
   * entry less than `range`, which copies key and value).
   */
  scanRaw(name: DbName, options: RangeOptions, visit: (entry: RawEntry) => boolean): void {
    const db = this.rawDbs.get(name);
    if (!db) throw new TypeError(`unknown database ${name}`);
    this.flushBatchRecords(name);
    const query: { start?: Buffer; end?: Buffer; limit?: number; reverse?: boolean } = {};
    if (options.start) query.start = options.start;
    if (options.end) query.end = options.end;
    if (options.limit !== undefined) query.limit = options.limit;
    if (options.reverse) query.reverse = true;
    // An open low bound: lmdb-js would take 0x05 for a handle with a keyEncoder (the first key
    // of its ordered-binary encoding); `keyEncoding: 'binary'` takes 0x00.
    if (options.reverse ? !options.end : !options.start) {
      if (options.reverse) query.end = RANGE_LOW;
      else query.start = RANGE_LOW;
    }
    for (const { value } of db.getRange(query)) {
      if (!visit(value)) break;
    }
  }

  /** Only inside `transact`. `value` may be encoded once beforehand, to be stored under several keys. */
  put(name: DbName, key: Buffer, value: object | EncodedRecord): void {
    this.writes += 1;
    this.recorder?.push({ db: name, key: Buffer.from(key), write: true, value });
    const held = value instanceof EncodedRecord ? undefined : this.batchRecordOf(name, key);
    if (held) {
      held.value = value;
      held.dirty = true;
      return;
    }
    if (this.batchRecords && BATCH_CACHED.has(name))
      this.batchRecordsOf(name)?.delete(key.toString('latin1'));
    this.db(name).putSync(
      key,
      value instanceof EncodedRecord ? value.bytes : encodeValue(CURRENT_VERSIONS[name], value),
    );
  }

  /**
   * A record encoded for `put`, when the same value goes under more than one key (of families
   * still at the first schema version: asserted, so that a bump cannot pass unnoticed).
   */
  encode(value: object): EncodedRecord {
    assert.ok(ALL_AT_FIRST_VERSION, 'encode() without a family: every family at version 1');
    return new EncodedRecord(encodeValue(VALUE_SCHEMA_VERSION, value));
  }

  /** Only inside `transact`. */
  remove(name: DbName, key: Buffer): void {
    this.writes += 1;
    this.recorder?.push({ db: name, key: Buffer.from(key), write: true });
    const held = this.batchRecordOf(name, key);
    if (held) {
      held.value = undefined;
      held.dirty = true;
      return;
    }
    this.db(name).removeSync(key);
  }

  /** Runs `apply` atomically in the next group commit; resolves once durable. */
  /**
   * A compacted copy of the whole index into the directory `path` (its `data.mdb`), taken in
   * one read transaction: a consistent snapshot while commits go on (src/engine/backup.ts).
   */
  backup(path: string): Promise<void> {
    return this.root.backup(path, true);
  }

  transact<T>(apply: () => T): Promise<T> {
    const faults = this.faults;
    const run = faults ? (): T => withCommitFault(faults, apply) : apply;
    return this.root.childTransaction(run).catch((error: unknown) => this.failed(error));
  }

  /**
   * A commit that failed: LMDB found no room to write its pages (`disk_full`, and the engine
   * goes on: nothing of the commit is applied, and the environment stays usable), or another
   * error, as it came. lmdb-js rejects the transaction with a generic error whose
   * `commitError` (a promise, rejected in the same turn) carries the system's; a short write
   * on a full disk reports EIO, so EIO with the file system nearly full counts as full too.
   */
  private async failed(error: unknown): Promise<never> {
    const pending = (error as { commitError?: Promise<unknown> } | undefined)?.commitError;
    let cause: unknown = error; // an injected fault (`faults`) is the system error itself
    if (pending instanceof Promise) {
      let timer: NodeJS.Timeout | undefined;
      cause = await Promise.race([
        pending.then(
          () => undefined,
          (reason: unknown) => reason,
        ),
        new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), 1000))),
      ]);
      clearTimeout(timer);
    } else if (!this.faults) throw error;
    const code = (cause as { code?: unknown } | undefined)?.code;
    if (code === 'ENOSPC' || code === ENOSPC_ERRNO) throw noRoom(error, cause);
    if ((code === 'EIO' || code === EIO_ERRNO) && (await this.nearlyFull()))
      throw noRoom(error, cause);
    throw error;
  }

  private async nearlyFull(): Promise<boolean> {
    const fs = await statfs(this.path).catch(() => undefined);
    return fs !== undefined && fs.bavail * fs.bsize < NEARLY_FULL_BYTES;
  }

  /**
   * Runs `applies` in order in one child transaction of the next group commit and settles each
   * on its own. Resolves `undefined` (nothing committed) when a command threw after it had
   * written: the caller then runs each command in its own transaction.
   */
  transactAll(applies: () => ReadonlyArray<() => unknown>): Promise<Settled[] | undefined> {
    const run = (): Settled[] | typeof ABORT => {
      this.batchRecords = new Map();
      try {
        const settled: Settled[] = [];
        for (const apply of applies()) {
          const before = this.writes;
          try {
            settled.push({ ok: true, value: apply() });
          } catch (error) {
            if (this.writes !== before) return ABORT;
            settled.push({ ok: false, error });
          }
        }
        this.flushBatchRecords();
        return settled;
      } finally {
        this.batchRecords = undefined;
      }
    };
    const faults = this.faults;
    return this.root.childTransaction(faults ? () => withCommitFault(faults, run) : run).then(
      (result) => (result === ABORT ? undefined : (result as Settled[])),
      (error: unknown) => this.failed(error),
    );
  }

  /**
   * Runs `apply` in a child transaction that is always rolled back, and answers what it returned
   * with every record it read (`get`, `peek`, `getShared`, `has`; not range scans) and wrote, in
   * order. A cluster member runs a command this way to learn what it would change, before it
   * publishes the change to the cluster (docs/cluster.md §6). Outside every batch.
   */
  capture<T>(apply: () => T): Promise<{ result: T; accesses: StoreAccess[] }> {
    let captured: { result: T; accesses: StoreAccess[] } | undefined;
    return this.root
      .childTransaction(() => {
        assert.equal(this.recorder, undefined, 'captures do not nest');
        const accesses: StoreAccess[] = [];
        this.recorder = accesses;
        try {
          captured = { result: apply(), accesses };
        } finally {
          this.recorder = undefined;
        }
        return ABORT;
      })
      .then(() => {
        assert.ok(captured, 'capture ran its callback');
        return captured;
      });
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

/**
 * Commands that share one child transaction (see the header). `submit` adds a command to the
 * batch that has not started yet, opening one when there is none.
 */
export class CommandBatch {
  private open: Array<PendingCommand> | undefined;

  /**
   * `committed`: told of each group's size and seconds from opening to commit (metrics).
   * `makeRoom`: a group's commit found the disk full; answers whether it freed room (the space
   * reserve), in which case the group is committed once more.
   */
  constructor(
    private readonly store: IndexStore,
    private readonly committed?: (size: number, seconds: number) => void,
    private readonly makeRoom?: () => Promise<boolean>,
  ) {}

  submit<T>(apply: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const done: Done = {
        settle: (_index, outcome) =>
          // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- as thrown
          outcome.ok ? resolve(outcome.value as T) : reject(outcome.error),
      };
      this.enqueue([{ apply, done, index: 0 }]);
    });
  }

  /**
   * Adds several commands at once, in order: each commits or fails on its own exactly as if
   * `submit`ted alone, and the one promise answers every outcome, in order, once all settled
   * (a group of many small commands: no promise and no callbacks per command).
   */
  submitEach(applies: ReadonlyArray<() => unknown>): Promise<Settled[]> {
    if (applies.length === 0) return Promise.resolve([]);
    return new Promise<Settled[]>((resolve) => {
      const outcomes = new Array<Settled>(applies.length);
      let left = applies.length;
      const done: Done = {
        settle: (index, outcome) => {
          outcomes[index] = outcome;
          if (--left === 0) resolve(outcomes);
        },
      };
      this.enqueue(applies.map((apply, index) => ({ apply, done, index })));
    });
  }

  private enqueue(commands: PendingCommand[]): void {
    if (this.open) {
      for (const command of commands) this.open.push(command);
      return;
    }
    this.open = commands;
    void this.run(commands);
  }

  private async run(batch: PendingCommand[], again = false): Promise<void> {
    const opened = performance.now();
    let settled: Settled[] | undefined;
    try {
      settled = await this.store.transactAll(() => {
        if (this.open === batch) this.open = undefined;
        return batch.map((command) => command.apply);
      });
    } catch (error) {
      // Nothing of the group was applied: with room made, its commands run again as they did.
      if (
        !again &&
        errorCode(error) === 'disk_full' &&
        (await this.makeRoom?.().catch(() => false))
      )
        return this.run(batch, true);
      for (const command of batch) command.done.settle(command.index, { ok: false, error });
      return;
    }
    if (settled === undefined) {
      for (const command of batch)
        this.store.transact(command.apply).then(
          (value) => command.done.settle(command.index, { ok: true, value }),
          (error: unknown) => command.done.settle(command.index, { ok: false, error }),
        );
      return;
    }
    this.committed?.(batch.length, (performance.now() - opened) / 1000);
    settled.forEach((outcome, index) => {
      const command = batch[index] as PendingCommand;
      command.done.settle(command.index, outcome);
    });
  }
}

/** Where commands' outcomes go: one `submit`'s promise, or the slots of one `submitEach`. */
interface Done {
  settle(index: number, outcome: Settled): void;
}

interface PendingCommand {
  readonly apply: () => unknown;
  readonly done: Done;
  /** Its slot in `done`. */
  readonly index: number;
}
