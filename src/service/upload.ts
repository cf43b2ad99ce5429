// The streaming PUT pipeline: socket → arena blocks → (ordered stage: cut points, object
// checksums) → pool store tasks in parallel → manifest.
//
// Memory is bounded twice: by the arena (all uploads) and by `BLOCKS_PER_UPLOAD_MAX` (one
// upload cannot hold the whole arena). An upload is admitted with a reserve of blocks (see
// `reserveBlocks`) and borrows more while the arena has free blocks and no upload waits for
// admission. When it can only take blocks from the last `PAUSE_SLACK_BLOCKS` of its reserve it
// pauses its socket. uWebSockets.js goes on reading until a read comes back short: with the
// gateway's capped receive buffer (`limits.socket_receive_bytes`) that is the rest of one read,
// without it up to what the kernel had buffered or far more (docs/architecture.md). Those
// bytes land in the slack, then in free blocks; the rest waits in heap copies (`UploadStats`
// counts them). A body no larger than one block is one chunk: a single store task that also
// computes the object checksums. Nothing here commits: the caller commits the manifest after
// verifying the checksums, so a failed or aborted upload leaves only unreferenced records
// (garbage).

import assert from 'node:assert';
import { hash } from 'node:crypto';
import type { BodyArena } from './body-arena.js';
import type { OrderedStage, OrderedUpload } from '../workers/ordered-stage.js';
import {
  tenantKeysFrom,
  type StoreTask,
  type StoreResult,
  type Outcome,
  type TenantKeyMaterial,
  type Slice,
  type TaskRunner,
} from '../workers/protocol.js';
import type { BodySource } from './body.js';
import type { ManifestChunk } from '../engine/ops/objects.js';
import { createMultiHasher, type DigestAlg } from '../engine/checksums.js';
import { BadRequest, fromWire } from '../util/errors.js';
import {
  Failed,
  storeChunk,
  storeChunks,
  type ChunkStoreDeps,
  type ChunkToStore,
} from '../workers/chunk-store.js';
import type { TenantKeys } from '../engine/chunk-codec.js';
import type { UploadPins } from './upload-pins.js';

/** TenantKeys by the material they were made from (the Authenticator keeps one per tenant). */
const tenantKeysByMaterial = new WeakMap<TenantKeyMaterial, TenantKeys>();

/** The gateway thread's TenantKeys of `material`, made once per material, not per request. */
export function tenantKeysOf(material: TenantKeyMaterial): TenantKeys {
  let keys = tenantKeysByMaterial.get(material);
  if (!keys) {
    keys = tenantKeysFrom(material);
    tenantKeysByMaterial.set(material, keys);
  }
  return keys;
}

/** The most blocks one upload owns: those holding its bytes plus its unused reserve. */
const BLOCKS_PER_UPLOAD_MAX = 24;
/**
 * Reserve blocks an upload keeps unused for the bytes uWebSockets.js delivers after `pause()`:
 * under 512 KiB with the capped receive buffer; with the kernel's autotuning, up to the receive
 * queue (measured on loopback: 2 MiB on average, up to 7.5 MiB, and more from a sender on the
 * same machine).
 */
const PAUSE_SLACK_BLOCKS = 4;
/**
 * A paused upload reads again once it can take this many blocks beyond its slack, so that each
 * pause moves several blocks, not one.
 */
const RESUME_GAP_BLOCKS = 6;

/**
 * The blocks an upload is admitted with and keeps for its whole life: a chunk of the largest
 * size (4 × average) wherever it starts, the pause slack and the resume gap; never more than
 * the body needs. With all of it free again except the blocks of an unfinished chunk, a paused
 * upload can always resume.
 */
