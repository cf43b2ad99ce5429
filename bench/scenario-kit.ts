// The toolkit of the benchmark scenarios: sizes per profile, datasets, and the measured and
// verified PUT and GET loads that scenarios are made of.
//
// Requests speak Lightwell's API (`LIGHTWELL_API`) unless the context names another `ObjectApi`:
// the comparison with peers (peers.ts) runs the same loads over other servers' path-style HTTP.
//
// Objects belong to datasets (a bucket, keys, and a body plan per key). A PUT scenario creates
// its dataset under measurement; a GET scenario reads one and, when it was not written earlier
// in the run (`--only get-…`), first writes it unmeasured. Every PUT response must be object
// metadata with the right `size`; after the timed part each object's CRC32C is recomputed from
// its plan and compared with the server's `checksums.CRC32C` when the server reports one. Every
// GET body is checked against the plan's CRC32 (cheaper for the client than CRC32C, which
// matters on two shared cores). Expected checksums are computed outside the timed windows.
// Timed windows also sample the service's process tree (CPU seconds, peak RSS) when its pid is
// known.

import { BenchError } from './bench-error.js';
import {
  type BodyPlan,
  type DataKind,
  crc32cBase64,
  makeTemplate,
  planChecksums,
  SeedAllocator,
} from './data.js';
import { Histogram } from './histogram.js';
import { jsonRequest, type ResponseResult } from './http1.js';
import {
  clientCpuSeconds,
  type LoadClient,
  type LoadRequest,
  type LoadResult,
  runLoad,
} from './load.js';
import { TreeMonitor, type TreeWindow } from './proc-stats.js';
import type { Progress, ProgressUnit } from './progress.js';
import type { Service } from './service.js';
import type { S3Sdk } from './s3-load.js';

export type Profile = 'full' | 'quick' | 'test';
export type ThroughputUnit = 'MB/s' | 'ops/s' | 'keys/s';

export interface ScenarioSizes {
  readonly largeBytes: number;
  readonly largeCountSingle: number;
  readonly largeCountMulti: number;
  readonly mediumBytes: number;
  readonly mediumCount: number;
  readonly smallBytes: number;
  readonly smallPuts: number;
  readonly smallGets: number;
  readonly partBytes: number;
  readonly parts: number;
  readonly listKeys: number;
  readonly mixedOps: number;
  readonly rssClients: number;
  readonly rssBytes: number;
}

const KiB = 1024;
const MiB = 1024 * KiB;
/** Clients of `rss-16x1g` (issue 2's target: 16 uploads of 1 GiB at once under 512 MiB). */
const RSS_CLIENTS_FEW = 16;

export const SCENARIO_SIZES: Readonly<Record<Profile, ScenarioSizes>> = {
  full: {
    largeBytes: 64 * MiB,
    largeCountSingle: 16,
    largeCountMulti: 64,
    mediumBytes: MiB,
    mediumCount: 2048,
    smallBytes: 4 * KiB,
    smallPuts: 50_000,
    smallGets: 100_000,
    partBytes: 64 * MiB,
    parts: 16,
    listKeys: 1_000_000,
    mixedOps: 4000,
    // Issue 6's 64 concurrent uploads (`rss-64x1g`); `rss-16x1g` runs issue 2's 16 first.
    rssClients: 64,
    rssBytes: 1024 * MiB,
  },
  // A smoke test: every code path, about 1.4 GiB written, under a minute on a slow service.
  quick: {
    largeBytes: 32 * MiB,
    largeCountSingle: 2,
    largeCountMulti: 8,
    mediumBytes: MiB,
    mediumCount: 64,
    smallBytes: 4 * KiB,
    smallPuts: 2000,
    smallGets: 4000,
    partBytes: 5 * MiB,
    parts: 16,
    listKeys: 2000,
    mixedOps: 400,
    rssClients: 16,
    rssBytes: 16 * MiB,
  },
  test: {
    largeBytes: 256 * KiB + 123,
    largeCountSingle: 2,
    largeCountMulti: 8,
    mediumBytes: 64 * KiB,
    mediumCount: 16,
    smallBytes: 4 * KiB,
    smallPuts: 100,
    smallGets: 200,
    partBytes: 32 * KiB,
    parts: 16,
    listKeys: 2500,
    mixedOps: 50,
    rssClients: 4,
    rssBytes: 3 * MiB + 7,
  },
};

