// Shared machinery of the crash tests: a plain node:http client whose connections die with the
// service, body generators, a concurrent ingest driver with a ledger of every operation and its
// outcome, the verifier of "every acknowledged write reads back byte-exact", and read-only
// inspections of the data directory (segment states, files, torn tails, reference counts and
// live-byte accounting).
//
// This module is a helper, not a test; tap lists it as "no tests found".
//
// Outcome rules of the ledger: a 2xx is acknowledged (the write is durable); a 4xx is a refusal
// (nothing was applied); a 5xx or a broken connection is unknown (it may or may not have been
// applied). Operations on one key are issued one after another, never concurrently, so after a
// crash the key must hold the result of its last acknowledged operation or of one of the
// operations issued after it whose outcome is unknown; never anything else.

import http from 'node:http';
import { createHash } from 'node:crypto';
import { Prng, seedFrom } from '../helpers/prng.js';

/**
 * Every random choice of a crash test (bodies, keys, deletes, ranges, kill moments) comes from
 * this seed: LIGHTWELL_CRASH_SEED=<seed> replays a run's choices (the moments the kernel
 * schedules stay its own). Each test prints it.
 */
export const CRASH_SEED = seedFrom('LIGHTWELL_CRASH_SEED');
export const crashRandom = new Prng(CRASH_SEED);
const randomInt = (n: number): number => crashRandom.int(n);
const randomBytes = (n: number): Buffer => crashRandom.bytes(n);
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { IndexStore } from '../../src/engine/index/store.js';
import {
  DB,
  segmentKey,
  chunkKey,
  type SegmentRecord,
  type ChunkRecord,
  type ObjectVersionRecord,
  type BucketRecord,
  type TenantRecord,
} from '../../src/engine/index/schema.js';
import { unpackChunkRefs } from '../../src/engine/ops/objects.js';
import { scanSegment } from '../../src/engine/segments/segment-scan.js';
import { parseSegmentFileName, segmentFileName } from '../../src/format/segment-header.js';
import { processAlive } from '../../src/engine/data-dir.js';
import { encodeKey } from '../helpers/service.js';

export const KiB = 1024;
export const MiB = 1024 * 1024;

export interface HttpResult {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: Buffer;
}

/** A keep-alive client for one service lifetime; `destroy()` drops every connection. */
export class HttpClient {
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

  constructor(
    readonly baseUrl: string,
    readonly token: string,
  ) {}

  request(
    method: string,
    path: string,
    options: { body?: Buffer; headers?: Record<string, string> } = {},
  ): Promise<HttpResult> {
    const url = new URL(this.baseUrl + path);
    const headers: Record<string, string> = {
      Authorization: `Bearer ${this.token}`,
      ...options.headers,
    };
    if (options.body) headers['Content-Length'] = String(options.body.length);
    else if (method === 'PUT' || method === 'POST') headers['Content-Length'] = '0';
    return new Promise((resolve, reject) => {
      const request = http.request(
        {
          host: url.hostname,
          port: url.port,
          path: url.pathname + url.search,
          method,
          headers,
          agent: this.agent,
          timeout: 60_000,
        },
        (response) => {
          const parts: Buffer[] = [];
          response.on('data', (part: Buffer) => parts.push(part));
          response.on('end', () => {
            const body = Buffer.concat(parts);
            const length = response.headers['content-length'];
            if (method !== 'HEAD' && length !== undefined && Number(length) !== body.length) {
              reject(new Error(`truncated response: ${body.length} of ${length} bytes`));
              return;
            }
            resolve({ status: response.statusCode ?? 0, headers: response.headers, body });
          });
          response.on('error', reject);
          response.on('aborted', () => reject(new Error('response aborted')));
        },
      );
      request.on('error', reject);
      request.on('timeout', () => request.destroy(new Error('timeout')));
      request.end(options.body);
    });
  }