export function reserveBlocks(
  contentLength: number,
  chunkAvgBytes: number,
  blockBytes: number,
): number {
  const chunkBlocks = Math.ceil((4 * chunkAvgBytes) / blockBytes) + 2;
  const bodyBlocks = Math.max(1, Math.ceil(contentLength / blockBytes));
  return Math.min(bodyBlocks, chunkBlocks + PAUSE_SLACK_BLOCKS + RESUME_GAP_BLOCKS);
}

/** Counters over all uploads of a gateway (logged at debug level). */
export class UploadStats {
  uploads = 0;
  bodyBytes = 0;
  /** Uploads that waited for their reserve (socket paused before the first byte). */
  admissionWaits = 0;
  pauses = 0;
  /** Body bytes parked in heap copies: before admission, or beyond an upload's slack. */
  parkedBytes = 0;
  /** Bytes parked now, and the most at any time. */
  parkedNow = 0;
  parkedPeak = 0;
  /** Of `parkedBytes`, those that arrived before the upload was admitted. */
  parkedWaiting = 0;
  /** The most bytes one upload had parked at once. */
  parkedUploadPeak = 0;
}

export interface UploadServices {
  readonly arena: BodyArena;
  readonly pool: TaskRunner;
  readonly ordered: OrderedStage;
  readonly chunkAvgBytes: number;
  /** Stores chunks on the gateway's own thread (small ones, see INLINE_CHUNK_BYTES_MAX). */
  readonly inline: ChunkStoreDeps;
  readonly stats: UploadStats;
  /** The segments unfinished uploads wrote to, reported to the engine (upload-pins.ts). */
  readonly pins: UploadPins;
}

/** Chunks up to this size are stored without the pool: the hand-off costs more than the work. */
export const INLINE_CHUNK_BYTES_MAX = 64 * 1024;

export interface ReceivedBody {
  readonly chunks: ManifestChunk[];
  readonly checksums: Record<string, string>;
  readonly compressed: boolean;
  /**
   * The entity tag: the hex MD5 of the body when `algs` asked for MD5 (S3 writes), else
   * `etagOf` (native writes keep theirs). MD5 is never among `checksums`.
   */
  readonly etag: string;
  /** The body's MD5 digest, when `algs` asked for it (checked against a Content-MD5). */
  readonly md5?: Buffer;
  /**
   * Lets compaction have the segments the chunks were written to: the caller calls it once the
   * commit has settled, whatever its outcome (committed chunks are then held by the index).
   */
  readonly release: () => void;
}

/** Starts receiving at once (uWS needs `onData` before the handler's first await). */
export interface UploadInput {
  /** The body, read as the arena admits it (paused while it cannot). */
  readonly source: BodySource;
  readonly keys: TenantKeyMaterial;
  readonly contentLength: number;
  readonly algs: readonly DigestAlg[];
  /**
   * Bytes wait (socket paused) until this settles; a rejection ends the upload with that error
   * and the rest of the body is read and discarded, or handed to a `Divert`'s sink.
   */
  readonly gate?: Promise<unknown>;
}

/** Where a diverted body goes: every byte in order, then one `end`. */
export interface BodySink {
  write(bytes: Uint8Array): void;
  /** The whole body was written, or it never will be (`error`: short, long or abandoned). */
  end(error?: unknown): void;
}

/**
 * A gate's rejection that ends the upload without storing anything and hands the whole body to
 * `sink` instead of discarding it (an idempotent replay checks its body this way).
 */
export class Divert {
  constructor(readonly sink: BodySink) {}
}

export function receiveBody(services: UploadServices, input: UploadInput): Promise<ReceivedBody> {
  return new BodyReceiver(services, input).result;
}

/** A body whole in memory, for `storeWhole`. */
export interface WholeInput {
  /** At most INLINE_CHUNK_BYTES_MAX bytes, not changed until the promise settles. */
  readonly bytes: Buffer;
  readonly keys: TenantKeyMaterial;
  readonly algs: readonly DigestAlg[];
}

