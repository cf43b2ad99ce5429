// Micro-benchmark of src/workers/ordered-stage.ts: what one ordered-stage thread keeps up with
// (the gear scan in WebAssembly on the arena and the whole-object checksums), with four uploads in
// flight on it as several listeners' would be, for the checksum sets a client can ask for. The
// gateway gives every two listeners one such thread (LISTENERS_PER_ORDERED_STAGE in gateway.ts).
//
// Usage: node dist/bench/micro/workers/ordered-stage.bench.js [--size 256MiB] [--rounds 3]
// Small defaults so it runs in seconds. Prints the best round per case (1 MB = 1e6 B) and a hash
// of every result so that the work cannot be optimised away.
import { createHash, randomFillSync } from 'node:crypto';
import { parseArgs } from 'node:util';
import { parseBytes } from '../../../src/util/config.js';
import { BodyArena } from '../../../src/service/body-arena.js';
import { OrderedStage, OrderedStageThread } from '../../../src/workers/ordered-stage.js';
import type { ChecksumAlg } from '../../../src/engine/checksums.js';

const BLOCK_BYTES = 1 << 20;
const ARENA_BLOCKS = 32;
const UPLOADS = 4;
const CHUNK_AVG_BYTES = 1 << 20;
const { values } = parseArgs({
  options: {
    size: { type: 'string', default: '64MiB' },
    rounds: { type: 'string', default: '3' },
  },
});
const totalBlocks = Math.max(UPLOADS, Math.floor(parseBytes(values.size, '--size') / BLOCK_BYTES));
const rounds = Math.max(1, Number.parseInt(values.rounds, 10) || 1);
const arena = new BodyArena(BLOCK_BYTES, ARENA_BLOCKS);
for (let block = 0; block < ARENA_BLOCKS; block += 1)
  arena.write(block * BLOCK_BYTES, randomFillSync(Buffer.alloc(BLOCK_BYTES)));
const thread = new OrderedStageThread({ arenas: [arena], blockBytes: BLOCK_BYTES });
// The thread and its port never keep a process alive; the benchmark must.
const keepAlive = setInterval(() => undefined, 1000);
const stage = new OrderedStage(thread.connect(0));
const results = createHash('sha256');

/** `UPLOADS` uploads of `totalBlocks / UPLOADS` arena blocks each, at once; their checksums. */
async function uploads(algs: readonly ChecksumAlg[]): Promise<string> {
  const each = Math.floor(totalBlocks / UPLOADS);
  const sums = await Promise.all(
    Array.from({ length: UPLOADS }, async (_, upload) => {
      const ordered = stage.begin(algs, CHUNK_AVG_BYTES);
      for (let n = 0; n < each; n += 1)
        await ordered.block((upload * 8 + n) % ARENA_BLOCKS, BLOCK_BYTES);
      return JSON.stringify((await ordered.end()).checksums);
    }),
  );
  return sums.join();
}

console.log(
  `ordered stage: ${totalBlocks} blocks of ${BLOCK_BYTES} B, ${UPLOADS} uploads at once, ` +
    `gear scan in ${(await thread.kernel) ? 'WebAssembly' : 'JavaScript'}, best of ${rounds}`,
);
const cases: ReadonlyArray<readonly ChecksumAlg[]> = [
  ['CRC32C'],
  ['CRC32C', 'SHA256'],
  ['CRC32C', 'CRC64NVME'],
  ['CRC32C', 'CRC32', 'CRC64NVME', 'SHA1', 'SHA256'],
];
for (const algs of cases) {
  results.update(await uploads(algs));
  let best = Number.POSITIVE_INFINITY;
  for (let round = 0; round < rounds; round += 1) {
    const start = process.hrtime.bigint();
    results.update(await uploads(algs));
    best = Math.min(best, Number(process.hrtime.bigint() - start));
  }
  const bytes = Math.floor(totalBlocks / UPLOADS) * UPLOADS * BLOCK_BYTES;
  console.log(
    `${algs.join('+').padEnd(40)} ${((bytes / best) * 1000).toFixed(0).padStart(6)} MB/s`,
  );
}
console.log(`results ${results.digest('hex').slice(0, 16)}`);
stage.close();
await thread.close();
clearInterval(keepAlive);
