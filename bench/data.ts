// Benchmark payloads: deterministic templates and the stamped bodies built from them.
//
// A PUT body is a `BodyPlan`: a shared, read-only template repeated to the body's length. When
// the plan has a seed, every 4 KiB block starts with a 20-byte ASCII stamp (12 hex digits of
// seed, 8 of block index), so no content-defined chunk of one object equals a chunk of another
// object or of the same object: the server cannot deduplicate what it should store. Writing the
// same seed again reproduces the same bytes exactly, which is how the deduplicating scenarios
// send "the same content again". Bodies are never materialised whole: the load generator fills
// one slice at a time into buffers it reuses (`fillSlice`), and the expected checksums of a body
// are recomputed the same way (`planChecksums`) outside the timed part of a scenario: CRC32C to
// compare with the server's own, CRC32 (twice as fast) to verify GET bodies while timed.
//
// Templates: `random` is incompressible (xorshift PRNG), `text` is JSON log lines that LZ4
// compresses about 3.6x. Both depend only on their seed, so the uWS sink child process and the
// client build identical bytes without exchanging them. Nothing here is persisted.

import assert from 'node:assert/strict';
import { crc32 } from '@node-rs/crc32';
import { crc32c } from '../src/util/crc32c.js';

export type DataKind = 'random' | 'text';

/** Size of each template; bodies longer than this repeat it (the stamps keep them unique). */
export const TEMPLATE_BYTES = 4 * 1024 * 1024;
export const STAMP_STRIDE_BYTES = 4096;
export const STAMP_BYTES = 20;
/** Seeds are 48-bit so that stamps stay unique across runs against a long-lived service. */
export const SEED_MAX = 2 ** 48 - 1;

export interface BodyPlan {
  readonly template: Buffer;
  readonly length: number;
  /** Null: the template repeated as is (tiny objects, sink measurements). */
  readonly seed: number | null;
}

const HEX_DIGITS = Buffer.from('0123456789abcdef', 'latin1');

/** Fills `target` with deterministic pseudo-random bytes (xorshift32). */
export function fillRandom(target: Buffer, seed: number): void {
  let state = seed >>> 0 || 0x9e3779b9;
  const words = Math.floor(target.length / 4);
  const view = new Uint32Array(target.buffer, target.byteOffset, words);
  for (let i = 0; i < words; i++) {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    view[i] = state >>> 0;
  }
  for (let i = words * 4; i < target.length; i++) target[i] = (state >>> (8 * (i % 4))) & 0xff;
}

const templates = new Map<string, Buffer>();

/**
 * The template of `bytes` bytes for a kind and seed, built once per process and shared: callers
 * must treat it as read-only.
 */
export function makeTemplate(kind: DataKind, bytes: number = TEMPLATE_BYTES, seed = 1): Buffer {
  assert.ok(bytes > 0 && bytes % 4 === 0, 'template size is a positive multiple of 4');
  const name = `${kind} ${bytes} ${seed}`;
  let template = templates.get(name);
  if (template === undefined) {
    template = kind === 'random' ? Buffer.alloc(bytes) : makeTextTemplate(bytes, seed);
    if (kind === 'random') fillRandom(template, seed);
    templates.set(name, template);
  }
  return template;
}

const LEVELS = ['info', 'info', 'info', 'debug', 'warn', 'error'];
const SERVICES = ['ingest', 'gateway', 'billing', 'auth', 'search', 'scheduler', 'indexer'];
const MESSAGES = [
  'request completed',
  'upstream timeout, retrying',
  'cache miss',
  'object stored',
  'token refreshed',
  'queue drained',
  'connection reset by peer',
  'slow query detected',
];
const PATHS = ['/api/v1/events', '/api/v1/metrics', '/api/v1/objects', '/healthz', '/api/v1/users'];
const STATUSES = [200, 200, 200, 201, 204, 404, 500];

function pick<T>(items: readonly T[], random: number): T {
  const item = items[random % items.length];
  assert.ok(item !== undefined);
  return item;
}

/** JSON log lines with random ids and numbers: LZ4 ratio about 3.6 on 1 MiB blocks. */
function makeTextTemplate(bytes: number, seed: number): Buffer {
  let state = seed >>> 0 || 0x9e3779b9;
  const next = (): number => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return state >>> 0;
  };
  const lines: string[] = [];
  let total = 0;
  let ms = 0;
  while (total < bytes) {
    ms += next() % 50;
    const time = new Date(Date.UTC(2026, 10, 20) + ms).toISOString();
    const requestId = next().toString(16).padStart(8, '0') + next().toString(16).padStart(8, '0');
    const line =
      `{"ts":"${time}","level":"${pick(LEVELS, next())}",` +
      `"service":"${pick(SERVICES, next())}-${next() % 16}","msg":"${pick(MESSAGES, next())}",` +
      `"path":"${pick(PATHS, next())}","status":${pick(STATUSES, next())},` +
      `"bytes":${next() % 100000},"durationMs":${(next() % 100000) / 100},` +
      `"requestId":"${requestId}"}\n`;
    lines.push(line);
    total += line.length;
  }
  const template = Buffer.alloc(bytes);
  template.write(lines.join(''), 0, bytes, 'latin1');
  return template;
}