/**
 * Stores a body that is already whole in memory and small enough for one inline chunk (the
 * ingest stream's small objects, complete in their first frame): one store on this thread, with
 * the object checksums, and none of the arena, admission or ordered-stage steps a streamed body
 * needs. What it resolves with is what `receiveBody` resolves with for the same bytes.
 */
export async function storeWhole(
  services: UploadServices,
  input: WholeInput,
): Promise<ReceivedBody> {
  const { bytes } = input;
  assert(bytes.length <= INLINE_CHUNK_BYTES_MAX, 'storeWhole takes bodies of one inline chunk');
  services.stats.uploads += 1;
  services.stats.bodyBytes += bytes.length;
  if (bytes.length === 0) {
    const hasher = await createMultiHasher(input.algs);
    return receivedOf([], hasher.digest(), false, 0, () => undefined);
  }
  const result = await storeChunk(services.inline, {
    keys: tenantKeysOf(input.keys),
    slices: [bytes],
    plainLength: bytes.length,
    objectChecksums: input.algs,
  });
  return receivedOfStored(services, result);
}

/**
 * `storeWhole` of many bodies at once (the small objects of an ingest stream's turn): their
 * records are appended in one pass and waited for together (chunk-store.ts `storeChunks`).
 * Answers, in input order, what `storeWhole` would resolve each with, or a `Failed` with what
 * it would reject with.
 */
export async function storeWholeBatch(
  services: UploadServices,
  inputs: readonly WholeInput[],
): Promise<Array<ReceivedBody | Failed>> {
  const results = new Array<ReceivedBody | Failed>(inputs.length);
  const stored: ChunkToStore[] = [];
  const storedAt: number[] = [];
  for (let i = 0; i < inputs.length; i += 1) {
    const input = inputs[i] as WholeInput;
    assert(input.bytes.length <= INLINE_CHUNK_BYTES_MAX, 'a batch takes bodies of one chunk');
    services.stats.uploads += 1;
    services.stats.bodyBytes += input.bytes.length;
    if (input.bytes.length === 0) {
      // Rare (no record to write): the single path, awaited here.
      results[i] = await storeWhole(services, input).catch((error: unknown) => new Failed(error));
      services.stats.uploads -= 1;
      continue;
    }
    stored.push({
      keys: tenantKeysOf(input.keys),
      bytes: input.bytes,
      objectChecksums: input.algs,
    });
    storedAt.push(i);
  }
  const outcomes = await storeChunks(services.inline, stored);
  for (let n = 0; n < outcomes.length; n += 1) {
    const outcome = outcomes[n] as StoreResult | Failed;
    const at = storedAt[n] as number;
    results[at] = outcome instanceof Failed ? outcome : receivedOfStored(services, outcome);
  }
  return results;
}

/** The ReceivedBody of one stored chunk (`storeWhole`), holding the segment it wrote to. */
function receivedOfStored(services: UploadServices, result: StoreResult): ReceivedBody {
  assert(result.checksums !== undefined, 'a store with object checksums returns them');
  const chunk: ManifestChunk = { id: Buffer.from(result.chunkId), plainLength: result.plainLength };
  const segmentId = result.location?.segmentId;
  if (result.location) chunk.location = result.location;
  if (segmentId !== undefined) services.pins.hold(segmentId);
  let pinned = segmentId !== undefined;
  const release = (): void => {
    if (!pinned) return;
    pinned = false;
    services.pins.release(segmentId as number);
  };
  return receivedOf([chunk], result.checksums, result.compressed, result.plainLength, release);
}

/** A ReceivedBody of stored chunks and their object checksums (MD5, if any, taken out). */
function receivedOf(
  chunks: ManifestChunk[],
  checksums: Readonly<Record<string, string>>,
  compressed: boolean,
  size: number,
  release: () => void,
): ReceivedBody {
  const objectChecksums = { ...checksums };
  const md5Base64 = objectChecksums['MD5'];
  delete objectChecksums['MD5'];
  const md5 = md5Base64 === undefined ? undefined : Buffer.from(md5Base64, 'base64');
  return {
    chunks,
    checksums: objectChecksums,
    compressed,
    etag: md5 ? `"${md5.toString('hex')}"` : etagOf(chunks, size),
    ...(md5 ? { md5 } : {}),
    release,
  };
}

