// The ingest-stream scenarios: objects written through lightwell/client's ingest stream
// (docs/ingest-protocol.md) over 1 or more WebSocket connections, in the same run as the HTTP
// PUT scenarios they are compared with (`put-4k-c64`, `put-64m-x1-random`). Throughput counts
// acknowledged objects (each durable); latency is from `put` to its acknowledgement, so it
// includes the time an object waited for the window. Every acknowledgement is checked for the
// object's size and its CRC32C (the server's `checksums.CRC32C` against the client's). A note
// records the server's CPU per object.

import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import { Histogram } from './histogram.js';
import {
  emptyMeasured,
  ensureBucket,
  mainBucket,
  timed,
  type Measured,
  type Scenario,
  type ScenarioContext,
  type ScenarioSizes,
} from './scenario-kit.js';
import { crc32c } from '../src/util/crc32c.js';
import {
  LightwellClient,
  type BodyFile,
  type PutItem,
  type PutResult,
} from '../src/client/index.js';

interface IngestShape {
  readonly objectBytes: (sizes: ScenarioSizes) => number;
  readonly objects: (sizes: ScenarioSizes) => number;
  readonly connections: number;
  readonly bounds: readonly string[];
  readonly unit: 'MB/s' | 'ops/s';
}

/** A body: `base` with the object's index in its first 8 bytes (no two objects dedup). */
function bodyOf(
  base: Buffer,
  index: number,
  runId: string,
): { body: Buffer | BodyFile; crc: string } {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(index);
  head.write(runId.slice(-4), 4, 'latin1');
  let crc = crc32c(head);
  crc = crc32c(base.subarray(8), crc);
  const digest = Buffer.alloc(4);
  digest.writeUInt32BE(crc >>> 0);
  if (base.length <= 1024 * 1024) {
    const bytes = Buffer.from(base);
    head.copy(bytes);
    return { body: bytes, crc: digest.toString('base64') };
  }
  // Large: streamed from the shared base, never copied whole.
  const file: BodyFile = {
    size: base.length,
    // eslint-disable-next-line @typescript-eslint/require-await -- an AsyncIterable of slices
    async *open() {
      yield head;
      for (let offset = 8; offset < base.length; offset += 1024 * 1024)
        yield base.subarray(offset, Math.min(base.length, offset + 1024 * 1024));
    },
  };
  return { body: file, crc: digest.toString('base64') };
}

export function ingestScenario(name: string, title: string, shape: IngestShape): Scenario {
  return {
    name,
    title,
    bounds: shape.bounds,
    run: async (context) => run(context, name, shape),
  };
}

/** Whether the service answers a WebSocket upgrade at /api/v1/ingest (a peer or a fake may not). */
function servesIngest(endpoint: string): Promise<boolean> {
  return new Promise((resolve) => {
    const url = new URL('/api/v1/ingest', endpoint);
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    const socket = new WebSocket(url, { perMessageDeflate: false, rejectUnauthorized: false });
    socket.once('open', () => {
      socket.terminate();
      resolve(true);
    });
    socket.once('unexpected-response', () => resolve(false));
    socket.once('error', () => resolve(false));
  });
}

