// A seeded, fault-injecting, in-memory file system behind the engine's I/O seam
// (src/util/io.ts), in the manner of TigerBeetle's testing/storage.zig.
//
// This module is a helper, not a test; tap lists it as "no tests found".
//
// Model: each file (an inode) has the bytes the process sees (`cache`, the page cache) and the
// bytes on the disk (`disk`). Writes and truncations change `cache` and are remembered as
// pending until an fdatasync of the file copies `cache` to `disk`. Names are separate: a create,
// rename or unlink changes the namespace at once, and the durable namespace only when the
// directory is fsynced. `crash()` keeps what a power cut may keep: the durable namespace, and
// for each file its disk bytes plus any subset of its pending writes (each whole, torn to a
// prefix, or lost, in any order), then answers a new `Io` for the process that restarts. The
// old one refuses everything from then on, so a write still in flight in the dead process can
// never land on the restarted one's disk.
//
// Faults, each by probability and drawn from one PRNG seeded by the test, so a failure replays
// from its seed: EIO on read and on write (a write may be torn: a prefix lands), ENOSPC on write
// (nothing lands), misdirected writes (the bytes land elsewhere in the file and the call
// succeeds), a failed fdatasync (the unsynced writes are then lost: `cache` falls back to
// `disk`, as Linux forgets dirty pages whose write-back failed, and every other open file of it
// fails its next fdatasync once, as Linux reports the error to each file description), bit flips in what a read
// returns (the disk is intact), and latency spikes (a call completes many event-loop turns
// later, which reorders completions). With a `capacity`, the disk can fill: a write or a
// truncation that would take more than the free bytes fails with ENOSPC and changes nothing, and
// `statfs` answers the figures (what the space reserve and compaction read). The index is a real
// LMDB environment elsewhere; `indexFaults` is its commit seam (src/engine/index/store.ts): a
// commit fails with ENOSPC while the disk has less than INDEX_COMMIT_BYTES free (LMDB needs
// fresh pages to commit), and with ENOSPC or EIO by probability. A commit is LMDB's, not a
// child transaction's: lmdb-js runs the callbacks of the child transactions it groups into one
// write batch together, in one stretch of the event loop, then commits them at once, and a
// failed commit fails them all. So the seam decides once per stretch (`indexCommit`, forgotten at the next microtask)
// and answers that decision to every child transaction in it; `indexCommits` keeps each
// decision, with the child transactions and the callers (`IndexCommit.callers`) that ran in it. `indexRoomNeeded` off models
// an index whose commits reuse pages freed inside its own file (after a restart, when no reader
// holds an old snapshot), which need no room on the disk. Every damage to bytes a caller was told were written is
// recorded (`damaged`), so a checker can tell a loud failure it must accept from a lost write.

import { dirname } from 'node:path';
import type { Io, IoFile } from '../../src/util/io.js';
import type { IndexFaults } from '../../src/engine/index/store.js';
import { Prng } from '../helpers/prng.js';

export { Prng };

export interface FaultProbabilities {
  readEio: number;
  writeEio: number;
  /** Of the failed writes, the share that leave a prefix behind. */
  tornShare: number;
  enospc: number;
  misdirected: number;
  syncEio: number;
  bitFlip: number;
  latencySpike: number;
  /** An index commit fails with ENOSPC, or with EIO (nothing of it applies). */
  indexEnospc: number;
  indexEio: number;
}

/** One LMDB commit as the seam decided it (see the header). */
export interface IndexCommit {
  /** 1 for the first commit the seam decided. */
  readonly id: number;
  /** The error every child transaction of the commit meets; undefined: it commits. */
  readonly fault: string | undefined;
  /** Child transactions that asked the seam. */
  children: number;
  /** Callers whose command ran in the commit (counted by the checker, see `indexCommit`). */
  callers: number;
}

/** Free bytes an index commit needs on a disk with a capacity (see the header). */
export const INDEX_COMMIT_BYTES = 4 * 1024;

export const NO_FAULTS: FaultProbabilities = {
  readEio: 0,
  writeEio: 0,
  tornShare: 0,
  enospc: 0,
  misdirected: 0,
  syncEio: 0,
  bitFlip: 0,
  latencySpike: 0,
  indexEnospc: 0,
  indexEio: 0,
};

