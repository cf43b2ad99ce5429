// The S3 scenarios: the native 64 MiB and 4 KiB PUT and GET measurements again, through
// Lightwell's S3-compatible API with `@aws-sdk/client-s3`, in the same run as the native ones.
// Each reports its ratio to the machine's limits, as every scenario does, and to the native
// scenario it mirrors (`compareTo`), once that one has run.
//
// The SDK is the load generator here, not the bench's HTTP client: its signing, checksums and
// XML parsing are part of what an S3 user pays, so they are measured (the client CPU column
// shows them). The client is set up as a high-volume user sets it up (`S3_CLIENT_SETTINGS`),
// with the wire unchanged from the SDK's defaults: every request SigV4-signed with its payload's
// SHA-256, CRC32 request checksums, response checksum validation. Bodies are the same stamped,
// incompressible plans as the native datasets. As in the native scenarios, the bench's own
// checks that need the whole body run outside the timed window (every PUT answer's ETag against
// the body's MD5, afterwards) or as the bytes stream in (every GET body's CRC32, as the native
// load generator computes it).

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

/** Connections of the busiest S3 scenario (`s3-small`); the client keeps a socket for each. */
const CONNECTIONS_MAX = 64;

/**
 * How the bench's S3 client is configured: what a user sending many requests through one client
 * sets, none of it changing the requests on the wire (docs/benchmarks.md, "S3 scenarios").
 * `cacheMiddleware` resolves each command's middleware stack once per client instead of once a
 * request (the SDK's own throughput setting since 3.649: 35–40% of the client's CPU per 4 KiB
 * PutObject here); the agent keeps a keep-alive socket per concurrent request (the SDK's default
 * agent keeps 50, so a 64-connection load queued in it); the region and a path-style endpoint
 * are fixed, so no request is redirected or resolved against the endpoint rules twice.
 */
export const S3_CLIENT_SETTINGS = {
  region: 'us-east-1',
  forcePathStyle: true,
  cacheMiddleware: true,
  requestHandler: {
    httpAgent: { keepAlive: true, maxSockets: CONNECTIONS_MAX },
    httpsAgent: { keepAlive: true, maxSockets: CONNECTIONS_MAX },
  },
} as const;

/** The S3 client of a run, made once from the service's key pair. */
const clients = new WeakMap<ScenarioContext, S3Client>();

function clientOf(context: ScenarioContext): S3Client | undefined {
  const existing = clients.get(context);
  if (existing) return existing;
  const credentials = context.service.credentials;
  if (!credentials) return undefined;
  const target = context.service.target;
  const client = new S3Client({
    ...S3_CLIENT_SETTINGS,
    endpoint: `${target.tls ? 'https' : 'http'}://${target.hostHeader}${target.basePath}`,
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
  's3-small': { native: 'small', connections: CONNECTIONS_MAX },
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
    // The AWS SDK runs on Node's HTTP client whatever --client says.
    client: 'node',
  };
}

function bodyOf(plan: BodyPlan, buffer: Buffer): Buffer {
  const body = buffer.subarray(0, plan.length);
  fillSlice(plan, 0, body);
  return body;
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
    if (etag !== undefined && etag !== `"${digests.md5}"` && failures.length < 5)
      failures.push(`object ${index}: ETag ${etag} is not the MD5 "${digests.md5}"`);
    if (index % 64 === 63 || plan.length >= 1024 * 1024)
      await new Promise((resolve) => setImmediate(resolve));
  }
  return { failures, crc32s };
}

/** PUTs the S3 dataset `name` through the SDK; each answer's ETag is checked afterwards. */
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
  const etags: (string | undefined)[] = [];
  const timedRun = await timed(context, () =>
    runWorkers(spec.connections, dataset.plans.length, async (index, worker) => {
      const plan = dataset.plans[index] as BodyPlan;
      const body = bodyOf(plan, buffers[worker] as Buffer);
      const answer = await client.send(
        new PutObjectCommand({ Bucket: bucket, Key: keys[index], Body: body }),
      );
      if (answer.ETag === undefined) throw new BenchError('PUT answered no ETag');
      etags[index] = answer.ETag;
    }),
  );
  const run = timedRun.value;
  if (run.failures.length === 0) {
    const verified = await verifyEtags(context, dataset, etags);
    run.failures.push(...verified.failures);
    if (verified.failures.length === 0)
      context.datasets.set(name, { ...dataset, crc32s: verified.crc32s });
  }
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
  return { dataset, measured: result };
}

/** Length and CRC32 of a GET answer's body, read as it streams in. */
async function streamedCrc32(body: AsyncIterable<Uint8Array>): Promise<{
  bytes: number;
  crc32: number;
}> {
  let bytes = 0;
  let crc = 0;
  for await (const chunk of body) {
    bytes += chunk.length;
    crc = crc32(chunk, crc);
  }
  return { bytes, crc32: crc };
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
      // In Node the body is the response stream (with the SDK's CRC32 validation piped in):
      // read as an application that streams it onwards would, not gathered into one buffer.
      const stream = answer.Body as AsyncIterable<Uint8Array> | undefined;
      if (stream === undefined) throw new BenchError('GET answered no body');
      const body = await streamedCrc32(stream);
      if (body.bytes !== objectBytes)
        throw new BenchError(`GET answered ${body.bytes} bytes, not ${objectBytes}`);
      if (body.crc32 !== dataset.crc32s[i]) throw new BenchError('GET body fails its CRC32');
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
