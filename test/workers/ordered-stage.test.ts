// Goal: the ordered-stage thread chunks and checksums a body read in place from the body arena
// exactly as the chunker and the checksum code do on a plain buffer, and its gear scan runs in
// WebAssembly on the arena's memory (passed through workerData), not in the JavaScript fallback.
// One thread serves several listeners: each listener's blocks are read from its own arena, and
// its upload ids (which every listener numbers from 1) never meet another listener's.
// Method: real BodyArenas, one OrderedStageThread and an OrderedStage per arena; seeded random
// blocks written into the arena and fed in order, reusing blocks as an upload does; cuts and
// CRC32C compared with chunkBoundaries and @node-rs/crc32 over the same bytes joined. Two
// listeners feed different bodies through the same block numbers of their arenas, interleaved.
// An upload the stage refuses to start fails alone; when the stage's port closes, the uploads
// waiting on it fail instead of waiting forever (a bare MessageChannel stands in for the thread,
// so that nothing answers before the close).
import t, { type Test } from 'tap';
import { MessageChannel } from 'node:worker_threads';
import { crc32cBase64 } from '../helpers/checksums.js';
import { BodyArena } from '../../src/service/body-arena.js';
import { OrderedStage, OrderedStageThread } from '../../src/workers/ordered-stage.js';
import { chunkBoundaries } from '../../src/engine/chunker.js';
import { errorCode } from '../../src/util/errors.js';

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

/** Feeds `body` block by block through `arena` into `stage`; resolves with all cuts and sums. */
async function feed(
  stage: OrderedStage,
  arena: BodyArena,
  body: Buffer,
  avgBytes: number,
): Promise<{ cuts: number[]; checksums: Record<string, string> }> {
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
  return { cuts, checksums: end.checksums };
}

/** The stage's thread is unref'd (it never keeps a gateway alive); a test must keep running. */
function stageThread(t: Test, arenas: BodyArena[]): OrderedStageThread {
  const thread = new OrderedStageThread({ arenas, blockBytes: BLOCK_BYTES });
  const keepAlive = setInterval(() => undefined, 1000);
  t.teardown(async () => {
    clearInterval(keepAlive);
    await thread.close();
  });
  return thread;
}

t.test('cuts and CRC32C of a body fed block by block from the arena', async (t) => {
  const arena = new BodyArena(BLOCK_BYTES, 8);
  const thread = stageThread(t, [arena]);
  const stage = new OrderedStage(thread.connect(0));
  t.equal(await thread.kernel, true, 'the gear scan runs in WebAssembly on the arena');
  const avgBytes = 65_536;
  const body = seeded(5 * 1024 * 1024 + 12_345, 9);
  const end = await feed(stage, arena, body, avgBytes);
  t.same(end.cuts, chunkBoundaries(body, { avgBytes }), `${end.cuts.length} cuts`);
  t.equal(end.checksums['CRC32C'], crc32cBase64(body), 'the whole-object CRC32C');
  stage.close();
});

t.test('one thread serves two listeners, each from its own arena', async (t) => {
  const arenas = [new BodyArena(BLOCK_BYTES, 4), new BodyArena(BLOCK_BYTES, 4)];
  const thread = stageThread(t, arenas);
  const stages = arenas.map((_, listener) => new OrderedStage(thread.connect(listener)));
  t.equal(await thread.kernel, true, 'the gear scan runs in WebAssembly on both arenas');
  const avgBytes = 65_536;
  const bodies = [seeded(3 * 1024 * 1024 + 777, 21), seeded(2 * 1024 * 1024 + 5, 22)];
  // Both listeners' first upload has id 1, and both write blocks 0-3 of their own arena.
  const ends = await Promise.all(
    stages.map((stage, listener) =>
      feed(stage, arenas[listener] as BodyArena, bodies[listener] as Buffer, avgBytes),
    ),
  );
  for (const [listener, end] of ends.entries()) {
    const body = bodies[listener] as Buffer;
    t.same(end.cuts, chunkBoundaries(body, { avgBytes }), `listener ${listener}: cuts`);
    t.equal(end.checksums['CRC32C'], crc32cBase64(body), `listener ${listener}: CRC32C`);
  }
  for (const stage of stages) stage.close();
});

