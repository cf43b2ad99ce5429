// The ordered stage: the per-upload work that must see a body's bytes in order, run on one
// dedicated thread per gateway so that neither the event loop nor the pool pays for it.
//
// For each large upload it runs the content-defined chunker (cut points) and the whole-object
// checksums (CRC32C always, plus those the client sent). Blocks are read in place from the body
// arena. The thread answers each block with the cut points found so far; the gateway turns
// them into store tasks for the pool, which run in parallel.

import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { Chunker, GEAR_INT32 } from '../engine/chunker.js';
import { GearKernel } from '../engine/gear-kernel.js';
import { createMultiHasher, type ChecksumAlg, type MultiHasher } from '../engine/checksums.js';
import { toWire, fromWire, type WireError } from '../util/errors.js';

/** What the thread needs of the body arena (body-arena.ts): its bytes and, when it has one, its
 * WebAssembly memory, on which the chunker's gear scan runs in place. */
interface OrderedStageArena {
  readonly buffer: SharedArrayBuffer;
  readonly memory: WebAssembly.Memory | undefined;
  readonly kernelOffset: number;
}

type Command =
  | { op: 'begin'; id: number; algs: ChecksumAlg[]; avgBytes: number }
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
  chunker: Chunker;
  hasher: Promise<MultiHasher>;
  /** Serialises this upload's commands behind the hasher's creation. */
  tail: Promise<void>;
}

if (
  !isMainThread &&
  parentPort &&
  (workerData as { orderedStage?: boolean } | undefined)?.orderedStage
) {
  const port = parentPort;
  const { arena, blockBytes } = workerData as { arena: OrderedStageArena; blockBytes: number };
  const bytes = Buffer.from(arena.buffer);
  const kernel = arena.memory && new GearKernel(arena.memory, arena.kernelOffset, GEAR_INT32);
  const uploads = new Map<number, UploadState>();
  port.postMessage({ kernel: kernel !== undefined } satisfies Started);
  port.on('message', (command: Command) => {
    if (command.op === 'begin') {
      const hasher = createMultiHasher(command.algs);
      uploads.set(command.id, {
        chunker: new Chunker({ avgBytes: command.avgBytes, kernel }),
        hasher,
        tail: hasher.then(() => undefined),
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
        const hasher = await state.hasher;
        if (command.op === 'block') {
          const view = bytes.subarray(
            command.block * blockBytes,
            command.block * blockBytes + command.length,
          );
          hasher.update(view);
          port.postMessage({ id: command.id, cuts: state.chunker.push(view) } satisfies Reply);
        } else {
          uploads.delete(command.id);
          port.postMessage({
            id: command.id,
            cuts: state.chunker.finish(),
            checksums: hasher.digest(),
          } satisfies Reply);
        }
      })
      .catch((error: unknown) => {
        uploads.delete(command.id);
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

/** The gateway's handle on the ordered-stage thread. */
export class OrderedStage {
  private readonly worker: Worker;
  /** Resolves once the thread runs: true when its gear scan runs in WebAssembly on the arena. */
  readonly kernel: Promise<boolean>;
  private readonly waiting = new Map<number, Array<{ resolve(reply: Reply): void }>>();
  private nextId = 1;

  constructor(options: { arena: OrderedStageArena; blockBytes: number }) {
    this.worker = new Worker(new URL(import.meta.url), {
      workerData: {
        orderedStage: true,
        arena: {
          buffer: options.arena.buffer,
          memory: options.arena.memory,
          kernelOffset: options.arena.kernelOffset,
        } satisfies OrderedStageArena,
        blockBytes: options.blockBytes,
      },
    });
    let started!: (kernel: boolean) => void;
    this.kernel = new Promise((resolve) => (started = resolve));
    this.worker.on('message', (message: Reply | Started) => {
      if ('kernel' in message) started(message.kernel);
      else this.waiting.get(message.id)?.shift()?.resolve(message);
    });
    this.worker.unref();
  }

  begin(algs: readonly ChecksumAlg[], avgBytes: number): OrderedUpload {
    const id = this.nextId++;
    this.waiting.set(id, []);
    this.worker.postMessage({ op: 'begin', id, algs: [...algs], avgBytes } satisfies Command);
    const expect = (): Promise<Reply> =>
      new Promise((resolve) => this.waiting.get(id)?.push({ resolve }));
    const settle = (reply: Reply): Exclude<Reply, { error: WireError }> => {
      if ('error' in reply) throw fromWire(reply.error);
      return reply;
    };
    return {
      block: async (block, length) => {
        const reply = expect();
        this.worker.postMessage({ op: 'block', id, block, length } satisfies Command);
        return settle(await reply).cuts;
      },
      end: async () => {
        const reply = expect();
        this.worker.postMessage({ op: 'end', id } satisfies Command);
        const done = settle(await reply);
        this.waiting.delete(id);
        return { cuts: done.cuts, checksums: 'checksums' in done ? done.checksums : {} };
      },
      drop: () => {
        this.waiting.delete(id);
        this.worker.postMessage({ op: 'drop', id } satisfies Command);
      },
    };
  }

  async close(): Promise<void> {
    await this.worker.terminate();
  }
}
