// The gateway process: the public listener (data-plane API at /api/v1), its worker pool, body
// arena and ordered-stage thread. Several gateway processes may share the public port.

import { Piscina } from 'piscina';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { randomUUID } from 'node:crypto';
import { IndexStore } from '../engine/index/store.js';
import { EngineClient } from '../engine/protocol.js';
import { dataDirPaths, checkDataDirFormat } from '../engine/data-dir.js';
import { Router, type Route } from '../http/router.js';
import { listen, type Handler, type Listener } from '../http/server.js';
import { openApiDocument } from '../http/openapi.js';
import { BodyArena } from './body-arena.js';
import { reserveBlocks, UploadStats } from './upload.js';
import { UploadPins } from './upload-pins.js';
import { OrderedStage } from '../workers/ordered-stage.js';
import { Authenticator } from './auth.js';
import { dataRoutes } from './routes.js';
import * as docs from './route-docs.js';
import { componentLogger, type Logger } from '../util/log.js';
import { tlsFilesOf, type Settings } from '../util/config.js';
import type { WorkerConfig } from '../workers/protocol.js';
import { PoolSealer } from '../workers/pool-seal.js';
import { RELEASE } from '../engine/data-dir.js';
import { AuditSink } from '../http/audit.js';
import { SegmentWriter } from '../engine/segments/segment-writer.js';
import { SegmentReader } from '../engine/segments/segment-reader.js';
import type { ChunkStoreDeps } from '../workers/chunk-store.js';

export const API_PREFIX = '/api/v1';
const BLOCK_BYTES = 1024 * 1024;
/** Smaller than an upload block: a chunk (1.13 MiB on average) wastes less of its last block. */
const DOWNLOAD_BLOCK_BYTES = 256 * 1024;

export interface RunningGateway {
  readonly port: number;
  stop(): Promise<void>;
}

/**
 * What one gateway may use of the service's budgets: `limits.inflight_bytes_max` is the whole
 * service's, split evenly among the `gateways` that serve starts, but every gateway's upload
 * arena holds at least one upload's reserve (so every upload can run), and so the service may
 * hold more than the setting when it is small against the gateway count. The automatic pool
 * size (`workers` 0) is a thread per core and one more, divided among the gateways and rounded
 * up; an explicit `workers` is per gateway. Without the split, every added gateway added its own
 * 64 MiB arena (and as much for downloads) and a pool as large as the machine's cores.
 */
export function gatewayShare(
  settings: Settings,
  cores: number,
): { arenaBlocks: number; threads: number } {
  const gateways = settings.int('gateways');
  const share = Math.floor(settings.bytes('limits.inflight_bytes_max') / gateways);
  const reserve = reserveBlocks(
    Number.MAX_SAFE_INTEGER,
    settings.bytes('storage.chunk_bytes_avg'),
    BLOCK_BYTES,
  );
  return {
    arenaBlocks: Math.max(reserve, Math.floor(share / BLOCK_BYTES)),
    threads: settings.int('workers') || Math.max(1, Math.ceil((cores + 1) / gateways)),
  };
}