async function run(context: ScenarioContext, name: string, shape: IngestShape): Promise<Measured> {
  const { target } = context.service;
  const endpoint = `${target.tls ? 'https' : 'http'}://${target.host}:${target.port}${target.basePath}`;
  if (!(await servesIngest(endpoint)))
    return emptyMeasured({ skipped: 'the service does not serve the ingest WebSocket' });
  const objectBytes = shape.objectBytes(context.sizes);
  const objects = shape.objects(context.sizes);
  const bucket = mainBucket(context);
  await ensureBucket(context, bucket);
  const header = await context.service.authHeader();
  const token = /Bearer (\S+)/.exec(header)?.[1] ?? '';
  const client = new LightwellClient({ endpoint, token });
  const base = randomBytes(objectBytes);
  const latency = new Histogram();
  const failures: string[] = [];
  let acknowledged = 0;
  let next = 0;
  context.progress.begin(name, objects, 'ops');
  const started = new Map<string, number>();
  const crcs = new Map<string, string>();
  function* items(): Generator<PutItem> {
    while (next < objects) {
      const index = next++;
      const key = `${name}/${context.runId}/${index}`;
      const { body, crc } = bodyOf(base, index, context.runId);
      started.set(key, performance.now());
      crcs.set(key, crc);
      yield { key, body, checksums: { CRC32C: crc } };
    }
  }
  const source = items();
  const load = await timed(context, async () => {
    const begun = performance.now();
    await Promise.all(
      Array.from({ length: shape.connections }, async () => {
        const stream = client.ingest(bucket);
        // One generator shared by the connections: each pulls while its window has room.
        const shared: Iterable<PutItem> = { [Symbol.iterator]: () => source };
        for await (const outcome of stream.putAll(shared)) {
          const key = outcome.key;
          const result = outcome as PutResult;
          const error = (outcome as { error?: { message: string } }).error;
          if (error) failures.push(`${key}: ${error.message}`);
          else if (result.size !== objectBytes) failures.push(`${key}: size ${result.size}`);
          else if (result.checksums['CRC32C'] !== crcs.get(key))
            failures.push(`${key}: CRC32C differs`);
          else acknowledged += 1;
          latency.record((performance.now() - (started.get(key) ?? 0)) * 1000);
          started.delete(key);
          crcs.delete(key);
          context.progress.update(acknowledged + failures.length);
        }
        await stream.close();
      }),
    );
    return (performance.now() - begun) / 1000;
  });
  context.progress.end(`${acknowledged} objects in ${load.value.toFixed(1)}s`);
  const cpu = load.window?.cpuSeconds;
  const notes =
    cpu === undefined
      ? []
      : [`server CPU ${((cpu / Math.max(1, acknowledged)) * 1e6).toFixed(0)} µs per object`];
  // The memory bound's figures (bench/proc-stats.ts): own pages summed, and with file pages once.
  if (load.window) {
    const mib = (bytes: number): string => (bytes / 2 ** 20).toFixed(0);
    notes.push(
      `server peak own memory ${mib(load.window.peakOwnBytes)} MiB summed over the processes ` +
        `(${mib(load.window.peakOnceBytes)} MiB with shared file pages once)`,
    );
  }
  return {
    operations: acknowledged,
    bytes: acknowledged * objectBytes,
    seconds: load.value,
    latency,
    unit: shape.unit,
    objects,
    objectBytes,
    concurrency: shape.connections,
    failures: failures.slice(0, 10),
    window: load.window,
    clientCpuSeconds: load.clientCpuSeconds,
    client: null,
    notes,
  };
}

const SMALL = { bounds: ['http-sink-tiny', 'lmdb-group-commit'], unit: 'ops/s' as const };
const LARGE = { bounds: ['http-sink-put', 'fdatasync-append', 'ideal-put-random'] };

export const INGEST_SCENARIOS: readonly Scenario[] = [
  ingestScenario('ingest-4k-x1', '4 KiB objects over 1 ingest connection', {
    ...SMALL,
    objectBytes: (s) => s.smallBytes,
    objects: (s) => s.smallPuts * 2,
    connections: 1,
  }),
  ingestScenario('ingest-4k-x4', '4 KiB objects over 4 ingest connections', {
    ...SMALL,
    objectBytes: (s) => s.smallBytes,
    objects: (s) => s.smallPuts * 2,
    connections: 4,
  }),
  ingestScenario('ingest-64k-c64', '64 KiB objects over 64 ingest connections (peak RSS)', {
    ...SMALL,
    objectBytes: () => 64 * 1024,
    objects: (s) => s.smallPuts,
    connections: 64,
  }),
  ingestScenario('ingest-64m-x1', '64 MiB objects over 1 ingest connection, incompressible', {
    ...LARGE,
    unit: 'MB/s',
    objectBytes: (s) => s.largeBytes,
    objects: (s) => s.largeCountSingle,
    connections: 1,
  }),
];
