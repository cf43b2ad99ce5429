// Goal: the storage engine's durability promises hold on a disk that fails and lies. For each
// seed, a random workload of puts, overwrites, deletes, multipart-like multi-chunk objects,
// reads, compaction passes (with the clock moved past the grace periods) and crashes runs
// against a fault-injecting file system; after every crash and restart:
// - every acknowledged object reads back byte for byte (or, where the disk was seen to corrupt
//   its bytes by a misdirected write, fails loudly: never wrong bytes);
// - nothing unacknowledged is committed (a chunk entry with references belongs to an object
//   that was acknowledged, or whose commit was in flight at the crash);
// - the index invariants hold: each segment's live bytes are the sum of its live chunks', each
//   chunk's references are the objects that hold it, the tenant's physical usage is the sum of
//   its live chunks, every live chunk lies inside a segment that exists, and every segment file
//   is known to the index or quarantined.
// Reads during the workload, with faults on, answer the right bytes or fail: never wrong ones.
// Index commits fail too (ENOSPC and EIO at the index's commit seam), as LMDB's do: the whole
// write batch, every child transaction grouped into the commit. A failed commit acknowledges
// nothing: every caller whose command last ran in it is answered with an error (checked for
// each command against the commit it ran in), so the model counts an object as written (or
// deleted) only once its commit resolved, and the index itself holds each object's manifest (a
// `meta` row per name, written in the commit) so that a rolled-back commit leaves no trace in
// either.
// A writer's report of a failed fdatasync reaches the engine a few turns late, and the engine's
// handle, held from the segment's creation, must catch the failure meanwhile. The engine also
// restarts under a live writer (a gateway outliving its engine): a new syncer, with new
// handles, over the same disk and page cache, which must still refuse every segment whose
// fdatasync failed. A report on its way at the restart is lost with its connection; the writer
// registers its open segment again (`reregister`) some disk operations after the restart, and
// the new engine refuses commits into it until then. The restart and the re-registration
// happen at a disk operation drawn from the seed, and every wait (the disk's latencies, the
// simulation's) is in virtual turns that pass only while no index commit is in flight
// (VirtualTurns in fault-io.ts), so that a seed replays though LMDB commits in real time.
// About a third of the seeds run on a small disk (a capacity, `storage.space_reserve` 64 KiB):
// it fills during the workload, and at the end such a seed fills it on purpose with faults off
// and checks the answer to a full disk: a put is refused with `disk_full` (503 to clients), the
// objects already written read back, every delete commits (an index commit on a full disk gets
// the space reserve), and once compaction reclaimed the deleted bytes, writes resume on the same
// process, without a restart.
// Method: the engine's own code, in process: SegmentWriter (as a pool worker and the compactor
// use it), SegmentSyncer (the engine's fdatasync before a commit), CommandBatch with the space
// reserve as its `makeRoom` (as the engine's), the commit's reference counting (addChunkRefs,
// releaseChunkRefs), the refusal of new segments while the reserve is out (the engine's
// `allocSegment`), recovery (given the reserve on a full disk, as at the engine's start),
// SpaceReserve, Compactor and SegmentReader, with segments and the reserve on
// test/fault/fault-io.ts, the index in a real LMDB environment whose commits go through the
// fault disk's commit seam, and a ManualClock. 200 seeds by default; LIGHTWELL_SIM_SEEDS=n runs
// n, LIGHTWELL_SIM_SEED=s replays one seed (a failure prints its seed and the faults injected;
// LIGHTWELL_SIM_DIGEST=1 prints a digest of each seed's faults, the same in every replay).
import t from 'tap';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { CommandBatch, IndexStore } from '../../src/engine/index/store.js';
import {
  DB,
  chunkKey,
  emptyUsage,
  tenantKey,
  segmentKey,
  type ChunkRecord,
  type SegmentRecord,
  type UsageRecord,
} from '../../src/engine/index/schema.js';
import { dataDirPaths, prepareDataDir, type DataDirPaths } from '../../src/engine/data-dir.js';
import {
  allocSegment,
  markSegmentFailed,
  sealSegment,
  watchedSegments,
} from '../../src/engine/ops/segments.js';
import {
  addChunkRefs,
  packChunkRefs,
  releaseChunkRefs,
  type ManifestChunk,
} from '../../src/engine/ops/objects.js';
import type { EngineContext } from '../../src/engine/ops/context.js';
import { SegmentWriter } from '../../src/engine/segments/segment-writer.js';
import { SegmentReader } from '../../src/engine/segments/segment-reader.js';
import { SegmentSyncer } from '../../src/engine/segments/segment-syncer.js';
import { recoverSegments } from '../../src/engine/segments/recovery.js';
import { Compactor } from '../../src/engine/segments/compaction.js';
import {
  encodeRecord,
  decodeRecordHeader,
  verifyPayload,
  RECORD_HEADER_SIZE,
  RECORD_KIND_CHUNK,
  COMPRESSION_NONE,
  CIPHER_NONE,
} from '../../src/format/record-frame.js';
import {
  parseSegmentFileName,
  segmentFileName,
  SEGMENT_HEADER_SIZE,
} from '../../src/format/segment-header.js';
import { SpaceReserve, withRoom } from '../../src/engine/space-reserve.js';
import { DiskFull, EngineUnavailable, errorCode } from '../../src/util/errors.js';
import { toProblem } from '../../src/http/error-answer.js';
import { loadSettings, type Settings } from '../../src/util/config.js';
import { ManualClock } from '../../src/util/clock.js';
import type { Io } from '../../src/util/io.js';
import {
  FaultDisk,
  NO_FAULTS,
  Prng,
  VirtualTurns,
  type FaultProbabilities,
  type IndexCommit,
} from './fault-io.js';

