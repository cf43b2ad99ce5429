// Goal: the WebAssembly gear scan computes exactly what the chunker's JavaScript scan computes,
// so the ordered stage's cut points (the dedup contract) do not depend on which one ran.
// Method: the kernel against gearScanJs hit by hit over seeded random data, for every mask the
// chunker uses and for ranges that end inside or just after an eight-byte turn; fast-check over
// random bytes, ranges and masks (seeds print on failure); and whole bodies chunked in a body
// arena's memory with the kernel against the same bodies chunked in plain buffers.
import t from 'tap';
import fc from 'fast-check';
import assert from 'node:assert/strict';
import {
  Chunker,
  GEAR_INT32,
  chunkAvgBytesMax,
  chunkAvgBytesMin,
  chunkBoundaries,
  gearScanJs,
} from '../../src/engine/chunker.js';
import {
  GearKernel,
  GEAR_KERNEL_TABLE_BYTES,
  WASM_PAGE_BYTES,
} from '../../src/engine/gear-kernel.js';
import { BodyArena } from '../../src/service/body-arena.js';

/** A kernel on a fresh memory of `pages`, with its table in the last KiB. */
function kernelOn(pages: number): { kernel: GearKernel; bytes: Uint8Array } {
  const memory = new WebAssembly.Memory({ initial: pages, maximum: pages, shared: true });
  const tableOffset = pages * WASM_PAGE_BYTES - GEAR_KERNEL_TABLE_BYTES;
  const kernel = new GearKernel(memory, tableOffset, GEAR_INT32);
  return { kernel, bytes: new Uint8Array(memory.buffer, 0, tableOffset) };
}

function randomFill(bytes: Uint8Array, seed: number): void {
  let x = seed >>> 0 || 1;
  for (let i = 0; i < bytes.length; i += 1) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    bytes[i] = x & 0xff;
  }
}

/** Every hit of a scan over view[from, to), as [index, hash] pairs, and the final hash. */
function hits(
  scan: (from: number, to: number, hash: number) => { at: number; hash: number },
  from: number,
  to: number,
): number[][] {
  const found: number[][] = [];
  let hash = 0;
  for (let at = from; at <= to;) {
    const next = scan(at, to, hash);
    found.push([next.at, next.hash]);
    if (next.at < 0) break;
    hash = next.hash;
    at = next.at + 1;
  }
  return found;
}

function both(kernel: GearKernel, view: Uint8Array, mask: number) {
  const viaKernel = (from: number, to: number, hash: number) => ({
    at: kernel.scan(view, from, to, hash, mask),
    hash: kernel.hash,
  });
  const viaJs = (from: number, to: number, hash: number) => {
    const at = gearScanJs(view, from, to, hash, mask);
    // gearScanJs leaves its hash in module state; recover it by rolling the same bytes.
    let h = hash;
    const end = at < 0 ? to : at + 1;
    for (let i = from; i < end; i += 1) h = ((h << 1) + (GEAR_INT32[view[i] ?? 0] ?? 0)) | 0;
    return { at, hash: h };
  };
  return { viaKernel, viaJs };
}

const masks = (() => {
  const all = new Set<number>([-1, -1 << 31]);
  for (let bits = Math.log2(chunkAvgBytesMin); bits <= Math.log2(chunkAvgBytesMax); bits += 1) {
    all.add((-1 << (32 - (bits + 2))) | 0);
    all.add((-1 << (32 - (bits - 2))) | 0);
  }
  return [...all];
})();

t.test('every hit and hash equals the JavaScript scan, for every chunker mask', async (t) => {
  const { kernel, bytes } = kernelOn(40);
  randomFill(bytes, 17);
  // A view that does not start at the memory's first byte, as arena blocks do not.
  const view = bytes.subarray(12_345, 12_345 + (2 << 20));
  for (const mask of masks) {
    const { viaKernel, viaJs } = both(kernel, view, mask);
    const expected = hits(viaJs, 0, view.length);
    t.same(hits(viaKernel, 0, view.length), expected, `mask ${(mask >>> 0).toString(16)}`);
  }
  t.ok(
    hits(both(kernel, view, (-1 << 26) | 0).viaJs, 0, view.length).length > 10,
    'the test finds hits',
  );
});

t.test('short ranges, ranges ending inside a turn, and hits at every position', async (t) => {
  const { kernel, bytes } = kernelOn(2);
  fc.assert(
    fc.property(
      fc.uint8Array({ minLength: 0, maxLength: 200 }),
      fc.nat(64),
      fc.nat(200),
      fc.integer(),
      fc.constantFrom(...masks, (-1 << 28) | 0, (-1 << 29) | 0, (-1 << 30) | 0),
      (data, offset, cut, hash, mask) => {
        bytes.set(data, offset);
        const view = bytes.subarray(offset, offset + data.length);
        const to = Math.min(cut, data.length);
        const { viaKernel, viaJs } = both(kernel, view, mask);
        for (let from = 0; from <= to; from += 1) {
          const expected = viaJs(from, to, hash);
          assert.deepEqual(viaKernel(from, to, hash), expected);
        }
      },
    ),
    { numRuns: 300 },
  );
  t.pass('agrees on 300 random cases');
});

t.test('bodies in a body arena chunk as in plain buffers', async (t) => {
  const arena = new BodyArena(256 << 10, 16);
  t.ok(arena.memory, 'the arena is a WebAssembly memory');
  if (!arena.memory) return;
  const kernel = new GearKernel(arena.memory, arena.kernelOffset, GEAR_INT32);
  for (const avgBytes of [4096, 65_536]) {
    const chunker = new Chunker({ avgBytes, kernel });
    const plain: Uint8Array[] = [];
    const cuts: number[] = [];
    for (let n = 0; n < 32; n += 1) {
      const block = n % arena.blockCount;
      const length = (256 << 10) - (n % 3) * 1000;
      const view = arena.view(block, 0, length);
      randomFill(view, n + avgBytes);
      plain.push(Uint8Array.from(view));
      cuts.push(...chunker.push(view));
    }
    cuts.push(...chunker.finish());
    const whole = new Uint8Array(plain.reduce((sum, p) => sum + p.length, 0));
    plain.reduce((offset, p) => (whole.set(p, offset), offset + p.length), 0);
    t.same(cuts, chunkBoundaries(whole, { avgBytes }), `avg ${avgBytes}: ${cuts.length} cuts`);
  }
});

t.test('a block outside the kernel memory is scanned in JavaScript', async (t) => {
  const { kernel } = kernelOn(1);
  const body = new Uint8Array(1 << 20);
  randomFill(body, 5);
  t.notOk(kernel.covers(body));
  const chunker = new Chunker({ avgBytes: 4096, kernel });
  t.same([...chunker.push(body), ...chunker.finish()], chunkBoundaries(body, { avgBytes: 4096 }));
});