/**
 * Bytes a full pass may write to the service's disk at worst (no compression, deduplication
 * failing): three sets of 64 MiB objects, 1 MiB and mixed, 4 KiB, multipart and the same
 * object as one PUT, list, and the RSS uploads (text-like, stored at a third or less).
 */
export function writtenBytesEstimate(s: ScenarioSizes): number {
  return (
    s.largeBytes * (s.largeCountSingle + s.largeCountMulti) * 3 +
    s.mediumBytes * s.mediumCount * 1.2 +
    s.smallBytes * s.smallPuts +
    s.partBytes * s.parts * 2 +
    s.listKeys * 64 +
    (s.rssBytes * (s.rssClients + RSS_CLIENTS_FEW)) / 3
  );
}

export interface Dataset {
  readonly name: string;
  readonly bucket: string;
  readonly keys: readonly string[];
  readonly plans: readonly BodyPlan[];
  /** Expected CRC32 per object, computed after the objects were written. */
  crc32s: readonly number[];
}

export interface ScenarioContext {
  readonly service: Service;
  readonly sizes: ScenarioSizes;
  readonly monitor: TreeMonitor | null;
  readonly templates: Readonly<Record<DataKind, Buffer>>;
  readonly seeds: SeedAllocator;
  /** Lower-case run id: names the buckets of this run. */
  readonly runId: string;
  readonly datasets: Map<string, Dataset>;
  readonly progress: Progress;
  /** 1 MiB of scratch for recomputing CRCs. */
  readonly scratch: Buffer;
  readonly buckets: Set<string>;
  /** How objects and buckets are named and PUTs answered: `LIGHTWELL_API` but for peers. */
  readonly api: ObjectApi;
  /** The load generator to run loads on where it can (load.ts `loadClient`). */
  readonly client: LoadClient;
  /** The AWS SDK's configuration in the S3 scenarios (s3-load.ts); `tuned` when unset. */
  readonly s3Sdk?: S3Sdk | undefined;
}

/** A fresh context for one service: a new run id, datasets and buckets. */
export function newScenarioContext(options: {
  readonly service: Service;
  readonly sizes: ScenarioSizes;
  readonly progress: Progress;
  readonly api: ObjectApi;
  readonly client: LoadClient;
  readonly s3Sdk?: S3Sdk | undefined;
}): ScenarioContext {
  const runId = `${Date.now().toString(36)}${Math.floor(Math.random() * 1296).toString(36)}`;
  const pid = options.service.pid;
  return {
    ...options,
    monitor: pid === null ? null : new TreeMonitor(pid),
    templates: { random: makeTemplate('random'), text: makeTemplate('text') },
    seeds: new SeedAllocator(),
    runId,
    datasets: new Map(),
    scratch: Buffer.allocUnsafe(1024 * 1024),
    buckets: new Set(),
  };
}

/** What a scenario measured; run.ts turns it into a reported result. */
export interface Measured {
  readonly operations: number;
  readonly bytes: number;
  readonly seconds: number;
  readonly latency: Histogram;
  readonly unit: ThroughputUnit;
  readonly objects: number;
  readonly objectBytes: number;
  readonly concurrency: number;
  readonly failures: readonly string[];
  /** The service's process tree over the timed window, when its pid is known. */
  readonly window: TreeWindow | null;
  /** CPU seconds the benchmark itself (the client) used in the timed window. */
  readonly clientCpuSeconds: number;
  /** The client that ran the timed load; null when none ran. */
  readonly client: LoadClient | null;
  readonly notes: readonly string[];
  /** Set when the scenario could not run for a reason that is not a failure. */
  readonly skipped?: string;
}

