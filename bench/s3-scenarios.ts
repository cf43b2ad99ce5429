// The S3 scenarios: the native 64 MiB and 4 KiB PUT and GET measurements again, through
// Lightwell's S3-compatible API with `@aws-sdk/client-s3`, in the same run as the native ones.
// Each reports its ratio to the machine's limits, as every scenario does, and to the native
// scenario it mirrors (`compareTo`), once that one has run.
//
// The SDK is the load generator here, not the bench's HTTP client: its signing, checksums and
// XML parsing are part of what an S3 user pays, so they are measured (the client CPU column
// shows them). By default the client is set up as a high-volume user sets it up
// (`S3_CLIENT_SETTINGS`, `--s3-sdk tuned`): every request SigV4-signed with its payload's
// SHA-256, checksums only where S3 requires them (the bench checks the bytes itself, as below),
// one attempt a request; `--s3-sdk default` runs the SDK as it comes (CRC32 on every PUT and
// GET, three attempts), and the settings line of the report records which. It runs in a worker
// thread of its own (bench/s3-load.ts), as the native load generator runs in a process of its
// own, at the native twin's concurrency. Bodies are the same stamped, incompressible plans as the native
// datasets. As in the native scenarios, the bench's own checks that need the whole body run
// outside the timed window (every PUT answer's ETag against the body's MD5, afterwards) or as
// the bytes stream in (every GET body's CRC32, as the native load generator computes it).

import { createHash } from 'node:crypto';
import { crc32 } from '@node-rs/crc32';
import { BenchError } from './bench-error.js';
import { fillSlice, type BodyPlan } from './data.js';
import { Histogram } from './histogram.js';
import type { Ratio, ScenarioReport } from './report.js';
import { S3_CONNECTIONS_MAX, S3Load, type S3LoadResult } from './s3-load.js';
import {
  emptyMeasured,
  planDataset,
  timed,
  type Dataset,
  type Measured,
  type Scenario,
  type ScenarioContext,
  type ScenarioSizes,
  type ThroughputUnit,
} from './scenario-kit.js';

/** The S3 load generator of a run (a worker thread with the SDK client), made once. */
const loads = new WeakMap<ScenarioContext, S3Load>();

function loadOf(context: ScenarioContext): S3Load | undefined {
  const existing = loads.get(context);
  if (existing) return existing;
  const credentials = context.service.credentials;
  if (!credentials) return undefined;
  const target = context.service.target;
  const load = new S3Load({
    endpoint: `${target.tls ? 'https' : 'http'}://${target.hostHeader}${target.basePath}`,
    sdk: context.s3Sdk ?? 'tuned',
    credentials: { accessKeyId: credentials.accessKeyId, secretAccessKey: credentials.secretKey },
  });
  loads.set(context, load);
  return load;
}

/** Ends the run's S3 load generator, if it started one (before its service stops). */
export async function closeS3Load(context: ScenarioContext): Promise<void> {
  const load = loads.get(context);
  loads.delete(context);
  await load?.close();
}

/** The S3 datasets: the native ones' sizes and counts, under their own names and bucket. */
interface S3DatasetSpec {
  readonly native: string;
  readonly connections: number;
}

const S3_DATASETS: Readonly<Record<string, S3DatasetSpec>> = {
  's3-large-x1': { native: 'large-x1-random', connections: 1 },
  's3-small': { native: 'small', connections: S3_CONNECTIONS_MAX },
};

function s3Bucket(context: ScenarioContext): string {
  return `lwbench-${context.runId}-s3`;
}

/** Warm-up requests of each kind before the first timed S3 scenario (`s3-load-worker.ts`). */
const WARM_UP_REQUESTS_MAX = 2000;

/**
 * The run's S3 bucket, created (outside any timed window) the first time, when the client is
 * also warmed up: up to WARM_UP_REQUESTS_MAX 4 KiB PUTs and GETs (the small dataset's count at
 * most) at the small scenarios' concurrency.
 */
async function ensureS3Bucket(context: ScenarioContext, load: S3Load): Promise<string> {
  const bucket = s3Bucket(context);
  if (context.buckets.has(bucket)) return bucket;
  await load.run({ kind: 'createBucket', bucket });
  const warmUp = await load.run({
    kind: 'warmUp',
    bucket,
    count: Math.min(WARM_UP_REQUESTS_MAX, context.sizes.smallPuts),
    objectBytes: context.sizes.smallBytes,
    connections: S3_CONNECTIONS_MAX,
  });
  if (warmUp.failed > 0)
    throw new BenchError(`warming up the S3 client: ${warmUp.failures.join('; ')}`);
  context.buckets.add(bucket);
  return bucket;
}