class BodyReceiver {
  readonly result: Promise<ReceivedBody>;
  private resolve!: (body: ReceivedBody) => void;
  private reject!: (error: unknown) => void;
  private failed = false;
  private readonly blockBytes: number;
  private readonly single: boolean;
  /** Arena block of each body block, in body order; -1 once released. */
  private readonly blocks: number[] = [];
  private readonly blockTasks: number[] = [];
  private readonly blockOrdered: boolean[] = [];
  private used = 0;
  private received = 0;
  private lastSeen = false;
  /** Bytes that have no block yet, in body order (see `park`). */
  private readonly overflow: Uint8Array[] = [];
  private parkedLength = 0;
  private waitingForBlock = false;
  private paused = false;
  /** Reading is paused because the upload went past its share of blocks (see `throttle`). */
  private throttled = false;
  private held = 0;
  /** Blocks of this upload's reserve that it holds unused (see body-arena.ts). */
  private readonly spare: number[] = [];
  private reserve = 1;
  private lastCut = 0;
  private sentToOrdered = 0;
  private finished = false;
  private finishing = false;
  /** Wakes `nextBlock` when this upload holds fewer blocks than its share. */
  private ownBlockFreed: (() => void) | undefined;
  private readonly stored: Array<Promise<StoreResult>> = [];
  /** Segments this upload's records were written to, held in `services.pins` (one each). */
  private readonly pinned: number[] = [];
  private pinsReleased = false;
  private readonly ordered: OrderedUpload | undefined;
  /** Takes the body's bytes once a gate diverted it (see `Divert`). */
  private sink: BodySink | undefined;
  /** What ended the upload, once it failed. */
  private failure: unknown;

  constructor(
    private readonly services: UploadServices,
    private readonly input: UploadInput,
  ) {
    this.result = new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    this.result.catch(() => undefined);
    this.blockBytes = services.arena.blockBytes;
    this.single = input.contentLength <= this.blockBytes;
    if (!this.single) this.ordered = services.ordered.begin(input.algs, services.chunkAvgBytes);
    input.source.onAbort(() => {
      // A body already received belongs to the route, which commits it and then releases its
      // pins (ReceivedBody.release), whether or not the client waits for the answer.
      if (this.finished) return;
      const error = BadRequest('the client went away before the body was complete');
      if (this.sink) this.endSink(error);
      else this.fail(error);
    });
    if (input.contentLength === 0) {
      void (input.gate ?? Promise.resolve()).then(
        () => this.finishEmpty(),
        (error: unknown) => this.fail(error),
      );
      return;
    }
    this.reserve = this.single
      ? 1
      : reserveBlocks(input.contentLength, services.chunkAvgBytes, this.blockBytes);
    services.stats.uploads += 1;
    services.stats.bodyBytes += input.contentLength;
    const reserve = input.gate ? undefined : services.arena.tryTakeMany(this.reserve);
    if (reserve) this.spare.push(...reserve);
    else this.awaitAdmission(input.gate);
    input.source.onBody((chunk, isLast) => this.onData(chunk, isLast));
  }

  /**
   * Nothing is read until the reserve is in hand and the gate passed: the first delivery pauses
   * the socket and is parked. (Pausing here would not hold: uWS arms its idle timer when the
   * handler returns, and a socket that stays paused then times out.)
   */
  private awaitAdmission(gate: Promise<unknown> | undefined): void {
    const { arena, stats } = this.services;
    stats.admissionWaits += 1;
    this.waitingForBlock = true;
    const admitted = arena.takeMany(this.reserve, this.input.keys.tenantNum).then((blocks) => {
      if (this.failed) for (const block of blocks) arena.release(block);
      else this.spare.push(...blocks);
    });
    Promise.all([admitted, gate]).then(
      () => this.resumeAfterWait(),
      (error: unknown) => this.fail(error),
    );
  }

