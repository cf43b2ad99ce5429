// The S3 scenarios: the native 64 MiB and 4 KiB PUT and GET measurements again, through
// Lightwell's S3-compatible API with `@aws-sdk/client-s3` in its default configuration (the
// client S3 users run: CRC32 request checksums, response checksum validation), in the same run
// as the native ones. Each reports its ratio to the machine's limits, as every scenario does,
// and to the native scenario it mirrors (`compareTo`), once that one has run.
//
// The SDK is the load generator here, not the bench's HTTP client: its signing, checksums and
// XML parsing are part of what an S3 user pays, so they are measured (the client CPU column
// shows them). Bodies are the same stamped, incompressible plans as the native datasets; every
// PUT answer's ETag is checked against the body's MD5 and every GET body against its CRC32.

import { createHash } from 'node:crypto';
import { crc32 } from '@node-rs/crc32';
import {
  CreateBucketCommand,
  GetObjectCommand,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { BenchError, errorMessage } from './bench-error.js';
import { fillSlice, type BodyPlan } from './data.js';
import { Histogram } from './histogram.js';
import type { Ratio, ScenarioReport } from './report.js';
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

/** The S3 client of a run, made once from the service's key pair. */
const clients = new WeakMap<ScenarioContext, S3Client>();

function clientOf(context: ScenarioContext): S3Client | undefined {
  const existing = clients.get(context);
  if (existing) return existing;
  const credentials = context.service.credentials;
  if (!credentials) return undefined;
  const target = context.service.target;
  const client = new S3Client({
    endpoint: `${target.tls ? 'https' : 'http'}://${target.hostHeader}${target.basePath}`,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: credentials.accessKeyId, secretAccessKey: credentials.secretKey },
  });
  clients.set(context, client);
  return client;
}

/** The S3 datasets: the native ones' sizes and counts, under their own names and bucket. */
interface S3DatasetSpec {
  readonly native: string;
  readonly connections: number;
}

const S3_DATASETS: Readonly<Record<string, S3DatasetSpec>> = {
  's3-large-x1': { native: 'large-x1-random', connections: 1 },
  's3-small': { native: 'small', connections: 64 },
};

function s3Bucket(context: ScenarioContext): string {
  return `lwbench-${context.runId}-s3`;
}

async function ensureS3Bucket(context: ScenarioContext, client: S3Client): Promise<string> {
  const bucket = s3Bucket(context);
  if (context.buckets.has(bucket)) return bucket;
  try {
    await client.send(new CreateBucketCommand({ Bucket: bucket }));
  } catch (error) {
    if (!(error instanceof S3ServiceException && error.name === 'BucketAlreadyOwnedByYou'))
      throw error;
  }
  context.buckets.add(bucket);
  return bucket;
}

/** `count` operations over `connections` workers; the latency of each in the histogram. */
async function runWorkers(
  connections: number,
  count: number,
  operation: (index: number, worker: number) => Promise<void>,
): Promise<{ latency: Histogram; failures: string[]; seconds: number }> {
  const latency = new Histogram();
  const failures: string[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: Math.min(connections, count) }, async (_, worker) => {
      for (let index = next++; index < count; index = next++) {
        const begun = performance.now();
        try {
          await operation(index, worker);
          latency.record((performance.now() - begun) * 1000);
        } catch (error) {
          if (failures.length < 5) failures.push(`object ${index}: ${errorMessage(error)}`);
        }
      }
    }),
  );
  return { latency, failures, seconds: (performance.now() - started) / 1000 };
}

function measured(
  run: { latency: Histogram; failures: string[]; seconds: number },
  shape: { unit: ThroughputUnit; objects: number; objectBytes: number; concurrency: number },
  window: { window: Measured['window']; clientCpuSeconds: number },
): Measured {
  return {
    ...emptyMeasured({ failures: run.failures }),
    operations: shape.objects - run.failures.length,
    bytes: (shape.objects - run.failures.length) * shape.objectBytes,
    seconds: run.seconds,
    latency: run.latency,
    ...shape,
    window: window.window,
    clientCpuSeconds: window.clientCpuSeconds,
  };
}

function bodyOf(plan: BodyPlan, buffer: Buffer): Buffer {
  const body = buffer.subarray(0, plan.length);
  fillSlice(plan, 0, body);
  return body;
}

/** PUTs the S3 dataset `name` through the SDK, each answer's ETag checked against the MD5. */
async function putDataset(
  context: ScenarioContext,
  name: string,
): Promise<{ dataset: Dataset; measured: Measured } | { skipped: string }> {
  const client = clientOf(context);
  if (!client) return { skipped: 'no access key pair (runs given --token only)' };
  const spec = S3_DATASETS[name];
  if (spec === undefined) throw new BenchError(`unknown S3 dataset ${name}`);
  const native = planDataset(context, spec.native);
  const bucket = await ensureS3Bucket(context, client);
  const keys = native.keys.map((key) => `s3/${key}`);
  const dataset: Dataset = { ...native, name, bucket, keys, crc32s: [] };
  const objectBytes = dataset.plans[0]?.length ?? 0;
  const buffers = Array.from({ length: spec.connections }, () => Buffer.allocUnsafe(objectBytes));
  const crcs: number[] = [];
  const timedRun = await timed(context, () =>
    runWorkers(spec.connections, dataset.plans.length, async (index, worker) => {
      const plan = dataset.plans[index] as BodyPlan;
      const body = bodyOf(plan, buffers[worker] as Buffer);
      const md5 = createHash('md5').update(body).digest('hex');
      crcs[index] = crc32(body);
      const answer = await client.send(
        new PutObjectCommand({ Bucket: bucket, Key: keys[index], Body: body }),
      );
      if (answer.ETag !== `"${md5}"`)
        throw new BenchError(`ETag ${answer.ETag ?? 'missing'} is not the MD5 "${md5}"`);
    }),
  );
  const run = timedRun.value;
  const result = measured(
    run,
    {
      unit: objectBytes >= 1024 * 1024 ? 'MB/s' : 'ops/s',
      objects: keys.length,
      objectBytes,
      concurrency: spec.connections,
    },
    timedRun,
  );
  if (run.failures.length === 0) context.datasets.set(name, { ...dataset, crc32s: crcs });
  return { dataset, measured: result };
}

/** GETs `reads` objects of the S3 dataset (cycling), each body checked by length and CRC32. */
async function getDataset(
  context: ScenarioContext,
  name: string,
  reads: (sizes: ScenarioSizes, dataset: Dataset) => number,
): Promise<Measured> {
  const client = clientOf(context);
  if (!client) return emptyMeasured({ skipped: 'no access key pair (runs given --token only)' });
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
  const keys = dataset.keys;
  const timedRun = await timed(context, () =>
    runWorkers(spec.connections, count, async (index) => {
      const i = index % keys.length;
      const answer = await client.send(
        new GetObjectCommand({ Bucket: dataset.bucket, Key: keys[i] }),
      );
      const body = await answer.Body?.transformToByteArray();
      if (body?.length !== objectBytes)
        throw new BenchError(`GET answered ${body?.length ?? 0} bytes, not ${objectBytes}`);
      if (crc32(body) !== dataset.crc32s[i]) throw new BenchError('GET body fails its CRC32');
    }),
  );
  return measured(
    timedRun.value,
    {
      unit: objectBytes >= 1024 * 1024 ? 'MB/s' : 'ops/s',
      objects: count,
      objectBytes,
      concurrency: spec.connections,
    },
    timedRun,
  );
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