export interface Scenario {
  readonly name: string;
  readonly title: string;
  /** Limit names; the first is the one the ratio refers to. */
  readonly bounds: readonly string[];
  run(context: ScenarioContext): Promise<Measured>;
}

// ---------------------------------------------------------------------------------------------
// Datasets

export interface DatasetSpec {
  readonly kind: DataKind;
  readonly bytes: (sizes: ScenarioSizes) => number;
  readonly count: (sizes: ScenarioSizes) => number;
  readonly connections: (sizes: ScenarioSizes) => number;
  /** Same plans (same bytes) as this dataset, under new keys. */
  readonly dedupOf?: string;
  /** How long a request may make no progress before the client gives up (default 120 s). */
  readonly idleTimeoutMs?: number;
}

const large = (s: ScenarioSizes): number => s.largeBytes;
const single = (s: ScenarioSizes): number => s.largeCountSingle;
const multi = (s: ScenarioSizes): number => s.largeCountMulti;
const one = (): number => 1;
const eight = (): number => 8;

const DATASETS: Readonly<Record<string, DatasetSpec>> = {
  'large-x1-random': { kind: 'random', bytes: large, count: single, connections: one },
  'large-x8-random': { kind: 'random', bytes: large, count: multi, connections: eight },
  'large-x1-text': { kind: 'text', bytes: large, count: single, connections: one },
  'large-x8-text': { kind: 'text', bytes: large, count: multi, connections: eight },
  'large-x1-dedup': {
    kind: 'random',
    bytes: large,
    count: single,
    connections: one,
    dedupOf: 'large-x1-random',
  },
  'large-x8-dedup': {
    kind: 'random',
    bytes: large,
    count: multi,
    connections: eight,
    dedupOf: 'large-x8-random',
  },
  medium: {
    kind: 'random',
    bytes: (s) => s.mediumBytes,
    count: (s) => s.mediumCount,
    connections: () => 32,
  },
  small: {
    kind: 'random',
    bytes: (s) => s.smallBytes,
    count: (s) => s.smallPuts,
    connections: () => 64,
  },
  // The multipart scenario's object as one PUT: the speed its parallel parts must match.
  whole: {
    kind: 'random',
    bytes: (s) => s.partBytes * s.parts,
    count: () => 1,
    connections: () => 1,
  },
  // Text-like (LZ4 stores about a quarter): 64 GiB of uploads must fit on the machine's disk.
  // Memory is bounded by buffering, which does not depend on what the bytes are. Uploads the
  // arena cannot admit yet wait, in arrival order, without progress: on two cores the last of
  // 64 waits minutes, so the client's idle timeout covers the whole run.
  rss: {
    kind: 'text',
    bytes: (s) => s.rssBytes,
    count: (s) => s.rssClients,
    connections: (s) => s.rssClients,
    idleTimeoutMs: 30 * 60_000,
  },
  // Issue 2's memory target, 16 uploads at once, on a service that has served nothing else.
  'rss-few': {
    kind: 'text',
    bytes: (s) => s.rssBytes,
    count: (s) => Math.min(RSS_CLIENTS_FEW, s.rssClients),
    connections: (s) => Math.min(RSS_CLIENTS_FEW, s.rssClients),
    idleTimeoutMs: 30 * 60_000,
  },
};

export function datasetSpec(name: string): DatasetSpec {
  const spec = DATASETS[name];
  if (spec === undefined) throw new BenchError(`unknown dataset ${name}`);
  return spec;
}

export const OCTET_STREAM = 'Content-Type: application/octet-stream\r\n';

export function objectPath(bucket: string, key: string): string {
  return `/api/v1/buckets/${encodeURIComponent(bucket)}/objects/${encodeKey(key)}`;
}

