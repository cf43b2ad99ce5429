// The gateway process: its listeners of the public port (its APIs: public-apis.ts), one per
// listener thread, each with its body arenas, and the worker pool and ordered-stage threads
// they share. Several gateway processes may share the public port too.

import { Piscina } from 'piscina';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { randomUUID } from 'node:crypto';
import { IndexStore } from '../engine/index/store.js';
import { EngineClient } from '../engine/protocol.js';
import {
  dataDirPaths,
  checkDataDirFormat,
  requireStore,
  noEngineError,
  type DataDirPaths,
} from '../engine/data-dir.js';
import { claimPublicPort } from './port-claim.js';
import type { Route } from '../http/router.js';
import { listen, type Handler, type Listener } from '../http/server.js';
import { API_PREFIX, publicApis } from './public-apis.js';
import { AccessLogDelivery } from '../service/bucket-logging.js';
import { openApiDocument } from '../http/openapi.js';
import { readyzRoute } from '../http/readiness.js';
import {
  processRegistry,
  RequestMetrics,
  reportToEngine,
  counterOf,
  gaugeOf,
} from '../http/metrics.js';
import { accessLogger, bothAnswered } from '../http/access-log.js';
import type { Registry } from 'prom-client';
import { BodyArena, arenaMemory, type ArenaMemory } from '../service/body-arena.js';
import { poolTasks, startListenerThread } from './listener-threads.js';
import { reserveBlocks, UploadStats } from '../service/upload.js';
import { UploadPins } from '../service/upload-pins.js';
import { chunkRepairOf } from '../service/cluster-read.js';
import { OrderedStage, OrderedStageThread } from '../workers/ordered-stage.js';
import type { MessagePort } from 'node:worker_threads';
import { Authenticator } from '../service/auth.js';
import { dataRoutes, type GatewayServices } from '../native/routes.js';
import * as docs from '../native/route-docs.js';
import { ingestBackend } from './ingest-backend.js';
import { ingestRoute, type IngestServer } from '../ingest/server.js';
import { componentLogger, type Logger } from '../util/log.js';
import { tlsFilesOf, type Settings } from '../util/config.js';
import type { TaskRunner, WorkerConfig } from '../workers/protocol.js';
import { PoolSealer } from '../workers/pool-seal.js';
import { checkChunkSetting } from '../engine/chunker.js';
import { RELEASE } from '../engine/data-dir.js';
import { AuditSink } from '../http/audit.js';
import { SegmentWriter } from '../engine/segments/segment-writer.js';
import { SegmentReader } from '../engine/segments/segment-reader.js';
import type { ChunkStoreDeps } from '../workers/chunk-store.js';

export { API_PREFIX } from './public-apis.js';
const BLOCK_BYTES = 1024 * 1024;
/** Smaller than an upload block: a chunk (1.13 MiB on average) wastes less of its last block. */
const DOWNLOAD_BLOCK_BYTES = 256 * 1024;

export interface RunningGateway {
  readonly port: number;
  /** Rejects when a listener thread fails; the process should then stop and exit non-zero. */
  readonly failed: Promise<never>;
  stop(): Promise<void>;
}

/** The automatic listener threads of a gateway process (`gateway_threads` 0), before the split. */
const LISTENERS_AUTO_MAX = 4;

export interface GatewayShare {
  /** Listener threads of this gateway process. */
  readonly listeners: number;
  /** The upload arena of each listener thread, in blocks of 1 MiB. */
  readonly arenaBlocks: number;
  /** The pool threads of this gateway process, shared by its listeners. */
  readonly threads: number;
}

