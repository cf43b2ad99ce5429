// Micro-benchmark of src/engine/chunker.ts: content-defined chunking throughput on random data
// fed in 1 MiB blocks, at several average chunk sizes, as plain Uint8Array and Buffer blocks.
//
// Usage: node dist/bench/micro/engine/chunker.bench.js [--size 64MiB] [--rounds 3]
// Small defaults so CI runs it as a smoke test. Prints the best round per case (1 GB = 1e9 B)
// and a hash of every cut list so the work cannot be optimised away.
import { createHash, randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { parseBytes } from '../../../src/util/config.js';
import { Chunker } from '../../../src/engine/chunker.js';

const blockBytes = 1 << 20;
const { values } = parseArgs({
  options: {
    size: { type: 'string', default: '16MiB' },
    rounds: { type: 'string', default: '3' },
  },
});
const bodyBytes = parseBytes(values.size, '--size');
const rounds = Math.max(1, Number.parseInt(values.rounds, 10) || 1);
const body = randomBytes(bodyBytes);
const bufferBlocks: Uint8Array[] = [];
const plainBlocks: Uint8Array[] = [];
for (let from = 0; from < body.length; from += blockBytes) {
  const length = Math.min(blockBytes, body.length - from);
  bufferBlocks.push(body.subarray(from, from + length));
  plainBlocks.push(new Uint8Array(body.buffer, body.byteOffset + from, length));
}
const results = createHash('sha256');

function cutBody(blocks: readonly Uint8Array[], avgBytes: number): number[] {
  const chunker = new Chunker({ avgBytes });
  const cuts: number[] = [];
  for (const block of blocks) cuts.push(...chunker.push(block));
  cuts.push(...chunker.finish());
  return cuts;
}

/** Best of `rounds` timed runs after one warm-up; prints GB/s and what `work` reports. */
function throughput(name: string, work: () => string): void {
  let result = work();
  let best = Number.POSITIVE_INFINITY;
  for (let round = 0; round < rounds; round++) {
    const start = process.hrtime.bigint();
    result = work();
    best = Math.min(best, Number(process.hrtime.bigint() - start));
    results.update(result);
  }
  const rate = (bodyBytes / best).toFixed(2);
  console.log(`${name.padEnd(28)} ${rate.padStart(7)} GB/s  ${result.slice(0, 24)}`);
}

console.log(`chunker: ${bodyBytes} random bytes in ${blockBytes}-byte blocks, best of ${rounds}`);
for (const avgBytes of [1 << 20, 1 << 16, 1 << 12]) {
  const chunks = (blocks: readonly Uint8Array[]) => (): string =>
    `${cutBody(blocks, avgBytes).length} chunks`;
  throughput(`avg ${avgBytes} Uint8Array`, chunks(plainBlocks));
  throughput(`avg ${avgBytes} Buffer`, chunks(bufferBlocks));
}
// Reference point on the same machine and moment: the VM is shared, so compare ratios.
throughput('node:crypto SHA-256', () => {
  const hash = createHash('sha256');
  for (const block of bufferBlocks) hash.update(block);
  return hash.digest('hex');
});
console.log(`result hash ${results.digest('hex').slice(0, 16)}`);