/** Encodes each `/`-separated segment of a key, keeping the slashes. */
export function encodeKey(key: string): string {
  return key.split('/').map(encodeURIComponent).join('/');
}

export async function ensureBucket(context: ScenarioContext, bucket: string): Promise<void> {
  if (context.buckets.has(bucket)) return;
  await context.api.createBucket(context.service, bucket);
  context.buckets.add(bucket);
}

async function createLightwellBucket(service: Service, bucket: string): Promise<void> {
  const response = await jsonRequest(service.target, {
    method: 'POST',
    path: '/api/v1/buckets',
    headers: await service.authHeader(),
    json: { name: bucket },
  });
  if (response.status !== 201 && response.status !== 409) {
    const text = response.text.slice(0, 300);
    throw new BenchError(`create bucket ${bucket}: HTTP ${response.status} ${text}`);
  }
}

export function mainBucket(context: ScenarioContext): string {
  return `lwbench-${context.runId}`;
}

export function planDataset(context: ScenarioContext, name: string): Dataset {
  const spec = datasetSpec(name);
  const count = spec.count(context.sizes);
  const source = spec.dedupOf === undefined ? null : context.datasets.get(spec.dedupOf);
  const template = context.templates[spec.kind];
  const length = spec.bytes(context.sizes);
  const keys: string[] = [];
  const plans: BodyPlan[] = [];
  for (let i = 0; i < count; i++) {
    keys.push(`${name}/${i.toString().padStart(7, '0')}`);
    plans.push(source?.plans[i] ?? { template, length, seed: context.seeds.next() });
  }
  return { name, bucket: mainBucket(context), keys, plans, crc32s: [] };
}

// ---------------------------------------------------------------------------------------------
// Measurement helpers

export interface Timed<T> {
  readonly value: T;
  readonly window: TreeWindow | null;
  readonly clientCpuSeconds: number;
}

/** Runs `work` as a timed window: samples the service's tree and the client's CPU. */
export async function timed<T>(
  context: ScenarioContext,
  work: () => Promise<T>,
): Promise<Timed<T>> {
  context.monitor?.begin();
  const cpuBefore = clientCpuSeconds();
  try {
    const value = await work();
    const cpu = clientCpuSeconds() - cpuBefore;
    const window = context.monitor?.end() ?? null;
    return { value, window, clientCpuSeconds: cpu };
  } catch (error) {
    context.monitor?.end();
    throw error;
  }
}

export type LoadSettings = Omit<Parameters<typeof runLoad>[0], 'target' | 'onProgress'>;

/** Runs a load with a progress task; the total is in bytes or requests. */
export async function loadWithProgress(
  context: ScenarioContext,
  label: string,
  total: { amount: number; unit: ProgressUnit },
  settings: LoadSettings,
): Promise<LoadResult> {
  context.progress.begin(label, total.amount, total.unit);
  const result = await runLoad({
    client: context.client,
    ...settings,
    target: context.service.target,
    onProgress: (p) => {
      const done = total.unit === 'bytes' ? p.bytesSent + p.bytesReceived : p.requestsDone;
      context.progress.update(done);
    },
  });
  const failed = result.failures > 0 ? `, ${result.failures} failed` : '';
  context.progress.end(`${result.requests} requests in ${result.seconds.toFixed(1)}s${failed}`);
  return result;
}

export function parseJson(body: Buffer | null): unknown {
  if (body === null) return null;
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    return null;
  }
}

interface ObjectMeta {
  readonly size?: unknown;
  readonly checksums?: { readonly CRC32C?: unknown } | null;
}

export type ServerCrcs = (string | undefined)[];

