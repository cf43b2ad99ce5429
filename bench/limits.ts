// The machine's own limits, measured in the same run as the service so that every Lightwell
// number can be read as a fraction of what this machine can do at all.
//
// Each limit is a function returning `{name, value, unit}`:
// - HTTP through the server library alone: a uWebSockets.js sink in a child process (its CPU
//   apart from the client's) driven by the same load generator as the scenarios, on the same
//   client (native or Node, `LimitContext.client`), so that ratios compare like with like:
//   64 MiB PUTs (MB/s), 64 MiB GETs from memory with CRC32 checks (MB/s), tiny requests at
//   concurrency 64. They run for a time budget, so their requests repeat (`period: 1`).
// - Per-core data-path stages on 1 MiB inputs: SHA-256, CRC32C, LZ4 on text-like data,
//   AES-256-GCM (GB/s, one thread).
// - Storage: 1 MiB appends with fdatasync every 8 MiB (MB/s) in the data directory's parent,
//   1 MiB O_DIRECT reads of a synced file (MB/s, what a large object's GET reads from),
//   LMDB puts group-committed by lmdb-js (puts/s) and an LMDB range scan (keys/s).
// Budgets are small: the whole pass takes about 11 s, or 4 s with --quick. Temporary files live
// in a fresh temp directory that is removed afterwards.

