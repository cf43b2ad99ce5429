// The load generator: N keep-alive connections, each with one request in flight, pulling request
// numbers from one shared counter until a request count or a duration is reached.
//
// Each request is built on demand by the caller (`makeRequest(index, connection)`), so bodies
// are plans over shared templates rather than buffers, and no per-request state is kept beyond
// what the caller's `check` records. Every response is checked (status, body length, CRC32 of
// the body against the expected value) and its latency goes into one log-linear histogram.
// A progress callback reports live counters at a fixed interval. Failures are counted and a few
// are kept as samples; past `failuresMax` the run stops early rather than spin on errors.
//
// Two clients run the loop. The native one (native-load.ts, a C executable) costs the shared
// cores a fraction of the Node one (http1.ts) per request, and runs a load when it is built, the
// target is plain HTTP, and its requests can be built up front: a request count without a
// duration, or a `period` after which the requests repeat. It builds them by calling
// `makeRequest(i, i % connections)` in order before the load starts, so `makeRequest` must not
// depend on answers that come in during the load; one that answers null (it ends the load
// itself) runs on the Node client, called again from index 0. Its answers go through the same
// `checkResponse`, `check` callbacks included, after the load, in request order. `client:
// 'node'` forces the Node client, the reference. Either way the result says which client ran.

import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { errorMessage } from './bench-error.js';
import { Histogram } from './histogram.js';
import { Http1Connection, type RequestSpec, type ResponseResult, type Target } from './http1.js';
import { nativeClientCpuSeconds, nativeLoadAvailable, runNativeRequests } from './native-load.js';

export type LoadClient = 'node' | 'native';

export interface LoadRequest extends RequestSpec {
  /** Accepted statuses; default 200. */
  readonly expectStatus?: number | readonly number[];
  /** Expected response body length. */
  readonly expectBytes?: number;
  /** Expected CRC32 of the response body (implies `crc`). */
  readonly expectCrc32?: number;
  /** Further checks on the response; returns a failure message or null. */
  readonly check?: (response: ResponseResult) => string | null;
}

export interface LoadProgress {
  readonly requestsDone: number;
  /** Request body bytes handed to sockets so far (live, slice by slice). */
  readonly bytesSent: number;
  readonly bytesReceived: number;
  readonly failures: number;
  readonly elapsedSeconds: number;
}

export interface LoadOptions {
  readonly target: Target;
  readonly connections: number;
  /** Stop after this many requests; unlimited when absent. */
  readonly requests?: number;
  /** Stop issuing requests after this long; unlimited when absent. */
  readonly durationMs?: number;
  /** Builds request `index`; null ends the connection's loop. */
  readonly makeRequest: (index: number, connection: number) => LoadRequest | null;
  readonly onProgress?: (progress: LoadProgress) => void;
  readonly progressIntervalMs?: number;
  readonly failuresMax?: number;
  readonly idleTimeoutMs?: number;
  /**
   * Requests repeat after this many: request i is request i % period, whatever its connection.
   * A duration load needs it to run on the native client, which builds its requests up front.
   */
  readonly period?: number;
  /** The client to run the load on where it can (default native; see `loadClient`). */
  readonly client?: LoadClient;
}

export interface LoadResult {
  readonly requests: number;
  readonly failures: number;
  readonly failureSamples: readonly string[];
  readonly bytesSent: number;
  readonly bytesReceived: number;
  readonly seconds: number;
  readonly latency: Histogram;
  readonly statuses: Readonly<Record<string, number>>;
  readonly connects: number;
  /** The client that ran the load. */
  readonly client: LoadClient;
}

const FAILURE_SAMPLES_MAX = 5;

interface LoadState {
  next: number;
  stop: boolean;
  requests: number;
  failures: number;
  samples: string[];
  bytesSent: number;
  bytesReceived: number;
  statuses: Record<string, number>;
  readonly latency: Histogram;
  readonly started: number;
  readonly deadline: number;
}

/** Runs the load to completion; never throws for request failures (they are counted). */
export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  if (loadClient(options) === 'native') {
    const entries = requestsUpFront(options);
    if (entries !== null && entries.length > 0) return runNativeLoad(options, entries);
  }
  return runNodeLoad(options);
}

/**
 * The client that runs a load: the native one when asked for (the default), built, and able to
 * (plain HTTP; a request count without a duration, or a period), else the Node one.
 */
export function loadClient(options: LoadOptions): LoadClient {
  const upFront =
    options.period !== undefined ||
    (options.requests !== undefined && options.durationMs === undefined);
  const able = upFront && options.connections > 0 && !options.target.tls && nativeLoadAvailable();
  return (options.client ?? 'native') === 'native' && able ? 'native' : 'node';
}

/** CPU seconds the load generator has used so far: this process and native runs that ended. */
export function clientCpuSeconds(): number {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1e6 + nativeClientCpuSeconds();
}

function newLoadState(options: LoadOptions): LoadState {
  const started = performance.now();
  return {
    next: 0,
    stop: false,
    requests: 0,
    failures: 0,
    samples: [],
    bytesSent: 0,
    bytesReceived: 0,
    statuses: {},
    latency: new Histogram(),
    started,
    deadline: options.durationMs === undefined ? Infinity : started + options.durationMs,
  };
}

function resultOf(
  state: LoadState,
  run: { seconds: number; connects: number; client: LoadClient },
): LoadResult {
  return {
    requests: state.requests,
    failures: state.failures,
    failureSamples: state.samples,
    bytesSent: state.bytesSent,
    bytesReceived: state.bytesReceived,
    latency: state.latency,
    statuses: state.statuses,
    ...run,
  };
}