/** What the seeds did in all, so that a run that checked nothing cannot pass. */
const totals = {
  crashes: 0,
  chunksChecked: 0,
  commits: 0,
  faults: 0,
  indexFaults: 0,
  fullDisks: 0,
  resumed: 0,
  /** Failed index commits that held more than one child transaction (LMDB's whole batch). */
  batchCommitFaults: 0,
  /** Callers answered with an error because the commit their command ran in failed. */
  callersOfFailedCommits: 0,
  /** Engine restarts under a live writer (a gateway outliving its engine). */
  engineRestarts: 0,
  /** Poisoned segments a restarted engine loaded from the index and refused. */
  marksLoaded: 0,
  /** Commits a restarted engine refused until the segment's writer registered it again. */
  unregisteredRefusals: 0,
  /** Failures whose report was lost with the old engine and sent again by the writer. */
  reportsResent: 0,
};

const TENANT = 't1';
const TENANT_NUM = 1;
const OPS_PER_SEED = 60;
const silent = pino({ level: 'silent' });
/** The `meta` row that holds a simulated object's manifest (the model's own, not the engine's). */
const OBJECT_ROW = 'sim-object\0';

function objectRow(name: string): Buffer {
  return Buffer.from(OBJECT_ROW + name, 'utf8');
}

interface StoredObject {
  readonly chunks: ReadonlyArray<{ id: Buffer; payload: Buffer }>;
}

interface Life {
  /** The process crashed: its commits are refused (a dead process commits nothing). */
  dead: boolean;
  readonly io: Io;
  readonly writer: SegmentWriter;
  /** The engine's syncer: replaced when the engine restarts under a live writer. */
  syncer: SegmentSyncer;
  readonly reader: SegmentReader;
  readonly compactor: Compactor;
  readonly reserve: SpaceReserve;
  /** The engine's group commit, with the reserve to make room on a full disk. */
  readonly batch: CommandBatch;
}

class Simulation {
  readonly prng: Prng;
  readonly disk: FaultDisk;
  readonly clock = new ManualClock();
  /** The disk's latencies and the simulation's waits, in turns that replay (fault-io.ts). */
  readonly turns = new VirtualTurns();
  readonly settings: Settings;
  readonly context: EngineContext;
  /**
   * Committed objects by name: what must read back. An object is added once its commit
   * resolved (in commit order); a crash waits for the commits in flight to settle, so one whose
   * commit landed just before it counts, though its client may not have had the answer yet.
   */
  readonly acked = new Map<string, StoredObject>();
  /** Every chunk id ever committed, by hex, with its payload. */
  private readonly payloads = new Map<string, Buffer>();
  readonly store: IndexStore;
  private life!: Life;
  private nextName = 0;
  /** Callers acknowledged although their command last ran in a failed commit. */
  private readonly wrongAcks: string[] = [];

  private constructor(
    readonly seed: number,
    readonly paths: DataDirPaths,
  ) {
    this.prng = new Prng(seed);
    const profile = faultProfile(this.prng);
    const capacity = this.prng.chance(0.35) ? 384 * 1024 + this.prng.int(384 * 1024) : undefined;
    this.disk = new FaultDisk(seed ^ 0x5eed, NO_FAULTS, { capacity });
    this.disk.faults = profile;
    this.disk.turns = this.turns;
    this.store = IndexStore.open({
      path: paths.index,
      readOnly: false,
      faults: this.disk.indexFaults(),
    });
    // The index's commits are outside work of the virtual turns (fault-io.ts), so that a seed
    // replays: what runs while LMDB commits, and what commits together, is the same each time.
    const { store, turns } = this;
    const transact = store.transact.bind(store);
    const transactAll = store.transactAll.bind(store);
    store.transact = (apply) => turns.outside(() => transact(apply));
    store.transactAll = (applies) => turns.outside(() => transactAll(applies));
    this.settings = loadSettings({
      flags: {
        'storage.segment_bytes_max': '48KiB',
        'storage.direct_io': 'false',
        'storage.space_reserve': '64KiB',
      },
    });
    const clock = this.clock;
    this.context = {
      store: this.store,
      masterKey: Buffer.alloc(32),
      settings: this.settings,
      now: () => clock.now(),
    };
  }

