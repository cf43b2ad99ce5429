// The load generator: N keep-alive connections, each with one request in flight, pulling request
// numbers from one shared counter until a request count or a duration is reached.
//
// Each request is built on demand by the caller (`makeRequest(index, connection)`), so bodies
// are plans over shared templates rather than buffers, and no per-request state is kept beyond
// what the caller's `check` records. Every response is checked (status, body length, CRC32 of
// the body against the expected value) and its latency goes into one log-linear histogram.
// A progress callback reports live counters at a fixed interval. Failures are counted and a few
// are kept as samples; past `failuresMax` the run stops early rather than spin on errors.

import { performance } from 'node:perf_hooks';
import { errorMessage } from './bench-error.js';
import { Histogram } from './histogram.js';
import { Http1Connection, type RequestSpec, type ResponseResult, type Target } from './http1.js';

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
  const started = performance.now();
  const state: LoadState = {
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
  return {
    requests: state.requests,
    failures: state.failures,
    failureSamples: state.samples,
    bytesSent: state.bytesSent,
    bytesReceived: state.bytesReceived,
    seconds: (performance.now() - started) / 1000,
    latency: state.latency,
    statuses: state.statuses,
    connects: connections.reduce((sum, c) => sum + c.connects, 0),
  };
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
    let failure: string | null;
    try {
      const response = await connection.request(
        request.expectCrc32 === undefined ? request : { ...request, crc: true },
      );
      state.latency.record(response.latencyMs * 1000);
      state.bytesReceived += response.bodyBytes;
      state.statuses[response.status] = (state.statuses[response.status] ?? 0) + 1;
      failure = checkResponse(request, response);
    } catch (error) {
      failure = errorMessage(error);
    }
    state.requests += 1;
    if (failure !== null) recordFailure(options, state, request, failure);
  }
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