  private onData(chunk: ArrayBuffer, isLast: boolean): void {
    if (this.failed) {
      if (this.sink) this.toSink(new Uint8Array(chunk), isLast);
      return;
    }
    this.received += chunk.byteLength;
    if (isLast) this.lastSeen = true;
    if (this.received > this.input.contentLength) {
      this.fail(BadRequest('the body is longer than its Content-Length'));
      return;
    }
    const source = new Uint8Array(chunk);
    if (this.overflow.length > 0 || this.waitingForBlock) {
      this.park(source, true);
      this.pauseSocket();
    } else this.copyIn(source, true);
    if (isLast && this.received < this.input.contentLength) {
      this.fail(BadRequest('the body is shorter than its Content-Length'));
      return;
    }
    if (this.overflow.length === 0 && !this.waitingForBlock) this.afterCopy();
  }

  /**
   * Copies into the current block, taking new blocks as they fill; parks what does not fit
   * (copied if `source` is uWS's buffer, which is gone when `onData` returns).
   */
  private copyIn(source: Uint8Array, fromSocket: boolean): void {
    let offset = 0;
    while (offset < source.length) {
      if (this.blocks.length === 0 || this.used === this.blockBytes) {
        if (this.blocks.length > 0) this.blockFilled(this.blocks.length - 1, this.blockBytes);
        const block = this.takeBlock();
        if (block === undefined) {
          this.park(source.subarray(offset), fromSocket);
          this.waitForBlock();
          return;
        }
        this.addBlock(block);
      }
      const count = Math.min(source.length - offset, this.blockBytes - this.used);
      const base = (this.blocks[this.blocks.length - 1] as number) * this.blockBytes + this.used;
      this.services.arena.write(base, source.subarray(offset, offset + count));
      this.used += count;
      offset += count;
    }
  }

  /**
   * Borrows from the arena while this upload may, else takes from its reserve; once only the
   * slack is left (and the rest of the body does not fit in it), reading pauses.
   */
  private takeBlock(): number | undefined {
    // A body of one block has it in its reserve: borrowing another would hold two blocks for
    // one (64 small uploads would then take 128, and the next ones wait for admission).
    if (this.single) return this.spare.pop() ?? this.services.arena.tryTake();
    // Bytes delivered after a pause take free blocks past the share: they are already here.
    const mayBorrow = this.owned < BLOCKS_PER_UPLOAD_MAX || this.throttled;
    const borrowed = mayBorrow ? this.services.arena.tryTake() : undefined;
    if (borrowed !== undefined) return borrowed;
    const block = this.spare.pop();
    const beyond = this.input.contentLength - (this.blocks.length + 1) * this.blockBytes;
    if (this.spare.length <= PAUSE_SLACK_BLOCKS && beyond > this.spare.length * this.blockBytes)
      this.throttle();
    return block;
  }

  /** Blocks this upload holds bytes in, plus its unused reserve. */
  private get owned(): number {
    return this.held + this.spare.length;
  }

  /** Keeps bytes that have no block yet; `resumeAfterWait` feeds them in order. */
  private park(bytes: Uint8Array, copy: boolean): void {
    const { stats } = this.services;
    this.overflow.push(copy ? Buffer.from(bytes) : bytes);
    this.parkedLength += bytes.length;
    if (copy) stats.parkedBytes += bytes.length;
    if (copy && this.spare.length + this.held === 0) stats.parkedWaiting += bytes.length;
    stats.parkedNow += bytes.length;
    stats.parkedPeak = Math.max(stats.parkedPeak, stats.parkedNow);
    stats.parkedUploadPeak = Math.max(stats.parkedUploadPeak, this.parkedLength);
  }