  static async create(seed: number, paths: DataDirPaths): Promise<Simulation> {
    const simulation = new Simulation(seed, paths);
    // The reserve is taken before the faults start, as at an engine's first start.
    const faults = simulation.disk.faults;
    simulation.disk.faults = NO_FAULTS;
    simulation.life = await simulation.start(simulation.disk.io);
    simulation.disk.faults = faults;
    return simulation;
  }

  private async start(io: Io): Promise<Life> {
    const { store, context, paths } = this;
    const life = { dead: false } as Life;
    const reserve = new SpaceReserve({
      root: paths.root,
      configuredBytes: this.settings.bytes('storage.space_reserve'),
      log: silent,
      io,
    });
    await reserve.open();
    const writer = new SegmentWriter({
      io,
      clock: this.clock,
      segmentsDir: paths.segments,
      segmentBytesMax: this.settings.bytes('storage.segment_bytes_max'),
      registry: {
        // As the engine's allocSegment: no new segment while the reserve is out.
        allocate: async () => {
          if (!reserve.whole) throw DiskFull('the reserve is out; deleted data is being reclaimed');
          return (
            await store.transact(() => {
              alive(life);
              return allocSegment(context, { ownerPid: process.pid });
            })
          ).segmentId;
        },
        seal: async (segmentId, size) => {
          await store.transact(() => {
            alive(life);
            sealSegment(context, { segmentId, size });
          });
        },
        // As a gateway's report to the engine's segmentFailed command: it takes a few turns
        // to arrive, and is answered once the mark is committed; lost if the engine restarted
        // meanwhile.
        failed: async (segmentId) => {
          const engine = life.syncer;
          await this.turns.sleep(this.prng.int(4));
          if (engine !== life.syncer) {
            totals.reportsResent += 1; // counted when the writer will send it again
            throw EngineUnavailable('lost the connection to the engine');
          }
          await engine.poison(segmentId);
        },
        // As a gateway's segmentOpened: the engine holds its handle from before the first record.
        opened: (segmentId) => life.syncer.hold(segmentId),
      },
    });
    const syncer = this.engineSyncer(life, io);
    const reader = new SegmentReader(paths.segments, { io, clock: this.clock });
    const compactor = new Compactor({
      paths,
      store,
      settings: this.settings,
      log: silent,
      io,
      clock: this.clock,
      segmentFailed: (segmentId) => life.syncer.poison(segmentId),
      segmentSealed: (segmentId) => life.syncer.forget(segmentId),
      space: reserve,
    });
    const batch = new CommandBatch(
      store,
      undefined,
      async () => (await reserve.release('an index commit found the disk full')) > 0,
    );
    return Object.assign(life, { io, writer, syncer, reader, compactor, reserve, batch });
  }

  /**
   * The engine's syncer as engine.ts builds it: the poison marks of earlier lives loaded, new
   * ones committed through the group commit, the segments being written held.
   */
  private engineSyncer(life: Life, io: Io): SegmentSyncer {
    const syncer = new SegmentSyncer(this.paths.segments, io);
    this.store.refresh();
    const { failed, writing } = watchedSegments(this.context);
    syncer.load(failed);
    for (const segmentId of failed) if (syncer.isPoisoned(segmentId)) totals.marksLoaded += 1;
    syncer.persist = async (segmentId) => {
      const refused = await this.submit(life, `mark segment ${segmentId}`, () => {
        alive(life);
        markSegmentFailed(this.context, { segmentId });
      });
      if (refused !== undefined)
        throw refused instanceof Error ? refused : new Error(describe(refused));
    };
    // Commits into the live writer's open segments wait for it to register them again.
    syncer.expect(writing);
    return syncer;
  }

