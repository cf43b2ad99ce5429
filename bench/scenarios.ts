// The benchmark scenarios of issue 6, run against Lightwell's public port, in run order.
//
// 64 MiB objects (1 and 8 streams, incompressible and text-like, PUT and GET, and the same
// content written again), 1 MiB at concurrency 32, 4 KiB at concurrency 64, a 1 GiB multipart
// upload in 16 parallel parts, listing a bucket of 1,000,000 keys, a mixed 80/20 GET/PUT load, and
// 64 clients uploading 1 GiB each at once for peak RSS. Sizes shrink with --quick (see
// SCENARIO_SIZES). Each scenario reports throughput, p50/p99 latency, server CPU-seconds per GB
// and peak RSS, and names the limits that bound it: the first is the ratio's denominator.

import { errorMessage } from './bench-error.js';
import {
  datasetSpec,
  emptyMeasured,
  ensureDataset,
  getRequest,
  loadWithProgress,
  type Measured,
  measuredFromLoad,
  type Scenario,
  type ScenarioContext,
  type ScenarioSizes,
  type ThroughputUnit,
  timed,
  writeDataset,
} from './scenario-kit.js';
import { listScenario, mixedScenario, multipartScenario } from './scenario-kinds.js';
import { S3_SCENARIOS } from './s3-scenarios.js';
import { INGEST_SCENARIOS } from './ingest-scenarios.js';
import { LIFECYCLE_SCENARIOS } from './lifecycle-scenario.js';

export {
  emptyMeasured,
  LIGHTWELL_API,
  type Measured,
  newScenarioContext,
  type Profile,
  type Scenario,
  type ScenarioContext,
  SCENARIO_SIZES,
  writtenBytesEstimate,
} from './scenario-kit.js';

interface PutOptions {
  readonly bounds: readonly string[];
  readonly unit?: ThroughputUnit;
}

/** PUT a dataset under measurement; verification of the bytes follows, untimed. */
function putScenario(name: string, title: string, dataset: string, options: PutOptions): Scenario {
  return {
    name,
    title,
    bounds: options.bounds,
    run: async (context) => {
      const spec = datasetSpec(dataset);
      const written = await writeDataset(context, dataset, name);
      return measuredFromLoad(written.load, {
        unit: options.unit ?? 'MB/s',
        objects: written.dataset.plans.length,
        objectBytes: spec.bytes(context.sizes),
        concurrency: spec.connections(context.sizes),
        failures: written.failures,
        notes: written.notes,
      });
    },
  };
}

interface GetOptions {
  readonly connections: number;
  readonly bounds: readonly string[];
  readonly reads?: (sizes: ScenarioSizes) => number;
  readonly unit?: ThroughputUnit;
}

/** GET every object of a dataset (or `reads` objects, cycling), CRC32-checking every body. */
function getScenario(
  name: string,
  title: string,
  datasetName: string,
  options: GetOptions,
): Scenario {
  return {
    name,
    title,
    bounds: options.bounds,
    run: async (context: ScenarioContext) => {
      const dataset = await ensureDataset(context, datasetName);
      const headers = await context.service.authHeader();
      const reads = options.reads?.(context.sizes) ?? dataset.keys.length;
      const objectBytes = dataset.plans[0]?.length ?? 0;
      const total = { amount: reads * objectBytes, unit: 'bytes' as const };
      const load = await timed(context, () =>
        loadWithProgress(context, name, total, {
          connections: options.connections,
          requests: reads,
          makeRequest: (i) => getRequest(dataset, i, headers, context.api),
        }),
      );
      return measuredFromLoad(load, {
        unit: options.unit ?? 'MB/s',
        objects: reads,
        objectBytes,
        concurrency: options.connections,
      });
    },
  };
}

const PUT = { bounds: ['http-sink-put', 'fdatasync-append', 'ideal-put-random'] };
const PUT_TEXT = { bounds: ['http-sink-put', 'fdatasync-append', 'ideal-put-text'] };
const DEDUP = { bounds: ['http-sink-put', 'sha256'] };
// Large chunks are read from the disk with O_DIRECT (the page cache does not hold them).
const GET_BOUNDS = ['http-source-get', 'direct-read'];
const GET_1 = { connections: 1, bounds: GET_BOUNDS };
const GET_8 = { connections: 8, bounds: GET_BOUNDS };