/** A worker's run as the scenario's throughput window: its latencies and failures. */
function outcome(result: S3LoadResult): {
  latency: Histogram;
  failures: string[];
  seconds: number;
} {
  const latency = new Histogram();
  for (const micros of result.latenciesUs) if (micros >= 0) latency.record(micros);
  const failures = [...result.failures];
  if (result.failed > failures.length)
    failures.push(`${result.failed - failures.length} more failed`);
  return { latency, failures, seconds: result.seconds };
}

function measured(
  run: { latency: Histogram; failures: string[]; seconds: number },
  shape: { unit: ThroughputUnit; objects: number; objectBytes: number; concurrency: number },
  window: { window: Measured['window']; clientCpuSeconds: number },
  failed: number,
): Measured {
  return {
    ...emptyMeasured({ failures: run.failures }),
    operations: shape.objects - failed,
    bytes: (shape.objects - failed) * shape.objectBytes,
    seconds: run.seconds,
    latency: run.latency,
    ...shape,
    window: window.window,
    clientCpuSeconds: window.clientCpuSeconds,
    // The AWS SDK runs on Node's HTTP client whatever --client says.
    client: 'node',
  };
}

/** MD5 (hex) and CRC32 of a plan's body, regenerated slice by slice into `scratch`. */
function planDigests(plan: BodyPlan, scratch: Buffer): { md5: string; crc32: number } {
  const md5 = createHash('md5');
  let crc = 0;
  for (let offset = 0; offset < plan.length;) {
    const n = fillSlice(plan, offset, scratch);
    const slice = scratch.subarray(0, n);
    md5.update(slice);
    crc = crc32(slice, crc);
    offset += n;
  }
  return { md5: md5.digest('hex'), crc32: crc };
}

/**
 * Every PUT answer's ETag against the MD5 of the body it answered, after the timed window (as
 * the native scenarios verify theirs); failures, and the bodies' CRC32s for the GETs.
 */
async function verifyEtags(
  context: ScenarioContext,
  dataset: Dataset,
  etags: readonly (string | undefined)[],
): Promise<{ failures: string[]; crc32s: number[] }> {
  const failures: string[] = [];
  const crc32s: number[] = [];
  for (const [index, plan] of dataset.plans.entries()) {
    const digests = planDigests(plan, context.scratch);
    crc32s.push(digests.crc32);
    const etag = etags[index];
    if (etag !== `"${digests.md5}"` && failures.length < 5)
      failures.push(`object ${index}: ETag ${etag ?? 'missing'} is not the MD5 "${digests.md5}"`);
    if (index % 64 === 63 || plan.length >= 1024 * 1024)
      await new Promise((resolve) => setImmediate(resolve));
  }
  return { failures, crc32s };
}

function unitOf(objectBytes: number): ThroughputUnit {
  return objectBytes >= 1024 * 1024 ? 'MB/s' : 'ops/s';
}

/** PUTs the S3 dataset `name` through the SDK; each answer's ETag is checked afterwards. */
async function putDataset(
  context: ScenarioContext,
  name: string,
): Promise<{ dataset: Dataset; measured: Measured } | { skipped: string }> {
  const load = loadOf(context);
  if (!load) return { skipped: 'no access key pair (runs given --token only)' };
  const spec = S3_DATASETS[name];
  if (spec === undefined) throw new BenchError(`unknown S3 dataset ${name}`);
  const native = planDataset(context, spec.native);
  const bucket = await ensureS3Bucket(context, load);
  const keys = native.keys.map((key) => `s3/${key}`);
  const dataset: Dataset = { ...native, name, bucket, keys, crc32s: [] };
  const objectBytes = dataset.plans[0]?.length ?? 0;
  const timedRun = await timed(context, () =>
    load.run({ kind: 'put', bucket, keys, plans: dataset.plans, connections: spec.connections }),
  );
  const run = outcome(timedRun.value);
  if (timedRun.value.failed === 0) {
    const verified = await verifyEtags(context, dataset, timedRun.value.etags);
    run.failures.push(...verified.failures);
    if (verified.failures.length === 0)
      context.datasets.set(name, { ...dataset, crc32s: verified.crc32s });
  }
  const shape = {
    unit: unitOf(objectBytes),
    objects: keys.length,
    objectBytes,
    concurrency: spec.connections,
  };
  return { dataset, measured: measured(run, shape, timedRun, timedRun.value.failed) };
}

