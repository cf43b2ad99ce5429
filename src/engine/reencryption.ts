// Background re-encryption after a tenant data-key rotation: every chunk still under a retired
// key is rewritten under the tenant's current key, and once none is left the retired keys are
// dropped from the tenant record (src/engine/ops/key-rotation.ts starts it; the console shows it).
//
// A chunk keeps its id: the id is an opaque name once written (it came from the dedup key of its
// generation, and new writes under the new key get ids from the new dedup key, so they never
// collide with it), and every version that references it stays as it is. Only the chunk entry
// moves to the new record, the way compaction moves it (src/engine/segments/compaction.ts).
//
// Invariants:
// - One job per tenant, a `meta` row `reencrypt\0<tenant num>` written in the transaction of
//   the rotation (or of the console's start). Its cursor is the last chunk entry handled; a
//   restart resumes from it. A rotation while a job runs restarts its pass from the first chunk:
//   chunks it already rewrote are under a key that is now retired too.
// - A new record is durable before the chunk entry points at it, and the entry moves only if it
//   still points where the record was read from (compaction or a tenant purge may have moved or
//   removed it meanwhile; a moved entry is queued for a second look). A crash before the move
//   leaves garbage in the job's segment, which compaction reclaims; the old record stays where
//   it was until compaction copies the segment away, so reads in flight finish.
// - Chunk entries created while the job is active (an upload that loaded the tenant's keys
//   before the rotation may commit a chunk under the old key after the cursor passed its place)
//   are queued by the commit itself (`noteNewChunks`, `reencrypt-recheck\0` rows). When the pass
//   reaches the end, the job waits until every segment pinned by uploads in flight at that
//   moment is released (such an upload has then committed or given up), looks at every queued
//   chunk, and drops the retired keys in a transaction that finds the queue empty and the
//   tenant's key unchanged. A chunk that cannot be read (damaged, or its segment gone) keeps
//   the retired keys: dropping them could not make it readable, and a repair might.
// - Throttled to `keys.reencrypt_rate` bytes read per second (default 16 MiB, 0: no limit); the
//   engine's event loop is given a turn after every chunk. Opening and sealing again costs the
//   engine's thread about 10 ms per MiB of incompressible chunk (measured on the project's
//   loaded 2-core machine, a failed try under the current key included: about 100 MiB/s), so
//   the default keeps re-encryption under a fifth of the engine's time.
//
// Persists: the job rows and queued chunks described above (docs/on-disk-format.md §5, `meta`);
// the chunk entries, segment live bytes and `TenantRecord.retiredKeys` / `droppedKeys`.

import { Buffer } from 'node:buffer';
import type { Logger } from 'pino';
import { decodeChunk, encodeChunk, type TenantKeys } from './chunk-codec.js';
import {
  DB,
  chunkKey,
  segmentKey,
  tenantKey,
  type ChunkRecord,
  type SegmentRecord,
  type TenantRecord,
} from './index/schema.js';
import type { EngineContext } from './ops/context.js';
import { SegmentReader } from './segments/segment-reader.js';
import type { SegmentWriter } from './segments/segment-writer.js';
import { engineSegmentWriter } from './segments/engine-writer.js';
import { unwrapTenantKey } from '../security/keys.js';
import { errorCode, isLightwellError } from '../util/errors.js';
import {
  QUEUED,
  REENCRYPT_PREFIX,
  after,
  jobKey,
  prefixEnd,
  recheckKey,
  recheckPrefix,
  reencryptionOf,
  startReencryption,
  wakers,
  type ReencryptionRecord,
  type ReencryptionState,
} from './ops/reencryption.js';
import { nodeIo, type Io } from '../util/io.js';

/** Chunk entries read per transaction. */
const CHUNKS_PER_BATCH = 64;
/** Record bytes read per transaction, at most (and one chunk more). */
const BATCH_BYTES = 8 * 1024 * 1024;
/** Damaged chunks named in a job (all are counted). */
export const UNREADABLE_LISTED_MAX = 20;
const POLL_MS = 5_000;

/** What one chunk came to. */
type Outcome =
  | { kind: 'current' | 'gone' }
  | { kind: 'unreadable'; problem: string }
  | {
      kind: 'rewritten';
      from: { segmentId: number; offset: number; length: number };
      to: { segmentId: number; offset: number; length: number; payloadChecksum: number };
    };