  /**
   * The engine restarts while puts run and the writer (a gateway's) lives on: a new syncer,
   * with new handles, which must still refuse every segment whose fdatasync failed before.
   * The restart, and the writer's re-registration after it, begin with a disk operation drawn
   * from the seed (or once the puts are over, if they end first).
   */
  private async restartEngineDuring(count: number): Promise<void> {
    const life = this.life;
    let registering: Promise<void> | undefined;
    let cancelRegistration: (() => boolean) | undefined;
    const reregister = (): void => {
      registering = life.writer.reregister();
    };
    const restart = (): void => {
      const old = life.syncer;
      life.syncer = this.engineSyncer(life, life.io);
      old.close();
      totals.engineRestarts += 1;
      cancelRegistration = this.disk.afterOps(1 + this.prng.int(8), reregister);
    };
    const cancelRestart = this.disk.afterOps(1 + this.prng.int(16), restart);
    const puts = [];
    for (let i = 0; i < count; i += 1) puts.push(this.put());
    await Promise.all(puts);
    if (!cancelRestart()) restart();
    if (!(cancelRegistration as () => boolean)()) reregister();
    await registering;
  }

  async run(): Promise<void> {
    for (let op = 0; op < OPS_PER_SEED; op += 1) {
      const roll = this.prng.int(100);
      if (roll < 45) await this.concurrently(1 + this.prng.int(4));
      else if (roll < 60) await this.remove();
      else if (roll < 72) await this.readSome();
      else if (roll < 82) await this.compact();
      else if (roll < 86) await this.restartEngineDuring(1 + this.prng.int(3));
      else await this.crashDuring(1 + this.prng.int(3));
    }
    await this.crashAndCheck([]);
    if (this.disk.capacity !== undefined) {
      await this.fillAndReclaim();
      await this.crashAndCheck([]);
    }
  }

  /**
   * The answer to a full disk, with faults off: fill it until a put is refused (which must be
   * `disk_full`, 503), read every object back, delete them all (each delete must commit), and
   * let compaction reclaim the bytes until a put is accepted again.
   */
  private async fillAndReclaim(): Promise<void> {
    this.disk.faults = NO_FAULTS;
    let refused: unknown;
    for (let i = 0; i < 1000 && refused === undefined; i += 1) refused = await this.put(40_000);
    if (refused === undefined) throw new Error('the disk never filled');
    const problem = toProblem(refused);
    if (errorCode(refused) !== 'disk_full' || problem.status !== 503)
      throw new Error(
        `a full disk refused a put with ${String(errorCode(refused))} (${problem.status}), ` +
          `not disk_full (503): ${describe(refused)}`,
      );
    totals.fullDisks += 1;
    await this.readAll();
    for (const name of [...this.acked.keys()]) {
      const failure = await this.remove(name);
      if (failure !== undefined)
        throw new Error(`a delete on a full disk failed: ${describe(failure)}`);
    }
    for (let pass = 0; pass < 4; pass += 1) {
      this.clock.advance(16 * 60_000);
      await this.life.compactor.runOnce();
      if ((await this.put(1_000)) === undefined) {
        totals.resumed += 1;
        return;
      }
    }
    throw new Error(
      `writes did not resume after the deletes and 4 compaction passes ` +
        `(${this.disk.free()} bytes free, reserve ${this.life.reserve.whole ? 'whole' : 'out'})`,
    );
  }

  /**
   * Every acknowledged object, read with faults off: the right bytes, without an error (or,
   * over bytes the disk corrupted, a loud failure).
   */
  private async readAll(): Promise<void> {
    for (const [name, object] of this.acked)
      for (const chunk of object.chunks) {
        const entry = this.store.get<ChunkRecord>(DB.chunks, chunkKey(TENANT_NUM, chunk.id));
        let bytes: Buffer;
        try {
          bytes = await this.readChunk(this.life, chunk.id);
        } catch (error) {
          if (entry && this.damaged(entry.segmentId, entry.offset, entry.length)) continue;
          throw new Error(`${name}: unreadable on a full disk: ${String(error)}`);
        }
        if (!bytes.equals(chunk.payload)) throw new Error(`${name}: wrong bytes`);
      }
  }

  /** Puts (new names and overwrites) running at once. */
  private async concurrently(count: number): Promise<void> {
    const puts = [];
    for (let i = 0; i < count; i += 1) puts.push(this.put());
    await Promise.all(puts);
  }

  /** Some puts, and a crash while they run. */
  private async crashDuring(count: number): Promise<void> {
    const puts = [];
    for (let i = 0; i < count; i += 1) puts.push(this.put());
    await this.turns.sleep(this.prng.int(40));
    await this.crashAndCheck(puts);
  }

  private pickName(): string {
    const names = [...this.acked.keys()];
    if (names.length > 0 && this.prng.chance(0.3))
      return names[this.prng.int(names.length)] as string;
    return `object-${this.nextName++}`;
  }

