// Goal: benchmark payloads are deterministic, unique where they must be (so the server cannot
// deduplicate what it should store) and identical where they must be (the dedup scenarios); the
// text template compresses 3-5x; latency percentiles are accurate to a bucket; the process-tree
// sampler finds children and counts CPU and RSS.
// Method: regenerate bodies with different slice sizes and compare CRCs and blocks; compress
// the text template with lz4-napi; record known distributions; sample a spawned child tree.

import t from 'tap';
import { spawn } from 'node:child_process';
import { crc32, crc32c } from '@node-rs/crc32';
import { compressSync } from 'lz4-napi';
import {
  crc32cBase64,
  fillSlice,
  makeTemplate,
  planChecksums,
  repeatedCrc32,
  SeedAllocator,
  STAMP_STRIDE_BYTES,
} from '../../bench/data.js';
import { bucketIndex, bucketUpper, Histogram } from '../../bench/histogram.js';
import { processTree, sampleProcessTree, TreeMonitor } from '../../bench/proc-stats.js';

const MiB = 1024 * 1024;

t.test('a plan gives the same bytes whatever the slice size', async (t) => {
  const plan = { template: makeTemplate('random'), length: 9 * MiB + 4099, seed: 123456789012 };
  const sum = planChecksums(plan, Buffer.alloc(MiB));
  t.same(planChecksums(plan, Buffer.alloc(4099)), sum, 'odd slices that split stamps');
  const short = { ...plan, length: 100_003 };
  t.same(
    planChecksums(short, Buffer.alloc(3)),
    planChecksums(short, Buffer.alloc(MiB)),
    '3-byte slices',
  );
  const whole = Buffer.alloc(plan.length);
  t.equal(fillSlice(plan, 0, whole), plan.length);
  t.same({ crc32: crc32(whole), crc32c: crc32c(whole) }, sum, 'one slice');
  const unstamped = { ...plan, seed: null };
  t.equal(
    planChecksums(unstamped, Buffer.alloc(MiB)).crc32,
    repeatedCrc32(plan.template, plan.length),
  );
  const first = { ...plan, length: 5 * MiB + 1 };
  const second = { ...plan, length: 3 * MiB, seed: 7 };
  const both = Buffer.alloc(first.length + second.length);
  fillSlice(first, 0, both);
  fillSlice(second, 0, both.subarray(first.length));
  const chained = planChecksums(second, Buffer.alloc(MiB), planChecksums(first, Buffer.alloc(MiB)));
  t.same(chained, { crc32: crc32(both), crc32c: crc32c(both) }, 'checksums chain across parts');
});

t.test('stamps make every 4 KiB block unique across seeds and offsets', async (t) => {
  const template = makeTemplate('text');
  const length = 2 * template.length;
  const blocks = new Set<string>();
  for (const seed of [1, 2]) {
    const body = Buffer.alloc(length);
    fillSlice({ template, length, seed }, 0, body);
    for (let offset = 0; offset < length; offset += STAMP_STRIDE_BYTES) {
      const block = body.subarray(offset, offset + STAMP_STRIDE_BYTES);
      blocks.add(`${crc32c(block)} ${block.toString('latin1', 0, 20)}`);
    }
  }
  t.equal(
    blocks.size,
    (2 * length) / STAMP_STRIDE_BYTES,
    'no block repeats although the template does',
  );
  const again = Buffer.alloc(4096);
  fillSlice({ template, length, seed: 2 }, 4096, again);
  t.equal(again.toString('latin1', 0, 20), '00000000000200000001', 'stamp: seed, block index');
});

t.test('text template compresses 3-5x with LZ4, random does not', async (t) => {
  const text = makeTemplate('text');
  const random = makeTemplate('random');
  let textOut = 0;
  let randomOut = 0;
  for (let offset = 0; offset < text.length; offset += MiB) {
    textOut += compressSync(text.subarray(offset, offset + MiB)).length;
    randomOut += compressSync(random.subarray(offset, offset + MiB)).length;
  }
  const ratio = text.length / textOut;
  t.ok(ratio >= 3 && ratio <= 5, `text ratio ${ratio.toFixed(2)}`);
  t.ok(random.length / randomOut < 1.01, 'random is incompressible');
  t.same(makeTemplate('text'), text, 'deterministic');
});

t.test('seeds and checksum encoding', async (t) => {
  const seeds = new SeedAllocator(5);
  const a = seeds.next();
  t.equal(seeds.next(), a + 1);
  t.ok(a > 2 ** 24, 'salt in the high bits');
  const check = crc32c(Buffer.from('123456789'));
  t.equal(crc32cBase64(check), Buffer.from('e3069283', 'hex').toString('base64'));
});

t.test('histogram percentiles within one bucket (about 3%)', async (t) => {
  const histogram = new Histogram();
  for (let v = 1; v <= 100_000; v++) histogram.record(v);
  t.equal(histogram.count, 100_000);
  for (const [q, exact] of [
    [0.5, 50_000],
    [0.99, 99_000],
    [1, 100_000],
  ] as const) {
    const value = histogram.percentile(q);
    t.ok(value >= exact && value <= exact * 1.032, `p${q * 100} = ${value}, exact ${exact}`);
  }
  let previous = -1;
  const wrong: number[] = [];
  for (let v = 0; v < 5_000_000; v = Math.floor(v * 1.01) + 1) {
    const index = bucketIndex(v);
    const upper = bucketUpper(index);
    if (index < previous || upper < v || upper > v * 1.032 + 1) wrong.push(v);
    previous = index;
  }
  t.same(wrong, [], 'buckets are monotonic, hold their value, and are at most 3.2% wide');
  t.ok(bucketIndex(2 ** 50) >= bucketIndex(2 ** 40 - 1), 'large values clamp');
  const empty = new Histogram();
  t.equal(empty.percentile(0.99), 0);
  empty.merge(histogram);
  t.equal(empty.percentile(0.5), histogram.percentile(0.5));
});

t.test('process tree: children are found, CPU and RSS counted', async (t) => {
  // 300 ms of the child's own CPU, not of wall time: on a loaded machine a wall-clock busy loop
  // gets a fraction of a core. The child says when it is done, then idles.
  const busy =
    'const s = process.cpuUsage(); ' +
    'for (let u = process.cpuUsage(s); u.user + u.system < 300000; u = process.cpuUsage(s)); ' +
    'process.stdout.write("done"); setTimeout(() => {}, 30000)';
  const child = spawn(process.execPath, ['-e', busy], { stdio: ['ignore', 'pipe', 'ignore'] });
  t.teardown(() => child.kill());
  const monitor = new TreeMonitor(process.pid, 20);
  monitor.begin();
  await new Promise((resolve) => child.stdout.once('data', resolve));
  t.ok(processTree(process.pid).includes(child.pid ?? -1), 'child in the tree');
  const window = monitor.end();
  t.ok(window.cpuSeconds >= 0.2, `tree CPU ${window.cpuSeconds} s includes the busy child`);
  t.ok(window.peakRssBytes > 10 * MiB, `peak RSS ${window.peakRssBytes}`);
  // PSS counts shared pages in part, so it lies between the private memory and the RSS sum.
  t.ok(
    window.peakPssBytes !== null &&
      window.peakPssBytes > 10 * MiB &&
      window.peakPssBytes <= window.peakRssBytes,
    `peak PSS ${String(window.peakPssBytes)}`,
  );
  t.ok(window.processesMax >= 2);
  t.equal(sampleProcessTree(process.pid, false)?.pssBytes, null, 'PSS only when asked');
  t.equal(sampleProcessTree(2 ** 22 + 12345), null, 'a missing root gives null');
});