async function runNodeLoad(options: LoadOptions): Promise<LoadResult> {
  const state = newLoadState(options);
  const connections: Http1Connection[] = [];
  for (let c = 0; c < options.connections; c++) {
    connections.push(
      new Http1Connection(options.target, {
        idleTimeoutMs: options.idleTimeoutMs ?? 120_000,
        onBodyBytes: (bytes) => {
          state.bytesSent += bytes;
        },
      }),
    );
  }
  const report = (): void => options.onProgress?.(progressOf(state));
  const timer = setInterval(report, options.progressIntervalMs ?? 200);
  try {
    await Promise.all(
      connections.map((connection, c) => connectionLoop(options, state, connection, c)),
    );
  } finally {
    clearInterval(timer);
    for (const connection of connections) connection.close();
  }
  report();
  return resultOf(state, {
    seconds: (performance.now() - state.started) / 1000,
    connects: connections.reduce((sum, c) => sum + c.connects, 0),
    client: 'node',
  });
}

/**
 * Every distinct request, built in order; null when `makeRequest` ends the load itself. None
 * (a count of 0) also leaves the load to the Node client, which answers an empty result.
 */
function requestsUpFront(options: LoadOptions): LoadRequest[] | null {
  const count = Math.min(options.period ?? Infinity, options.requests ?? Infinity);
  const requests: LoadRequest[] = [];
  for (let i = 0; i < count; i++) {
    const request = options.makeRequest(i, i % options.connections);
    if (request === null) return null;
    requests.push(request);
  }
  return requests;
}

async function runNativeLoad(
  options: LoadOptions,
  entries: readonly LoadRequest[],
): Promise<LoadResult> {
  const state = newLoadState(options);
  const outcome = await runNativeRequests({
    target: options.target,
    connections: options.connections,
    entries,
    requests: options.requests ?? null,
    durationMs: options.durationMs ?? null,
    idleTimeoutMs: options.idleTimeoutMs ?? 120_000,
    failuresMax: options.failuresMax ?? 20,
    progressIntervalMs: options.progressIntervalMs ?? 200,
    onProgress: (progress) => options.onProgress?.(progress),
  });
  for (const [index, response] of outcome.responses.entries()) {
    const request = entries[index % entries.length];
    assert.ok(request !== undefined);
    settle(options, state, request, response);
  }
  state.bytesSent = outcome.bytesSent;
  options.onProgress?.({ ...progressOf(state), elapsedSeconds: outcome.seconds });
  return resultOf(state, {
    seconds: outcome.seconds,
    connects: outcome.connects,
    client: 'native',
  });
}

function progressOf(state: LoadState): LoadProgress {
  return {
    requestsDone: state.requests,
    bytesSent: state.bytesSent,
    bytesReceived: state.bytesReceived,
    failures: state.failures,
    elapsedSeconds: (performance.now() - state.started) / 1000,
  };
}

async function connectionLoop(
  options: LoadOptions,
  state: LoadState,
  connection: Http1Connection,
  c: number,
): Promise<void> {
  const requestsMax = options.requests ?? Infinity;
  while (!state.stop && state.next < requestsMax && performance.now() < state.deadline) {
    const index = state.next;
    state.next += 1;
    const request = options.makeRequest(index, c);
    if (request === null) return;
    let outcome: ResponseResult | string;
    try {
      outcome = await connection.request(
        request.expectCrc32 === undefined ? request : { ...request, crc: true },
      );
    } catch (error) {
      outcome = errorMessage(error);
    }
    settle(options, state, request, outcome);
  }
}

/** Counts one request: its response (checked) or why it failed. */
function settle(
  options: LoadOptions,
  state: LoadState,
  request: LoadRequest,
  outcome: ResponseResult | string,
): void {
  let failure: string | null;
  if (typeof outcome === 'string') {
    failure = outcome;
  } else {
    state.latency.record(outcome.latencyMs * 1000);
    state.bytesReceived += outcome.bodyBytes;
    state.statuses[outcome.status] = (state.statuses[outcome.status] ?? 0) + 1;
    try {
      failure = checkResponse(request, outcome);
    } catch (error) {
      failure = errorMessage(error);
    }
  }
  state.requests += 1;
  if (failure !== null) recordFailure(options, state, request, failure);
}

function recordFailure(
  options: LoadOptions,
  state: LoadState,
  request: LoadRequest,
  failure: string,
): void {
  state.failures += 1;
  if (state.samples.length < FAILURE_SAMPLES_MAX) {
    state.samples.push(`${request.method} ${request.path}: ${failure}`);
  }
  if (state.failures >= (options.failuresMax ?? 20)) state.stop = true;
}

/** Returns a failure message or null when the response is what the request expected. */
export function checkResponse(request: LoadRequest, response: ResponseResult): string | null {
  const expected = request.expectStatus ?? 200;
  const accepted = typeof expected === 'number' ? [expected] : expected;
  if (!accepted.includes(response.status)) {
    const detail = response.body ? ` ${response.body.toString('utf8', 0, 300)}` : '';
    return `status ${response.status}, expected ${accepted.join(' or ')}${detail}`;
  }
  if (request.body && response.bodySent !== request.body.length) {
    return `sent ${response.bodySent} of ${request.body.length} body bytes`;
  }
  if (request.expectBytes !== undefined && response.bodyBytes !== request.expectBytes) {
    return `received ${response.bodyBytes} body bytes, expected ${request.expectBytes}`;
  }
  if (request.expectCrc32 !== undefined && response.crc32 !== request.expectCrc32) {
    return `body CRC32 ${hex(response.crc32)}, expected ${hex(request.expectCrc32)}`;
  }
  return request.check ? request.check(response) : null;
}

function hex(value: number): string {
  return (value >>> 0).toString(16).padStart(8, '0');
}