  /**
   * One object of 1-3 chunks (a multipart upload's parts are chunks too): its records are
   * appended and written, the engine fdatasyncs their segments and commits; only then is the
   * object acknowledged. An overwrite releases the old object's chunks in the same commit.
   * Answers the error of a put that was refused; undefined once it is acknowledged.
   */
  private async put(size?: number): Promise<unknown> {
    const name = this.pickName();
    const chunks = Array.from({ length: 1 + this.prng.int(3) }, () => ({
      id: this.prng.bytes(32),
      payload: this.prng.bytes(size ?? 1 + this.prng.int(this.prng.chance(0.2) ? 40_000 : 3_000)),
    }));
    const object: StoredObject = { chunks };
    const life = this.life;
    const manifest: ManifestChunk[] = [];
    try {
      for (const chunk of chunks) {
        const record = encodeRecord(
          {
            kind: RECORD_KIND_CHUNK,
            compression: COMPRESSION_NONE,
            cipher: CIPHER_NONE,
            tenantNum: TENANT_NUM,
            plainLength: chunk.payload.length,
            chunkId: chunk.id,
            nonce: Buffer.alloc(12),
          },
          chunk.payload,
        );
        const appended = await life.writer.append([record]);
        await appended.written();
        const header = decodeRecordHeader(record, 0);
        manifest.push({
          id: chunk.id,
          plainLength: chunk.payload.length,
          location: {
            segmentId: appended.segmentId,
            offset: appended.offset,
            length: appended.length,
            payloadChecksum: header.payloadChecksum,
          },
        });
      }
      await life.syncer.sync(manifest.map((chunk) => chunk.location?.segmentId as number));
    } catch (error) {
      if (errorCode(error) === 'engine_unavailable') totals.unregisteredRefusals += 1;
      return error; // never committed: the client got an error
    }
    for (const chunk of chunks) this.payloads.set(chunk.id.toString('hex'), chunk.payload);
    const { store } = this;
    const refused = await this.submit(life, `put ${name}`, () => {
      alive(life);
      const usage = store.get<UsageRecord>(DB.usage, tenantKey(TENANT)) ?? emptyUsage(TENANT);
      addChunkRefs(this.context, TENANT_NUM, manifest, usage);
      const before = store.get<{ chunks: Buffer }>(DB.meta, objectRow(name));
      if (before) releaseChunkRefs(this.context, TENANT_NUM, before.chunks, usage);
      store.put(DB.meta, objectRow(name), { chunks: packRefs(object) });
      store.put(DB.usage, tenantKey(TENANT), usage);
    });
    // Refused (chunk_gone, a failed index commit, or the process is dead): not committed.
    if (refused !== undefined) return refused;
    this.acked.set(name, object);
    totals.commits += 1;
    return undefined;
  }

  /** Deletes an object (a random one without `name`); answers the error of one that failed. */
  private async remove(name?: string): Promise<unknown> {
    const names = [...this.acked.keys()];
    if (names.length === 0) return undefined;
    const chosen = name ?? names[this.prng.int(names.length)];
    if (chosen === undefined) return undefined;
    const { store } = this;
    const life = this.life;
    const refused = await this.submit(life, `delete ${chosen}`, () => {
      alive(life);
      const object = store.get<{ chunks: Buffer }>(DB.meta, objectRow(chosen));
      if (!object) return;
      const usage = store.get<UsageRecord>(DB.usage, tenantKey(TENANT)) ?? emptyUsage(TENANT);
      releaseChunkRefs(this.context, TENANT_NUM, object.chunks, usage);
      store.put(DB.usage, tenantKey(TENANT), usage);
      store.remove(DB.meta, objectRow(chosen));
    });
    if (refused !== undefined) return refused;
    this.acked.delete(chosen);
    return undefined;
  }

  /**
   * A command through the engine's group commit; answers its error, or undefined once it is
   * acknowledged. The command notes the LMDB commit each run of it is part of (a group that
   * found the disk full runs again once room is made; one whose command threw after writing
   * runs each command again on its own): a caller acknowledged although its last run was in a
   * failed commit is a broken promise, reported by the next check.
   */
  private async submit(life: Life, what: string, apply: () => void): Promise<unknown> {
    let ranIn: IndexCommit | undefined;
    let refused: unknown;
    try {
      await life.batch.submit(() => {
        ranIn = this.disk.indexCommit();
        ranIn.callers += 1;
        apply();
      });
    } catch (error) {
      if (isIndexFault(error)) totals.indexFaults += 1;
      refused = error ?? new Error('refused without an error');
    }
    if (ranIn?.fault !== undefined) {
      if (refused === undefined)
        this.wrongAcks.push(`${what}: acknowledged, but index commit ${ranIn.id} failed`);
      else totals.callersOfFailedCommits += 1;
    }
    return refused;
  }