t.test('an upload the stage cannot start fails alone', async (t) => {
  const arena = new BodyArena(BLOCK_BYTES, 4);
  const thread = stageThread(t, [arena]);
  const stage = new OrderedStage(thread.connect(0));
  const refused = stage.begin(['CRC32C'], 3); // not a power of two within the range
  arena.write(0, seeded(1000, 5));
  const failure = (answer: Promise<unknown>): Promise<string | undefined> =>
    answer.then(
      () => undefined,
      (reason: unknown) => errorCode(reason),
    );
  t.equal(await failure(refused.block(0, 1000)), 'bad_request', 'the bad chunk size fails it');
  // A command sent after the failure was answered is answered too, with the same error.
  t.equal(await failure(refused.block(0, 1000)), 'bad_request', 'and every later command');
  const body = seeded(BLOCK_BYTES + 99, 6);
  const end = await feed(stage, arena, body, 65_536);
  t.equal(end.checksums['CRC32C'], crc32cBase64(body), 'the next upload runs as usual');
  t.throws(() => thread.connect(1), 'a port for an arena the thread does not hold is refused');
  stage.close();
});

t.test('uploads waiting when the stage ends fail, and so do later ones', async (t) => {
  const channel = new MessageChannel();
  const stage = new OrderedStage(channel.port2);
  // The stage's port never keeps a process alive; this test must keep running.
  const keepAlive = setInterval(() => undefined, 1000);
  t.teardown(() => clearInterval(keepAlive));
  const upload = stage.begin(['CRC32C'], 65_536);
  const waiting = upload.block(0, 10);
  const ending = upload.end();
  channel.port1.close();
  for (const [name, pending] of [
    ['a block', waiting],
    ['the end', ending],
  ] as const) {
    const error = await pending.catch((reason: unknown) => reason);
    t.equal(errorCode(error), 'internal', `${name} waiting on the stage fails`);
  }
  const later = await stage
    .begin(['CRC32C'], 65_536)
    .block(0, 10)
    .catch((reason: unknown) => reason);
  t.match((later as Error).message, /ordered stage ended/, 'a later upload fails at once');
});

t.test('a stage thread that fails says so, and its ports close', async (t) => {
  // An arena whose kernel table would lie past its memory: the thread's start throws.
  const memory = new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true });
  const broken = { buffer: memory.buffer as SharedArrayBuffer, memory, kernelOffset: 65_536 };
  const thread = new OrderedStageThread({ arenas: [broken], blockBytes: BLOCK_BYTES });
  const keepAlive = setInterval(() => undefined, 1000);
  t.teardown(() => clearInterval(keepAlive));
  const before = new OrderedStage(thread.connect(0));
  const waiting = before.begin(['CRC32C'], 65_536).block(0, 10);
  const error = await thread.failed.catch((reason: unknown) => reason);
  t.equal(errorCode(error), 'internal');
  t.match((error as Error).message, /ordered-stage thread failed/);
  const waited = await waiting.catch((reason: unknown) => reason);
  t.match((waited as Error).message, /ordered stage ended/, 'an upload waiting on it fails');
  const after = new OrderedStage(thread.connect(0));
  const late = await after
    .begin(['CRC32C'], 65_536)
    .block(0, 10)
    .catch((reason: unknown) => reason);
  t.match((late as Error).message, /ordered stage ended/, 'a port asked for later is closed');
  await thread.close();
});

t.test('a stage thread closed by its gateway is no failure', async (t) => {
  const arena = new BodyArena(BLOCK_BYTES, 2);
  const thread = new OrderedStageThread({ arenas: [arena], blockBytes: BLOCK_BYTES });
  const keepAlive = setInterval(() => undefined, 1000);
  t.teardown(() => clearInterval(keepAlive));
  t.equal(await thread.kernel, true);
  await thread.close();
  let failed = false;
  thread.failed.catch(() => (failed = true));
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.equal(failed, false);
});
