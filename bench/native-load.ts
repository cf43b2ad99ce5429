// The native load generator seen from Node: bench/native/loadgen.c, which `npm run build`
// compiles into dist/bench/native/lightwell-loadgen (scripts/build-native.mjs), runs the same
// closed loop as the Node client (load.ts over http1.ts) for a fraction of its CPU.
//
// `runNativeRequests` writes the requests, built up front, into a request file in a fresh temp
// directory (each head exactly as http1.ts renders it; a body as its bytes, or as a plan: the
// template's file, length and seed), with every body template as a file beside it; starts the
// executable; turns its progress lines into `onProgress` calls; and reads its result file back
// into one ResponseResult (or the transport's failure) per request, in request order. The file
// formats are documented at the top of loadgen.c. Bodies are never materialised: the C side
// fills stamped slices from the template as `fillSlice` does. The temp directory is removed
// afterwards. The CPU time the executable reports is added to `nativeClientCpuSeconds`, so that
// the client's CPU per GB still counts the client.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { BenchError } from './bench-error.js';
import { parseHead } from './http1-parser.js';
import { renderHead, type ResponseResult, type Target } from './http1.js';
import type { LoadProgress, LoadRequest } from './load.js';

/** Where `npm run build` puts the executable, beside this module's compiled file. */
export const NATIVE_LOADGEN_PATH = fileURLToPath(
  new URL('./native/lightwell-loadgen', import.meta.url),
);

/** Accepted statuses per request at most (the C side's `STATUSES_MAX`). */
const STATUSES_MAX = 16;
/** Bodies the C side keeps are at most this long (its `COLLECT_BYTES_MAX`). */
export const NATIVE_COLLECT_BYTES_MAX = 1024 * 1024;
const REQUEST_MAGIC = 'LWLOAD1\n';
const RESULT_MAGIC = 'LWRES01\n';
const RESULT_FIXED_BYTES = 44;
const FLAG_CRC = 1;
const FLAG_COLLECT = 2;
const FLAG_KEEP_HEAD = 4;
const FLAG_NO_BODY = 8;
const RESULT_FAILED = 1;
const RESULT_KEEP_ALIVE = 2;
const STDERR_BYTES_MAX = 4096;

let cpuSecondsEnded = 0;

/** Whether the executable was built (Linux with a C compiler at build time). */
export function nativeLoadAvailable(): boolean {
  return process.platform === 'linux' && existsSync(NATIVE_LOADGEN_PATH);
}

/** CPU seconds of every native load generator run that has ended in this process. */
export function nativeClientCpuSeconds(): number {
  return cpuSecondsEnded;
}

export interface NativeLoad {
  readonly target: Target;
  readonly connections: number;
  /** Request i is `entries[i % entries.length]`. */
  readonly entries: readonly LoadRequest[];
  /** How many requests to run; null runs them until the duration is over. */
  readonly requests: number | null;
  readonly durationMs: number | null;
  readonly idleTimeoutMs: number;
  /** Failures (transport, status, length, CRC32) after which no new request starts. */
  readonly failuresMax: number;
  readonly progressIntervalMs: number;
  readonly onProgress: (progress: LoadProgress) => void;
}

export interface NativeOutcome {
  /** One per request run, in request order: the response, or why the transport failed. */
  readonly responses: readonly (ResponseResult | string)[];
  /** Request body bytes written, failed requests included. */
  readonly bytesSent: number;
  /** From the first connect to the last response. */
  readonly seconds: number;
  readonly connects: number;
}