import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createCipheriv, createHash, randomBytes } from 'node:crypto';
import {
  closeSync,
  constants,
  fdatasyncSync,
  mkdtempSync,
  openSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { open as openFile, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { open as openLmdb } from 'lmdb';
import { lz4Compressed, lz4Implementation } from '../src/engine/chunk-codec.js';
import { libc, native } from '../src/util/libc.js';
import { alignedBuffer } from '../src/util/buffer-pool.js';
import { crc32c, crc32cImplementation } from '../src/util/crc32c.js';
import { BenchError, errorMessage } from './bench-error.js';
import { makeTemplate, repeatedCrc32, SINK_SOURCE_SEED, TEMPLATE_BYTES } from './data.js';
import { parseTarget } from './http1.js';
import { clientCpuSeconds, type LoadClient, type LoadResult, runLoad } from './load.js';
import { sampleProcessTree } from './proc-stats.js';

export interface Limit {
  readonly name: string;
  readonly value: number;
  readonly unit: string;
  /** How it was measured, in a few words. */
  readonly detail?: string;
  /** Numbers that other figures derive from (sink CPU per GB, LZ4 ratio). */
  readonly extra?: Readonly<Record<string, number>>;
}

export interface LimitBudget {
  readonly cpuMs: number;
  readonly httpMs: number;
  readonly appendMs: number;
  readonly appendBytesMax: number;
  readonly lmdbPuts: number;
  readonly lmdbScanKeys: number;
}

export const LIMIT_BUDGETS = {
  full: {
    cpuMs: 500,
    httpMs: 1500,
    appendMs: 1200,
    appendBytesMax: 2 ** 30,
    lmdbPuts: 100_000,
    lmdbScanKeys: 100_000,
  },
  quick: {
    cpuMs: 150,
    httpMs: 450,
    appendMs: 400,
    appendBytesMax: 2 ** 28,
    lmdbPuts: 20_000,
    lmdbScanKeys: 15_000,
  },
  test: {
    cpuMs: 30,
    httpMs: 150,
    appendMs: 100,
    appendBytesMax: 2 ** 24,
    lmdbPuts: 2_000,
    lmdbScanKeys: 2_000,
  },
} as const satisfies Record<string, LimitBudget>;

export interface SinkHandle {
  readonly port: number;
  readonly pid: number;
  stop(): Promise<void>;
}

export interface LimitContext {
  readonly budget: LimitBudget;
  /** Where temporary files go (the parent of the service's data directory). */
  readonly tmpParent: string;
  /** The uWS sink, started on first use. */
  sink(): Promise<SinkHandle>;
  /** The load generator of the HTTP limits: the scenarios' own. */
  readonly client: LoadClient;
}

export type LimitFunction = (context: LimitContext) => Promise<Limit>;

const MiB = 1024 * 1024;
const OBJECT_BYTES = 64 * MiB;
const SINK_PUT_SEED = 11;

/** Starts the uWS sink child process and waits for its ready line. */
export async function startSink(): Promise<SinkHandle> {
  const script = fileURLToPath(new URL('./sink.js', import.meta.url));
  const child = spawn(process.execPath, [script], { stdio: ['pipe', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout });
    lines.once('line', (line) => {
      lines.close();
      const parsed = JSON.parse(line) as { ready?: boolean; port?: number };
      if (parsed.ready === true && typeof parsed.port === 'number') resolve(parsed.port);
      else reject(new BenchError(`sink: unexpected first line ${line}`));
    });
    child.once('exit', (code) => {
      reject(new BenchError(`sink exited with ${String(code)} before it was ready`));
    });
    child.once('error', reject);
  });
  assert.ok(child.pid !== undefined);
  return { port, pid: child.pid, stop: () => stopChild(child) };
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.stdin?.end();
  const timer = setTimeout(() => child.kill('SIGTERM'), 2000);
  await exited;
  clearTimeout(timer);
}

function sinkTarget(sink: SinkHandle): ReturnType<typeof parseTarget> {
  return parseTarget(`http://127.0.0.1:${sink.port}`);
}

function assertLoadClean(name: string, result: LoadResult): void {
  if (result.failures > 0) {
    const samples = result.failureSamples.join('; ');
    throw new BenchError(`${name}: ${result.failures} failed requests: ${samples}`);
  }
}

/**
 * 64 MiB PUTs into the sink over 4 connections; detail carries the sink's CPU per GB. Every body
 * is stamped with one seed: the sink discards it, and stamping costs the same for any seed.
 */
export const httpSinkPut: LimitFunction = async (context) => {
  const sink = await context.sink();
  const body = { template: makeTemplate('random'), length: OBJECT_BYTES, seed: SINK_PUT_SEED };
  const before = sampleProcessTree(sink.pid);
  const clientBefore = clientCpuSeconds();
  const result = await runLoad({
    target: sinkTarget(sink),
    client: context.client,
    connections: 4,
    durationMs: context.budget.httpMs,
    period: 1,
    makeRequest: () => ({ method: 'PUT', path: '/sink', body }),
  });
  const gigabytes = result.bytesSent / 1e9;
  const client = (clientCpuSeconds() - clientBefore) / gigabytes;
  const after = sampleProcessTree(sink.pid);
  assertLoadClean('http-sink-put', result);
  const cpu = before && after ? (after.cpuSeconds - before.cpuSeconds) / gigabytes : NaN;
  return {
    name: 'http-sink-put',
    value: result.bytesSent / 1e6 / result.seconds,
    unit: 'MB/s',
    detail:
      `4 connections x 64 MiB PUT, ${result.requests} requests, ${result.client} client; ` +
      'CPU-s/GB: ' +
      `sink ${cpu.toFixed(2)}, client ${client.toFixed(2)}`,
    extra: { sinkCpuSecondsPerGB: cpu, clientCpuSecondsPerGB: client },
  };
};

/** 64 MiB GETs streamed from the sink's memory, every byte CRC32-checked like a scenario's. */
export const httpSourceGet: LimitFunction = async (context) => {
  const sink = await context.sink();
  const source = makeTemplate('random', TEMPLATE_BYTES, SINK_SOURCE_SEED);
  const expectCrc32 = repeatedCrc32(source, OBJECT_BYTES);
  const clientBefore = clientCpuSeconds();
  const result = await runLoad({
    target: sinkTarget(sink),
    client: context.client,
    connections: 4,
    durationMs: context.budget.httpMs,
    period: 1,
    makeRequest: () => ({
      method: 'GET',
      path: `/blob/${OBJECT_BYTES}`,
      expectBytes: OBJECT_BYTES,
      expectCrc32,
    }),
  });
  const client = (clientCpuSeconds() - clientBefore) / (result.bytesReceived / 1e9);
  assertLoadClean('http-source-get', result);
  return {
    name: 'http-source-get',
    value: result.bytesReceived / 1e6 / result.seconds,
    unit: 'MB/s',
    detail:
      `4 connections x 64 MiB GET with CRC32 check, ${result.requests} requests, ` +
      `${result.client} client; ` +
      `client ${client.toFixed(2)} CPU-s/GB`,
    extra: { clientCpuSecondsPerGB: client },
  };
};

/** Tiny GETs at concurrency 64: the request-rate ceiling of server library plus client. */
export const httpSinkTiny: LimitFunction = async (context) => {
  const sink = await context.sink();
  const result = await runLoad({
    target: sinkTarget(sink),
    client: context.client,
    connections: 64,
    durationMs: context.budget.httpMs,
    period: 1,
    makeRequest: () => ({ method: 'GET', path: '/tiny', expectBytes: 2 }),
  });
  assertLoadClean('http-sink-tiny', result);
  return {
    name: 'http-sink-tiny',
    value: result.requests / result.seconds,
    unit: 'req/s',
    detail:
      `64 connections, ${result.requests} requests, ${result.client} client, ` +
      `p99 ${(result.latency.percentile(0.99) / 1000).toFixed(2)} ms`,
  };
};

/**
 * Runs `work` on 1 MiB inputs for the CPU budget on this thread and returns GB/s of input.
 * Yields to the event loop every 32 MiB so that native outputs (lz4-napi) are freed.
 */
async function perCoreRate(
  name: string,
  budgetMs: number,
  inputs: readonly Buffer[],
  work: (input: Buffer) => number,
): Promise<Limit> {
  let check = 0;
  for (const input of inputs) check ^= work(input);
  let bytes = 0;
  const started = performance.now();
  let elapsed = 0;
  for (let i = 0; elapsed < budgetMs; i++) {
    const input = inputs[i % inputs.length];
    assert.ok(input !== undefined);
    check ^= work(input);
    bytes += input.length;
    if (bytes % (32 * MiB) === 0) {
      await new Promise((resolve) => setImmediate(resolve));
      elapsed = performance.now() - started;
    }
  }
  const seconds = (performance.now() - started) / 1000;
  return {
    name,
    value: bytes / 1e9 / seconds,
    unit: 'GB/s',
    detail:
      `one thread, 1 MiB inputs, ${Math.round(bytes / MiB)} MiB, ` +
      `check ${(check >>> 0).toString(16)}`,
  };
}

function megabyteInputs(kind: 'random' | 'text'): Buffer[] {
  const template = makeTemplate(kind);
  const inputs: Buffer[] = [];
  for (let offset = 0; offset < template.length; offset += MiB) {
    inputs.push(template.subarray(offset, offset + MiB));
  }
  return inputs;
}

export const sha256: LimitFunction = (context) =>
  perCoreRate('sha256', context.budget.cpuMs, megabyteInputs('random'), (input) =>
    createHash('sha256').update(input).digest().readUInt32LE(0),
  );

/** Through the implementation the service uses (Lightwell's native library where it is built). */
export const crc32cRate: LimitFunction = async (context) => {
  const limit = await perCoreRate(
    'crc32c',
    context.budget.cpuMs,
    megabyteInputs('random'),
    (input) => crc32c(input),
  );
  return { ...limit, detail: `${crc32cImplementation()}, ${limit.detail ?? ''}` };
};

/** LZ4 with the compressor Lightwell stores chunks with (its native one where it is built). */
export const lz4Compress: LimitFunction = async (context) => {
  const inputs = megabyteInputs('text');
  let compressed = 0;
  for (const input of inputs) compressed += lz4Compressed(input).length;
  const limit = await perCoreRate(
    'lz4-compress',
    context.budget.cpuMs,
    inputs,
    (input) => lz4Compressed(input).length,
  );
  const ratio = (inputs.length * MiB) / compressed;
  const detail = `${lz4Implementation()}, ${limit.detail ?? ''}; text-like, ratio ${ratio.toFixed(2)}`;
  return { ...limit, detail, extra: { ratio } };
};

/**
 * AES-256-GCM as the store threads run it: OpenSSL reached directly, sealing into a buffer that
 * is reused (`libc().aesGcm`), where the Node binary exports it; node:crypto otherwise, which
 * allocates its output for every call and runs at about half that speed.
 */
export const aes256Gcm: LimitFunction = async (context) => {
  const key = randomBytes(32);
  const iv = randomBytes(12);
  const aad = Buffer.alloc(0);
  const direct = libc()?.aesGcm;
  const output = Buffer.alloc(MiB + 16);
  const limit = await perCoreRate(
    'aes-256-gcm',
    context.budget.cpuMs,
    megabyteInputs('random'),
    (input) => {
      iv.writeUInt32LE((iv.readUInt32LE(0) + 1) >>> 0, 0);
      if (direct) {
        const written = direct.seal(key, iv, aad, [input], output.subarray(0, input.length + 16));
        return output.readUInt32LE(0) ^ output.readUInt32LE(written - 4);
      }
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      const out = cipher.update(input);
      cipher.final();
      return out.readUInt32LE(0) ^ cipher.getAuthTag().readUInt32LE(0);
    },
  );
  const how = direct ? 'OpenSSL, into a reused buffer' : 'node:crypto';
  return { ...limit, detail: `${how}, ${limit.detail ?? ''}` };
};

/** Sequential 1 MiB appends, fdatasync every 8 MiB, in a temp dir beside the data dir. */
export const fdatasyncAppend: LimitFunction = (context) => {
  const dir = mkdtempSync(join(context.tmpParent, 'lightwell-limit-append-'));
  const block = makeTemplate('random', MiB, 3);
  const fd = openSync(join(dir, 'append.seg'), 'w');
  let bytes = 0;
  const started = performance.now();
  const { appendBytesMax, appendMs } = context.budget;
  try {
    while (bytes < appendBytesMax && performance.now() - started < appendMs) {
      writeSync(fd, block);
      bytes += block.length;
      if (bytes % (8 * MiB) === 0) fdatasyncSync(fd);
    }
    fdatasyncSync(fd);
  } finally {
    closeSync(fd);
    rmSync(dir, { recursive: true, force: true });
  }
  const seconds = (performance.now() - started) / 1000;
  return Promise.resolve({
    name: 'fdatasync-append',
    value: bytes / 1e6 / seconds,
    unit: 'MB/s',
    detail:
      `1 MiB writes, fdatasync every 8 MiB, ${Math.round(bytes / MiB)} MiB ` +
      `in ${context.tmpParent}`,
  });
};

const DIRECT_READS_IN_FLIGHT = 4;

/**
 * Reads back, with O_DIRECT, 1 MiB at a time and four reads in flight, a file written and synced
 * just before: what the disk itself delivers. Large chunk records are written and read that way
 * (src/engine/segments/), so the page cache does not hold them and a GET of a large object reads
 * the disk; this is the limit of such GETs. Where O_DIRECT or the native library is missing, the
 * reads are buffered (from the page cache), as the service's are then, and the detail says so.
 */
export const directRead: LimitFunction = async (context) => {
  const dir = mkdtempSync(join(context.tmpParent, 'lightwell-limit-read-'));
  const path = join(dir, 'read.seg');
  const fileBytes = Math.min(context.budget.appendBytesMax, 256 * MiB);
  try {
    const block = makeTemplate('random', MiB, 5);
    const fd = openSync(path, 'w');
    try {
      for (let written = 0; written < fileBytes; written += MiB) writeSync(fd, block);
      fdatasyncSync(fd);
    } finally {
      closeSync(fd);
    }
    const misalignment = native()?.misalignment;
    let direct = misalignment !== undefined;
    let handle: FileHandle;
    try {
      handle = await openFile(path, direct ? constants.O_RDONLY | constants.O_DIRECT : 'r');
    } catch {
      direct = false; // a file system without O_DIRECT
      handle = await openFile(path, 'r');
    }
    try {
      const buffers = Array.from({ length: DIRECT_READS_IN_FLIGHT }, () =>
        misalignment ? alignedBuffer(MiB, 4096, misalignment) : Buffer.allocUnsafe(MiB),
      );
      let next = 0;
      let bytes = 0;
      const started = performance.now();
      const reader = async (buffer: Buffer): Promise<void> => {
        while (performance.now() - started < context.budget.appendMs) {
          const position = (next % (fileBytes / MiB)) * MiB;
          next += 1;
          const { bytesRead } = await handle.read(buffer, 0, MiB, position);
          if (bytesRead !== MiB) throw new BenchError(`direct-read: ${bytesRead} bytes read`);
          bytes += bytesRead;
        }
      };
      await Promise.all(buffers.map(reader));
      const seconds = (performance.now() - started) / 1000;
      return {
        name: 'direct-read',
        value: bytes / 1e6 / seconds,
        unit: 'MB/s',
        detail:
          `${direct ? 'O_DIRECT' : 'buffered (no O_DIRECT here)'} 1 MiB reads, ` +
          `${DIRECT_READS_IN_FLIGHT} in flight, of a ${Math.round(fileBytes / MiB)} MiB file ` +
          `in ${context.tmpParent}`,
      };
    } finally {
      await handle.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
};

/** A value shaped like an object-version record, about 200 bytes in msgpack. */
function indexValue(i: number): Record<string, unknown> {
  const hash = ((i * 2654435761) >>> 0).toString(16).padStart(8, '0');
  return {
    v: 1,
    bucket: 'bench-bucket',
    size: 4096 + i,
    etag: `"${hash}0123456789abcdef0123456789"`,
    lastModified: 1_790_000_000_000 + i,
    contentType: 'application/octet-stream',
    crc32c: 'AAAAAA==',
    chunks: [[i, 0, 4096, 4113]],
    storageClass: 'STANDARD',
    metadata: {},
  };
}

function indexKey(i: number): string {
  return `bench-bucket/objects/${i.toString().padStart(10, '0')}`;
}

type Lmdb = ReturnType<typeof openLmdb>;

async function withTempLmdb<T>(tmpParent: string, use: (db: Lmdb) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpParent, 'lightwell-limit-lmdb-'));
  const db = openLmdb({
    path: join(dir, 'index'),
    encoding: 'msgpack',
    keyEncoding: 'ordered-binary',
    compression: false,
    noSync: false,
    noMetaSync: false,
    overlappingSync: true,
  });
  try {
    return await use(db);
  } finally {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Many db.put calls in flight, the last one awaited: lmdb-js commits them in batches. */
export const lmdbGroupCommit: LimitFunction = (context) =>
  withTempLmdb(context.tmpParent, async (db) => {
    const count = context.budget.lmdbPuts;
    const started = performance.now();
    let last: Promise<boolean> = Promise.resolve(true);
    for (let i = 0; i < count; i++) last = db.put(indexKey(i), indexValue(i));
    await last;
    // With overlappingSync a commit may resolve before its fsync: wait until it is durable.
    await db.flushed;
    const seconds = (performance.now() - started) / 1000;
    return {
      name: 'lmdb-group-commit',
      value: count / seconds,
      unit: 'puts/s',
      detail: `${count} async puts of ~200 B msgpack values, then db.flushed`,
    };
  });

/** Range scan over keys written in one transaction. */
export const lmdbRangeScan: LimitFunction = (context) =>
  withTempLmdb(context.tmpParent, async (db) => {
    const count = context.budget.lmdbScanKeys;
    await db.transaction(() => {
      // Inside the transaction a put applies at once; its promise is the transaction's.
      for (let i = 0; i < count; i++) void db.put(indexKey(i), indexValue(i));
    });
    const started = performance.now();
    let seen = 0;
    for (const _entry of db.getRange({ start: indexKey(0), end: indexKey(count) })) seen += 1;
    const seconds = (performance.now() - started) / 1000;
    if (seen !== count) throw new BenchError(`lmdb-range-scan: saw ${seen} of ${count} keys`);
    return {
      name: 'lmdb-range-scan',
      value: count / seconds,
      unit: 'keys/s',
      detail: `${count} keys with values`,
    };
  });

export const LIMIT_FUNCTIONS: readonly LimitFunction[] = [
  httpSinkPut,
  httpSourceGet,
  httpSinkTiny,
  sha256,
  crc32cRate,
  lz4Compress,
  aes256Gcm,
  fdatasyncAppend,
  directRead,
  lmdbGroupCommit,
  lmdbRangeScan,
];

/** Measures every limit in order; the sink is started once and stopped at the end. */
export async function measureLimits(options: {
  budget: LimitBudget;
  tmpParent: string;
  client: LoadClient;
  onLimit?: (limit: Limit, index: number, total: number) => void;
}): Promise<{ limits: Limit[]; failures: string[] }> {
  const started: { sink: Promise<SinkHandle> | null } = { sink: null };
  const context: LimitContext = {
    budget: options.budget,
    tmpParent: options.tmpParent,
    sink: () => (started.sink ??= startSink()),
    client: options.client,
  };
  const limits: Limit[] = [];
  const failures: string[] = [];
  try {
    for (const [index, measure] of LIMIT_FUNCTIONS.entries()) {
      try {
        const limit = await measure(context);
        limits.push(limit);
        options.onLimit?.(limit, index, LIMIT_FUNCTIONS.length);
      } catch (error) {
        failures.push(`${measure.name}: ${errorMessage(error)}`);
      }
    }
  } finally {
    if (started.sink !== null) await (await started.sink).stop();
  }
  return { limits, failures };
}

function limitValue(limits: readonly Limit[], name: string): Limit | undefined {
  return limits.find(
    (limit) => limit.name === name && Number.isFinite(limit.value) && limit.value > 0,
  );
}

/**
 * The PUT rate the data path could reach if the measured stages were its only CPU costs and ran
 * on every core in parallel: cores / (seconds per byte of HTTP + SHA-256 + CRC32C + AES-GCM
 * [+ LZ4]), capped by durable appends. Text-like data is encrypted and appended after LZ4, so
 * those stages see 1/ratio of the bytes. The client's own CPU is not subtracted: it shares the
 * same cores, so the real ceiling is lower.
 */
export function deriveLimits(limits: readonly Limit[], cores: number): Limit[] {
  const sink = limitValue(limits, 'http-sink-put');
  const sha = limitValue(limits, 'sha256');
  const crc = limitValue(limits, 'crc32c');
  const aes = limitValue(limits, 'aes-256-gcm');
  const lz4 = limitValue(limits, 'lz4-compress');
  const append = limitValue(limits, 'fdatasync-append');
  if (!sink || !sha || !crc || !aes || !lz4 || !append) return [];
  const http = (sink.extra?.['sinkCpuSecondsPerGB'] ?? 0) / 1e9;
  const perByte = (limit: Limit): number => 1 / (limit.value * 1e9);
  const ratio = lz4.extra?.['ratio'] ?? 1;
  const random = Math.min(
    cores / (http + perByte(sha) + perByte(crc) + perByte(aes)),
    append.value * 1e6,
  );
  const text = Math.min(
    cores / (http + perByte(sha) + perByte(crc) + perByte(lz4) + perByte(aes) / ratio),
    append.value * 1e6 * ratio,
  );
  const detail = `${cores} cores / sum of per-byte stage costs, capped by fdatasync-append`;
  return [
    {
      name: 'ideal-put-random',
      value: random / 1e6,
      unit: 'MB/s',
      detail: `${detail}; HTTP (sink) + SHA-256 + CRC32C + AES`,
    },
    {
      name: 'ideal-put-text',
      value: text / 1e6,
      unit: 'MB/s',
      detail: `${detail}; + LZ4, AES and append on 1/${ratio.toFixed(2)} of the bytes`,
    },
  ];
}