  private unpark(): Uint8Array[] {
    this.services.stats.parkedNow -= this.parkedLength;
    this.parkedLength = 0;
    return this.overflow.splice(0);
  }

  private addBlock(block: number): void {
    this.blocks.push(block);
    this.blockTasks.push(0);
    this.blockOrdered.push(this.single);
    this.held += 1;
    this.used = 0;
  }

  private waitForBlock(): void {
    if (this.waitingForBlock) return;
    this.waitingForBlock = true;
    this.pauseSocket();
    void this.nextBlock().then(
      (block) => {
        this.waitingForBlock = false;
        if (this.failed) {
          this.services.arena.release(block);
          return;
        }
        this.addBlock(block);
        this.resumeAfterWait();
      },
      (error: unknown) => this.fail(error),
    );
  }

  /** Feeds the parked bytes, then reads from the socket again. */
  private resumeAfterWait(): void {
    this.waitingForBlock = false;
    if (this.failed) return;
    for (const part of this.unpark()) {
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- copyIn may set it
      if (this.waitingForBlock) this.park(part, false);
      else this.copyIn(part, false);
    }
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- as above
    if (this.waitingForBlock) return;
    // After the last byte there is nothing to read: the socket stays paused (uWS's idle timer
    // stays off while the commit runs) and the response resumes it (Exchange.send).
    if (!this.throttled) this.resumeSocket();
    this.afterCopy();
  }

  /** Pauses reading until this upload can take `RESUME_GAP_BLOCKS` beyond its slack. */
  private throttle(): void {
    if (!this.throttled) this.services.stats.pauses += 1;
    this.throttled = true;
    this.pauseSocket();
  }

  private unthrottle(): void {
    if (!this.throttled) return;
    const { arena } = this.services;
    const borrowable = arena.waiting
      ? 0
      : Math.min(arena.available, BLOCKS_PER_UPLOAD_MAX - this.owned);
    if (this.spare.length - PAUSE_SLACK_BLOCKS + Math.max(0, borrowable) < RESUME_GAP_BLOCKS)
      return;
    this.throttled = false;
    if (!this.waitingForBlock && !this.failed) this.resumeSocket();
  }

  /** Reads again; after the last byte the socket stays paused until the response (see above). */
  private resumeSocket(): void {
    if (!this.paused || this.input.source.aborted || this.lastSeen) return;
    this.paused = false;
    this.input.source.resumeReading();
  }

  private pauseSocket(): void {
    if (this.paused || this.input.source.aborted) return;
    this.paused = true;
    this.input.source.pauseReading();
  }

  /**
   * The next block for parked bytes: from the reserve, borrowed from the arena, or the next one
   * this upload frees.
   */
  private async nextBlock(): Promise<number> {
    for (;;) {
      const block =
        this.spare.pop() ??
        (this.owned < BLOCKS_PER_UPLOAD_MAX ? this.services.arena.tryTake() : undefined);
      if (block !== undefined) return block;
      if (this.failed) throw BadRequest('the upload failed');
      await new Promise<void>((resolve) => (this.ownBlockFreed = resolve));
    }
  }

  /** A released block refills the reserve first; beyond it, it goes back to the arena. */
  private giveBack(block: number): void {
    this.held -= 1;
    if (!this.failed && !this.finished && this.held + this.spare.length < this.reserve)
      this.spare.push(block);
    else this.services.arena.release(block);
  }

  private afterCopy(): void {
    if (this.finishing || !this.lastSeen || this.received !== this.input.contentLength) return;
    this.finishing = true;
    if (this.single) {
      this.storeSingle();
      return;
    }
    this.blockFilled(this.blocks.length - 1, this.used);
    void this.finishOrdered();
  }