/** Runs a load on the native client; throws BenchError only when the executable fails. */
export async function runNativeRequests(load: NativeLoad): Promise<NativeOutcome> {
  assert.ok(load.entries.length > 0, 'at least one request');
  const dir = mkdtempSync(join(tmpdir(), 'lightwell-loadgen-'));
  try {
    const requestPath = join(dir, 'requests.bin');
    const resultPath = join(dir, 'results.bin');
    writeFileSync(requestPath, encodeRequests(load, dir));
    const cpuSeconds = await runExecutable(requestPath, resultPath, load.onProgress);
    cpuSecondsEnded += cpuSeconds;
    return decodeResults(readFileSync(resultPath), load.entries);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Starts the executable and waits for it; answers the CPU seconds it reported. */
async function runExecutable(
  requestPath: string,
  resultPath: string,
  onProgress: (progress: LoadProgress) => void,
): Promise<number> {
  const child = spawn(NATIVE_LOADGEN_PATH, [requestPath, resultPath], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (text: string) => {
    if (stderr.length < STDERR_BYTES_MAX) stderr += text;
  });
  let cpuSeconds = 0;
  const lines = createInterface({ input: child.stdout });
  lines.on('line', (line) => {
    const [kind, ...fields] = line.split(' ');
    const numbers = fields.map(Number);
    if (kind === 'P') onProgress(progressLine(numbers));
    else if (kind === 'D') cpuSeconds = ((numbers[0] ?? 0) + (numbers[1] ?? 0)) / 1e6;
  });
  const ended = await new Promise<{ code: number | null; signal: string | null }>(
    (resolve, reject) => {
      child.once('error', reject);
      child.once('close', (code, signal) => resolve({ code, signal }));
    },
  );
  if (ended.code !== 0) {
    const how =
      ended.code === null ? `was killed by ${String(ended.signal)}` : `exited ${ended.code}`;
    throw new BenchError(`native load generator ${how}: ${stderr.trim()}`);
  }
  return cpuSeconds;
}

function progressLine(numbers: readonly number[]): LoadProgress {
  return {
    requestsDone: numbers[0] ?? 0,
    bytesSent: numbers[1] ?? 0,
    bytesReceived: numbers[2] ?? 0,
    failures: numbers[3] ?? 0,
    elapsedSeconds: (numbers[4] ?? 0) / 1e6,
  };
}

/** A little-endian byte writer that grows as it goes. */
class ByteWriter {
  private buffer = Buffer.allocUnsafe(1024 * 1024);
  private length = 0;

  u8(value: number): void {
    this.room(1);
    this.length = this.buffer.writeUInt8(value, this.length);
  }

  u16(value: number): void {
    this.room(2);
    this.length = this.buffer.writeUInt16LE(value, this.length);
  }

  u32(value: number): void {
    this.room(4);
    this.length = this.buffer.writeUInt32LE(value, this.length);
  }

  /** A whole number below 2^53, or null for all ones (the C side's NONE). */
  u64(value: number | null): void {
    this.room(8);
    const low = value === null ? 0xffffffff : value % 2 ** 32;
    const high = value === null ? 0xffffffff : Math.floor(value / 2 ** 32);
    this.buffer.writeUInt32LE(low, this.length);
    this.length = this.buffer.writeUInt32LE(high, this.length + 4);
  }

  /** A u16 or u32 length, then the bytes. */
  text(text: string, lengthBytes: 2 | 4): void {
    const bytes = Buffer.byteLength(text, 'latin1');
    if (lengthBytes === 2) this.u16(bytes);
    else this.u32(bytes);
    this.room(bytes);
    this.length += this.buffer.write(text, this.length, 'latin1');
  }

  bytes(bytes: Buffer): void {
    this.room(bytes.length);
    this.length += bytes.copy(this.buffer, this.length);
  }

  done(): Buffer {
    return this.buffer.subarray(0, this.length);
  }

  private room(bytes: number): void {
    if (this.length + bytes <= this.buffer.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buffer.length * 2, this.length + bytes));
    this.buffer.copy(grown, 0, 0, this.length);
    this.buffer = grown;
  }
}

/** The request file; each template the requests use is written into `dir` as it is met. */
function encodeRequests(load: NativeLoad, dir: string): Buffer {
  const templates = new Map<Buffer, number>();
  const entries = new ByteWriter();
  for (const request of load.entries) encodeEntry(entries, load.target, request, templates);
  const header = new ByteWriter();
  header.bytes(Buffer.from(REQUEST_MAGIC, 'latin1'));
  header.u32(load.connections);
  header.u32(load.entries.length);
  header.u64(load.requests ?? 0);
  header.u32(load.durationMs ?? 0);
  header.u32(load.idleTimeoutMs);
  header.u32(load.failuresMax);
  header.u32(load.progressIntervalMs);
  header.u16(load.target.port);
  header.text(load.target.host, 2);
  header.u16(templates.size);
  for (const [template, id] of templates) {
    const path = join(dir, `template-${id}.bin`);
    writeFileSync(path, template);
    header.text(path, 2);
  }
  return Buffer.concat([header.done(), entries.done()]);
}

function encodeEntry(
  writer: ByteWriter,
  target: Target,
  request: LoadRequest,
  templates: Map<Buffer, number>,
): void {
  const body = request.body ?? null;
  writer.text(renderHead(target, request, body === null ? 0 : body.length), 4);
  const crc = request.crc === true || request.expectCrc32 !== undefined;
  writer.u8(
    (crc ? FLAG_CRC : 0) |
      (request.collect === true ? FLAG_COLLECT : 0) |
      (request.check === undefined ? 0 : FLAG_KEEP_HEAD) |
      (request.method === 'HEAD' ? FLAG_NO_BODY : 0),
  );
  if (body === null) {
    writer.u8(0);
  } else if (Buffer.isBuffer(body)) {
    writer.u8(1);
    writer.u32(body.length);
    writer.bytes(body);
  } else {
    let id = templates.get(body.template);
    if (id === undefined) {
      id = templates.size;
      templates.set(body.template, id);
    }
    writer.u8(2);
    writer.u16(id);
    writer.u64(body.length);
    writer.u64(body.seed);
  }
  const expected = request.expectStatus ?? 200;
  const statuses = typeof expected === 'number' ? [expected] : expected;
  assert.ok(statuses.length >= 1 && statuses.length <= STATUSES_MAX, '1 to 16 statuses');
  writer.u8(statuses.length);
  for (const status of statuses) writer.u16(status);
  writer.u64(request.expectBytes ?? null);
  writer.u64(request.expectCrc32 === undefined ? null : request.expectCrc32 >>> 0);
}

/**
 * The response with headers parsed from its kept head when they are first read: most checks
 * read only the body (3 µs a response saved on a 4 KiB PUT).
 */
function withHeaders(fields: Omit<ResponseResult, 'headers'>, head: Buffer): ResponseResult {
  let headers: Readonly<Record<string, string>> | null = null;
  return {
    ...fields,
    get headers() {
      headers ??= head.length === 0 ? {} : parseHead(head.toString('latin1')).headers;
      return headers;
    },
  };
}

function readU64(file: Buffer, at: number): number {
  return file.readUInt32LE(at) + file.readUInt32LE(at + 4) * 2 ** 32;
}

/** The result file as responses, in request order. */
function decodeResults(file: Buffer, entries: readonly LoadRequest[]): NativeOutcome {
  if (file.toString('latin1', 0, 8) !== RESULT_MAGIC) {
    throw new BenchError('native load generator: not a result file');
  }
  const count = readU64(file, 8);
  const responses: (ResponseResult | string)[] = [];
  let bytesSent = 0;
  let at = 32;
  for (let index = 0; index < count; index++) {
    const request = entries[index % entries.length];
    assert.ok(request !== undefined);
    const errorBytes = file.readUInt32LE(at + 32);
    const headBytes = file.readUInt32LE(at + 36);
    const bodyBytes = file.readUInt32LE(at + 40);
    const textAt = at + RESULT_FIXED_BYTES;
    const flags = file.readUInt8(at + 2);
    const bodySent = readU64(file, at + 16);
    bytesSent += bodySent;
    if ((flags & RESULT_FAILED) !== 0) {
      responses.push(file.toString('utf8', textAt, textAt + errorBytes));
    } else {
      const head = file.subarray(textAt + errorBytes, textAt + errorBytes + headBytes);
      const bodyAt = textAt + errorBytes + headBytes;
      const fields = {
        status: file.readUInt16LE(at),
        bodyBytes: readU64(file, at + 8),
        crc32: file.readUInt32LE(at + 4),
        body: request.collect === true ? file.subarray(bodyAt, bodyAt + bodyBytes) : null,
        keepAlive: (flags & RESULT_KEEP_ALIVE) !== 0,
        latencyMs: readU64(file, at + 24) / 1000,
        bodySent,
      };
      responses.push(withHeaders(fields, head));
    }
    at = textAt + errorBytes + headBytes + bodyBytes;
  }
  assert.equal(at, file.length, 'the result file ends after its last result');
  return { responses, bytesSent, seconds: readU64(file, 16) / 1e6, connects: readU64(file, 24) };
}
