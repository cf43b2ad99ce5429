// Goal: `crc32c` answers the standard CRC-32C for any bytes, wherever they live, through either
// implementation: Lightwell's native library (three interleaved chains joined with a carry-less
// multiply) and @node-rs/crc32 agree on every length, alignment and split; on a machine with a
// C compiler and an x86-64 CPU with SSE4.2 and PCLMULQDQ the build really produced the library
// and `crc32c` uses it; without the library, or without koffi, Lightwell falls back quietly;
// the build script builds where asked, and without a compiler warns and succeeds unless told
// the library is required.
// Method: the check value of "123456789"; fast-check properties over random bytes, offsets and
// split points against @node-rs/crc32; lengths around the chains' stretch sizes (3 x 256 and
// 3 x 4096 bytes) where the joins happen; views of a SharedArrayBuffer and of a shared
// WebAssembly.Memory (the upload arena); scripts/build-native.mjs run into a temp directory.
import t from 'tap';
import fc from 'fast-check';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crc32c as nodeRsCrc32c } from '@node-rs/crc32';
import { crc32c, crc32cImplementation, crc32cPortable } from '../../src/util/crc32c.js';
import { loadNative, native, NATIVE_LIBRARY_PATH } from '../../src/util/libc.js';
import { checkBuild, compilerAvailable } from '../helpers/build-native.js';

const CHECK_INPUT = Buffer.from('123456789');
const CHECK_VALUE = 0xe3069283;

function cpuHasFastPath(): boolean {
  if (process.platform !== 'linux' || process.arch !== 'x64') return false;
  const flags = /^flags\s*:(.*)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? '';
  return / sse4_2( |$)/.test(flags) && / pclmulqdq( |$)/.test(flags);
}

const fast = native()?.crc32c ? native() : undefined;

t.test('the build produced the native library, and crc32c uses it', async (t) => {
  if (!compilerAvailable() || !cpuHasFastPath()) {
    t.equal(crc32cImplementation(), fast ? 'native' : '@node-rs/crc32');
    return;
  }
  t.ok(existsSync(NATIVE_LIBRARY_PATH), `${NATIVE_LIBRARY_PATH} exists`);
  t.ok(fast, 'the library loads and its CPU check passes');
  t.equal(crc32cImplementation(), 'native');
});

t.test('the check value of "123456789"', async (t) => {
  t.equal(crc32c(CHECK_INPUT), CHECK_VALUE, 'crc32c');
  t.equal(crc32cPortable(CHECK_INPUT), CHECK_VALUE, 'portable');
  if (fast) t.equal(fast.crc32c?.(CHECK_INPUT, 0), CHECK_VALUE, 'native');
  t.equal(crc32c(Buffer.alloc(0)), 0, 'nothing');
  t.equal(crc32c(Buffer.alloc(0), 0x12345678), 0x12345678, 'nothing after something');
});

t.test('native and portable agree on lengths around every join', { skip: !fast }, async (t) => {
  const bytes = randomBytes(3 * 4096 * 3 + 64);
  const lengths = new Set<number>();
  for (const stretch of [256, 4096])
    for (let rounds = 1; rounds <= 3; rounds++)
      for (let delta = -17; delta <= 17; delta++) lengths.add(3 * stretch * rounds + delta);
  for (let length = 0; length <= 80; length++) lengths.add(length);
  let mismatches = 0;
  for (const length of lengths)
    for (let offset = 0; offset < 9; offset++) {
      const view = bytes.subarray(offset, offset + length);
      if (fast?.crc32c?.(view, 0) !== nodeRsCrc32c(view)) mismatches += 1;
    }
  t.equal(mismatches, 0, `${lengths.size} lengths at 9 alignments`);
});

t.test('any bytes, split anywhere, continue from any CRC', async (t) => {
  fc.assert(
    fc.property(
      fc.uint8Array({ minLength: 0, maxLength: 40_000 }),
      fc.nat(),
      fc.integer({ min: 0, max: 0xffffffff }),
      (array, cut, initial) => {
        const bytes = Buffer.from(array);
        const at = bytes.length === 0 ? 0 : cut % bytes.length;
        const whole = nodeRsCrc32c(bytes, initial);
        const joined = crc32c(bytes.subarray(at), crc32c(bytes.subarray(0, at), initial));
        return crc32c(bytes, initial) === whole && joined === whole;
      },
    ),
    { numRuns: 300 },
  );
  t.pass('crc32c(b, crc32c(a, x)) = crc32c(a + b, x) = @node-rs/crc32');
});

t.test('views of shared memory, as the upload arena hands them out', async (t) => {
  const shared = new Uint8Array(new SharedArrayBuffer(200_000));
  shared.set(randomBytes(shared.length));
  const memory = new WebAssembly.Memory({ initial: 4, maximum: 4, shared: true });
  const wasm = new Uint8Array(memory.buffer);
  wasm.set(randomBytes(wasm.length));
  for (const [name, whole] of [
    ['SharedArrayBuffer', shared],
    ['WebAssembly.Memory', wasm],
  ] as const) {
    const view = whole.subarray(3, 150_003);
    const expected = nodeRsCrc32c(Buffer.from(view));
    t.equal(crc32c(view), expected, name);
    t.equal(crc32cPortable(view), expected, `${name}, portable`);
  }
});

t.test('without the library, or without koffi, there is no native path', async (t) => {
  t.equal(loadNative(join(tmpdir(), 'no-such-liblightwell.so')), undefined, 'missing file');
  t.equal(
    loadNative(NATIVE_LIBRARY_PATH, () => {
      throw new TypeError('Cannot find the native Koffi module');
    }),
    undefined,
    'no koffi',
  );
});

t.test('the build script', async (t) => {
  const built = checkBuild(t, '--out', /native library not built .*@node-rs\/crc32/);
  if (built === null) return;
  const loaded = loadNative(built);
  if (cpuHasFastPath()) t.equal(loaded?.crc32c?.(CHECK_INPUT, 0), CHECK_VALUE, 'the new library');
});
