// Goal: MD5 is computed where the other whole-object digests are, and only when asked: a body
// received with MD5 among its algorithms answers the hex MD5 as its ETag and the digest in
// `md5`, never among `checksums`; without it the ETag stays the native one (etagOf). Both
// paths are covered: a one-block body hashed by its store task, and a body of many blocks
// hashed by the ordered-stage thread.
// Method: `receiveBody` with a fake exchange and segment writer (as upload-blocks.test.ts), and
// a real OrderedStageThread fed from a real BodyArena; digests compared with node:crypto.
import t, { type Test } from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import type { Piscina } from 'piscina';
import { BodyArena } from '../../src/service/body-arena.js';
import { etagOf, receiveBody, UploadStats, type UploadServices } from '../../src/service/upload.js';
import type { UploadPins } from '../../src/service/upload-pins.js';
import { OrderedStage, OrderedStageThread } from '../../src/workers/ordered-stage.js';
import type { ChunkStoreDeps } from '../../src/workers/chunk-store.js';
import type { Exchange } from '../../src/http/exchange.js';
import type { IndexStore } from '../../src/engine/index/store.js';
import type { SegmentWriter } from '../../src/engine/segments/segment-writer.js';
import type { SegmentReader } from '../../src/engine/segments/segment-reader.js';
import type { DigestAlg } from '../../src/engine/checksums.js';

const BLOCK_BYTES = 256 * 1024;

function services(): UploadServices {
  let offset = 0;
  const writer = {
    append(buffers: readonly Uint8Array[]) {
      const length = buffers.reduce((sum, buffer) => sum + buffer.byteLength, 0);
      const at = offset;
      offset += length;
      return Promise.resolve({
        segmentId: 1,
        offset: at,
        length,
        written: () => Promise.resolve(),
      });
    },
  } as unknown as SegmentWriter;
  const inline: ChunkStoreDeps = {
    index: () => ({ get: () => undefined }) as unknown as IndexStore,
    writer: () => writer,
    reader: () => ({}) as unknown as SegmentReader,
    deadChunkGraceMs: 0,
  };
  return {
    arena: new BodyArena(BLOCK_BYTES, 4),
    pool: {} as unknown as Piscina, // never used: a 4 KiB body is stored inline
    ordered: {} as unknown as OrderedStage, // never used: one-block bodies skip it
    chunkAvgBytes: BLOCK_BYTES,
    inline,
    stats: new UploadStats(),
    pins: { hold: () => undefined, release: () => undefined } as unknown as UploadPins,
  };
}

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

async function receive(body: Buffer, algs: readonly DigestAlg[]) {
  const keys = { tenantNum: 1, dataKey: randomBytes(32), dedupKey: randomBytes(32) };
  return receiveBody(services(), {
    source: exchangeWith(body),
    keys,
    contentLength: body.length,
    algs,
  });
}

t.test('a one-block body asked for MD5 has its hex MD5 as ETag', async (t) => {
  const body = randomBytes(4096);
  const md5 = createHash('md5').update(body).digest();
  const received = await receive(body, ['CRC32C', 'MD5']);
  t.equal(received.etag, `"${md5.toString('hex')}"`);
  t.same(received.md5, md5);
  t.same(Object.keys(received.checksums), ['CRC32C'], 'MD5 is not a checksum');
  received.release();
  const native = await receive(body, ['CRC32C']);
  t.equal(native.etag, etagOf(native.chunks, body.length), 'without MD5 the native ETag');
  t.equal(native.md5, undefined);
  native.release();
});

t.test('an empty body asked for MD5 has the MD5 of nothing', async (t) => {
  const received = await receive(Buffer.alloc(0), ['CRC32C', 'MD5']);
  t.equal(received.etag, '"d41d8cd98f00b204e9800998ecf8427e"');
  t.notOk('MD5' in received.checksums);
  received.release();
});

function stageThread(t: Test, arenas: BodyArena[]): OrderedStageThread {
  const thread = new OrderedStageThread({ arenas, blockBytes: BLOCK_BYTES });
  const keepAlive = setInterval(() => undefined, 1000);
  t.teardown(async () => {
    clearInterval(keepAlive);
    await thread.close();
  });
  return thread;
}

t.test('the ordered stage hashes MD5 of a many-block body when asked', async (t) => {
  const arena = new BodyArena(BLOCK_BYTES, 4);
  const stage = new OrderedStage(stageThread(t, [arena]).connect(0));
  const body = randomBytes(3 * BLOCK_BYTES + 1234);
  const upload = stage.begin(['CRC32C', 'MD5'], 65_536);
  for (let offset = 0, n = 0; offset < body.length; offset += BLOCK_BYTES, n += 1) {
    const piece = body.subarray(offset, offset + BLOCK_BYTES);
    const block = n % arena.blockCount;
    arena.write(block * BLOCK_BYTES, piece);
    await upload.block(block, piece.length);
  }
  const end = await upload.end();
  t.equal(end.checksums['MD5'], createHash('md5').update(body).digest('base64'));
  t.ok(end.checksums['CRC32C'], 'the CRC32C beside it');
  stage.close();
});