type Pending =
  { kind: 'write'; offset: number; bytes: Buffer } | { kind: 'truncate'; size: number };

class Inode {
  cache: Buffer = Buffer.alloc(0);
  disk: Buffer = Buffer.alloc(0);
  pending: Pending[] = [];
  /** Byte ranges of this file a caller was told were written but that hold other bytes. */
  damaged: Array<{ from: number; to: number }> = [];
  /** Failed write-backs so far; each open file reports each once (Linux's errseq_t). */
  errors = 0;
}

function errno(code: string, what: string): NodeJS.ErrnoException {
  const error: NodeJS.ErrnoException = new Error(`${code}: ${what} (injected)`);
  error.code = code;
  return error;
}

function writeInto(target: Buffer, offset: number, bytes: Buffer): Buffer {
  const end = offset + bytes.length;
  const out =
    end > target.length ? Buffer.concat([target, Buffer.alloc(end - target.length)]) : target;
  bytes.copy(out, offset);
  return out;
}

function resize(target: Buffer, size: number): Buffer {
  if (size <= target.length) return Buffer.from(target.subarray(0, size));
  return Buffer.concat([target, Buffer.alloc(size - target.length)]);
}

/**
 * Event-loop turns that replay: the disk's latencies and a simulation's waits sleep on these
 * virtual turns, and a turn passes only while no outside work (the index's commits, which take
 * real time on LMDB's thread) is in flight; the outcomes of outside work are handed back only
 * once all of it has finished, in the order it began. So what runs between two turns, and in
 * which order, depends on the seed alone, not on how fast LMDB commits.
 */
export class VirtualTurns {
  private turn = 0;
  /** Sleepers by the turn they wake at, in the order they began to sleep. */
  private sleepers: Array<{ at: number; wake: () => void }> = [];
  private driving = false;
  private issued = 0;
  private running = 0;
  private finished: Array<{ order: number; deliver: () => void }> = [];

  /** Resolves once `count` turns have passed (at once for none). */
  sleep(count: number): Promise<void> {
    if (count <= 0) return Promise.resolve();
    return new Promise<void>((wake) => {
      const at = this.turn + count;
      let index = this.sleepers.length;
      while (index > 0 && (this.sleepers[index - 1] as { at: number }).at > at) index -= 1;
      this.sleepers.splice(index, 0, { at, wake });
      this.drive();
    });
  }

  /** Runs outside work; its outcome is handed back as the header says. */
  outside<T>(work: () => Promise<T>): Promise<T> {
    const order = (this.issued += 1);
    this.running += 1;
    return new Promise<T>((resolve, reject) => {
      const done = (deliver: () => void): void => {
        this.finished.push({ order, deliver });
        this.running -= 1;
      };
      this.drive();
      work().then(
        (value) => done(() => resolve(value)),
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- as thrown
        (error: unknown) => done(() => reject(error)),
      );
    });
  }

  private drive(): void {
    if (this.driving) return;
    this.driving = true;
    // Outcomes are handed back in a turn of their own, from this loop (never from LMDB's
    // callback, whose moment varies), so that they land at the same point in every run.
    const step = (): void => {
      if (this.running === 0 && this.finished.length > 0) {
        const finished = this.finished.sort((a, b) => a.order - b.order);
        this.finished = [];
        for (const { deliver } of finished) deliver();
      } else if (this.running === 0) {
        if (this.sleepers.length === 0) {
          this.driving = false;
          return;
        }
        this.turn += 1;
        while ((this.sleepers[0]?.at ?? Infinity) <= this.turn) this.sleepers.shift()?.wake();
      }
      setImmediate(step);
    };
    setImmediate(step);
  }
}

/** The disk and the faults; `io` is the current process's view of it. */
export class FaultDisk {
  readonly prng: Prng;
  /**
   * The index seam's own draws: LMDB runs a commit's callbacks at a moment of its choosing,
   * which would otherwise shift every later draw of the disk's and break the replay.
   */
  private readonly indexPrng: Prng;
  faults: FaultProbabilities;
  /** Every injected fault, in order, for the report of a failing seed. */
  readonly log: string[] = [];
  private names = new Map<string, Inode>();
  private durableNames = new Map<string, Inode>();
  private generation = 0;
  io: Io;