interface KeySet {
  current: TenantKeys;
  retired: Buffer[];
  /** `retiredAt` of the newest retired key: the rotation the keys belong to. */
  rotatedAt: number;
}

function failedAuthentication(error: unknown): boolean {
  return isLightwellError(error) && error.details['reason'] === 'authentication';
}

export interface ReencryptorOptions {
  context: EngineContext;
  log: Logger;
  /** The data directory's segments folder (DataDirPaths.segments). */
  segments: string;
  /** Segments uploads in flight wrote to (segment-pins.ts). */
  pins: { pinnedNow(): number[]; has(segmentId: number): boolean; settled(): boolean };
  io?: Io;
  pollMs?: number;
  /** Waits `ms` (tests pass one that does not). */
  sleep?: (ms: number) => Promise<void>;
}

/** Runs every active job in the background, one chunk at a time. */
export class Reencryptor {
  private running: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly writer: SegmentWriter;
  private readonly reader: SegmentReader;
  private readonly rate: number;
  private budgetStart = 0;
  private budgetBytes = 0;

  constructor(private readonly options: ReencryptorOptions) {
    const { context } = options;
    const { settings } = context;
    const io = options.io ?? nodeIo;
    const { segments } = options;
    this.rate = settings.bytes('keys.reencrypt_rate');
    this.reader = new SegmentReader(segments);
    this.writer = engineSegmentWriter({ context, segmentsDir: segments, io });
  }

  start(): void {
    wakers.add(this.wake);
    this.timer = setInterval(this.wake, this.options.pollMs ?? POLL_MS);
    this.timer.unref();
    this.wake();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    wakers.delete(this.wake);
    if (this.timer) clearInterval(this.timer);
    await this.running;
    await this.writer.close();
    this.reader.close();
  }

  readonly wake = (): void => {
    if (this.stopped) return;
    this.running ??= this.runAll()
      .catch((error: unknown) =>
        this.options.log.error({ err: error }, 're-encryption failed; retrying on the next poll'),
      )
      .finally(() => {
        this.running = undefined;
      });
  };

  /** Works on the active jobs until none has work it can do now (also what tests await). */
  async runAll(): Promise<void> {
    for (;;) {
      if (this.stopped) return;
      // Read in a transaction of its own: it queues behind the command that woke the runner.
      const { store } = this.options.context;
      const jobs = await store.transact(() =>
        [
          ...store.range<ReencryptionRecord>(DB.meta, {
            start: Buffer.from(REENCRYPT_PREFIX, 'latin1'),
            end: prefixEnd(Buffer.from(REENCRYPT_PREFIX, 'latin1')),
          }),
        ].map((entry) => entry.value),
      );
      let progressed = false;
      for (const job of jobs) {
        if (this.isStopped()) return;
        if (job.state === 'running') progressed = (await this.step(job.tenantNum)) || progressed;
        else if (job.state === 'settling')
          progressed = (await this.settle(job.tenantNum)) || progressed;
      }
      if (!progressed) return;
    }
  }

  /** Read afresh after an await (a stop may have come in meanwhile). */
  private isStopped(): boolean {
    return this.stopped;
  }

  /** The tenant's keys, read in a transaction (a master-key rotation swaps both at once). */
  private keysOf(tenant: TenantRecord): KeySet {
    const master = this.options.context.masterKey;
    const unwrap = (wrapped: Buffer): Buffer =>
      unwrapTenantKey(master, tenant.id, Buffer.from(wrapped));
    return {
      current: {
        tenantNum: tenant.num,
        dataKey: unwrap(tenant.wrappedKey),
        dedupKey: Buffer.alloc(0),
      },
      retired: (tenant.retiredKeys ?? []).map((retired) => unwrap(retired.wrappedKey)),
      rotatedAt: tenant.retiredKeys?.[0]?.retiredAt ?? 0,
    };
  }