  put(
    bucket: string,
    key: string,
    body: Buffer,
    headers: Record<string, string> = {},
  ): Promise<HttpResult> {
    return this.request('PUT', `/buckets/${bucket}/objects/${encodeKey(key)}`, { body, headers });
  }

  get(bucket: string, key: string, headers: Record<string, string> = {}): Promise<HttpResult> {
    return this.request('GET', `/buckets/${bucket}/objects/${encodeKey(key)}`, { headers });
  }

  delete(bucket: string, key: string): Promise<HttpResult> {
    return this.request('DELETE', `/buckets/${bucket}/objects/${encodeKey(key)}`);
  }

  destroy(): void {
    this.agent.destroy();
  }
}

export function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** Text-like bytes that LZ4 shrinks a lot, different on every call. */
export function compressible(size: number): Buffer {
  const words = [
    'object',
    'store',
    'segment',
    'chunk',
    'tenant',
    'bucket',
    'record',
    'durable',
    'ingest',
    'commit',
  ];
  const lines: string[] = [];
  let length = 0;
  let line = randomInt(1_000_000);
  while (length < size) {
    const text = `${line++} ${words[line % 10]!} ${words[(line * 7) % 10]!} level=info value=${line % 97}\n`;
    lines.push(text);
    length += text.length;
  }
  return Buffer.from(lines.join('')).subarray(0, size);
}

export type BodyKind =
  'empty' | 'small' | 'medium' | 'large-random' | 'large-compressible' | 'shared';

export interface Body {
  readonly kind: BodyKind;
  readonly bytes: Buffer;
  readonly sha: string;
}

/** Bodies of the mixed workload; `shared` ones repeat (deduplication), the rest are fresh. */
export class Bodies {
  readonly shared: Body[];

  constructor(
    private readonly weights: Readonly<Record<BodyKind, number>>,
    private readonly sizes: { mediumBytes: number; largeMin: number; largeMax: number },
  ) {
    this.shared = [
      randomBytes(3 * MiB + 17),
      compressible(MiB + 5),
      randomBytes(100 * KiB),
      randomBytes(2 * MiB),
    ].map((bytes) => ({ kind: 'shared', bytes, sha: sha256(bytes) }));
  }

  next(): Body {
    const total = Object.values(this.weights).reduce((sum, weight) => sum + weight, 0);
    let pick = crashRandom.float() * total;
    let kind: BodyKind = 'small';
    for (const [name, weight] of Object.entries(this.weights) as Array<[BodyKind, number]>) {
      pick -= weight;
      if (pick < 0) {
        kind = name;
        break;
      }
    }
    if (kind === 'shared') return this.shared[randomInt(this.shared.length)] as Body;
    const { mediumBytes, largeMin, largeMax } = this.sizes;
    const bytes =
      kind === 'empty'
        ? Buffer.alloc(0)
        : kind === 'small'
          ? randomBytes(1 + randomInt(4096))
          : kind === 'medium'
            ? randomBytes(mediumBytes - 2048 + randomInt(4096))
            : kind === 'large-random'
              ? randomBytes(largeMin + randomInt(largeMax - largeMin))
              : compressible(largeMin + randomInt(largeMax - largeMin));
    return { kind, bytes, sha: sha256(bytes) };
  }

  byShaOf(sha: string): Buffer | undefined {
    return this.shared.find((body) => body.sha === sha)?.bytes;
  }
}

/** What a key holds: a body's SHA-256 (hex) and size, or `null` for "absent". */
export type State = { sha: string; size: number } | null;

type Outcome = 'pending' | 'ok' | 'refused' | 'unknown';

interface Op {
  readonly kind: 'put' | 'delete';
  readonly result: State;
  outcome: Outcome;
  status?: number;
}

export interface IngestStats {
  puts: number;
  putBytes: number;
  deletes: number;
  refused: number;
  unknown: number;
  statuses: Record<string, number>;
}