  /** The disk's size in bytes; undefined: it never fills, and its Io has no `statfs`. */
  readonly capacity: number | undefined;

  constructor(
    seed: number,
    faults: FaultProbabilities,
    options: { capacity?: number | undefined } = {},
  ) {
    this.prng = new Prng(seed);
    this.indexPrng = new Prng(seed ^ 0x1dec);
    this.faults = faults;
    this.capacity = options.capacity;
    this.io = this.makeIo(this.generation);
  }

  /** Bytes the files take now (what the process sees). */
  used(): number {
    let bytes = 0;
    for (const inode of new Set(this.names.values())) bytes += inode.cache.length;
    return bytes;
  }

  /** Bytes still free; Infinity without a capacity. */
  free(): number {
    return this.capacity === undefined ? Infinity : Math.max(0, this.capacity - this.used());
  }

  /** Whether an index commit needs INDEX_COMMIT_BYTES free on the disk (see the header). */
  indexRoomNeeded = true;

  /** Every index commit the seam decided, in order (see the header). */
  readonly indexCommits: IndexCommit[] = [];
  private runningCommit: IndexCommit | undefined;

  /** The commit seam of the index (see the header). */
  indexFaults(): IndexFaults {
    return {
      commit: () => {
        const commit = this.indexCommit();
        commit.children += 1;
        return commit.fault === undefined ? undefined : errno(commit.fault, 'index commit');
      },
    };
  }

  /**
   * The LMDB commit whose child transactions run in this stretch of the event loop, decided on
   * the first call in the stretch: a command's callback calls this to learn which commit it is
   * part of.
   */
  indexCommit(): IndexCommit {
    if (this.runningCommit) return this.runningCommit;
    const commit: IndexCommit = {
      id: this.indexCommits.length + 1,
      fault: this.indexFault(),
      children: 0,
      callers: 0,
    };
    this.indexCommits.push(commit);
    this.runningCommit = commit;
    queueMicrotask(() => (this.runningCommit = undefined));
    return commit;
  }

  private indexFault(): string | undefined {
    if (this.indexRoomNeeded && this.free() < INDEX_COMMIT_BYTES) {
      this.note(`index commit: ENOSPC, ${this.free()} bytes free`);
      return 'ENOSPC';
    }
    if (this.indexPrng.chance(this.faults.indexEnospc)) {
      this.note('index commit: ENOSPC');
      return 'ENOSPC';
    }
    if (this.indexPrng.chance(this.faults.indexEio)) {
      this.note('index commit: EIO');
      return 'EIO';
    }
    return undefined;
  }

  /** Fails with ENOSPC, changing nothing, when growing `inode` to `size` needs more room. */
  private room(inode: Inode, size: number, what: string): void {
    const growth = size - inode.cache.length;
    if (growth > 0 && growth > this.free()) {
      this.note(`${what}: ENOSPC, disk full`);
      throw errno('ENOSPC', what);
    }
  }

  /** A power cut: what survives is decided by the PRNG; answers the restarted process's Io. */
  crash(): Io {
    this.trace('crash');
    this.generation += 1;
    this.names = new Map(this.durableNames);
    for (const inode of new Set(this.names.values())) {
      let disk = inode.disk;
      for (const change of inode.pending) {
        const fate = this.prng.int(3);
        if (fate === 0) continue;
        if (change.kind === 'truncate') disk = resize(disk, change.size);
        else {
          const keep = fate === 1 ? change.bytes.length : this.prng.int(change.bytes.length + 1);
          disk = writeInto(disk, change.offset, change.bytes.subarray(0, keep));
        }
      }
      inode.disk = disk;
      inode.cache = Buffer.from(disk);
      inode.pending = [];
    }
    this.io = this.makeIo(this.generation);
    return this.io;
  }

  /** Damage recorded for the file at `path` (bytes a caller was told hold what they do not). */
  damageOf(path: string): ReadonlyArray<{ from: number; to: number }> {
    return this.names.get(path)?.damaged ?? [];
  }

  /** Paths that exist now. */
  paths(): string[] {
    return [...this.names.keys()];
  }

