// The ordered stage: the per-upload work that must see a body's bytes in order, run on
// dedicated threads that a gateway process's listeners share (one for every two listeners, see
// gateway.ts), so that neither their event loops nor the pool pays for it.
//
// For each large upload it runs the content-defined chunker (cut points) and the whole-object
// checksums (CRC32C always, plus those the client sent). Blocks are read in place from the
// listener's body arena: a thread holds every listener's arena, and each listener talks to its
// thread over a MessagePort of its own, which names the arena. The thread answers each block with
// the cut points found so far; the listener turns them into store tasks for the pool, which run
// in parallel.
//
// Shared, not one per listener: a thread costs about 8 MiB of resident memory (a JavaScript heap)
// and keeps up with 1.8-2.8 GB/s of uploads that ask for CRC32C alone (the gear scan in
// WebAssembly and CRC32C; bench/micro/workers/ordered-stage.bench.ts).

import {
  MessageChannel,
  Worker,
  isMainThread,
  parentPort,
  workerData,
  type MessagePort,
} from 'node:worker_threads';
import { Chunker, GEAR_INT32 } from '../engine/chunker.js';
import { GearKernel } from '../engine/gear-kernel.js';
import { createMultiHasher, type DigestAlg, type MultiHasher } from '../engine/checksums.js';
import assert from 'node:assert';
import { toWire, fromWire, Internal, type WireError } from '../util/errors.js';

/** What the thread needs of a body arena (body-arena.ts): its bytes and, when it has one, its
 * WebAssembly memory, on which the chunker's gear scan runs in place. */
export interface OrderedStageArena {
  readonly buffer: SharedArrayBuffer;
  readonly memory?: WebAssembly.Memory | undefined;
  readonly kernelOffset: number;
}

interface ThreadData {
  readonly orderedStage: true;
  readonly arenas: readonly OrderedStageArena[];
  readonly blockBytes: number;
}

/** From the gateway to the thread: a listener's port, and the arena its blocks name. */
interface Connect {
  readonly arena: number;
  readonly port: MessagePort;
}

type Command =
  | { op: 'begin'; id: number; algs: DigestAlg[]; avgBytes: number }
  | { op: 'block'; id: number; block: number; length: number }
  | { op: 'end'; id: number }
  | { op: 'drop'; id: number };

/** The thread's first message: whether the chunker scans with the WebAssembly kernel. */
interface Started {
  kernel: boolean;
}

type Reply =
  | { id: number; cuts: number[] }
  | { id: number; cuts: number[]; checksums: Record<string, string> }
  | { id: number; error: WireError };

interface UploadState {
  /** Rejects when the upload cannot start (a chunk size or checksum refused) or has failed. */
  started: Promise<{ chunker: Chunker; hasher: MultiHasher<DigestAlg> }>;
  /** Serialises this upload's commands behind its start. */
  tail: Promise<void>;
}

/** An arena as the thread reads it. */
interface ArenaView {
  readonly bytes: Buffer;
  readonly kernel: GearKernel | undefined;
}

if (!isMainThread && parentPort && (workerData as Partial<ThreadData> | undefined)?.orderedStage) {
  const { arenas, blockBytes } = workerData as ThreadData;
  const views: ArenaView[] = arenas.map((arena) => ({
    bytes: Buffer.from(arena.buffer),
    kernel: arena.memory && new GearKernel(arena.memory, arena.kernelOffset, GEAR_INT32),
  }));
  parentPort.postMessage({
    kernel: views.every((view) => view.kernel !== undefined),
  } satisfies Started);
  parentPort.on('message', ({ arena, port }: Connect) =>
    serveListener(port, views[arena] as ArenaView, blockBytes),
  );
}

/** In the thread: one listener's uploads, whose ids are its own. */
function serveListener(port: MessagePort, arena: ArenaView, blockBytes: number): void {
  const uploads = new Map<number, UploadState>();
  port.on('message', (command: Command) => {
    if (command.op === 'begin') {
      // An upload that cannot start fails its next command (which awaits the start), never the
      // thread, which serves other uploads; one dropped before it sends a command fails nothing.
      const started = (async () => ({
        chunker: new Chunker({ avgBytes: command.avgBytes, kernel: arena.kernel }),
        hasher: await createMultiHasher(command.algs),
      }))();
      uploads.set(command.id, {
        started,
        tail: started.then(
          () => undefined,
          () => undefined,
        ),
      });
      return;
    }
    const state = uploads.get(command.id);
    if (!state) return;
    if (command.op === 'drop') {
      uploads.delete(command.id);
      return;
    }
    state.tail = state.tail
      .then(async () => {
        const { chunker, hasher } = await state.started;
        if (command.op === 'block') {
          const view = arena.bytes.subarray(
            command.block * blockBytes,
            command.block * blockBytes + command.length,
          );
          hasher.update(view);
          port.postMessage({ id: command.id, cuts: chunker.push(view) } satisfies Reply);
        } else {
          uploads.delete(command.id);
          port.postMessage({
            id: command.id,
            cuts: chunker.finish(),
            checksums: hasher.digest(),
          } satisfies Reply);
        }
      })
      .catch((error: unknown) => {
        // Every later command of the upload answers the same error (the listener may have sent
        // more before it heard of this one, and waits for each answer); its end forgets it.
        state.started = Promise.reject(error instanceof Error ? error : Internal(String(error)));
        state.started.catch(() => {});
        if (command.op === 'end') uploads.delete(command.id);
        port.postMessage({ id: command.id, error: toWire(error) } satisfies Reply);
      });
  });
}

