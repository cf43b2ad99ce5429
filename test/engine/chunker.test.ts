// Goal: chunk boundaries are a pure, stable function of the content (the dedup contract) and
// behave like FastCDC: sizes within [min, max], a mean near avg, and local effects of edits.
// Method: a pinned hash of the gear table and of golden cut lists, comparison with a naive
// byte-by-byte reference, fast-check properties over random data and random block splits (seeds
// print on failure), and statistics on seeded pseudo-random bodies.
import t from 'tap';
import fc from 'fast-check';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import {
  Chunker,
  GEAR_TABLE,
  GEAR_TABLE_CHECKSUM,
  chunkBoundaries,
  gearTableChecksum,
} from '../../src/engine/chunker.js';

/** Seeded xorshift32 bytes: reproducible "random" bodies, fast enough for 64 MiB. */
function pseudoRandomBytes(length: number, seed: number): Uint8Array {
  const words = new Uint32Array(Math.ceil(length / 4));
  let x = seed >>> 0 || 1;
  for (let i = 0; i < words.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    words[i] = x;
  }
  return new Uint8Array(words.buffer, 0, length);
}

/** FastCDC as the header comment states it, hashing every byte from each chunk start. */
function referenceCuts(data: Uint8Array, avgBytes: number): number[] {
  const [minBytes, maxBytes, bits] = [avgBytes / 4, avgBytes * 4, Math.log2(avgBytes)];
  const maskS = 2 ** 32 - 2 ** (32 - (bits + 2));
  const maskL = 2 ** 32 - 2 ** (32 - (bits - 2));
  const cuts: number[] = [];
  let start = 0;
  while (start < data.length) {
    const end = Math.min(start + maxBytes, data.length);
    let cut = end;
    let h = 0;
    for (let i = start; i < end; i++) {
      h = (h * 2 + GEAR_TABLE[data[i]!]!) % 2 ** 32;
      const length = i - start + 1;
      const mask = length < avgBytes ? maskS : maskL;
      if (length >= minBytes && length < maxBytes && (h & mask) === 0) {
        cut = i + 1;
        break;
      }
    }
    cuts.push(cut);
    start = cut;
  }
  return cuts;
}

function cutsOfBlocks(blocks: readonly Uint8Array[], avgBytes: number): number[] {
  const chunker = new Chunker({ avgBytes });
  const cuts: number[] = [];
  for (const block of blocks) cuts.push(...chunker.push(block));
  return [...cuts, ...chunker.finish()];
}

function splitAt(data: Uint8Array, points: readonly number[]): Uint8Array[] {
  const sorted = [...new Set(points.map((p) => p % (data.length + 1)))].sort((a, b) => a - b);
  const blocks: Uint8Array[] = [];
  let from = 0;
  for (const point of [...sorted, data.length]) {
    blocks.push(data.subarray(from, point));
    from = point;
  }
  return blocks;
}

function chunkLengths(cuts: readonly number[]): number[] {
  return cuts.map((cut, n) => cut - (n === 0 ? 0 : cuts[n - 1]!));
}

t.test('the gear table is pinned', async (t) => {
  // The table decides every chunk boundary ever stored: it must never change.
  const pinned = 'b706aa27652b6fa06442263a4f2f8de9fd6fe4a535a4dc3675477821e55e7e88';
  t.equal(gearTableChecksum(GEAR_TABLE), pinned);
  t.equal(GEAR_TABLE_CHECKSUM, pinned);
  t.equal(GEAR_TABLE.length, 256);
  t.equal(new Set(GEAR_TABLE).size, 256, 'entries are distinct');
});

t.test('golden cut points are pinned', async (t) => {
  // Cut lists of fixed bodies for several sizes, hashed to one constant.
  const all = createHash('sha256');
  for (const avgBytes of [256, 4096, 65_536, 1 << 20]) {
    const body = pseudoRandomBytes(avgBytes * 24, avgBytes);
    all.update(`${avgBytes}:${chunkBoundaries(body, { avgBytes }).join(',')};`);
  }
  t.equal(all.digest('hex'), 'd6e4f4cf0f7eddb1bc804106dfeab5c9ea5337f1663117bd3ccd99ae50a2c90b');
});

t.test('equals the byte-by-byte reference for any block split', async (t) => {
  fc.assert(
    fc.property(
      fc.uint8Array({ maxLength: 12_000 }),
      fc.array(fc.nat(), { maxLength: 12 }),
      fc.constantFrom(256, 512, 1024),
      (data, points, avgBytes) => {
        const expected = referenceCuts(data, avgBytes);
        assert.deepEqual(cutsOfBlocks([data], avgBytes), expected);
        assert.deepEqual(cutsOfBlocks(splitAt(data, points), avgBytes), expected);
      },
    ),
    { numRuns: 150 },
  );
  // fast-check's bytes are mostly uniform; also cover long runs and low entropy.
  fc.assert(
    fc.property(
      fc.array(fc.record({ byte: fc.integer({ min: 0, max: 3 }), run: fc.nat(3000) }), {
        maxLength: 20,
      }),
      fc.array(fc.nat(), { maxLength: 6 }),
      (runs, points) => {
        const data = Uint8Array.from(runs.flatMap((r) => Array<number>(r.run).fill(r.byte)));
        assert.deepEqual(cutsOfBlocks(splitAt(data, points), 256), referenceCuts(data, 256));
      },
    ),
    { numRuns: 100 },
  );
  t.pass('random bodies and splits agree with the reference');
});