  /**
   * The job as it stands, with the tenant and its keys; undefined when there is nothing to do
   * (the job was removed, paused or finished, or restarted here by a newer rotation).
   */
  private current(
    tenantNum: number,
    state: ReencryptionState,
  ): { job: ReencryptionRecord; tenant: TenantRecord; keys: KeySet } | undefined {
    const { context } = this.options;
    const job = reencryptionOf(context, tenantNum);
    if (!job || job.state !== state) return undefined;
    const tenant = context.store.get<TenantRecord>(DB.tenants, tenantKey(job.tenantId));
    if (!tenant || tenant.state === 'deleted' || tenant.num !== tenantNum) {
      // The tenant is gone: its purge removes the chunks, the job has nothing left to do.
      context.store.remove(DB.meta, jobKey(tenantNum));
      this.dropQueue(tenantNum, Number.MAX_SAFE_INTEGER);
      return undefined;
    }
    if ((tenant.retiredKeys?.length ?? 0) === 0) {
      context.store.put(DB.meta, jobKey(tenantNum), {
        ...job,
        state: 'complete',
        finishedAt: context.now(),
        keysDropped: job.keysDropped ?? 0,
      });
      return undefined;
    }
    if (tenant.retiredKeys?.[0]?.retiredAt !== job.rotatedAt) {
      startReencryption(context, tenant);
      return undefined;
    }
    return { job, tenant, keys: this.keysOf(tenant) };
  }

  private dropQueue(tenantNum: number, max: number): number {
    const prefix = recheckPrefix(tenantNum);
    let removed = 0;
    const { store } = this.options.context;
    for (const { key } of [
      ...store.range(DB.meta, { start: prefix, end: prefixEnd(prefix), limit: max }),
    ]) {
      store.remove(DB.meta, Buffer.from(key));
      removed += 1;
    }
    return removed;
  }

  /** One batch of the pass; true while the job moved on. */
  private async step(tenantNum: number): Promise<boolean> {
    const { store } = this.options.context;
    if (!(await this.counted(tenantNum))) return false;
    const read = await store.transact(() => {
      const found = this.current(tenantNum, 'running');
      if (!found) return undefined;
      const prefix = tenantChunkPrefix(tenantNum);
      const start = found.job.cursor ? after(Buffer.from(found.job.cursor)) : prefix;
      const chunks: Array<{ key: Buffer; value: ChunkRecord }> = [];
      let bytes = 0;
      for (const entry of store.range<ChunkRecord>(DB.chunks, {
        start,
        end: prefixEnd(prefix),
        limit: CHUNKS_PER_BATCH,
      })) {
        chunks.push({ key: Buffer.from(entry.key), value: entry.value });
        bytes += entry.value.length;
        if (bytes >= BATCH_BYTES) break;
      }
      return { ...found, chunks };
    });
    if (!read) return false;
    const outcomes: Array<{ key: Buffer; outcome: Outcome }> = [];
    for (const chunk of read.chunks) {
      // A pause takes effect at the next chunk; what was rewritten so far is kept.
      if (this.stopped || reencryptionOf(this.options.context, tenantNum)?.state !== 'running')
        break;
      outcomes.push({
        key: chunk.key,
        outcome: await this.rewrite(read.keys, chunk.key, chunk.value),
      });
    }
    const last = outcomes.at(-1)?.key;
    await store.transact(() => {
      const job = reencryptionOf(this.options.context, tenantNum);
      if (!job || job.rotatedAt !== read.keys.rotatedAt) return;
      if (job.state !== 'running' && job.state !== 'paused') return;
      const updated = this.apply(tenantNum, job, outcomes);
      if (last !== undefined) updated.cursor = last;
      if (read.chunks.length === 0 && job.state === 'running') {
        // The end of the pass: wait for the uploads in flight now (see the header).
        updated.state = 'settling';
        updated.pinned = this.options.pins.pinnedNow();
      }
      updated.updatedAt = this.options.context.now();
      store.put(DB.meta, jobKey(tenantNum), updated);
    });
    return !this.stopped && (outcomes.length > 0 || read.chunks.length === 0);
  }

  /** Counts the tenant's chunk entries once per pass, a slice at a time; false if stopped. */
  private async counted(tenantNum: number): Promise<boolean> {
    const { store } = this.options.context;
    const job = reencryptionOf(this.options.context, tenantNum);
    if (!job || job.chunksTotal !== undefined) return true;
    const prefix = tenantChunkPrefix(tenantNum);
    let total = 0;
    let start = prefix;
    for (;;) {
      const keys = [...store.range(DB.chunks, { start, end: prefixEnd(prefix), limit: 10_000 })];
      total += keys.length;
      const lastKey = keys.at(-1)?.key;
      if (lastKey === undefined || keys.length < 10_000) break;
      start = after(Buffer.from(lastKey));
      await new Promise((resolve) => setImmediate(resolve));
      if (this.stopped) return false;
    }
    await store.transact(() => {
      const current = reencryptionOf(this.options.context, tenantNum);
      if (current && current.startedAt === job.startedAt)
        store.put(DB.meta, jobKey(tenantNum), { ...current, chunksTotal: total });
    });
    return true;
  }