/**
 * What one gateway may use of the service's budgets: `limits.inflight_bytes_max` is the whole
 * service's, split evenly among the `gateways` that serve starts and then among each gateway's
 * listener threads, but every listener's upload arena holds at least one upload's reserve (so
 * every upload can run), and so the service may hold more than the setting when it is small
 * against the listener count. The automatic pool size (`workers` 0) is a thread per core and
 * one more, divided among the gateways and rounded up; an explicit `workers` is per gateway.
 *
 * The automatic listener count (`gateway_threads` 0) is one per core, at most four, divided
 * among the gateways, and no more than leaves each listener two uploads' reserves (an arena of
 * one reserve admits one large upload at a time, while the other listeners' arenas may sit
 * idle): two at the default budget. Small requests keep a listener's thread busy (on two cores
 * two listeners served 16–47% more 4 KiB GETs and 4–8% more PUTs than one, docs/benchmarks.md),
 * and each listener costs about 20 MiB of its own (mostly its thread's JavaScript heap).
 */
export function gatewayShare(settings: Settings, cores: number): GatewayShare {
  const gateways = settings.int('gateways');
  const budget = Math.floor(settings.bytes('limits.inflight_bytes_max') / gateways);
  const reserve = reserveBlocks(
    Number.MAX_SAFE_INTEGER,
    settings.bytes('storage.chunk_bytes_avg'),
    BLOCK_BYTES,
  );
  const listeners =
    settings.int('gateway_threads') ||
    Math.max(
      1,
      Math.min(
        Math.floor(Math.min(cores, LISTENERS_AUTO_MAX) / gateways),
        Math.floor(budget / (2 * reserve * BLOCK_BYTES)),
      ),
    );
  return {
    listeners,
    arenaBlocks: Math.max(reserve, Math.floor(budget / listeners / BLOCK_BYTES)),
    threads: settings.int('workers') || Math.max(1, Math.ceil((cores + 1) / gateways)),
  };
}

/** A listener thread's arenas: made before the pool starts, whose threads use them all. */
export interface ListenerMemory {
  readonly arenaBlocks: number;
  readonly upload: ArenaMemory;
  readonly downloadBlocks: number;
  readonly downloads: ArenaMemory;
}

function listenerMemory(arenaBlocks: number, chunkAvgBytes: number): ListenerMemory {
  // Downloads get an arena of the same size (see download.ts), with room for the largest chunk.
  const downloadBlocks = Math.max(
    Math.ceil((chunkAvgBytes * 4) / DOWNLOAD_BLOCK_BYTES),
    (arenaBlocks * BLOCK_BYTES) / DOWNLOAD_BLOCK_BYTES,
  );
  return {
    arenaBlocks,
    upload: arenaMemory(BLOCK_BYTES, arenaBlocks),
    downloadBlocks,
    downloads: arenaMemory(DOWNLOAD_BLOCK_BYTES, downloadBlocks),
  };
}

/**
 * Starts a gateway process: its worker pool, its first listener on this thread, and the other
 * listener threads (listener-threads.ts), which share the public port (SO_REUSEPORT: the kernel
 * spreads connections among them) and the pool.
 */