t.test('identical content gives identical cuts at the default size', async (t) => {
  // 1 MiB blocks as the gateway delivers them, against odd block sizes and a Buffer view.
  const body = pseudoRandomBytes(24 << 20, 7);
  const expected = chunkBoundaries(body);
  t.same(cutsOfBlocks(splitAt(body, [1, 777_777, 5 << 20, (5 << 20) + 3]), 1 << 20), expected);
  const blocks: Uint8Array[] = [];
  for (let from = 0; from < body.length; from += 1 << 20) {
    blocks.push(Buffer.from(body.buffer, from, Math.min(1 << 20, body.length - from)));
  }
  t.same(cutsOfBlocks(blocks, 1 << 20), expected);
  t.same(expected, referenceCuts(body, 1 << 20), 'matches the reference');
});

t.test('SharedArrayBuffer blocks chunk like ordinary ones', async (t) => {
  const body = pseudoRandomBytes(1 << 20, 11);
  const shared = new Uint8Array(new SharedArrayBuffer(body.length));
  shared.set(body);
  t.same(chunkBoundaries(shared, { avgBytes: 4096 }), chunkBoundaries(body, { avgBytes: 4096 }));
});

t.test('chunk sizes stay within [min, max] and average near avg', async (t) => {
  for (const [avgBytes, bodyBytes] of [
    [4096, 8 << 20],
    [65_536, 32 << 20],
    [1 << 20, 64 << 20],
  ] as const) {
    const chunker = new Chunker({ avgBytes });
    const cuts = chunkBoundaries(pseudoRandomBytes(bodyBytes, avgBytes + 1), { avgBytes });
    const lengths = chunkLengths(cuts);
    const last = lengths.pop() ?? 0;
    t.ok(last > 0 && last <= chunker.maxBytes, `last chunk ${last}`);
    const outside = lengths.filter((l) => l < chunker.minBytes || l > chunker.maxBytes);
    t.same(outside, [], `avg ${avgBytes}: every chunk but the last within [min, max]`);
    const mean = lengths.reduce((sum, l) => sum + l, 0) / lengths.length;
    t.ok(
      mean >= avgBytes * 0.7 && mean <= avgBytes * 1.3,
      `avg ${avgBytes}: mean ${Math.round(mean)} over ${lengths.length} chunks within ±30%`,
    );
  }
});

t.test('low-entropy data is cut at max', async (t) => {
  const chunker = new Chunker({ avgBytes: 4096 });
  const zeros = new Uint8Array(100_000);
  const cuts = [...chunker.push(zeros), ...chunker.finish()];
  const lengths = chunkLengths(cuts);
  t.ok(
    lengths.slice(0, -1).every((l) => l === chunker.maxBytes),
    'all full chunks are max',
  );
  t.equal(cuts.at(-1), zeros.length);
});

t.test('an insertion at the start moves only nearby boundaries', async (t) => {
  const avgBytes = 65_536;
  const body = pseudoRandomBytes(16 << 20, 3);
  const edited = new Uint8Array(body.length + 100);
  edited.set(pseudoRandomBytes(100, 5));
  edited.set(body, 100);
  const before = chunkBoundaries(body, { avgBytes });
  const after = new Set(chunkBoundaries(edited, { avgBytes }));
  const kept = before.filter((cut) => after.has(cut + 100)).length;
  t.ok(kept >= before.length - 2, `${kept} of ${before.length} boundaries shifted by 100`);
  t.ok(before.length > 150, `${before.length} chunks`);
});

t.test('empty input gives no chunks', async (t) => {
  t.same(chunkBoundaries(new Uint8Array(0)), []);
  const chunker = new Chunker();
  t.same(chunker.push(new Uint8Array(0)), []);
  t.same(chunker.push(Buffer.alloc(0)), []);
  t.same(chunker.finish(), []);
  t.same(chunkBoundaries(new Uint8Array(1), { avgBytes: 256 }), [1], 'one byte is one chunk');
});

t.test('options and misuse', async (t) => {
  const chunker = new Chunker();
  t.same([chunker.avgBytes, chunker.minBytes, chunker.maxBytes], [1 << 20, 1 << 18, 1 << 22]);
  for (const avgBytes of [0, 128, 1000, 4097, 1 << 27, Number.NaN, 2.5]) {
    t.throws(() => new Chunker({ avgBytes }), { code: 'bad_request' }, `avgBytes ${avgBytes}`);
  }
  const used = new Chunker({ avgBytes: 256 });
  t.same(used.push(new Uint8Array(100)), []);
  t.equal(used.length, 100);
  t.same(used.finish(), [100]);
  t.throws(() => used.push(new Uint8Array(1)), { code: 'ERR_ASSERTION' });
  t.throws(() => used.finish(), { code: 'ERR_ASSERTION' });
});