/**
 * Writes bytes [offset, offset + n) of the body into `target` and returns n, the largest count
 * that fits in `target` and the body. Copies from the template, then stamps.
 */
export function fillSlice(plan: BodyPlan, offset: number, target: Buffer): number {
  const count = Math.min(target.length, plan.length - offset);
  assert.ok(count >= 0 && offset >= 0, 'slice lies inside the body');
  const template = plan.template;
  let done = 0;
  while (done < count) {
    const from = (offset + done) % template.length;
    const n = Math.min(count - done, template.length - from);
    template.copy(target, done, from, from + n);
    done += n;
  }
  if (plan.seed !== null) stampSlice(plan.seed, offset, target, count);
  return count;
}

/** Writes the stamps whose bytes fall into [offset, offset + count). */
function stampSlice(seed: number, offset: number, target: Buffer, count: number): void {
  const stamp = Buffer.allocUnsafe(STAMP_BYTES);
  // Digits 0..11 spell the seed, 12..19 the block index, most significant first.
  for (let k = 0; k < 12; k++) {
    stamp[k] = HEX_DIGITS[Math.floor(seed / 2 ** (4 * (11 - k))) % 16] ?? 0x30;
  }
  const end = offset + count;
  const first = Math.floor(offset / STAMP_STRIDE_BYTES);
  for (let block = first; block * STAMP_STRIDE_BYTES < end; block++) {
    for (let k = 12; k < STAMP_BYTES; k++) {
      stamp[k] = HEX_DIGITS[(block >>> (4 * (19 - k))) & 15] ?? 0x30;
    }
    const at = block * STAMP_STRIDE_BYTES - offset;
    if (at >= 0 && at + STAMP_BYTES <= count) {
      stamp.copy(target, at);
      continue;
    }
    // A stamp cut by the slice boundary: write only its bytes inside the slice.
    const from = Math.max(0, -at);
    const to = Math.min(STAMP_BYTES, count - at);
    if (from < to) stamp.copy(target, at + from, from, to);
  }
}

export interface Checksums {
  readonly crc32: number;
  readonly crc32c: number;
}

/**
 * CRC32 and CRC32C of the whole body, regenerated slice by slice into `scratch`; `initial`
 * continues the checksums of preceding bytes (the parts of a multipart object).
 */
export function planChecksums(
  plan: BodyPlan,
  scratch: Buffer,
  initial: Checksums = { crc32: 0, crc32c: 0 },
): Checksums {
  let sum = initial;
  for (let offset = 0; offset < plan.length;) {
    const n = fillSlice(plan, offset, scratch);
    const slice = scratch.subarray(0, n);
    sum = { crc32: crc32(slice, sum.crc32), crc32c: crc32c(slice, sum.crc32c) };
    offset += n;
  }
  return sum;
}

/** CRC32 of the template repeated to `length` bytes (what the sink's GET source serves). */
export function repeatedCrc32(template: Buffer, length: number): number {
  let crc = 0;
  for (let offset = 0; offset < length;) {
    const n = Math.min(template.length, length - offset);
    crc = crc32(template.subarray(0, n), crc);
    offset += n;
  }
  return crc;
}

/** Hands out fresh 48-bit seeds: a random run salt in the high bits, a counter below. */
export class SeedAllocator {
  private readonly salt: number;
  private counter = 0;

  constructor(salt: number = Math.floor(Math.random() * 2 ** 24)) {
    this.salt = salt % 2 ** 24;
  }

  next(): number {
    this.counter += 1;
    assert.ok(this.counter < 2 ** 24, 'seed counter overflow');
    return this.salt * 2 ** 24 + this.counter;
  }
}

/** Big-endian base64 of a CRC32C, as S3 and Lightwell's `checksums.CRC32C` carry it. */
export function crc32cBase64(crc: number): string {
  const bytes = Buffer.alloc(4);
  bytes.writeUInt32BE(crc >>> 0, 0);
  return bytes.toString('base64');
}

/** Seed of the template that the uWS sink's GET source serves (see sink.ts). */
export const SINK_SOURCE_SEED = 7;
