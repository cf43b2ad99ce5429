// The S3 scenarios' load generator, in a worker thread of the bench: the AWS SDK client and the
// closed loop of `connections` requests that drives it (bench/s3-load.ts starts it and sends
// it jobs).
//
// It runs off the bench's main thread for the reason the native load generator runs in a
// process of its own: the main thread samples the service's process tree every 100 ms with
// synchronous /proc reads (bench/proc-stats.ts; 13–55 ms each on the loaded project machine, a
// PSS sample every second 300–500 ms), and a client on that event loop sends nothing while a
// sample runs. Each API's load then has one client thread of its own, the same concurrency,
// and the same stalls (none).
//
// Messages: the parent posts `{ id, job }` and gets `{ id, result }` or `{ id, error }` back.
// Bodies come as plans (bench/data.ts), filled into one buffer per connection as the native
// load generator fills them; a plan's template arrives as a Uint8Array (structured clone), one
// copy for all the plans that share it.

import { crc32 } from '@node-rs/crc32';
import {
  CreateBucketCommand,
  GetObjectCommand,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { randomFillSync } from 'node:crypto';
import { parentPort, workerData } from 'node:worker_threads';
import { BenchError, errorMessage } from './bench-error.js';
import { fillSlice, type BodyPlan } from './data.js';
import {
  S3_CLIENT_DEFAULT_SETTINGS,
  S3_CLIENT_SETTINGS,
  type S3Job,
  type S3LoadInit,
  type S3LoadResult,
} from './s3-load.js';

/** Failure messages kept per job (the count of failures is the latencies' shortfall). */
const FAILURE_SAMPLES_MAX = 5;

const init = workerData as S3LoadInit;
const client = new S3Client({
  ...(init.sdk === 'default' ? S3_CLIENT_DEFAULT_SETTINGS : S3_CLIENT_SETTINGS),
  endpoint: init.endpoint,
  credentials: init.credentials,
});

/** `count` operations over `connections` loops; each one's latency (µs), or its failure. */
async function closedLoop(
  connections: number,
  count: number,
  operation: (index: number, connection: number) => Promise<void>,
): Promise<S3LoadResult> {
  const latenciesUs = new Float64Array(count).fill(-1);
  const failures: string[] = [];
  let failed = 0;
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: Math.min(connections, count) }, async (_, connection) => {
      for (let index = next++; index < count; index = next++) {
        const begun = performance.now();
        try {
          await operation(index, connection);
          latenciesUs[index] = (performance.now() - begun) * 1000;
        } catch (error) {
          failed += 1;
          if (failures.length < FAILURE_SAMPLES_MAX)
            failures.push(`object ${index}: ${errorMessage(error)}`);
        }
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  return { latenciesUs, failures, failed, seconds, etags: [] };
}

/** The plans' templates as Buffers again, one per distinct template. */
function revivePlans(plans: readonly BodyPlan[]): BodyPlan[] {
  const buffers = new Map<Uint8Array, Buffer>();
  return plans.map((plan) => {
    const bytes = plan.template as Uint8Array;
    let template = buffers.get(bytes);
    if (template === undefined) {
      template = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      buffers.set(bytes, template);
    }
    return { ...plan, template };
  });
}

async function put(job: Extract<S3Job, { kind: 'put' }>): Promise<S3LoadResult> {
  const plans = revivePlans(job.plans);
  const objectBytes = plans[0]?.length ?? 0;
  const buffers = Array.from({ length: job.connections }, () => Buffer.allocUnsafe(objectBytes));
  const etags: (string | undefined)[] = new Array<string | undefined>(plans.length);
  const result = await closedLoop(job.connections, plans.length, async (index, connection) => {
    const plan = plans[index] as BodyPlan;
    const body = (buffers[connection] as Buffer).subarray(0, plan.length);
    fillSlice(plan, 0, body);
    const answer = await client.send(
      new PutObjectCommand({ Bucket: job.bucket, Key: job.keys[index], Body: body }),
    );
    if (answer.ETag === undefined) throw new BenchError('PUT answered no ETag');
    etags[index] = answer.ETag;
  });
  return { ...result, etags };
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

function get(job: Extract<S3Job, { kind: 'get' }>): Promise<S3LoadResult> {
  return closedLoop(job.connections, job.count, async (index) => {
    const i = index % job.keys.length;
    const answer = await client.send(
      new GetObjectCommand({ Bucket: job.bucket, Key: job.keys[i] }),
    );
    // In Node the body is the response stream itself with the bench's settings (checksums
    // WHEN_REQUIRED, s3-load.ts), or the SDK's CRC32-validating stream around it by default;
    // read as an application that streams it onwards would, not gathered into one buffer.
    const stream = answer.Body as AsyncIterable<Uint8Array> | undefined;
    if (stream === undefined) throw new BenchError('GET answered no body');
    const body = await streamedCrc32(stream);
    if (body.bytes !== job.objectBytes)
      throw new BenchError(`GET answered ${body.bytes} bytes, not ${job.objectBytes}`);
    if (body.crc32 !== job.crc32s[i]) throw new BenchError('GET body fails its CRC32');
  });
}

/**
 * PUTs then GETs `count` distinct random bodies at the scenarios' concurrency, outside any timed
 * window, so that the SDK's code and the server's S3 path are compiled by V8 before a scenario
 * measures them: the first few thousand requests of a fresh client run on V8's interpreter and
 * baseline code at two to three times the CPU of a warmed-up one (docs/benchmarks.md), a cost
 * the native load generator, a C program, never pays.
 */
async function warmUp(job: Extract<S3Job, { kind: 'warmUp' }>): Promise<S3LoadResult> {
  const key = (index: number): string => `s3-warm-up/${index}`;
  const bodies = Array.from({ length: job.connections }, () => Buffer.alloc(job.objectBytes));
  const puts = await closedLoop(job.connections, job.count, async (index, connection) => {
    const body = randomFillSync(bodies[connection] as Buffer);
    await client.send(new PutObjectCommand({ Bucket: job.bucket, Key: key(index), Body: body }));
  });
  if (puts.failed > 0) return puts;
  return closedLoop(job.connections, job.count, async (index) => {
    const answer = await client.send(new GetObjectCommand({ Bucket: job.bucket, Key: key(index) }));
    const stream = answer.Body as AsyncIterable<Uint8Array> | undefined;
    if (stream === undefined) throw new BenchError('GET answered no body');
    let bytes = 0;
    for await (const chunk of stream) bytes += chunk.length;
    if (bytes !== job.objectBytes) throw new BenchError(`GET answered ${bytes} bytes`);
  });
}

async function createBucket(bucket: string): Promise<S3LoadResult> {
  try {
    await client.send(new CreateBucketCommand({ Bucket: bucket }));
  } catch (error) {
    if (!(error instanceof S3ServiceException && error.name === 'BucketAlreadyOwnedByYou'))
      throw error;
  }
  return { latenciesUs: new Float64Array(0), failures: [], failed: 0, seconds: 0, etags: [] };
}

function run(job: S3Job): Promise<S3LoadResult> {
  if (job.kind === 'put') return put(job);
  if (job.kind === 'get') return get(job);
  if (job.kind === 'warmUp') return warmUp(job);
  return createBucket(job.bucket);
}

const port = parentPort;
if (port === null) throw new BenchError('s3-load-worker.js runs as a worker thread');
port.on('message', (message: { id: number; job: S3Job }) => {
  run(message.job).then(
    (result) => port.postMessage({ id: message.id, result }),
    (error: unknown) => port.postMessage({ id: message.id, error: errorMessage(error) }),
  );
});