  /** Moves the rewritten entries that still point where they were read; inside a transaction. */
  private apply(
    tenantNum: number,
    job: ReencryptionRecord,
    outcomes: ReadonlyArray<{ key: Buffer; outcome: Outcome }>,
  ): ReencryptionRecord {
    const { store } = this.options.context;
    const updated: ReencryptionRecord = { ...job, unreadable: [...job.unreadable] };
    for (const { key, outcome } of outcomes) {
      updated.chunksScanned += 1;
      if (outcome.kind === 'unreadable') {
        updated.chunksUnreadable += 1;
        if (updated.unreadable.length < UNREADABLE_LISTED_MAX)
          updated.unreadable.push({
            chunkId: key.subarray(4).toString('hex'),
            problem: outcome.problem,
          });
        continue;
      }
      if (outcome.kind !== 'rewritten') continue;
      const chunk = store.get<ChunkRecord>(DB.chunks, key);
      if (!chunk) continue; // purged meanwhile
      if (chunk.segmentId !== outcome.from.segmentId || chunk.offset !== outcome.from.offset) {
        // Compaction moved the old record meanwhile: look at it again before the keys go.
        store.put(DB.meta, recheckKey(tenantNum, key.subarray(4)), QUEUED);
        continue;
      }
      if (chunk.refs > 0) {
        adjustLive(store, chunk.segmentId, -chunk.length);
        adjustLive(store, outcome.to.segmentId, outcome.to.length);
      }
      chunk.segmentId = outcome.to.segmentId;
      chunk.offset = outcome.to.offset;
      chunk.length = outcome.to.length;
      chunk.payloadChecksum = outcome.to.payloadChecksum;
      store.put(DB.chunks, key, chunk);
      updated.chunksRewritten += 1;
      updated.bytesRewritten += chunk.plainLength;
    }
    return updated;
  }

  /**
   * Reads one chunk; when the current key does not open it, writes it again under that key and
   * answers where to. Dead chunks are left alone: nothing reads them and no new write can
   * reach them (their ids come from a retired dedup key), and they are dropped after the grace.
   */
  private async rewrite(keys: KeySet, key: Buffer, chunk: ChunkRecord): Promise<Outcome> {
    if (chunk.refs === 0) return { kind: 'gone' };
    const from = { segmentId: chunk.segmentId, offset: chunk.offset, length: chunk.length };
    let record: Buffer;
    try {
      record = await this.reader.read(from);
    } catch (error) {
      return { kind: 'unreadable', problem: `${errorCode(error) ?? 'io'}: cannot read the record` };
    }
    await this.throttle(record.length);
    const expected = {
      chunkId: key.subarray(4),
      payloadChecksum: chunk.payloadChecksum,
      plainLength: chunk.plainLength,
    };
    let plain: Buffer;
    try {
      decodeChunk(keys.current, record, expected);
      return { kind: 'current' };
    } catch (error) {
      if (!failedAuthentication(error) || keys.retired.length === 0)
        return { kind: 'unreadable', problem: errorCode(error) ?? 'corrupt_data' };
      try {
        const [first, ...rest] = keys.retired as [Buffer, ...Buffer[]];
        plain = decodeChunk(
          { ...keys.current, dataKey: first, retiredDataKeys: rest },
          record,
          expected,
        );
      } catch (again) {
        return {
          kind: 'unreadable',
          problem: `${errorCode(again) ?? 'corrupt_data'}: no key opens it`,
        };
      }
    }
    const encoded = encodeChunk(keys.current, expected.chunkId, [plain], plain.length);
    const appended = await this.writer.append([encoded.header, ...encoded.payload]);
    await appended.durable();
    // The engine's loop gets a turn between chunks.
    await new Promise((resolve) => setImmediate(resolve));
    return {
      kind: 'rewritten',
      from,
      to: {
        segmentId: appended.segmentId,
        offset: appended.offset,
        length: appended.length,
        payloadChecksum: encoded.payloadChecksum,
      },
    };
  }