  /** Reads acknowledged objects with faults on: the right bytes, or an error. */
  private async readSome(): Promise<void> {
    const names = [...this.acked.keys()];
    for (let i = 0; i < Math.min(3, names.length); i += 1) {
      const name = names[this.prng.int(names.length)] as string;
      for (const chunk of (this.acked.get(name) as StoredObject).chunks) {
        let bytes: Buffer;
        try {
          bytes = await this.readChunk(this.life, chunk.id);
        } catch {
          continue; // a loud failure is an allowed answer to a faulty disk
        }
        if (!bytes.equals(chunk.payload))
          throw new Error(`${name}: a read answered wrong bytes without an error`);
      }
    }
  }

  /** Reads a chunk as the gateway does: locate, read the record, check its frame and CRC. */
  private async readChunk(life: Life, id: Buffer): Promise<Buffer> {
    this.store.refresh();
    const chunk = this.store.get<ChunkRecord>(DB.chunks, chunkKey(TENANT_NUM, id));
    if (!chunk) throw new Error('no chunk entry');
    const record = await life.reader.read(chunk);
    const header = decodeRecordHeader(record, 0);
    if (header.payloadChecksum !== chunk.payloadChecksum || !header.chunkId.equals(id))
      throw new Error('the record is not the chunk the index names');
    const payload = record.subarray(RECORD_HEADER_SIZE);
    verifyPayload(header, payload);
    return Buffer.from(payload);
  }

  /** A compaction pass; one that a fault ended is an allowed outcome (the engine logs it). */
  private async compact(): Promise<void> {
    if (this.prng.chance(0.5)) this.clock.advance(16 * 60_000);
    await this.life.compactor.runOnce().catch(() => undefined);
  }

  /**
   * A power cut: the old process's I/O fails from now on, the disk keeps what it may, and a new
   * process recovers and is checked with faults off (the checker's reads must see the disk).
   */
  private async crashAndCheck(running: ReadonlyArray<Promise<unknown>>): Promise<void> {
    this.life.dead = true;
    totals.crashes += 1;
    const io = this.disk.crash();
    // What the dead process still had running fails on its dead Io or its refused commits.
    await Promise.allSettled(running);
    const faults = this.disk.faults;
    this.disk.faults = NO_FAULTS;
    // LMDB reuses the pages its earlier commits freed: recovery's few updates need no new room.
    this.disk.indexRoomNeeded = false;
    this.life = await this.start(io);
    // As at the engine's start: recovery on a full disk gets the reserve.
    await withRoom(this.life.reserve, 'recovery found the disk full', () =>
      recoverSegments({
        paths: this.paths,
        store: this.store,
        log: silent,
        includeOwn: true,
        io,
        clock: this.clock,
      }),
    );
    await this.check();
    this.disk.faults = faults;
    this.disk.indexRoomNeeded = true;
  }

  private damaged(segmentId: number, offset: number, length: number): boolean {
    const path = join(this.paths.segments, segmentFileName(segmentId));
    return this.disk.damageOf(path).some(
      (range) =>
        (range.from < offset + length && offset < range.to) ||
        // A damaged header makes the reader refuse the whole file.
        range.from < SEGMENT_HEADER_SIZE,
    );
  }