/** Every operation of the current lifetime per key, and what each key held before it. */
export class Ledger {
  private readonly truth = new Map<string, State>();
  private ops = new Map<string, Op[]>();
  readonly stats: IngestStats = {
    puts: 0,
    putBytes: 0,
    deletes: 0,
    refused: 0,
    unknown: 0,
    statuses: {},
  };
  /** Keys whose unknown operation turned out applied / not applied, over all verifications. */
  unknownApplied = 0;
  unknownNotApplied = 0;
  private putWaiters: Array<{ puts: number; resolve: () => void }> = [];

  /**
   * Resolves once `stats.puts` reaches `puts`: a crash round kills the service only after it has
   * acknowledged a real amount of writes, however slow a loaded machine makes them.
   */
  untilPuts(puts: number): Promise<void> {
    if (this.stats.puts >= puts) return Promise.resolve();
    return new Promise((resolve) => this.putWaiters.push({ puts, resolve }));
  }

  keys(): string[] {
    return [...new Set([...this.truth.keys(), ...this.ops.keys()])].sort();
  }

  begin(key: string, kind: 'put' | 'delete', result: State): Op {
    const op: Op = { kind, result, outcome: 'pending' };
    const list = this.ops.get(key) ?? [];
    list.push(op);
    this.ops.set(key, list);
    return op;
  }

  finish(op: Op, status: number | undefined, bytes = 0): void {
    const label = status === undefined ? 'network' : String(status);
    this.stats.statuses[label] = (this.stats.statuses[label] ?? 0) + 1;
    if (status !== undefined && status >= 200 && status < 300) {
      op.outcome = 'ok';
      if (op.kind === 'put') {
        this.stats.puts += 1;
        this.stats.putBytes += bytes;
        this.wakePutWaiters();
      } else this.stats.deletes += 1;
    } else if (status !== undefined && status >= 400 && status < 500) {
      op.outcome = 'refused';
      this.stats.refused += 1;
    } else {
      op.outcome = 'unknown';
      this.stats.unknown += 1;
    }
    if (status !== undefined) op.status = status;
  }

  private wakePutWaiters(): void {
    const puts = this.stats.puts;
    const due = this.putWaiters.filter((waiter) => waiter.puts <= puts);
    if (due.length === 0) return;
    this.putWaiters = this.putWaiters.filter((waiter) => waiter.puts > puts);
    for (const waiter of due) waiter.resolve();
  }

  /** Every state the key may hold now. */
  candidates(key: string): State[] {
    const list = this.ops.get(key) ?? [];
    let lastOk = -1;
    list.forEach((op, index) => {
      if (op.outcome === 'ok') lastOk = index;
    });
    const states: State[] = [
      lastOk >= 0 ? (list[lastOk] as Op).result : (this.truth.get(key) ?? null),
    ];
    for (const op of list.slice(lastOk + 1)) {
      if (op.outcome === 'unknown' || op.outcome === 'pending') states.push(op.result);
    }
    return states;
  }

  /** After a verification: the key holds `observed`; the lifetime's operations are folded in. */
  settle(key: string, observed: State): void {
    const candidates = this.candidates(key);
    if (candidates.length > 1) {
      if (sameState(observed, candidates[0] as State)) this.unknownNotApplied += 1;
      else this.unknownApplied += 1;
    }
    this.truth.set(key, observed);
  }

  nextLifetime(): void {
    this.ops = new Map();
  }

  /** What the key holds when nothing is in doubt (verification happened). */
  current(key: string): State {
    return this.truth.get(key) ?? null;
  }
}

export function sameState(a: State, b: State): boolean {
  if (a === null || b === null) return a === b;
  return a.sha === b.sha && a.size === b.size;
}

function describe(state: State): string {
  return state === null ? 'absent' : `${state.sha.slice(0, 12)}… (${state.size} B)`;
}

/**
 * Runs `lanes` concurrent clients until `stop()` is called: each takes a key nobody is using,
 * PUTs a body or DELETEs the key, and records the outcome.
 */