/** Every scenario, in run order (PUTs before the GETs that read their objects). */
export const SCENARIOS: readonly Scenario[] = [
  // First, on a service that has served nothing else: its peak RSS is what 16 uploads take.
  putScenario('rss-16x1g', '16 clients each uploading 1 GiB at once (peak RSS)', 'rss-few', PUT),
  putScenario('put-64m-x1-random', '64 MiB PUT, 1 stream, incompressible', 'large-x1-random', PUT),
  getScenario(
    'get-64m-x1-random',
    '64 MiB GET, 1 stream, incompressible',
    'large-x1-random',
    GET_1,
  ),
  putScenario('put-64m-x8-random', '64 MiB PUT, 8 streams, incompressible', 'large-x8-random', PUT),
  getScenario(
    'get-64m-x8-random',
    '64 MiB GET, 8 streams, incompressible',
    'large-x8-random',
    GET_8,
  ),
  putScenario(
    'put-64m-x1-text',
    '64 MiB PUT, 1 stream, text-like (LZ4 ~3.6x)',
    'large-x1-text',
    PUT_TEXT,
  ),
  getScenario('get-64m-x1-text', '64 MiB GET, 1 stream, text-like', 'large-x1-text', GET_1),
  putScenario(
    'put-64m-x8-text',
    '64 MiB PUT, 8 streams, text-like (LZ4 ~3.6x)',
    'large-x8-text',
    PUT_TEXT,
  ),
  getScenario('get-64m-x8-text', '64 MiB GET, 8 streams, text-like', 'large-x8-text', GET_8),
  putScenario(
    'put-64m-x1-dedup',
    '64 MiB PUT, 1 stream, content stored before',
    'large-x1-dedup',
    DEDUP,
  ),
  putScenario(
    'put-64m-x8-dedup',
    '64 MiB PUT, 8 streams, content stored before',
    'large-x8-dedup',
    DEDUP,
  ),
  putScenario('put-1m-c32', '1 MiB PUT, concurrency 32', 'medium', PUT),
  getScenario('get-1m-c32', '1 MiB GET, concurrency 32', 'medium', {
    connections: 32,
    bounds: GET_BOUNDS,
  }),
  putScenario('put-4k-c64', '4 KiB PUT, concurrency 64', 'small', {
    bounds: ['http-sink-tiny', 'lmdb-group-commit'],
    unit: 'ops/s',
  }),
  getScenario('get-4k-c64', '4 KiB GET, concurrency 64', 'small', {
    connections: 64,
    reads: (s) => s.smallGets,
    unit: 'ops/s',
    bounds: ['http-sink-tiny'],
  }),
  // The same 64 MiB and 4 KiB loads through S3 and the AWS SDK, after their native twins.
  ...S3_SCENARIOS,
  // In the same run as put-4k-c64 and put-64m-x1-random, which they are compared with.
  ...INGEST_SCENARIOS,
  // In-process (the engine's executor on an index of its own): see lifecycle-scenario.ts.
  ...LIFECYCLE_SCENARIOS,
  putScenario(
    'put-1g-x1-random',
    '1 GiB PUT, single stream (the multipart object whole)',
    'whole',
    PUT,
  ),
  multipartScenario('multipart-1g-16p', '1 GiB multipart upload, 16 parallel parts', PUT.bounds),
  // Before the listing: its million keys leave the index's pages resident in every process that
  // maps it (clean file pages, but counted in RSS), which would hide the upload path's memory.
  putScenario('rss-64x1g', '64 clients each uploading 1 GiB at once (peak RSS)', 'rss', PUT),
  listScenario('list-1m-keys', 'list a bucket of 1,000,000 keys, 1000 per page', [
    'lmdb-range-scan',
  ]),
  mixedScenario('mixed-80get-20put', '1 MiB objects, 80% GET / 20% PUT, concurrency 32', [
    'http-source-get',
    'http-sink-put',
  ]),
];

/** Runs a scenario; an exception becomes a failed measurement instead of ending the run. */
export function runScenarioSafely(scenario: Scenario, context: ScenarioContext): Promise<Measured> {
  return scenario
    .run(context)
    .catch((error: unknown) => emptyMeasured({ failures: [errorMessage(error)] }));
}