  private async check(): Promise<void> {
    if (this.wrongAcks.length > 0) throw new Error(this.wrongAcks.join('; '));
    const { store } = this;
    store.refresh();
    // Every acknowledged object reads back (or, over bytes the disk corrupted, fails loudly).
    for (const [name, object] of this.acked) {
      for (const chunk of object.chunks) {
        const entry = store.get<ChunkRecord>(DB.chunks, chunkKey(TENANT_NUM, chunk.id));
        if (!entry || entry.refs === 0) throw new Error(`${name}: acknowledged, but no live chunk`);
        let bytes: Buffer | undefined;
        try {
          bytes = await this.readChunk(this.life, chunk.id);
        } catch (error) {
          if (this.damaged(entry.segmentId, entry.offset, entry.length)) continue;
          const segment = store.get<SegmentRecord>(DB.segments, segmentKey(entry.segmentId));
          const size = this.disk.sizeOf(
            join(this.paths.segments, segmentFileName(entry.segmentId)),
          );
          throw new Error(
            `${name}: acknowledged chunk at ${entry.segmentId}@${entry.offset}+${entry.length} ` +
              `(segment ${String(segment?.state)} size ${String(segment?.size)}, file ${String(size)}) unreadable: ` +
              String(error),
          );
        }
        if (!bytes.equals(chunk.payload)) throw new Error(`${name}: wrong bytes`);
        totals.chunksChecked += 1;
      }
    }
    // Reference counts: each chunk's references are the committed objects that hold it;
    // nothing else is live.
    const holders = new Map<string, number>();
    for (const object of this.acked.values())
      for (const chunk of object.chunks) {
        const hex = chunk.id.toString('hex');
        holders.set(hex, (holders.get(hex) ?? 0) + 1);
      }
    const live = new Map<number, number>();
    let physical = 0;
    for (const { key, value } of store.range<ChunkRecord>(DB.chunks, {})) {
      const hex = Buffer.from(key).subarray(4).toString('hex');
      const expected = holders.get(hex) ?? 0;
      if (value.refs !== expected)
        throw new Error(`chunk ${hex}: ${value.refs} references, ${expected} holders`);
      if (value.refs === 0) continue;
      if (!this.payloads.has(hex)) throw new Error(`chunk ${hex} is live but was never written`);
      live.set(value.segmentId, (live.get(value.segmentId) ?? 0) + value.length);
      physical += value.length;
      const segment = store.get<SegmentRecord>(DB.segments, segmentKey(value.segmentId));
      if (!segment || segment.state === 'deleted')
        throw new Error(`chunk ${hex} lives in segment ${value.segmentId}, which is gone`);
      const lied =
        this.disk.damageOf(join(this.paths.segments, segmentFileName(value.segmentId))).length > 0;
      if (segment.size !== undefined && value.offset + value.length > segment.size && !lied)
        throw new Error(`chunk ${hex} lies past the end of segment ${value.segmentId}`);
    }
    for (const { value } of store.range<SegmentRecord>(DB.segments, {})) {
      if (value.liveBytes !== (live.get(value.id) ?? 0))
        throw new Error(
          `segment ${value.id}: liveBytes ${value.liveBytes}, live chunks ${live.get(value.id) ?? 0}`,
        );
      const size = this.disk.sizeOf(join(this.paths.segments, segmentFileName(value.id)));
      // A segment registered whose file never appeared is sealed empty by recovery.
      const path = join(this.paths.segments, segmentFileName(value.id));
      const lied = this.disk.damageOf(path).length > 0;
      if (value.state === 'sealed' && value.size !== (size ?? 0) && !lied)
        throw new Error(
          `segment ${value.id}: sealed at ${String(value.size)}, file has ${String(size)}`,
        );
    }
    // The index's own list of objects is the model's: a failed commit left no trace in either.
    const rows = new Map<string, Buffer>();
    const start = Buffer.from(OBJECT_ROW, 'utf8');
    const end = Buffer.concat([start, Buffer.from([0xff])]);
    for (const { key, value } of store.range<{ chunks: Buffer }>(DB.meta, { start, end }))
      rows.set(key.toString('utf8').slice(OBJECT_ROW.length), value.chunks);
    if (rows.size !== this.acked.size)
      throw new Error(`the index holds ${rows.size} objects, the model ${this.acked.size}`);
    for (const [name, object] of this.acked)
      if (!rows.get(name)?.equals(packRefs(object)))
        throw new Error(`${name}: the index holds another manifest`);
    const usage = store.get<UsageRecord>(DB.usage, tenantKey(TENANT));
    if ((usage?.physicalBytes ?? 0) !== physical)
      throw new Error(
        `usage: physicalBytes ${String(usage?.physicalBytes)}, live chunks ${physical}`,
      );
    for (const path of this.disk.paths()) {
      const id = parseSegmentFileName(path.slice(this.paths.segments.length + 1));
      if (id !== undefined && !store.has(DB.segments, segmentKey(id)))
        throw new Error(`segment file ${path} is not in the index and not quarantined`);
    }
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : JSON.stringify(error);
}

function isIndexFault(error: unknown): boolean {
  return /index commit/.test(String((error as { message?: unknown } | undefined)?.message));
}

function alive(life: Life): void {
  if (life.dead) throw new Error('the process is dead');
}

function packRefs(object: StoredObject): Buffer {
  return packChunkRefs(
    object.chunks.map((chunk) => ({ id: chunk.id, plainLength: chunk.payload.length })),
  );
}

/** Each fault on or off for this seed, so some seeds run clean and some run rough. */
function faultProfile(prng: Prng): FaultProbabilities {
  const maybe = (p: number): number => (prng.chance(0.5) ? p : 0);
  return {
    readEio: maybe(0.02),
    writeEio: maybe(0.01),
    tornShare: 0.5,
    enospc: maybe(0.01),
    misdirected: maybe(0.004),
    syncEio: maybe(0.02),
    bitFlip: maybe(0.02),
    latencySpike: maybe(0.05),
    indexEnospc: maybe(0.01),
    indexEio: maybe(0.02),
  };
}

async function runSeed(seed: number): Promise<string | undefined> {
  // The index on tmpfs where there is one: its commits are durable in the model, and an
  // fsync per commit on a shared disk would make 200 seeds take minutes.
  const base = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();
  const root = mkdtempSync(join(base, 'lw-sim-'));
  const paths = dataDirPaths(root);
  await prepareDataDir(paths);
  const simulation = await Simulation.create(seed, paths);
  try {
    await simulation.run();
    totals.faults += simulation.disk.log.length;
    // What replays from the seed: every fault injected, and the index commits' fates.
    if (process.env['LIGHTWELL_SIM_DIGEST']) {
      const fates = simulation.disk.indexCommits.map((commit) => commit.fault ?? '-').join('');
      const log = simulation.disk.log.join('\n').replaceAll(root, '');
      const digest = createHash('sha256').update(log).update(fates);
      digests.push(`seed ${seed}: ${digest.digest('hex').slice(0, 16)}`);
    }
    totals.batchCommitFaults += simulation.disk.indexCommits.filter(
      (commit) => commit.fault !== undefined && commit.children > 1,
    ).length;
    return undefined;
  } catch (error) {
    const faults = simulation.disk.log
      .slice(process.env['LIGHTWELL_SIM_VERBOSE'] ? 0 : -12)
      .join('\n  ');
    const segment = /at (\d+)@/.exec((error as Error).message)?.[1];
    const name = segment && segmentFileName(Number(segment));
    const trace = simulation.disk.traced
      .filter((line) => !name || line.includes(name) || line.includes('crash'))
      .join('\n  ');
    return `seed ${seed}: ${(error as Error).message}\n  last faults:\n  ${faults}\n  ${trace}`;
  } finally {
    await simulation.store.close();
    rmSync(root, { recursive: true, force: true });
  }
}

/** Each seed's digest of what it injected (LIGHTWELL_SIM_DIGEST=1), to check a replay. */
const digests: string[] = [];

const only = process.env['LIGHTWELL_SIM_SEED'];
const count = Number(process.env['LIGHTWELL_SIM_SEEDS'] ?? 200);
const first = Number(process.env['LIGHTWELL_SIM_FIRST'] ?? 1);
const seeds =
  only !== undefined ? [Number(only)] : Array.from({ length: count }, (_, i) => first + i);

// 200 seeds take about a minute on an idle 2-core machine and three or more under a load of 20:
// longer than the suite's time-out for one file. Each batch below keeps its own time-out, which
// is what catches a seed that hangs.
t.setTimeout(15 * 60_000);

/** Seeds per subtest: each has its own time-out, generous for a loaded machine. */
const SEEDS_PER_TEST = 25;

for (let start = 0; start < seeds.length; start += SEEDS_PER_TEST) {
  const batch = seeds.slice(start, start + SEEDS_PER_TEST);
  const name = `seeds ${String(batch[0])}..${String(batch.at(-1))}: faults, crashes and restarts`;
  t.test(name, { timeout: 180_000 }, async (t) => {
    const failures: string[] = [];
    for (const seed of batch) {
      const failure = await runSeed(seed);
      if (failure) failures.push(failure);
    }
    for (const failure of failures) t.comment(failure);
    t.same(failures, [], `replay one with LIGHTWELL_SIM_SEED=<seed>`);
  });
}

t.test('the seeds did what they are meant to', (t) => {
  t.comment(JSON.stringify(totals));
  for (const digest of digests) t.comment(digest);
  t.ok(totals.crashes >= seeds.length, 'every seed crashed at least once');
  t.ok(totals.commits > 0 && totals.chunksChecked > 0, 'objects were committed and read back');
  if (seeds.length >= 20) {
    t.ok(totals.faults > 0, 'faults were injected');
    t.ok(totals.indexFaults > 0, 'index commits failed');
    t.ok(totals.batchCommitFaults > 0, 'failed index commits held several child transactions');
    t.ok(totals.callersOfFailedCommits > 0, 'and their callers were answered with errors');
    t.ok(totals.fullDisks > 0, 'disks filled');
    t.equal(totals.resumed, totals.fullDisks, 'and writes resumed on each');
    t.ok(totals.engineRestarts > 0, 'engines restarted under live writers');
    t.ok(totals.unregisteredRefusals > 0, 'and refused commits until the writer registered again');
    t.ok(totals.marksLoaded > 0, 'restarted engines loaded the marks of failed fdatasyncs');
  }
  t.end();
});