export async function startGateway(options: {
  dataDir: string;
  settings: Settings;
}): Promise<RunningGateway> {
  const { settings } = options;
  const log = componentLogger('gateway');
  checkChunkSetting(settings.bytes('storage.chunk_bytes_avg'));
  const paths = dataDirPaths(options.dataDir);
  requireStore(paths, 'gateway');
  await checkDataDirFormat(paths);
  const share = gatewayShare(settings, availableParallelism());
  const claim = await claimPublicPort(paths, settings.listen('public_listen'), share.listeners);
  const chunkAvgBytes = settings.bytes('storage.chunk_bytes_avg');
  const memories = Array.from({ length: share.listeners }, () =>
    listenerMemory(share.arenaBlocks, chunkAvgBytes),
  );
  const sealer = new PoolSealer(`lightwell.pool-seal.${randomUUID()}`);
  const pool = startPool(settings, paths.root, memories, sealer, share.threads);
  const listeners: RunningListener[] = [];
  let failed: (error: unknown) => void = () => {};
  const failure = new Promise<never>((_, reject) => (failed = reject));
  // Handled by whoever runs the process (child.ts), once the start has resolved; until then a
  // rejection must not count as unhandled.
  failure.catch(() => {});
  const ordered = startOrderedStages(memories);
  for (const thread of ordered) thread.failed.catch(failed);
  void (ordered[0] as OrderedStageThread).kernel.then((kernel) =>
    log.debug({ gearScan: kernel ? 'webassembly' : 'javascript' }, 'ordered stage started'),
  );
  const orderedPort = (listener: number): MessagePort =>
    (ordered[Math.floor(listener / LISTENERS_PER_ORDERED_STAGE)] as OrderedStageThread).connect(
      listener,
    );
  const stopAll = async (): Promise<void> => {
    // Every listener stops, and the pool's segments are sealed, even when one stop fails.
    const stops = await Promise.allSettled(listeners.map((listener) => listener.stop()));
    const seals = await sealer.sealAll(POOL_SEAL_WAIT_MS);
    if (seals.sealed < seals.asked) log.info(seals, 'pool segments left to recovery');
    sealer.close();
    await pool.destroy();
    await Promise.all(ordered.map((thread) => thread.close()));
    await claim.release();
    for (const stop of stops) if (stop.status === 'rejected') throw stop.reason;
  };
  try {
    const first = await startListener({
      settings,
      paths,
      listener: 0,
      memory: memories[0] as ListenerMemory,
      tasks: poolTasks(pool, 0),
      ordered: orderedPort(0),
      port: claim.port,
    });
    listeners.push(first);
    if (claim.port === 0) await claim.register(first.port);
    // The others listen on the first one's port: with port 0, the one the first was given.
    for (let listener = 1; listener < share.listeners; listener += 1) {
      const thread = await startListenerThread({
        settings,
        dataDir: options.dataDir,
        listener,
        memory: memories[listener] as ListenerMemory,
        pool,
        ordered: orderedPort(listener),
        port: first.port,
        // Past the listener's own drain, after which its sockets are closed.
        stopWaitMs: settings.duration('shutdown.grace') + THREAD_EXIT_MARGIN_MS,
      });
      listeners.push(thread);
      thread.failed.catch(failed);
    }
  } catch (error) {
    await stopAll();
    throw error;
  }
  const port = (listeners[0] as RunningListener).port;
  log.info(
    {
      port,
      listeners: share.listeners,
      inflightBytes: share.listeners * share.arenaBlocks * BLOCK_BYTES,
      poolThreads: share.threads,
    },
    'gateway listening',
  );
  return { port, failed: failure, stop: stopAll };
}

/**
 * Listeners per ordered-stage thread. One thread keeps up with 1.8-2.8 GB/s of uploads that ask
 * for the default CRC32C alone, 0.9-1.1 with SHA-256 or CRC64NVME too and 0.45 with all five
 * (bench/micro/workers/ordered-stage.bench.ts): more than two listeners' uploads reach on the pool
 * they share but when clients ask for every checksum. Each thread costs about 8 MiB of an idle
 * gateway's RSS.
 */
const LISTENERS_PER_ORDERED_STAGE = 2;

/** The ordered-stage threads; each holds every listener's upload arena, as pool threads do. */
function startOrderedStages(memories: readonly ListenerMemory[]): OrderedStageThread[] {
  const arenas = memories.map((memory) => memory.upload);
  return Array.from(
    { length: Math.ceil(memories.length / LISTENERS_PER_ORDERED_STAGE) },
    () => new OrderedStageThread({ arenas, blockBytes: BLOCK_BYTES }),
  );
}

function startPool(
  settings: Settings,
  dataDir: string,
  memories: readonly ListenerMemory[],
  sealer: PoolSealer,
  threads: number,
): Piscina {
  const workerConfig: WorkerConfig = {
    arenas: memories.map((memory) => ({
      upload: memory.upload.buffer,
      downloads: memory.downloads.buffer,
    })),
    blockBytes: BLOCK_BYTES,
    downloadBlockBytes: DOWNLOAD_BLOCK_BYTES,
    dataDir,
    segmentBytesMax: settings.bytes('storage.segment_bytes_max'),
    directIo: settings.bool('storage.direct_io'),
    deadChunkGraceMs: settings.duration('storage.dead_chunk_grace'),
    logLevel: settings.string('log.level'),
    sealChannel: sealer.channelName,
  };
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
  return pool;
}