export interface OrderedUpload {
  /** Feeds the next block (in body order); resolves with the cut points it revealed. */
  block(block: number, length: number): Promise<number[]>;
  /** Ends the body; resolves with the last cut points and the whole-object checksums. */
  end(): Promise<{ cuts: number[]; checksums: Record<string, string> }>;
  drop(): void;
}

/** An ordered-stage thread of the gateway process, which its first thread starts and ends. */
export class OrderedStageThread {
  private readonly worker: Worker;
  private readonly arenaCount: number;
  private closing = false;
  private ended = false;
  /** Resolves once the thread runs: true when its gear scan runs in WebAssembly on the arenas. */
  readonly kernel: Promise<boolean>;
  /**
   * Rejects when the thread fails (an exception that nothing caught) or ends unasked; the
   * gateway then stops cleanly and fails (the uploads that were waiting on it fail at once, see
   * `OrderedStage`). Without a handler, the thread's error would end the gateway's main thread
   * while listener threads still hold their sockets, which aborts the process.
   */
  readonly failed: Promise<never>;

  /** `arenas`: every listener's upload arena, by listener number. */
  constructor(options: { arenas: readonly OrderedStageArena[]; blockBytes: number }) {
    this.worker = new Worker(new URL(import.meta.url), {
      workerData: {
        orderedStage: true,
        arenas: options.arenas.map((arena) => ({
          buffer: arena.buffer,
          memory: arena.memory,
          kernelOffset: arena.kernelOffset,
        })),
        blockBytes: options.blockBytes,
      } satisfies ThreadData,
    });
    this.arenaCount = options.arenas.length;
    this.kernel = new Promise((resolve) =>
      this.worker.once('message', (message: Started) => resolve(message.kernel)),
    );
    this.failed = new Promise<never>((_, reject) => {
      this.worker.once('error', (error: Error) =>
        reject(Internal(`ordered-stage thread failed: ${error.stack ?? error.message}`)),
      );
      this.worker.once('exit', (code: number) => {
        this.ended = true;
        if (!this.closing) reject(Internal(`ordered-stage thread ended (code ${code})`));
      });
    });
    // Observed by whoever runs the gateway (startGateway), not necessarily at once.
    this.failed.catch(() => {});
    this.worker.unref();
  }

  /** A port for the uploads of the listener whose arena is `arena` (see `OrderedStage`). */
  connect(arena: number): MessagePort {
    assert(Number.isInteger(arena) && arena >= 0 && arena < this.arenaCount, 'no such arena');
    const channel = new MessageChannel();
    // A thread that has ended would drop the port unseen: it is closed instead, so that the
    // uploads sent over its other end fail at once (`OrderedStage`).
    if (this.ended) channel.port1.close();
    else this.worker.postMessage({ arena, port: channel.port1 } satisfies Connect, [channel.port1]);
    return channel.port2;
  }

  async close(): Promise<void> {
    this.closing = true;
    await this.worker.terminate();
  }
}

interface Waiter {
  resolve(reply: Reply): void;
  reject(error: unknown): void;
}

/**
 * A listener's handle on the ordered-stage thread, over the port `connect` gave it. When the
 * port closes (the thread ended, or the listener stops), every upload waiting on it fails, and
 * so does every later one: none waits for an answer that cannot come.
 */
export class OrderedStage {
  private readonly waiting = new Map<number, Waiter[]>();
  private nextId = 1;
  private ended = false;

  constructor(private readonly port: MessagePort) {
    port.on('message', (message: Reply) => this.waiting.get(message.id)?.shift()?.resolve(message));
    port.once('close', () => {
      this.ended = true;
      for (const waiters of this.waiting.values())
        for (const waiter of waiters.splice(0)) waiter.reject(ORDERED_STAGE_ENDED());
    });
    // Like the thread, the port never keeps a gateway alive.
    port.unref();
  }

  begin(algs: readonly DigestAlg[], avgBytes: number): OrderedUpload {
    const id = this.nextId++;
    this.waiting.set(id, []);
    this.port.postMessage({ op: 'begin', id, algs: [...algs], avgBytes } satisfies Command);
    const expect = (): Promise<Reply> =>
      new Promise((resolve, reject) => {
        if (this.ended) reject(ORDERED_STAGE_ENDED());
        else this.waiting.get(id)?.push({ resolve, reject });
      });
    const settle = (reply: Reply): Exclude<Reply, { error: WireError }> => {
      if ('error' in reply) throw fromWire(reply.error);
      return reply;
    };
    return {
      block: async (block, length) => {
        const reply = expect();
        this.port.postMessage({ op: 'block', id, block, length } satisfies Command);
        return settle(await reply).cuts;
      },
      end: async () => {
        const reply = expect();
        this.port.postMessage({ op: 'end', id } satisfies Command);
        const done = settle(await reply);
        this.waiting.delete(id);
        return { cuts: done.cuts, checksums: 'checksums' in done ? done.checksums : {} };
      },
      drop: () => {
        this.waiting.delete(id);
        this.port.postMessage({ op: 'drop', id } satisfies Command);
      },
    };
  }

  close(): void {
    this.port.close();
  }
}

const ORDERED_STAGE_ENDED = (): Error => Internal('the ordered stage ended before the upload did');