export function startIngest(options: {
  client: () => HttpClient;
  bucket: string;
  keys: readonly string[];
  lanes: number;
  bodies: Bodies;
  ledger: Ledger;
  deleteShare: number;
}): { stop(): Promise<void> } {
  const busy = new Set<string>();
  let stopping = false;
  const lane = async (): Promise<void> => {
    while (!stopping) {
      const free = options.keys.filter((key) => !busy.has(key));
      const key = free[randomInt(free.length)] as string;
      busy.add(key);
      try {
        if (crashRandom.float() < options.deleteShare) {
          const op = options.ledger.begin(key, 'delete', null);
          const status = await options
            .client()
            .delete(options.bucket, key)
            .then(
              (r) => r.status,
              () => undefined,
            );
          options.ledger.finish(op, status);
        } else {
          const body = options.bodies.next();
          const op = options.ledger.begin(key, 'put', { sha: body.sha, size: body.bytes.length });
          const status = await options
            .client()
            .put(options.bucket, key, body.bytes)
            .then(
              (r) => r.status,
              () => undefined,
            );
          options.ledger.finish(op, status, body.bytes.length);
        }
      } finally {
        busy.delete(key);
      }
    }
  };
  const running = Array.from({ length: options.lanes }, () => lane());
  return {
    stop: async () => {
      stopping = true;
      await Promise.all(running);
    },
  };
}

export interface VerifyResult {
  keys: number;
  present: number;
  bytes: number;
  failures: string[];
}

/** GETs every key of the ledger and checks it against its candidates; settles the ledger. */
export async function verifyAll(
  client: HttpClient,
  bucket: string,
  ledger: Ledger,
  bodies: Bodies,
): Promise<VerifyResult> {
  const result: VerifyResult = { keys: 0, present: 0, bytes: 0, failures: [] };
  const keys = ledger.keys();
  const check = async (key: string): Promise<void> => {
    const candidates = ledger.candidates(key);
    let response: HttpResult;
    try {
      response = await client.get(bucket, key);
    } catch (error) {
      result.failures.push(`${key}: GET failed: ${(error as Error).message}`);
      return;
    }
    let observed: State;
    if (response.status === 404) observed = null;
    else if (response.status === 200)
      observed = { sha: sha256(response.body), size: response.body.length };
    else {
      result.failures.push(
        `${key}: GET answered ${response.status} ${response.body.toString().slice(0, 200)}`,
      );
      return;
    }
    result.keys += 1;
    if (!candidates.some((candidate) => sameState(candidate, observed))) {
      result.failures.push(
        `${key}: holds ${describe(observed)}, expected one of ${candidates.map(describe).join(', ')}`,
      );
      return;
    }
    if (observed) {
      result.present += 1;
      result.bytes += observed.size;
      // A range read of a known body, across chunk boundaries.
      const whole = bodies.byShaOf(observed.sha);
      if (whole && whole.length > 10) {
        const start = randomInt(whole.length - 5);
        const end = Math.min(whole.length - 1, start + randomInt(600 * KiB));
        const ranged = await client
          .get(bucket, key, { Range: `bytes=${start}-${end}` })
          .catch((error: unknown) => ({
            status: -1,
            body: Buffer.from((error as Error).message),
            headers: {},
          }));
        if (ranged.status !== 206 || !ranged.body.equals(whole.subarray(start, end + 1))) {
          result.failures.push(
            `${key}: Range bytes=${start}-${end} answered ${ranged.status} with wrong bytes`,
          );
        }
      }
    }
    ledger.settle(key, observed);
  };
  for (let index = 0; index < keys.length; index += 8)
    await Promise.all(keys.slice(index, index + 8).map(check));
  return result;
}

// ---- the data directory, read-only -----------------------------------------------------------

export interface SegmentState {
  readonly id: number;
  readonly state: SegmentRecord['state'];
  readonly ownerPid: number | undefined;
  readonly ownerAlive: boolean;
  readonly size: number | undefined;
  readonly liveBytes: number;
  readonly fileSize: number | undefined;
}

