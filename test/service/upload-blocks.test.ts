// Goal: a body that fits in one arena block holds exactly one block while it is stored (its
// reserve, never a borrowed one besides), so an arena of N blocks admits N small uploads at once
// without any waiting for admission; every block is back once the uploads are done.
// Method: `receiveBody` on a real BodyArena of 8 small blocks, uploads started one after
// another, with a fake exchange that delivers each 4 KiB body in one piece and a fake segment
// writer whose writes complete only when the test lets them, so that all uploads hold their
// blocks at the same time. (Checked to fail when a small upload borrows beside its reserve.)
import t from 'tap';
import { randomBytes } from 'node:crypto';
import type { Piscina } from 'piscina';
import { BodyArena } from '../../src/service/body-arena.js';
import { receiveBody, UploadStats, type UploadServices } from '../../src/service/upload.js';
import type { UploadPins } from '../../src/service/upload-pins.js';
import type { OrderedStage } from '../../src/workers/ordered-stage.js';
import type { ChunkStoreDeps } from '../../src/workers/chunk-store.js';
import type { Exchange } from '../../src/http/exchange.js';
import type { IndexStore } from '../../src/engine/index/store.js';
import type { SegmentWriter } from '../../src/engine/segments/segment-writer.js';
import type { SegmentReader } from '../../src/engine/segments/segment-reader.js';

const BLOCK_BYTES = 64 * 1024;
const BLOCKS = 8;
const BODY_BYTES = 4096;

/** A segment writer whose appends are written when `writeAll` says so. */
function heldWriter(): { writer: SegmentWriter; writeAll: () => void; appends: () => number } {
  const pending: Array<() => void> = [];
  let offset = 0;
  let appends = 0;
  const writer = {
    append(buffers: readonly Uint8Array[]) {
      appends += 1;
      const length = buffers.reduce((sum, buffer) => sum + buffer.byteLength, 0);
      const at = offset;
      offset += length;
      const written = new Promise<void>((resolve) => pending.push(resolve));
      return Promise.resolve({ segmentId: 1, offset: at, length, written: () => written });
    },
  } as unknown as SegmentWriter;
  return {
    writer,
    writeAll: () => {
      for (const resolve of pending.splice(0)) resolve();
    },
    appends: () => appends,
  };
}

/** An exchange that delivers `body` in one piece once the receiver attaches to it. */
function exchangeWith(body: Buffer): Exchange {
  return {
    aborted: false,
    onAbort: () => undefined,
    onBody: (handler: (chunk: ArrayBuffer, isLast: boolean) => void) => {
      const copy = body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength);
      queueMicrotask(() => handler(copy as ArrayBuffer, true));
    },
    pauseReading: () => undefined,
    resumeReading: () => undefined,
  } as unknown as Exchange;
}

t.test('small bodies hold one block each: N blocks admit N uploads at once', async (t) => {
  const arena = new BodyArena(BLOCK_BYTES, BLOCKS);
  const held = heldWriter();
  const inline: ChunkStoreDeps = {
    index: () => ({ get: () => undefined }) as unknown as IndexStore,
    writer: () => held.writer,
    reader: () => ({}) as unknown as SegmentReader,
    deadChunkGraceMs: 0,
  };
  const stats = new UploadStats();
  const services: UploadServices = {
    arena,
    pool: {} as unknown as Piscina, // never used: small bodies are stored inline
    ordered: {} as unknown as OrderedStage, // never used: one-block bodies skip it
    chunkAvgBytes: BLOCK_BYTES,
    inline,
    stats,
    pins: { hold: () => undefined, release: () => undefined } as unknown as UploadPins,
  };
  const keys = { tenantNum: 1, dataKey: randomBytes(32), dedupKey: randomBytes(32) };
  const bodies = Array.from({ length: BLOCKS }, () => randomBytes(BODY_BYTES));
  // One after another, each body arriving before the next upload starts (as on a busy
  // gateway): an upload that borrowed a block beside its reserve would still hold both.
  const received: Array<ReturnType<typeof receiveBody>> = [];
  for (const body of bodies) {
    received.push(
      receiveBody(services, {
        source: exchangeWith(body),
        keys,
        contentLength: body.length,
        algs: ['CRC32C'],
      }),
    );
    await new Promise((resolve) => setImmediate(resolve));
  }
  for (let turn = 0; turn < 20 && held.appends() < BLOCKS; turn += 1)
    await new Promise((resolve) => setImmediate(resolve));
  t.equal(held.appends(), BLOCKS, 'every upload is storing its chunk at once');
  t.equal(stats.admissionWaits, 0, 'none waited for admission');
  t.equal(arena.available, 0, 'each holds one block, no more');
  held.writeAll();
  const results = await Promise.all(received);
  t.equal(results.length, BLOCKS);
  t.ok(
    results.every((result) => result.chunks.length === 1 && result.chunks[0]?.location),
    'each body is one stored chunk',
  );
  t.equal(arena.available, BLOCKS, 'every block is back');
});
