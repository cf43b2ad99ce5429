// Goal: the ordered-stage thread chunks and checksums a body read in place from the body arena
// exactly as the chunker and the checksum code do on a plain buffer, and its gear scan runs in
// WebAssembly on the arena's memory (passed through workerData), not in the JavaScript fallback.
// Method: a real BodyArena and OrderedStage; seeded random blocks written into the arena and fed
// in order, reusing blocks as an upload does; cuts and CRC32C compared with chunkBoundaries and
// @node-rs/crc32 over the same bytes joined.
import t from 'tap';
import { crc32c } from '@node-rs/crc32';
import { BodyArena } from '../../src/gateway/body-arena.js';
import { OrderedStage } from '../../src/workers/ordered-stage.js';
import { chunkBoundaries } from '../../src/engine/chunker.js';

const BLOCK_BYTES = 256 * 1024;

function seeded(length: number, seed: number): Buffer {
  const bytes = Buffer.alloc(length);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < length; i += 1) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    bytes[i] = x & 0xff;
  }
  return bytes;
}

t.test('cuts and CRC32C of a body fed block by block from the arena', async (t) => {
  const arena = new BodyArena(BLOCK_BYTES, 8);
  const stage = new OrderedStage({ arena, blockBytes: BLOCK_BYTES });
  // The stage's thread is unref'd (it never keeps a gateway alive); this test must keep running.
  const keepAlive = setInterval(() => undefined, 1000);
  t.teardown(async () => {
    clearInterval(keepAlive);
    await stage.close();
  });
  t.equal(await stage.kernel, true, 'the gear scan runs in WebAssembly on the arena');
  const avgBytes = 65_536;
  const body = seeded(5 * 1024 * 1024 + 12_345, 9);
  const upload = stage.begin(['CRC32C'], avgBytes);
  const cuts: number[] = [];
  for (let offset = 0, n = 0; offset < body.length; offset += BLOCK_BYTES, n += 1) {
    const piece = body.subarray(offset, offset + BLOCK_BYTES);
    const block = n % arena.blockCount;
    arena.write(block * BLOCK_BYTES, piece);
    cuts.push(...(await upload.block(block, piece.length)));
  }
  const end = await upload.end();
  cuts.push(...end.cuts);
  t.same(cuts, chunkBoundaries(body, { avgBytes }), `${cuts.length} cuts`);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32c(body) >>> 0);
  t.equal(end.checksums['CRC32C'], crc.toString('base64'), 'the whole-object CRC32C');
});