  /** Waits as long as `keys.reencrypt_rate` asks for `bytes` more. */
  private async throttle(bytes: number): Promise<void> {
    if (this.rate <= 0) return;
    const now = Date.now();
    if (now - this.budgetStart > 1_000) {
      this.budgetStart = now;
      this.budgetBytes = 0;
    }
    this.budgetBytes += bytes;
    const due = this.budgetStart + (this.budgetBytes / this.rate) * 1_000;
    if (due > now) await (this.options.sleep ?? sleep)(due - now);
  }

  /**
   * The end of a pass: once the uploads in flight at its end are done, the queued chunks are
   * looked at, then the retired keys dropped. True while it moved on.
   */
  private async settle(tenantNum: number): Promise<boolean> {
    const { context, pins } = this.options;
    const { store } = context;
    const read = await store.transact(() => {
      const found = this.current(tenantNum, 'settling');
      if (!found) return undefined;
      const prefix = recheckPrefix(tenantNum);
      const queued = [
        ...store.range(DB.meta, { start: prefix, end: prefixEnd(prefix), limit: CHUNKS_PER_BATCH }),
      ].map((entry) => Buffer.from(entry.key).subarray(prefix.length));
      const chunks = queued.map((chunkId) => {
        const key = chunkKey(tenantNum, chunkId);
        return { key, value: store.get<ChunkRecord>(DB.chunks, key) };
      });
      return { ...found, chunks };
    });
    if (!read) return false;
    if (!pins.settled() || (read.job.pinned ?? []).some((segmentId) => pins.has(segmentId)))
      return false; // the poll comes back
    const outcomes: Array<{ key: Buffer; outcome: Outcome }> = [];
    for (const chunk of read.chunks) {
      if (this.stopped) return false;
      const outcome = chunk.value
        ? await this.rewrite(read.keys, chunk.key, chunk.value)
        : { kind: 'gone' as const };
      outcomes.push({ key: chunk.key, outcome });
    }
    return store.transact(() => {
      const job = reencryptionOf(context, tenantNum);
      if (!job || job.state !== 'settling' || job.rotatedAt !== read.keys.rotatedAt) return false;
      for (const { key } of outcomes) store.remove(DB.meta, recheckKey(tenantNum, key.subarray(4)));
      const updated = this.apply(tenantNum, job, outcomes);
      updated.chunksScanned -= outcomes.length; // looked at twice, counted once
      updated.updatedAt = context.now();
      const prefix = recheckPrefix(tenantNum);
      const left = [...store.range(DB.meta, { start: prefix, end: prefixEnd(prefix), limit: 1 })];
      if (left.length === 0) this.finish(updated);
      store.put(DB.meta, jobKey(tenantNum), updated);
      return true;
    });
  }

  /** Drops the retired keys when every chunk read under the current key; in the transaction. */
  private finish(job: ReencryptionRecord): void {
    const { context, log } = this.options;
    const tenant = context.store.get<TenantRecord>(DB.tenants, tenantKey(job.tenantId));
    if (!tenant) return;
    job.state = 'complete';
    job.finishedAt = context.now();
    delete job.pinned;
    if (job.chunksUnreadable > 0) {
      job.keysDropped = 0;
      log.error(
        { tenantId: job.tenantId, unreadable: job.chunksUnreadable },
        'chunks that no key opens keep the retired data keys; scrub and repair the tenant',
      );
      return;
    }
    const dropped = tenant.retiredKeys?.length ?? 0;
    const kept: TenantRecord = { ...tenant, droppedKeys: (tenant.droppedKeys ?? 0) + dropped };
    delete kept.retiredKeys;
    context.store.put(DB.tenants, tenantKey(tenant.id), kept);
    job.keysDropped = dropped;
    log.info(
      { tenantId: job.tenantId, chunks: job.chunksRewritten, keysDropped: dropped },
      'tenant re-encrypted under its current data key; retired keys dropped',
    );
  }
}

/** The first 4 bytes of every chunk entry key of the tenant (schema.ts `chunkKey`). */
function tenantChunkPrefix(tenantNum: number): Buffer {
  const prefix = Buffer.alloc(4);
  prefix.writeUInt32BE(tenantNum, 0);
  return prefix;
}

function adjustLive(store: EngineContext['store'], segmentId: number, delta: number): void {
  const record = store.get<SegmentRecord>(DB.segments, segmentKey(segmentId));
  if (!record) return;
  record.liveBytes += delta;
  store.put(DB.segments, segmentKey(segmentId), record);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