export function withIndex<T>(dataDir: string, read: (store: IndexStore) => T): Promise<T> {
  const store = IndexStore.open({ path: join(dataDir, 'index'), readOnly: true });
  try {
    return Promise.resolve(read(store)).finally(() => store.close());
  } catch (error) {
    void store.close();
    throw error;
  }
}

export async function segmentStates(dataDir: string): Promise<SegmentState[]> {
  return withIndex(dataDir, (store) => {
    const states: SegmentState[] = [];
    for (const { value } of store.range<SegmentRecord>(DB.segments, {})) {
      const path = join(dataDir, 'segments', segmentFileName(value.id));
      states.push({
        id: value.id,
        state: value.state,
        ownerPid: value.ownerPid,
        ownerAlive: value.ownerPid !== undefined && processAlive(value.ownerPid),
        size: value.size,
        liveBytes: value.liveBytes,
        // The compactor may delete the file at any moment: a stat, not an exists-then-stat.
        fileSize: statSync(path, { throwIfNoEntry: false })?.size,
      });
    }
    return states;
  });
}

/** Open segments of dead owners, and how many bytes of torn tail each holds (scanned now). */
export async function tornTails(
  dataDir: string,
): Promise<Array<{ id: number; fileSize: number; validEnd: number }>> {
  const found: Array<{ id: number; fileSize: number; validEnd: number }> = [];
  for (const segment of await segmentStates(dataDir)) {
    if (segment.state !== 'open' || segment.fileSize === undefined) continue;
    const scan = await scanSegment(
      join(dataDir, 'segments', segmentFileName(segment.id)),
      () => undefined,
      { withBytes: false },
    );
    found.push({
      id: segment.id,
      fileSize: scan.fileSize,
      validEnd: scan.segmentId === undefined ? 0 : scan.validEnd,
    });
  }
  return found;
}

export interface SegmentFiles {
  readonly files: number;
  readonly bytes: number;
  readonly unknown: string[];
  readonly orphans: string[];
}

/**
 * The segment files on disk, and those the index does not know. The service may be running (its
 * compactor allocates segments): a segment is registered before its file is created, so the
 * directory is listed first and the index read after, and every file listed must be known to
 * that later snapshot. (Read the other way round, a segment allocated in between showed up as
 * unknown.)
 */
export async function segmentFiles(dataDir: string): Promise<SegmentFiles> {
  const dir = join(dataDir, 'segments');
  const names = readdirSync(dir);
  const known = new Set((await segmentStates(dataDir)).map((segment) => segment.id));
  const result = { files: 0, bytes: 0, unknown: [] as string[], orphans: [] as string[] };
  for (const name of names) {
    if (name.endsWith('.orphan')) {
      result.orphans.push(name);
      continue;
    }
    const id = parseSegmentFileName(name);
    if (id === undefined) continue;
    result.files += 1;
    try {
      result.bytes += statSync(join(dir, name)).size;
    } catch {
      continue; // deleted meanwhile
    }
    if (!known.has(id)) result.unknown.push(name);
  }
  return result;
}

/**
 * The invariants the engine's commits and compaction keep, checked on one index snapshot:
 * - every chunk entry's `refs` equals the references from all versions;
 * - every referenced chunk has an entry that points into a registered, not retired segment;
 * - a segment's `liveBytes` is the sum of the lengths of the live chunks in it.
 * Returns the violations (empty when all hold). The service must be idle.
 */
