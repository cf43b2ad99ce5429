// Micro-benchmark of src/engine/checksums.ts: throughput of each checksum algorithm through
// MultiHasher (1 MiB updates, as bodies arrive), all algorithms at once, the raw backends for
// comparison, and the cost of one CRC combine.
//
// Usage: node dist/bench/micro/engine/checksums.bench.js [--size 64MiB] [--rounds 3]
// Small defaults so CI runs it as a smoke test. Prints the best round per case (1 GB = 1e9 B)
// and a hash of every result so the work cannot be optimised away.
import { createHash, randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { crc32, crc32c } from '@node-rs/crc32';
import { parseBytes } from '../../../src/util/config.js';
import { crc32c as lightwellCrc32c, crc32cImplementation } from '../../../src/util/crc32c.js';
import {
  type ChecksumAlg,
  CHECKSUM_ALGS,
  crc32cCombine,
  crc64nvmeCombine,
  createMultiHasher,
} from '../../../src/engine/checksums.js';

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
const blocks: Buffer[] = [];
for (let from = 0; from < body.length; from += blockBytes) {
  blocks.push(body.subarray(from, from + blockBytes));
}
const results = createHash('sha256');

/** Runs `work` once to warm up, then `rounds` times; returns the best time in ns. */
async function bestNs(work: () => Promise<string> | string): Promise<number> {
  results.update(await work());
  let best = Number.POSITIVE_INFINITY;
  for (let round = 0; round < rounds; round++) {
    const start = process.hrtime.bigint();
    const result = await work();
    best = Math.min(best, Number(process.hrtime.bigint() - start));
    results.update(result);
  }
  return best;
}

async function throughput(group: string, name: string, work: () => Promise<string> | string) {
  const ns = await bestNs(work);
  const rate = (bodyBytes / ns).toFixed(2);
  console.log(`${group.padEnd(12)} ${name.padEnd(30)} ${rate.padStart(7)} GB/s`);
}

async function hashBody(algs: readonly ChecksumAlg[]): Promise<string> {
  const hasher = await createMultiHasher(algs);
  for (const block of blocks) hasher.update(block);
  return JSON.stringify(hasher.digest());
}

console.log(`checksums: ${bodyBytes} random bytes, ${blockBytes}-byte updates, best of ${rounds}`);
for (const alg of CHECKSUM_ALGS) {
  await throughput('MultiHasher', alg, () => hashBody([alg]));
}
await throughput('MultiHasher', 'all five', () => hashBody(CHECKSUM_ALGS));
await throughput('MultiHasher', 'CRC32C+CRC64NVME', () => hashBody(['CRC32C', 'CRC64NVME']));
await throughput('raw', '@node-rs crc32', () => {
  let crc = 0;
  for (const block of blocks) crc = crc32(block, crc);
  return String(crc);
});
await throughput('raw', '@node-rs crc32c', () => {
  let crc = 0;
  for (const block of blocks) crc = crc32c(block, crc);
  return String(crc);
});
await throughput('raw', `lightwell crc32c (${crc32cImplementation()})`, () => {
  let crc = 0;
  for (const block of blocks) crc = lightwellCrc32c(block, crc);
  return String(crc);
});

// Combine: a fresh length costs about log2(length) polynomial products to build x^(8 * length);
// repeating the last length (equal-sized parts) costs one product.
const combineCalls = 2000;
const combineLengths = Array.from({ length: 64 }, (_, n) => blockBytes + n * 4099);

async function combineCost(name: string, lengthOf: (n: number) => number): Promise<void> {
  const crc32cNs = await bestNs(() => {
    let crc = 0;
    for (let n = 0; n < combineCalls; n++) crc = crc32cCombine(crc, n, lengthOf(n));
    return String(crc);
  });
  const crc64Ns = await bestNs(() => {
    let crc = 0n;
    for (let n = 0; n < combineCalls; n++) crc = crc64nvmeCombine(crc, BigInt(n), lengthOf(n));
    return String(crc);
  });
  for (const [alg, ns] of [
    ['crc32cCombine', crc32cNs],
    ['crc64nvmeCombine', crc64Ns],
  ] as const) {
    const perCall = (ns / combineCalls).toFixed(0);
    const label = `${alg} ${name}`.padEnd(30);
    console.log(`${'combine'.padEnd(12)} ${label} ${perCall.padStart(7)} ns/call`);
  }
}

await combineCost('new length', (n) => combineLengths[n & 63] ?? 0);
await combineCost('same length', () => blockBytes);
console.log(`result hash ${results.digest('hex').slice(0, 16)}`);
