// The gear scan of chunker.ts compiled to WebAssembly, run on a memory it shares with the body
// arena so that it reads body bytes in place.
//
// Why: the scan is the ordered stage's main cost, and in JavaScript every byte pays two bounds
// checks (the body byte and the table entry). WebAssembly's loads need none (V8 backs a 32-bit
// memory with guard pages), and the scan runs 2.2–2.6 times as fast: 0.35–0.5 against
// 1.0–1.1 ns per byte on the project machine (docs/benchmarks.md, change log 11:20).
//
// The module is small enough to be written here by hand, as the bytes of its binary format
// (WebAssembly core specification, chapter 5), so the build needs no WebAssembly toolchain. It
// computes exactly what `gearScanJs` in chunker.ts computes; the chunker tests compare the two
// on every mask the chunker uses.
//
// The module, in the text format:
//
//   (import "env" "memory" (memory 1 65536 shared))
//   (global $hash (export "hash") (mut i32) (i32.const 0))
//   ;; Rolls h = (h << 1) + table[byte] over memory[from, to); returns the address of the first
//   ;; byte after which (h & mask) == 0, or -1. $hash holds h after the last byte consumed.
//   (func (export "scan") (param $from i32) (param $to i32) (param $h i32) (param $mask i32)
//                         (param $table i32) (result i32) (local $i i32) (local $t i32)
//     (local.set $i (local.get $from))
//     (block $bytewise
//       (loop $octets                                  ;; eight bytes a turn, no hit yet
//         (br_if $bytewise (i32.gt_u (i32.add (local.get $i) (i32.const 8)) (local.get $to)))
//         ;; k = 0..7: t = (prev << 1) + table[memory[i + k]]; a hit leaves h and i at the
//         ;; turn's start, and the bytewise loop finds which byte it was
//         (br_if $bytewise (i32.eqz (i32.and (local.tee $t (i32.add
//           (i32.shl (local.get $h) (i32.const 1))
//           (i32.load (i32.add (local.get $table)
//                              (i32.shl (i32.load8_u offset=0 (local.get $i)) (i32.const 2))))))
//           (local.get $mask))))
//         ... offset=1 .. offset=7, each from $t ...
//         (local.set $h (local.get $t))
//         (local.set $i (i32.add (local.get $i) (i32.const 8)))
//         (br $octets)))
//     (block $done
//       (loop $bytes
//         (br_if $done (i32.eqz (i32.lt_u (local.get $i) (local.get $to))))
//         (local.set $h (i32.add (i32.shl (local.get $h) (i32.const 1)) (table lookup of $i)))
//         (if (i32.eqz (i32.and (local.get $h) (local.get $mask)))
//           (then (global.set $hash (local.get $h)) (return (local.get $i))))
//         (local.set $i (i32.add (local.get $i) (i32.const 1)))
//         (br $bytes)))
//     (global.set $hash (local.get $h))
//     (i32.const -1))

import assert from 'node:assert/strict';

/** Bytes of one WebAssembly page. */
export const WASM_PAGE_BYTES = 65536;
/** Pages a 32-bit WebAssembly memory can have. */
export const WASM_PAGES_MAX = 65536;
/**
 * Largest memory the kernel scans: 2 GiB, so that every address is a non-negative int32 and an
 * address is never mistaken for the -1 of "no cut".
 */
export const GEAR_KERNEL_MEMORY_BYTES_MAX = 2 ** 31;
/** Bytes of the gear table the kernel keeps in the memory it scans. */
export const GEAR_KERNEL_TABLE_BYTES = 256 * 4;

const UNROLL = 8;

// Opcodes and encodings used below (core specification, 5.4).
const I32 = 0x7f;
const VOID_BLOCK = 0x40;
const OP = {
  block: 0x02,
  loop: 0x03,
  if: 0x04,
  end: 0x0b,
  br: 0x0c,
  brIf: 0x0d,
  return: 0x0f,
  localGet: 0x20,
  localSet: 0x21,
  localTee: 0x22,
  globalSet: 0x24,
  i32Load: 0x28,
  i32Load8u: 0x2d,
  i32Const: 0x41,
  i32Eqz: 0x45,
  i32LtU: 0x49,
  i32GtU: 0x4b,
  i32Add: 0x6a,
  i32And: 0x71,
  i32Shl: 0x74,
} as const;

function unsignedLeb(value: number): number[] {
  const out: number[] = [];
  let rest = value >>> 0;
  do {
    const low = rest & 0x7f;
    rest >>>= 7;
    out.push(rest === 0 ? low : low | 0x80);
  } while (rest !== 0);
  return out;
}

function signedLeb(value: number): number[] {
  const out: number[] = [];
  let rest = value | 0;
  for (;;) {
    const low = rest & 0x7f;
    rest >>= 7;
    const done = (rest === 0 && (low & 0x40) === 0) || (rest === -1 && (low & 0x40) !== 0);
    out.push(done ? low : low | 0x80);
    if (done) return out;
  }
}

function vector(items: readonly number[][]): number[] {
  return [...unsignedLeb(items.length), ...items.flat()];
}

function name(text: string): number[] {
  return vector([...Buffer.from(text, 'utf8')].map((byte) => [byte]));
}

function section(id: number, body: readonly number[]): number[] {
  return [id, ...unsignedLeb(body.length), ...body];
}

// Locals of the scan function: its five parameters, then two more.
const FROM = 0;
const TO = 1;
const H = 2;
const MASK = 3;
const TABLE = 4;
const I = 5;
const T = 6;

const get = (local: number): number[] => [OP.localGet, local];
const set = (local: number): number[] => [OP.localSet, local];
const constant = (value: number): number[] => [OP.i32Const, ...signedLeb(value)];