export interface RunningListener {
  readonly port: number;
  stop(): Promise<void>;
}

/**
 * One listener: the public port's routes on this thread's event loop, with its own engine
 * connection, index view, arenas and inline segment. Its pool tasks go to `tasks`, its uploads'
 * ordered work to the ordered-stage thread over `ordered`.
 */
export async function startListener(options: {
  settings: Settings;
  paths: DataDirPaths;
  listener: number;
  memory: ListenerMemory;
  tasks: TaskRunner;
  ordered: MessagePort;
  port: number;
}): Promise<RunningListener> {
  const { settings, paths, memory } = options;
  const log = componentLogger('gateway');
  const connectWaitMs = settings.duration('engine.connect_wait');
  const engine = new EngineClient(
    paths.socket,
    connectWaitMs,
    settings.duration('engine.call_timeout'),
  );
  await engine.waitForEngine(log).catch((error: unknown) => {
    throw noEngineError(paths, connectWaitMs, error);
  });
  const store = IndexStore.open({ path: paths.index, readOnly: true });
  const chunkAvgBytes = settings.bytes('storage.chunk_bytes_avg');
  const arena = new BodyArena(BLOCK_BYTES, memory.arenaBlocks, undefined, memory.upload);
  const downloadArena = new BodyArena(
    DOWNLOAD_BLOCK_BYTES,
    memory.downloadBlocks,
    undefined,
    memory.downloads,
  );
  const pool = options.tasks;
  const ordered = new OrderedStage(options.ordered);
  const uploadStats = new UploadStats();
  const uploadPins = new UploadPins(engine, componentLogger('gateway.upload'));
  const statsTimer = logUploadStats(uploadStats, componentLogger('gateway.upload'));
  // The listener's own segment, for the small chunks it stores itself.
  const inlineWriter = new SegmentWriter({
    segmentsDir: paths.segments,
    segmentBytesMax: settings.bytes('storage.segment_bytes_max'),
    registry: {
      allocate: async () =>
        (await engine.call('allocSegment', { ownerPid: process.pid })).segmentId,
      seal: async (segmentId, size) => {
        await engine.call('sealSegment', { segmentId, size });
      },
      failed: async (segmentId) => {
        await engine.call('segmentFailed', { segmentId });
      },
      opened: async (segmentId) => {
        await engine.call('segmentOpened', { segmentId });
      },
    },
  });
  // A restarted engine refuses commits into the open segment until the writer registers it
  // again (segment-writer.ts, `reregister`), which it does on every new connection.
  engine.onConnected(() => void inlineWriter.reregister());
  engine.reconnectWhile(() => inlineWriter.needsEngine);
  const inlineReader = new SegmentReader(paths.segments, { cachedFirst: true });
  const inline: ChunkStoreDeps = {
    index: () => store,
    writer: () => inlineWriter,
    reader: () => inlineReader,
    deadChunkGraceMs: settings.duration('storage.dead_chunk_grace'),
    corrupt: (report) => {
      engine.call('reportCorruptChunk', report).catch(() => undefined); // the read's error says it
    },
  };
  const tlsFiles = tlsFilesOf(settings);
  const auth = new Authenticator(paths, store);
  const services: GatewayServices = {
    store,
    engine,
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
    download: { arena: downloadArena, pool, inline, repairChunk: chunkRepairOf(store, engine) },
  };
  const routes: Route<Handler>[] = dataRoutes(services);
  let indexOpen = true;
  routes.push(readyzRoute({ engine, indexOpen: () => indexOpen }));
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
  // One command of rows unanswered: a busy listener sends its read rows once a commit, not once
  // a turn (http/audit.ts). A lone row waits AUDIT_SEND_DELAY_MS for the rows after it: at the
  // few hundred requests a second of one S3 SDK client, each row would otherwise be its own
  // engine command, wake-up and LMDB commit (docs/benchmarks.md). An audit query's barrier
  // still has the rows sent at once.
  const audit = new AuditSink(engine, componentLogger('gateway.audit'), {
    sendsInFlightMax: 1,
    sendDelayMs: AUDIT_SEND_DELAY_MS,
  });
  // S3 bucket logging's deliverer: one per gateway process, on its first listener.
  const logDelivery =
    options.listener === 0
      ? new AccessLogDelivery({
          ...services,
          log: componentLogger('gateway.access-log'),
          flushMs: settings.duration('logging.flush_interval'),
        }).start()
      : undefined;
  let ingest: IngestServer | undefined;
  // Process figures once a process: on the first listener's thread.
  const registry = processRegistry('gateway', options.listener === 0);
  const requests = new RequestMetrics(registry);
  uploadMetrics(registry, uploadStats);
  const stopReport = reportToEngine(engine, registry);
  const access = settings.bool('log.access') ? accessLogger(componentLogger('access')) : undefined;
  const listener: Listener = await listen(
    {
      host: settings.listen('public_listen').host,
      port: options.port,
      sharedPort: true,
      audit,
      receiveBufferBytes: settings.bytes('limits.socket_receive_bytes'),
      bodyRateMin: settings.bytes('limits.body_rate_min'),
      tls: tlsFiles,
      answered: bothAnswered((api, exchange) => requests.observe(api, exchange), access),
      sockets: (app) => {
        const backend = ingestBackend(services, audit);
        ingest = ingestRoute(app, API_PREFIX, backend, componentLogger('gateway.ingest'));
      },
    },
    publicApis({
      native: routes,
      services,
      identify: (exchange) => {
        try {
          auth.authenticate(exchange.header('authorization'), exchange.audit);
        } catch {
          // No valid bearer token: the row stays anonymous, or names the token's key.
        }
      },
    }),
    log,
  );
  log.debug({ port: listener.port, listener: options.listener }, 'listener started');
  return {
    port: listener.port,
    stop: async () => {
      clearInterval(statsTimer);
      stopReport();
      // In-flight requests and the seal of the inline segment need the engine; when it is gone
      // (stopped with this process), they fail at once, and the engine's next start recovers
      // the segments (src/engine/segments/recovery.ts).
      engine.stopWaiting();
      await logDelivery?.stop();
      await ingest?.close(settings.duration('shutdown.grace'));
      await listener.close(settings.duration('shutdown.grace'));
      // Only now: the requests that drained until here went on reporting their pins.
      uploadPins.close();
      await audit.close();
      await inlineWriter.close();
      inlineReader.close();
      ordered.close();
      engine.close();
      indexOpen = false;
      await store.close();
    },
  };
}