export async function startGateway(options: {
  dataDir: string;
  settings: Settings;
}): Promise<RunningGateway> {
  const { settings } = options;
  const log = componentLogger('gateway');
  const paths = dataDirPaths(options.dataDir);
  await checkDataDirFormat(paths);
  const engine = new EngineClient(paths.socket, 30_000);
  await engine.waitForEngine(log);
  const store = IndexStore.open({ path: paths.index, readOnly: true });
  const chunkAvgBytes = settings.bytes('storage.chunk_bytes_avg');
  const { arenaBlocks, threads } = gatewayShare(settings, availableParallelism());
  const arena = new BodyArena(BLOCK_BYTES, arenaBlocks);
  // Downloads get an arena of the same size (see download.ts), with room for the largest chunk.
  const downloadArena = new BodyArena(
    DOWNLOAD_BLOCK_BYTES,
    Math.max(
      Math.ceil((chunkAvgBytes * 4) / DOWNLOAD_BLOCK_BYTES),
      (arenaBlocks * BLOCK_BYTES) / DOWNLOAD_BLOCK_BYTES,
    ),
  );
  const workerConfig: WorkerConfig = {
    arena: arena.buffer,
    blockBytes: BLOCK_BYTES,
    downloads: downloadArena.buffer,
    downloadBlockBytes: DOWNLOAD_BLOCK_BYTES,
    dataDir: paths.root,
    segmentBytesMax: settings.bytes('storage.segment_bytes_max'),
    directIo: settings.bool('storage.direct_io'),
    deadChunkGraceMs: settings.duration('storage.dead_chunk_grace'),
    logLevel: settings.string('log.level'),
    sealChannel: `lightwell.pool-seal.${randomUUID()}`,
  };
  const sealer = new PoolSealer(workerConfig.sealChannel);
  const pool = new Piscina({
    filename: fileURLToPath(new URL('../workers/worker.js', import.meta.url)),
    minThreads: threads,
    maxThreads: threads,
    // Two tasks per worker overlap one task's segment write with the next one's CPU work;
    // more only adds megabyte-sized buffers in flight.
    concurrentTasksPerWorker: 2,
    // Idle workers must keep their event loop turning: lmdb-js renews read snapshots on a
    // timer, and a worker parked in Atomics.wait would read a snapshot older than a commit
    // that the gateway has already acknowledged.
    atomics: 'async',
    idleTimeout: Number.MAX_SAFE_INTEGER,
    // Task buffers are short-lived and mostly external (ciphertext, LZ4 output): a small young
    // generation collects them sooner and keeps each thread's resident memory low.
    resourceLimits: { maxYoungGenerationSizeMb: 8 },
    workerData: workerConfig,
  });
  pool.on('workerDestroy', (worker: { threadId: number }) => sealer.forget(worker.threadId));
  const ordered = new OrderedStage({ arena, blockBytes: BLOCK_BYTES });
  void ordered.kernel.then((kernel) =>
    log.debug({ gearScan: kernel ? 'webassembly' : 'javascript' }, 'ordered stage started'),
  );
  const uploadStats = new UploadStats();
  const uploadPins = new UploadPins(engine, componentLogger('gateway.upload'));
  const statsTimer = logUploadStats(uploadStats, componentLogger('gateway.upload'));
  // The gateway thread's own segment, for the small chunks it stores itself.
  const inlineWriter = new SegmentWriter({
    segmentsDir: paths.segments,
    segmentBytesMax: settings.bytes('storage.segment_bytes_max'),
    registry: {
      allocate: async () =>
        (await engine.call<{ segmentId: number }>('allocSegment', { ownerPid: process.pid }))
          .segmentId,
      seal: async (segmentId, size) => {
        await engine.call('sealSegment', { segmentId, size });
      },
    },
  });
  const inlineReader = new SegmentReader(paths.segments, { cachedFirst: true });
  const inline: ChunkStoreDeps = {
    index: () => store,
    writer: () => inlineWriter,
    reader: () => inlineReader,
    deadChunkGraceMs: settings.duration('storage.dead_chunk_grace'),
  };
  const tlsFiles = tlsFilesOf(settings);
  const auth = new Authenticator(paths, store);
  const routes: Route<Handler>[] = dataRoutes({
    store,
    engine,
    pool,
    settings,
    tls: tlsFiles !== undefined,
    auth,
    upload: {
      arena,
      pool,
      ordered,
      chunkAvgBytes,
      inline,
      stats: uploadStats,
      pins: uploadPins,
    },
    download: { arena: downloadArena, pool, inline },
  });
  // The document describes itself too, so its route is in the table it is generated from.
  let openapiText = '';
  routes.push({
    method: 'GET',
    path: '/openapi.json',
    operationId: 'getOpenApi',
    doc: docs.openapi,
    handler: (exchange) => exchange.send(200, { 'Content-Type': 'application/json' }, openapiText),
  });
  openapiText = JSON.stringify(
    openApiDocument({
      title: 'Lightwell native data-plane API',
      version: RELEASE,
      prefix: API_PREFIX,
      routes: routes.map((route) => ({
        ...route,
        doc: docs.withProblems(route.doc, route.method, route.path),
      })),
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer' },
        basic: { type: 'http', scheme: 'basic' },
        signedUrl: {
          type: 'apiKey',
          in: 'query',
          name: 'token',
          description: 'the lwurl_ token of a URL minted by POST /sign-url',
        },
      },
    }),
  );
  const address = settings.listen('public_listen');
  const audit = new AuditSink(engine, componentLogger('gateway.audit'));
  const listener: Listener = await listen(
    {
      host: address.host,
      port: address.port,
      sharedPort: true,
      audit,
      identify: (exchange) => {
        try {
          auth.authenticate(exchange.header('authorization'), exchange.audit);
        } catch {
          // No valid bearer token: the row stays anonymous, or names the token's key.
        }
      },
      receiveBufferBytes: settings.bytes('limits.socket_receive_bytes'),
      bodyRateMin: settings.bytes('limits.body_rate_min'),
      tls: tlsFiles,
    },
    new Router(API_PREFIX, routes),
    log,
  );
  log.info(
    { port: listener.port, inflightBytes: arena.blockCount * BLOCK_BYTES, poolThreads: threads },
    'gateway listening',
  );
  return {
    port: listener.port,
    stop: async () => {
      clearInterval(statsTimer);
      // In-flight requests and the seals of the open segments (the pool's and the inline one)
      // need the engine; when it is gone (stopped with this process), they fail at once, and
      // the engine's next start recovers the segments (src/engine/segments/recovery.ts).
      engine.stopWaiting();
      await listener.close();
      // Only now: the requests that drained until here went on reporting their pins.
      uploadPins.close();
      await audit.close();
      const seals = await sealer.sealAll(POOL_SEAL_WAIT_MS);
      if (seals.sealed < seals.asked) log.info(seals, 'pool segments left to recovery');
      sealer.close();
      await pool.destroy();
      await inlineWriter.close();
      inlineReader.close();
      await ordered.close();
      engine.close();
      await store.close();
    },
  };
}

const UPLOAD_STATS_INTERVAL_MS = 10_000;
/** How long a stop waits for the pool's threads to seal their segments. */
const POOL_SEAL_WAIT_MS = 5_000;

/** Logs the upload counters at debug level every interval in which they changed. */
function logUploadStats(stats: UploadStats, log: Logger): NodeJS.Timeout {
  let last = '';
  const timer = setInterval(() => {
    const text = JSON.stringify(stats);
    if (text === last) return;
    last = text;
    log.debug(stats, 'upload counters');
  }, UPLOAD_STATS_INTERVAL_MS);
  timer.unref();
  return timer;
}