/** Checks a PUT answer (object metadata with the right size); remembers the server CRC32C. */
export function putCheck(plan: BodyPlan, serverCrcs: ServerCrcs, index: number) {
  return (response: ResponseResult): string | null => {
    const meta = parseJson(response.body) as ObjectMeta | null;
    if (meta === null || typeof meta !== 'object') return 'PUT answered no JSON object metadata';
    if (meta.size !== plan.length) {
      return `PUT metadata size ${String(meta.size)}, sent ${plan.length}`;
    }
    const crc = meta.checksums?.CRC32C;
    if (typeof crc === 'string') serverCrcs[index] = crc;
    return null;
  };
}

/** What a PUT request expects of its answer (status, a body to collect, further checks). */
export type PutAnswer = Pick<LoadRequest, 'expectStatus' | 'collect' | 'check'>;

/** How a service names objects and buckets and answers a PUT. */
export interface ObjectApi {
  objectPath(bucket: string, key: string): string;
  /** Creates a bucket; one that exists already is fine. */
  createBucket(service: Service, bucket: string): Promise<void>;
  /** The checks of a PUT's answer; they may record the server's CRC32C of object `index`. */
  putAnswer(plan: BodyPlan, serverCrcs: ServerCrcs, index: number): PutAnswer;
}

/** Lightwell's own API: `/api/v1/buckets/…`, and object metadata in every PUT's answer. */
export const LIGHTWELL_API: ObjectApi = {
  objectPath,
  createBucket: createLightwellBucket,
  putAnswer: (plan, serverCrcs, index) => ({
    collect: true,
    check: putCheck(plan, serverCrcs, index),
  }),
};

export function putRequest(
  dataset: Dataset,
  index: number,
  headers: string,
  serverCrcs: ServerCrcs,
  api: ObjectApi,
): LoadRequest {
  const plan = dataset.plans[index];
  const key = dataset.keys[index];
  if (plan === undefined || key === undefined) {
    throw new BenchError(`no object ${index} in ${dataset.name}`);
  }
  return {
    method: 'PUT',
    path: api.objectPath(dataset.bucket, key),
    headers,
    body: plan,
    ...api.putAnswer(plan, serverCrcs, index),
  };
}

/**
 * Recomputes every object's checksums and compares CRC32C with what the server reported.
 * Returns failures, and a note of how many objects the server's CRC32C confirmed.
 */
export async function verifyDataset(
  context: ScenarioContext,
  dataset: Dataset,
  serverCrcs: Readonly<ServerCrcs>,
): Promise<{ failures: string[]; note: string }> {
  const failures: string[] = [];
  const crc32s: number[] = [];
  const total = dataset.plans.reduce((sum, plan) => sum + plan.length, 0);
  context.progress.begin(`${dataset.name}: computing expected checksums`, total, 'bytes');
  let done = 0;
  for (const [i, plan] of dataset.plans.entries()) {
    const sum = planChecksums(plan, context.scratch);
    crc32s.push(sum.crc32);
    const reported = serverCrcs[i];
    const expected = crc32cBase64(sum.crc32c);
    if (reported !== undefined && reported !== expected && failures.length < 5) {
      failures.push(`${dataset.keys[i] ?? i}: server CRC32C ${reported}, expected ${expected}`);
    }
    done += plan.length;
    context.progress.update(done);
    if (i % 64 === 63 || plan.length >= MiB) await new Promise((resolve) => setImmediate(resolve));
  }
  context.progress.end(failures.length === 0 ? 'ok' : `${failures.length} mismatches`);
  dataset.crc32s = crc32s;
  const reported = serverCrcs.filter((crc) => crc !== undefined).length;
  const note = `server CRC32C reported for ${reported} of ${dataset.plans.length} objects`;
  return { failures, note };
}

export interface Written {
  readonly dataset: Dataset;
  readonly load: Timed<LoadResult>;
  readonly failures: string[];
  readonly notes: string[];
}