  sizeOf(path: string): number | undefined {
    return this.names.get(path)?.cache.length;
  }

  private note(what: string): void {
    this.log.push(what);
    this.trace(what);
  }

  /** Every operation, kept only when LIGHTWELL_SIM_TRACE is set (to debug a failing seed). */
  readonly traced: string[] = [];

  trace(what: string): void {
    if (process.env['LIGHTWELL_SIM_TRACE']) this.traced.push(`g${this.generation} ${what}`);
  }

  /** Operations begun on the disk so far (every call of every Io). */
  private ops = 0;
  private readonly watchers: Array<{ at: number; run: () => void }> = [];

  /**
   * Runs `run` synchronously as the `count`-th operation from now begins, so that what a test
   * does then happens at the same point of the disk's work in every run of its seed (a number of
   * event-loop turns would not: the index's commits take real time). Answers a function that
   * cancels it and tells whether it had run.
   */
  afterOps(count: number, run: () => void): () => boolean {
    const watcher = { at: this.ops + Math.max(1, count), run };
    this.watchers.push(watcher);
    return () => {
      const at = this.watchers.indexOf(watcher);
      if (at < 0) return true;
      this.watchers.splice(at, 1);
      return false;
    };
  }

  private begin(): void {
    this.ops += 1;
    for (const watcher of [...this.watchers]) {
      if (watcher.at > this.ops) continue;
      this.watchers.splice(this.watchers.indexOf(watcher), 1);
      watcher.run();
    }
  }

  /** Completes after 0-2 event-loop turns, or after a spike of 20-60. */
  private async latency(): Promise<void> {
    let turns = this.prng.int(3);
    if (this.prng.chance(this.faults.latencySpike)) turns += 20 + this.prng.int(40);
    if (this.turns) return this.turns.sleep(turns);
    for (let i = 0; i < turns; i += 1) await new Promise<void>((resolve) => setImmediate(resolve));
  }

  /** Virtual turns for the latencies (a simulation's, so that it replays); real ones without. */
  turns: VirtualTurns | undefined;

  private makeIo(generation: number): Io {
    const alive = (): void => {
      if (generation !== this.generation) throw errno('EIO', 'the process crashed');
    };
    const step = async (): Promise<void> => {
      alive();
      this.begin();
      alive();
      await this.latency();
      alive();
    };
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the Io's methods are its own
    const disk = this;
    const capacity = this.capacity;
    const statfs =
      capacity === undefined
        ? {}
        : {
            async statfs() {
              await step();
              return { totalBytes: capacity, freeBytes: disk.free() };
            },
          };
    return {
      native: false,
      ...statfs,
      async open(path, flags) {
        await step();
        if (typeof flags === 'number') throw errno('EINVAL', 'no direct I/O here');
        let inode = disk.names.get(path);
        if (flags.startsWith('w') || flags.startsWith('a')) {
          if (inode && flags.includes('x')) throw errno('EEXIST', path);
          if (!inode || flags === 'w') {
            inode = new Inode();
            disk.names.set(path, inode);
          }
        } else if (!inode) throw errno('ENOENT', path);
        return disk.file(inode, path, step);
      },
      async pread(file, target, offset, length, position) {
        return (await file.read(target, offset, length, position)).bytesRead;
      },
      async rename(from, to) {
        await step();
        const inode = disk.names.get(from);
        if (!inode) throw errno('ENOENT', from);
        disk.names.delete(from);
        disk.names.set(to, inode);
      },
      async unlink(path) {
        await step();
        if (!disk.names.delete(path)) throw errno('ENOENT', path);
      },
      async readdir(path) {
        await step();
        return disk
          .paths()
          .filter((name) => dirname(name) === path)
          .map((name) => name.slice(path.length + 1));
      },
      async size(path) {
        await step();
        const inode = disk.names.get(path);
        if (!inode) throw errno('ENOENT', path);
        return inode.cache.length;
      },
      async syncDirectory(path) {
        await step();
        if (disk.prng.chance(disk.faults.syncEio)) {
          disk.note(`fsync of directory ${path}: EIO`);
          throw errno('EIO', `fsync ${path}`);
        }
        for (const [name, inode] of [...disk.durableNames]) {
          if (dirname(name) === path && disk.names.get(name) !== inode)
            disk.durableNames.delete(name);
        }
        for (const [name, inode] of disk.names)
          if (dirname(name) === path) disk.durableNames.set(name, inode);
      },
    };
  }