export async function indexInvariants(
  dataDir: string,
): Promise<{ violations: string[]; chunks: number; liveChunks: number; versions: number }> {
  return withIndex(dataDir, (store) => {
    const violations: string[] = [];
    const tenantNums = new Map<string, number>();
    for (const { value } of store.range<TenantRecord>(DB.tenants, {}))
      tenantNums.set(value.id, value.num);
    const bucketTenant = new Map<number, number>();
    for (const { value } of store.range<BucketRecord>(DB.buckets, {}))
      bucketTenant.set(value.id, tenantNums.get(value.tenantId) ?? -1);
    const expected = new Map<string, number>();
    let versions = 0;
    for (const { key, value } of store.range<ObjectVersionRecord>(DB.versions, {})) {
      versions += 1;
      if (value.deleteMarker) continue;
      const tenantNum = bucketTenant.get(key.readUInt32BE(0)) ?? -1;
      for (const ref of unpackChunkRefs(Buffer.from(value.chunks))) {
        const id = chunkKey(tenantNum, ref.id).toString('hex');
        expected.set(id, (expected.get(id) ?? 0) + 1);
      }
    }
    const segments = new Map<number, SegmentRecord>();
    for (const { value } of store.range<SegmentRecord>(DB.segments, {}))
      segments.set(value.id, value);
    const live = new Map<number, number>();
    let chunks = 0;
    let liveChunks = 0;
    for (const { key, value } of store.range<ChunkRecord>(DB.chunks, {})) {
      chunks += 1;
      const id = Buffer.from(key).toString('hex');
      const wanted = expected.get(id) ?? 0;
      expected.delete(id);
      if (value.refs !== wanted)
        violations.push(
          `chunk ${id.slice(0, 16)}…: refs ${value.refs}, referenced ${wanted} times`,
        );
      if (value.refs > 0) {
        liveChunks += 1;
        live.set(value.segmentId, (live.get(value.segmentId) ?? 0) + value.length);
        const segment = segments.get(value.segmentId);
        if (!segment)
          violations.push(
            `chunk ${id.slice(0, 16)}…: live in unregistered segment ${value.segmentId}`,
          );
        else if (segment.state === 'retired')
          violations.push(`chunk ${id.slice(0, 16)}…: live in retired segment ${value.segmentId}`);
      }
    }
    for (const [id, count] of expected)
      violations.push(`chunk ${id.slice(0, 16)}… referenced ${count} times has no entry`);
    for (const segment of segments.values()) {
      if (segment.state === 'retired') continue;
      const sum = live.get(segment.id) ?? 0;
      if (segment.liveBytes !== sum)
        violations.push(
          `segment ${segment.id} (${segment.state}): liveBytes ${segment.liveBytes}, live chunks ${sum}`,
        );
    }
    return { violations, chunks, liveChunks, versions };
  });
}

/** The chunk entries of a key's current version (to see deduplication). */
export async function chunkEntriesOf(
  dataDir: string,
  tenantId: string,
  bucketName: string,
  key: string,
): Promise<Array<ChunkRecord & { id: string }>> {
  return withIndex(dataDir, (store) => {
    const tenant = store.get<TenantRecord>(DB.tenants, Buffer.from(tenantId));
    const bucket = store.get<BucketRecord>(
      DB.buckets,
      Buffer.concat([Buffer.from(tenantId), Buffer.from([0]), Buffer.from(bucketName)]),
    );
    if (!tenant || !bucket) return [];
    const objectKey = Buffer.concat([Buffer.alloc(4), Buffer.from(key)]);
    objectKey.writeUInt32BE(bucket.id, 0);
    const version = store.get<ObjectVersionRecord>(DB.objects, objectKey);
    if (!version) return [];
    return unpackChunkRefs(Buffer.from(version.chunks)).map((ref) => ({
      ...(store.get<ChunkRecord>(DB.chunks, chunkKey(tenant.num, ref.id)) as ChunkRecord),
      id: Buffer.from(ref.id).toString('hex'),
    }));
  });
}

export function segmentKeyOf(id: number): Buffer {
  return segmentKey(id);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls `probe` until it returns true or `timeoutMs` passes; returns whether it did. */
export async function eventually(
  probe: () => Promise<boolean>,
  timeoutMs: number,
  everyMs = 100,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await probe()) return true;
    if (Date.now() > deadline) return false;
    await sleep(everyMs);
  }
}