  private blockFilled(index: number, length: number): void {
    if (this.single || !this.ordered || index < this.sentToOrdered) return;
    this.sentToOrdered = index + 1;
    const block = this.blocks[index] as number;
    void this.ordered.block(block, length).then(
      (cuts) => {
        this.blockOrdered[index] = true;
        this.onCuts(cuts);
        this.releaseDone();
      },
      (error: unknown) => this.fail(error),
    );
  }

  private onCuts(cuts: readonly number[]): void {
    if (this.failed) return;
    for (const cut of cuts) {
      if (cut <= this.lastCut) continue;
      this.dispatch(this.lastCut, cut);
      this.lastCut = cut;
    }
  }

  private dispatch(start: number, end: number, objectChecksums?: readonly DigestAlg[]): void {
    const slices: Slice[] = [];
    const touched: number[] = [];
    for (
      let index = Math.floor(start / this.blockBytes);
      index * this.blockBytes < end;
      index += 1
    ) {
      const blockStart = index * this.blockBytes;
      slices.push([
        this.blocks[index] as number,
        Math.max(start, blockStart) - blockStart,
        Math.min(end, blockStart + this.blockBytes) - blockStart,
      ]);
      touched.push(index);
      this.blockTasks[index] = (this.blockTasks[index] ?? 0) + 1;
    }
    const task: StoreTask = objectChecksums
      ? { kind: 'store', keys: this.input.keys, slices, plainLength: end - start, objectChecksums }
      : { kind: 'store', keys: this.input.keys, slices, plainLength: end - start };
    const stored =
      end - start <= INLINE_CHUNK_BYTES_MAX
        ? storeChunk(this.services.inline, {
            keys: tenantKeysOf(this.input.keys),
            slices: slices.map(([block, from, to]) => this.services.arena.view(block, from, to)),
            plainLength: end - start,
            objectChecksums,
          })
        : (this.services.pool.run(task) as Promise<Outcome<StoreResult>>).then((outcome) => {
            if (!outcome.ok) throw fromWire(outcome.error);
            return outcome.value;
          });
    this.stored.push(stored);
    void stored
      .then((result) => this.pin(result))
      .finally(() => {
        for (const index of touched) this.blockTasks[index] = (this.blockTasks[index] ?? 1) - 1;
        this.releaseDone();
      })
      .catch((error: unknown) => this.fail(error));
  }

  /** Holds the segment a new record was written to until the request ends (upload-pins.ts). */
  private pin(result: StoreResult): void {
    const segmentId = result.location?.segmentId;
    if (segmentId === undefined || this.pinsReleased) return;
    this.pinned.push(segmentId);
    this.services.pins.hold(segmentId);
  }

  private releasePins(): void {
    if (this.pinsReleased) return;
    this.pinsReleased = true;
    for (const segmentId of this.pinned.splice(0)) this.services.pins.release(segmentId);
  }

  private storeSingle(): void {
    this.dispatch(0, this.received, this.input.algs);
    void this.finish({});
  }

  private async finishOrdered(): Promise<void> {
    try {
      const done = await (this.ordered as OrderedUpload).end();
      this.onCuts(done.cuts);
      await this.finish(done.checksums);
    } catch (error) {
      this.fail(error);
    }
  }

  private async finishEmpty(): Promise<void> {
    const hasher = await createMultiHasher(this.input.algs);
    this.ordered?.drop();
    await this.finish(hasher.digest());
  }

  private async finish(checksums: Record<string, string>): Promise<void> {
    try {
      const results = await Promise.all(this.stored);
      if (this.failed) return;
      const chunks: ManifestChunk[] = results.map((result) => {
        const chunk: ManifestChunk = {
          id: Buffer.from(result.chunkId),
          plainLength: result.plainLength,
        };
        if (result.location) chunk.location = result.location;
        return chunk;
      });
      const objectChecksums =
        this.single && results[0]?.checksums ? results[0].checksums : checksums;
      this.finished = true;
      this.releaseAll();
      this.resolve(
        receivedOf(
          chunks,
          objectChecksums,
          results.some((r) => r.compressed),
          this.received,
          () => this.releasePins(),
        ),
      );
    } catch (error) {
      this.fail(error);
    }
  }