  private file(inode: Inode, path: string, step: () => Promise<void>): IoFile {
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the file's methods are its own
    const disk = this;
    let seen = inode.errors;
    const write = async (bytes: Buffer, position: number): Promise<number> => {
      await step();
      const { faults, prng } = disk;
      disk.room(inode, position + bytes.length, `write ${path}@${position}+${bytes.length}`);
      if (prng.chance(faults.enospc)) {
        disk.note(`write ${path}@${position}+${bytes.length}: ENOSPC`);
        throw errno('ENOSPC', path);
      }
      if (prng.chance(faults.writeEio)) {
        const keep = prng.chance(faults.tornShare) ? prng.int(bytes.length) : 0;
        disk.note(`write ${path}@${position}+${bytes.length}: EIO after ${keep} bytes`);
        if (keep > 0) disk.apply(inode, position, bytes.subarray(0, keep));
        throw errno('EIO', path);
      }
      if (bytes.length > 0 && prng.chance(faults.misdirected)) {
        const target = prng.int(inode.cache.length + 1);
        disk.note(`write ${path}@${position}+${bytes.length}: misdirected to ${target}`);
        disk.apply(inode, target, bytes);
        inode.damaged.push({ from: position, to: position + bytes.length });
        inode.damaged.push({ from: target, to: target + bytes.length });
        return bytes.length;
      }
      disk.apply(inode, position, bytes);
      disk.trace(`write ${path}@${position}+${bytes.length}`);
      return bytes.length;
    };
    const sync = async (): Promise<void> => {
      await step();
      if (disk.prng.chance(disk.faults.syncEio)) {
        disk.note(`fdatasync ${path}: EIO, ${inode.pending.length} writes lost`);
        inode.cache = Buffer.from(inode.disk);
        inode.pending = [];
        inode.errors += 1;
        seen = inode.errors;
        throw errno('EIO', `fdatasync ${path}`);
      }
      if (seen < inode.errors) {
        seen = inode.errors;
        throw errno('EIO', `fdatasync ${path}: an earlier write-back failed`);
      }
      inode.disk = Buffer.from(inode.cache);
      inode.pending = [];
      disk.trace(`fdatasync ${path} size ${inode.disk.length}`);
    };
    return {
      fd: -1,
      async read(buffer, offset, length, position) {
        await step();
        if (disk.prng.chance(disk.faults.readEio)) {
          disk.note(`read ${path}@${position}+${length}: EIO`);
          throw errno('EIO', path);
        }
        const end = Math.min(inode.cache.length, position + length);
        const bytesRead = Math.max(0, end - position);
        if (bytesRead > 0) inode.cache.copy(buffer, offset, position, end);
        if (bytesRead > 0 && disk.prng.chance(disk.faults.bitFlip)) {
          const at = disk.prng.int(bytesRead);
          disk.note(`read ${path}@${position}+${length}: bit flip at ${position + at}`);
          (buffer[offset + at] as number) ^= 1 << disk.prng.int(8);
        }
        return { bytesRead };
      },
      async write(buffer, offset, length, position) {
        const bytesWritten = await write(
          Buffer.from(buffer.subarray(offset, offset + length)),
          position,
        );
        return { bytesWritten };
      },
      async writev(buffers, position) {
        return { bytesWritten: await write(Buffer.concat(buffers), position) };
      },
      datasync: sync,
      sync,
      async truncate(size) {
        await step();
        disk.room(inode, size, `truncate ${path} to ${size}`);
        inode.cache = resize(inode.cache, size);
        inode.pending.push({ kind: 'truncate', size });
        disk.trace(`truncate ${path} ${size}`);
      },
      async stat() {
        await step();
        return { size: inode.cache.length };
      },
      close: async () => undefined,
    };
  }

  private apply(inode: Inode, position: number, bytes: Buffer): void {
    inode.cache = writeInto(inode.cache, position, bytes);
    inode.pending.push({ kind: 'write', offset: position, bytes: Buffer.from(bytes) });
  }
}