/** (prev << 1) + table[memory[i + offset]], left on the stack. */
function roll(prev: number, offset: number): number[] {
  return [
    ...get(prev),
    ...constant(1),
    OP.i32Shl,
    ...get(TABLE),
    ...get(I),
    OP.i32Load8u,
    0, // alignment 2^0
    ...unsignedLeb(offset),
    ...constant(2),
    OP.i32Shl,
    OP.i32Add,
    OP.i32Load,
    2, // alignment 2^2
    0, // offset
    OP.i32Add,
  ];
}

/** The value on the stack has none of the mask's bits set. */
const masksToZero: number[] = [...get(MASK), OP.i32And, OP.i32Eqz];

function scanBody(): number[] {
  const octets: number[] = [];
  for (let k = 0; k < UNROLL; k += 1) {
    octets.push(...roll(k === 0 ? H : T, k), OP.localTee, T, ...masksToZero, OP.brIf, 1);
  }
  return [
    ...get(FROM),
    ...set(I),
    OP.block,
    VOID_BLOCK, // $bytewise
    OP.loop,
    VOID_BLOCK, // $octets
    ...get(I),
    ...constant(UNROLL),
    OP.i32Add,
    ...get(TO),
    OP.i32GtU,
    OP.brIf,
    1,
    ...octets,
    ...get(T),
    ...set(H),
    ...get(I),
    ...constant(UNROLL),
    OP.i32Add,
    ...set(I),
    OP.br,
    0,
    OP.end,
    OP.end,
    OP.block,
    VOID_BLOCK, // $done
    OP.loop,
    VOID_BLOCK, // $bytes
    ...get(I),
    ...get(TO),
    OP.i32LtU,
    OP.i32Eqz,
    OP.brIf,
    1,
    ...roll(H, 0),
    OP.localTee,
    H,
    ...masksToZero,
    OP.if,
    VOID_BLOCK,
    ...get(H),
    OP.globalSet,
    0,
    ...get(I),
    OP.return,
    OP.end,
    ...get(I),
    ...constant(1),
    OP.i32Add,
    ...set(I),
    OP.br,
    0,
    OP.end,
    OP.end,
    ...get(H),
    OP.globalSet,
    0,
    ...constant(-1),
    OP.end,
  ];
}

function moduleBytes(): Uint8Array {
  const functionType = [0x60, ...vector([[I32], [I32], [I32], [I32], [I32]]), ...vector([[I32]])];
  const sharedLimits = 0x03; // min and max, shared
  const memoryImport = [
    ...name('env'),
    ...name('memory'),
    0x02, // memory
    sharedLimits,
    ...unsignedLeb(1),
    ...unsignedLeb(WASM_PAGES_MAX),
  ];
  const hashGlobal = [I32, 0x01 /* mutable */, ...constant(0), OP.end];
  const exports = [
    [...name('scan'), 0x00 /* function */, 0],
    [...name('hash'), 0x03 /* global */, 0],
  ];
  const locals = vector([[2, I32]]);
  const code = [...locals, ...scanBody()];
  return new Uint8Array([
    ...[0x00, 0x61, 0x73, 0x6d], // \0asm
    ...[0x01, 0x00, 0x00, 0x00], // version 1
    ...section(1, vector([functionType])),
    ...section(2, vector([memoryImport])),
    ...section(3, vector([unsignedLeb(0)])),
    ...section(6, vector([hashGlobal])),
    ...section(7, vector(exports)),
    ...section(10, vector([[...unsignedLeb(code.length), ...code]])),
  ]);
}

let compiled: WebAssembly.Module | undefined;

interface KernelExports {
  scan(from: number, to: number, hash: number, mask: number, table: number): number;
  readonly hash: WebAssembly.Global;
}

/**
 * The gear scan on one shared WebAssembly memory. It keeps its table at `tableOffset` in that
 * memory (GEAR_KERNEL_TABLE_BYTES, which the owner of the memory sets aside) and scans any
 * bytes that lie in the same memory.
 */
export class GearKernel {
  private readonly exports: KernelExports;

  constructor(
    readonly memory: WebAssembly.Memory,
    private readonly tableOffset: number,
    table: Int32Array,
  ) {
    assert.ok(memory.buffer.byteLength <= GEAR_KERNEL_MEMORY_BYTES_MAX);
    assert.ok(
      tableOffset % 4 === 0 && tableOffset + GEAR_KERNEL_TABLE_BYTES <= memory.buffer.byteLength,
    );
    assert.equal(table.length * 4, GEAR_KERNEL_TABLE_BYTES);
    compiled ??= new WebAssembly.Module(moduleBytes());
    const instance = new WebAssembly.Instance(compiled, { env: { memory } });
    this.exports = instance.exports as unknown as KernelExports;
    new Int32Array(memory.buffer, tableOffset, table.length).set(table);
  }

  /** The bytes lie in this kernel's memory, so `scan` can read them. */
  covers(bytes: Uint8Array): boolean {
    return bytes.buffer === this.memory.buffer;
  }

  /**
   * As chunker.ts's gearScanJs over bytes[from, to) of a view that `covers` accepts: the index
   * (in the view) of the first byte after which (h & mask) == 0, or -1; `hash` then holds h.
   */
  scan(bytes: Uint8Array, from: number, to: number, hash: number, mask: number): number {
    const base = bytes.byteOffset;
    const at = this.exports.scan(base + from, base + to, hash, mask, this.tableOffset);
    return at < 0 ? -1 : at - base;
  }

  /** h after the last byte the last `scan` consumed. */
  get hash(): number {
    return this.exports.hash.value as number;
  }
}
