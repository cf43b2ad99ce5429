// The S3 scenarios' load generator seen from the bench's main thread: one worker thread per run
// (bench/s3-load-worker.ts) holding the AWS SDK client, sent one job at a time (create a bucket,
// PUT a dataset, GET a dataset). Why a worker: see the top of s3-load-worker.ts.
//
// The worker is started once, outside any timed window (loading the SDK costs 100–200 ms of CPU),
// and is unreferenced while idle so that it never keeps the bench process alive; its CPU is the
// bench process's, so `clientCpuSeconds` (process.cpuUsage) counts it as it counts the main
// thread's.

import { Worker } from 'node:worker_threads';
import { BenchError } from './bench-error.js';
import type { BodyPlan } from './data.js';

/** Connections of the busiest S3 scenario (`s3-small`); the client keeps a socket for each. */
export const S3_CONNECTIONS_MAX = 64;

/**
 * How the bench's S3 client is configured: what a user sending many requests through one client
 * sets (docs/benchmarks.md, "S3 scenarios"). `cacheMiddleware` resolves each command's
 * middleware stack once per client instead of once a request (the SDK's own throughput setting
 * since 3.649: 35–40% of the client's CPU per 4 KiB PutObject here); the agent keeps a keep-alive
 * socket per concurrent request (the SDK's default agent keeps 50, so a 64-connection load
 * queued in it); the region and a path-style endpoint are fixed, so no request is redirected or
 * resolved against the endpoint rules twice. Checksums only where an operation requires one
 * (the SDK's switch for S3-compatible endpoints since 3.729): every payload stays signed with its
 * SHA-256, which the server verifies as it streams, and the bench checks every GET body's CRC32
 * and every PUT's ETag itself, as the native load generator checks its own, so the SDK's CRC32
 * of each body in both directions was a second pass over the same bytes (about a third of the
 * client's CPU per 64 MiB GET). One attempt a request, as the native load generator makes: a
 * failure is counted, never retried out of sight, and the retry strategy's per-request
 * bookkeeping is not paid.
 */
export const S3_CLIENT_SETTINGS = {
  region: 'us-east-1',
  forcePathStyle: true,
  cacheMiddleware: true,
  requestChecksumCalculation: 'WHEN_REQUIRED',
  responseChecksumValidation: 'WHEN_REQUIRED',
  maxAttempts: 1,
  requestHandler: {
    httpAgent: { keepAlive: true, maxSockets: S3_CONNECTIONS_MAX },
    httpsAgent: { keepAlive: true, maxSockets: S3_CONNECTIONS_MAX },
  },
} as const;

/**
 * The SDK as it comes (`--s3-sdk default`): only what any S3-compatible endpoint needs (a
 * region, path-style addressing) and the agent's socket count, so that a 64-connection load
 * is not queued in the client. Everything else is the SDK's default: the middleware stack
 * resolved per request, a CRC32 of every PUT body sent as `x-amz-checksum-crc32` (which the
 * server verifies) and `x-amz-checksum-mode: ENABLED` on every GET (the SDK validates the
 * returned CRC32 as the body streams), three attempts a request. With a Buffer body over HTTP
 * the SDK sends the CRC32 as a header, not as an aws-chunked trailer.
 */
export const S3_CLIENT_DEFAULT_SETTINGS = {
  region: 'us-east-1',
  forcePathStyle: true,
  requestHandler: S3_CLIENT_SETTINGS.requestHandler,
} as const;

/** Which client configuration the S3 scenarios run: the bench's (`tuned`) or the SDK's own. */
export type S3Sdk = 'tuned' | 'default';

export function s3SdkOf(text: string | undefined): S3Sdk {
  if (text === undefined || text === 'tuned') return 'tuned';
  if (text === 'default') return 'default';
  throw new BenchError('--s3-sdk must be tuned or default');
}

/** What the worker is started with. */
export interface S3LoadInit {
  readonly endpoint: string;
  readonly sdk: S3Sdk;
  readonly credentials: { readonly accessKeyId: string; readonly secretAccessKey: string };
}

export type S3Job =
  | { readonly kind: 'createBucket'; readonly bucket: string }
  | {
      /** Untimed: `count` PUTs and GETs of distinct random bodies under `s3-warm-up/`. */
      readonly kind: 'warmUp';
      readonly bucket: string;
      readonly count: number;
      readonly objectBytes: number;
      readonly connections: number;
    }
  | {
      readonly kind: 'put';
      readonly bucket: string;
      readonly keys: readonly string[];
      readonly plans: readonly BodyPlan[];
      readonly connections: number;
    }
  | {
      readonly kind: 'get';
      readonly bucket: string;
      readonly keys: readonly string[];
      /** Objects read, cycling over the keys. */
      readonly count: number;
      readonly connections: number;
      readonly objectBytes: number;
      readonly crc32s: readonly number[];
    };

export interface S3LoadResult {
  /** Per operation, in µs; -1 for one that failed. */
  readonly latenciesUs: Float64Array;
  readonly failures: string[];
  readonly failed: number;
  /** From the first request to the last answer. */
  readonly seconds: number;
  /** PUT: each answer's ETag, by object. */
  readonly etags: readonly (string | undefined)[];
}

type Reply = { id: number; result: S3LoadResult } | { id: number; error: string };

/** The worker thread and the jobs it has not answered yet. */
export class S3Load {
  private readonly worker: Worker;
  private readonly pending = new Map<
    number,
    { resolve: (result: S3LoadResult) => void; reject: (error: Error) => void }
  >();
  private nextId = 1;
  private failure: Error | null = null;

  constructor(init: S3LoadInit) {
    this.worker = new Worker(new URL('./s3-load-worker.js', import.meta.url), {
      workerData: init,
    });
    this.worker.unref();
    this.worker.on('message', (reply: Reply) => this.answer(reply));
    this.worker.on('error', (error) => this.fail(error));
    this.worker.on('exit', (code) => this.fail(new BenchError(`S3 load worker exited ${code}`)));
  }

  /** Runs a job in the worker; rejects when the job or the worker fails. */
  run(job: S3Job): Promise<S3LoadResult> {
    if (this.failure) return Promise.reject(this.failure);
    const id = this.nextId++;
    if (this.pending.size === 0) this.worker.ref();
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ id, job });
    });
  }

  /**
   * Ends the worker and its client's keep-alive sockets (a server that waits for its open
   * connections before it exits, as s3rver does on SIGTERM, would otherwise be killed).
   */
  async close(): Promise<void> {
    this.fail(new BenchError('the S3 load was closed'));
    await this.worker.terminate();
  }

  private answer(reply: Reply): void {
    const waiting = this.pending.get(reply.id);
    if (waiting === undefined) return;
    this.pending.delete(reply.id);
    if (this.pending.size === 0) this.worker.unref();
    if ('error' in reply) waiting.reject(new BenchError(reply.error));
    else waiting.resolve(reply.result);
  }

  private fail(error: Error): void {
    this.failure ??= error;
    for (const waiting of this.pending.values()) waiting.reject(error);
    this.pending.clear();
  }
}