/** Writes a dataset (measured when called from a PUT scenario) and verifies it. */
export async function writeDataset(
  context: ScenarioContext,
  name: string,
  label: string,
): Promise<Written> {
  const spec = datasetSpec(name);
  if (spec.dedupOf !== undefined) await ensureDataset(context, spec.dedupOf);
  const dataset = planDataset(context, name);
  await ensureBucket(context, dataset.bucket);
  const headers = `${await context.service.authHeader()}${OCTET_STREAM}`;
  const serverCrcs: ServerCrcs = [];
  const bytes = dataset.plans.reduce((sum, plan) => sum + plan.length, 0);
  const total = { amount: bytes, unit: 'bytes' as const };
  const load = await timed(context, () =>
    loadWithProgress(context, label, total, {
      connections: spec.connections(context.sizes),
      requests: dataset.plans.length,
      makeRequest: (i) => putRequest(dataset, i, headers, serverCrcs, context.api),
      ...(spec.idleTimeoutMs === undefined ? {} : { idleTimeoutMs: spec.idleTimeoutMs }),
    }),
  );
  const failures = [...load.value.failureSamples];
  const notes: string[] = [];
  if (load.value.failures === 0) {
    const verified = await verifyDataset(context, dataset, serverCrcs);
    failures.push(...verified.failures);
    notes.push(verified.note);
  }
  if (failures.length === 0) context.datasets.set(name, dataset);
  return { dataset, load, failures, notes };
}

/** The dataset, written (unmeasured) first when this run has not written it yet. */
export async function ensureDataset(context: ScenarioContext, name: string): Promise<Dataset> {
  const existing = context.datasets.get(name);
  if (existing !== undefined) return existing;
  const written = await writeDataset(context, name, `preparing ${name}`);
  if (written.failures.length > 0) {
    throw new BenchError(`preparing ${name}: ${written.failures.join('; ')}`);
  }
  return written.dataset;
}

export interface MeasuredShape {
  readonly unit: ThroughputUnit;
  readonly objects: number;
  readonly objectBytes: number;
  readonly concurrency: number;
  readonly failures?: readonly string[];
  readonly notes?: readonly string[];
}

/** A measurement of nothing: a scenario that was skipped or failed before it measured. */
export function emptyMeasured(extra: { failures?: readonly string[]; skipped?: string }): Measured {
  return {
    operations: 0,
    bytes: 0,
    seconds: 0,
    latency: new Histogram(),
    unit: 'MB/s',
    objects: 0,
    objectBytes: 0,
    concurrency: 0,
    failures: extra.failures ?? [],
    window: null,
    clientCpuSeconds: 0,
    client: null,
    notes: [],
    ...(extra.skipped === undefined ? {} : { skipped: extra.skipped }),
  };
}

export function measuredFromLoad(load: Timed<LoadResult>, shape: MeasuredShape): Measured {
  const result = load.value;
  return {
    operations: result.requests,
    bytes: result.bytesSent + result.bytesReceived,
    seconds: result.seconds,
    latency: result.latency,
    unit: shape.unit,
    objects: shape.objects,
    objectBytes: shape.objectBytes,
    concurrency: shape.concurrency,
    failures: shape.failures ?? result.failureSamples,
    window: load.window,
    clientCpuSeconds: load.clientCpuSeconds,
    client: result.client,
    notes: shape.notes ?? [],
  };
}

/** GET of object `index` (cycling over the dataset), checked by length and CRC32. */
export function getRequest(
  dataset: Dataset,
  index: number,
  headers: string,
  api: ObjectApi,
): LoadRequest {
  const i = index % dataset.keys.length;
  const key = dataset.keys[i];
  const plan = dataset.plans[i];
  const crc = dataset.crc32s[i];
  if (key === undefined || plan === undefined || crc === undefined) {
    throw new BenchError(`no object ${i} in ${dataset.name}`);
  }
  return {
    method: 'GET',
    path: api.objectPath(dataset.bucket, key),
    headers,
    expectBytes: plan.length,
    expectCrc32: crc,
  };
}