/** GETs `reads` objects of the S3 dataset (cycling), each body checked by length and CRC32. */
async function getDataset(
  context: ScenarioContext,
  name: string,
  reads: (sizes: ScenarioSizes, dataset: Dataset) => number,
): Promise<Measured> {
  const load = loadOf(context);
  if (!load) return emptyMeasured({ skipped: 'no access key pair (runs given --token only)' });
  if (!context.datasets.has(name)) {
    const written = await putDataset(context, name);
    if ('skipped' in written) return emptyMeasured({ skipped: written.skipped });
    if (written.measured.failures.length > 0)
      throw new BenchError(`preparing ${name}: ${written.measured.failures.join('; ')}`);
  }
  const dataset = context.datasets.get(name);
  if (dataset === undefined) throw new BenchError(`${name} was not written`);
  const spec = S3_DATASETS[name] as S3DatasetSpec;
  const count = reads(context.sizes, dataset);
  const objectBytes = dataset.plans[0]?.length ?? 0;
  const timedRun = await timed(context, () =>
    load.run({
      kind: 'get',
      bucket: dataset.bucket,
      keys: dataset.keys,
      count,
      connections: spec.connections,
      objectBytes,
      crc32s: dataset.crc32s,
    }),
  );
  const shape = {
    unit: unitOf(objectBytes),
    objects: count,
    objectBytes,
    concurrency: spec.connections,
  };
  return measured(outcome(timedRun.value), shape, timedRun, timedRun.value.failed);
}

/** An S3 scenario: its native twin's name, for the ratio to it. */
export interface S3Scenario extends Scenario {
  readonly compareTo: string;
}

const PUT_BOUNDS = ['http-sink-put', 'fdatasync-append', 'ideal-put-random'];
const GET_BOUNDS = ['http-source-get', 'direct-read'];

/** The S3 scenarios, run after the native ones they compare to. */
export const S3_SCENARIOS: readonly S3Scenario[] = [
  {
    name: 's3-put-64m-x1',
    title: 'S3 (AWS SDK) 64 MiB PUT, 1 stream, incompressible',
    bounds: PUT_BOUNDS,
    compareTo: 'put-64m-x1-random',
    run: async (context) => {
      const written = await putDataset(context, 's3-large-x1');
      return 'skipped' in written ? emptyMeasured(written) : written.measured;
    },
  },
  {
    name: 's3-get-64m-x1',
    title: 'S3 (AWS SDK) 64 MiB GET, 1 stream, incompressible',
    bounds: GET_BOUNDS,
    compareTo: 'get-64m-x1-random',
    run: (context) => getDataset(context, 's3-large-x1', (_, dataset) => dataset.keys.length),
  },
  {
    name: 's3-put-4k-c64',
    title: 'S3 (AWS SDK) 4 KiB PUT, concurrency 64',
    bounds: ['http-sink-tiny', 'lmdb-group-commit'],
    compareTo: 'put-4k-c64',
    run: async (context) => {
      const written = await putDataset(context, 's3-small');
      return 'skipped' in written ? emptyMeasured(written) : written.measured;
    },
  },
  {
    name: 's3-get-4k-c64',
    title: 'S3 (AWS SDK) 4 KiB GET, concurrency 64',
    bounds: ['http-sink-tiny'],
    compareTo: 'get-4k-c64',
    run: (context) => getDataset(context, 's3-small', (sizes) => sizes.smallGets),
  },
];

/**
 * `report` with its ratio to the native scenario it mirrors appended (`native <name>`), when
 * that scenario ran earlier in this run and both completed.
 */
export function withNativeRatio(
  scenario: Scenario,
  report: ScenarioReport,
  earlier: readonly ScenarioReport[],
): ScenarioReport {
  const compareTo = (scenario as Partial<S3Scenario>).compareTo;
  if (compareTo === undefined || report.status !== 'ok') return report;
  const native = earlier.find((candidate) => candidate.name === compareTo);
  if (native?.status !== 'ok' || !(native.throughput.value > 0)) return report;
  if (native.throughput.unit !== report.throughput.unit) return report;
  const ratio: Ratio = {
    limit: `native ${compareTo}`,
    value: report.throughput.value / native.throughput.value,
  };
  return { ...report, ratios: [...report.ratios, ratio] };
}