  /** Releases body blocks that no cut, ordered step or store task can still need. */
  private releaseDone(): void {
    for (let index = 0; index < this.blocks.length; index += 1) {
      const block = this.blocks[index] as number;
      if (block < 0 || !this.blockOrdered[index] || (this.blockTasks[index] ?? 0) > 0) continue;
      if (this.lastCut < (index + 1) * this.blockBytes && !this.single) continue;
      if (this.single && this.stored.length === 0) continue;
      this.blocks[index] = -1;
      this.giveBack(block);
    }
    this.unthrottle();
    this.wakeOwnWaiter();
  }

  private wakeOwnWaiter(): void {
    if (this.ownBlockFreed) {
      const wake = this.ownBlockFreed;
      this.ownBlockFreed = undefined;
      wake();
    }
  }

  private releaseAll(): void {
    for (let index = 0; index < this.blocks.length; index += 1) {
      const block = this.blocks[index] as number;
      if (block >= 0 && (this.blockTasks[index] ?? 0) === 0) {
        this.blocks[index] = -1;
        this.giveBack(block);
      }
    }
    if (this.failed || this.finished) this.returnSpare();
    this.wakeOwnWaiter();
  }

  private returnSpare(): void {
    for (const block of this.spare.splice(0)) this.services.arena.release(block);
  }

  private fail(error: unknown): void {
    if (this.failed) {
      // A gate that diverts after the body failed (the client went away first): its sink
      // learns that no body will come.
      if (error instanceof Divert) error.sink.end(this.failure);
      return;
    }
    this.failure = error;
    this.failed = true;
    this.wakeOwnWaiter();
    this.ordered?.drop();
    const parked = this.unpark();
    if (error instanceof Divert) this.divert(error.sink, parked);
    // The rest of the body is read and discarded, so the connection stays usable; after the
    // last byte the response resumes.
    this.resumeSocket();
    this.reject(error);
    // Blocks still read by running tasks are released as those tasks settle, and so are the
    // segments they wrote to: nothing of this upload will commit.
    void Promise.allSettled(this.stored).then(() => {
      this.releaseAll();
      this.releasePins();
    });
  }

  /**
   * Hands the body to `sink` instead of storing it. Only a gate diverts, and until the gate
   * passes every byte read is parked (`onData` has checked them against the length), so
   * `parked` is the whole body so far.
   */
  private divert(sink: BodySink, parked: readonly Uint8Array[]): void {
    this.sink = sink;
    for (const part of parked) sink.write(part);
    if (this.received === this.input.contentLength) this.endSink();
  }

  private toSink(bytes: Uint8Array, isLast: boolean): void {
    this.received += bytes.length;
    if (this.received > this.input.contentLength) {
      this.endSink(BadRequest('the body is longer than its Content-Length'));
      return;
    }
    this.sink?.write(bytes);
    if (this.received === this.input.contentLength) this.endSink();
    else if (isLast) this.endSink(BadRequest('the body is shorter than its Content-Length'));
  }

  private endSink(error?: unknown): void {
    const sink = this.sink;
    this.sink = undefined;
    sink?.end(error);
  }
}

/** The entity tag: a digest of the chunk list and length (equal content, equal tag). */
export function etagOf(chunks: readonly ManifestChunk[], size: number): string {
  // One-shot over the ids and the size (the same bytes a Hash object would be fed): a Hash
  // object per small object cost more than the digest.
  const parts: Buffer[] = chunks.map((chunk) => chunk.id);
  parts.push(Buffer.from(String(size), 'latin1'));
  return `"${hash('sha256', Buffer.concat(parts), 'hex').slice(0, 32)}"`;
}