/** The upload admission figures (upload.ts) as metrics, read at each collection. */
function uploadMetrics(registry: Registry, stats: UploadStats): void {
  counterOf(registry, 'lightwell_upload_admissions_total', 'Uploads admitted', () => stats.uploads);
  counterOf(
    registry,
    'lightwell_upload_admission_waits_total',
    'Uploads that waited for their share of the in-flight budget before their first byte',
    () => stats.admissionWaits,
  );
  counterOf(
    registry,
    'lightwell_upload_pauses_total',
    'Times an upload socket was paused for want of budget',
    () => stats.pauses,
  );
  counterOf(
    registry,
    'lightwell_upload_body_bytes_total',
    'Upload body bytes taken in',
    () => stats.bodyBytes,
  );
  gaugeOf(
    registry,
    'lightwell_upload_parked_bytes',
    'Upload body bytes parked in heap copies now',
    () => stats.parkedNow,
  );
}

const UPLOAD_STATS_INTERVAL_MS = 10_000;
/**
 * How long a listener's audit row waits for the rows after it before its command goes: the rows
 * of a slow trickle of reads share an engine commit. A read's row is sent after its answer,
 * never before it, so a gateway killed outright loses the rows of its last moments either way;
 * this widens that window by 20 ms. A mutation's row commits with the mutation, undelayed.
 */
const AUDIT_SEND_DELAY_MS = 20;
/** How long past `shutdown.grace` a stop waits for a listener thread to end on its own. */
const THREAD_EXIT_MARGIN_MS = 5_000;
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
