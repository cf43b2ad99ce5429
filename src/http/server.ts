// A uWebSockets.js listener that mounts one or more APIs (api.ts) and dispatches every request
// to the API its path is mounted on, which answers its failures in its own form. Shared by the
// gateway and the admin process.

import * as uWS from 'uWebSockets.js';
import { Exchange, HEADER_BYTES_MAX } from './exchange.js';
import { Router } from './router.js';
import { Mounts, routedApi, type Api, type Dispatch } from './api.js';
import type { Logger } from '../util/log.js';
import { BadRequest, HeadersTooLarge, Unavailable } from '../util/errors.js';
import { crashOnInvariantFailure } from '../util/invariant.js';
import type { AuditSink } from './audit.js';
import { setReceiveBuffer } from './receive-buffer.js';

import type { Handler } from './api.js';
export type { Handler };

export interface Listener {
  readonly port: number;
  /**
   * Drains: answers every new request 503 (readiness first), stops accepting connections, and
   * resolves when in-flight requests have finished or `graceMs` passed.
   */
  close(graceMs?: number): Promise<void>;
}

export interface ListenOptions {
  readonly host: string;
  readonly port: number;
  readonly tls?: { readonly certFile: string; readonly keyFile: string } | undefined;
  /** Several processes may share the port (SO_REUSEPORT). */
  readonly sharedPort: boolean;
  /** Receives every answered exchange (one audit row per request). */
  readonly audit?: AuditSink | undefined;
  /**
   * Names the caller on the audit row of a request that matched no route (a 404 or 405), when
   * its credentials are valid; never throws. Routed requests are named by their authentication.
   * For the APIs that have no `identify` of their own.
   */
  readonly identify?: ((exchange: Exchange) => void) | undefined;
  /**
   * SO_RCVBUF of every accepted connection (`setReceiveBuffer`); 0 or undefined keeps the
   * kernel's autotuning.
   */
  readonly receiveBufferBytes?: number | undefined;
  /**
   * The slowest request body kept open, in bytes a second (see `Exchange.onBody`); 0, undefined
   * or anything over uWebSockets.js's own floor of 16 KiB a second leaves that floor.
   */
  readonly bodyRateMin?: number | undefined;
  /** Adds WebSocket routes to the app (before its HTTP routes), e.g. the ingest transport. */
  readonly sockets?: ((app: uWS.TemplatedApp) => void) | undefined;
  /**
   * Told of every request once it is answered or aborted, with the name of its API: metrics
   * and the access log (counter increments and a log line, nothing that waits).
   */
  readonly answered?: ((api: string, exchange: Exchange) => void) | undefined;
}

/**
 * Listens and serves `apis`: each request goes to the API whose prefix holds its path (the
 * longest), else to the API of every other path (prefix ''), else it is a 404 problem. A Router
 * alone is one API with the native rules (problem+json, a strict query).
 */
export function listen(
  options: ListenOptions,
  apis: Router<Handler> | readonly Api[],
  log: Logger,
): Promise<Listener> {
  const app = options.tls ? tlsApp(options.tls) : uWS.App();
  const mounts = new Mounts(apis instanceof Router ? [routedApi({ router: apis })] : apis);
  for (const api of apis instanceof Router ? [] : apis)
    for (const endpoint of api.webSockets ?? []) app.ws(endpoint.pattern, endpoint.behavior);
  const inFlight = new Set<Exchange>();
  let draining = false;
  options.sockets?.(app);
  app.any('/*', (res, req) => {
    const exchange = new Exchange(res, req, options.bodyRateMin);
    const api = mounts.apiOf(exchange.path);
    exchange.errors = api.errors;
    exchange.strictQuery = api.strictQuery;
    // Refused before any work: while draining, and while the audit sink holds as many rows as
    // it may (the engine has not taken them), since a request served then would have its row
    // dropped. Each refusal has its row too (admin-api.md: every request writes one).
    if (draining || options.audit?.full) {
      const reason = draining
        ? 'the server is shutting down'
        : 'the audit log is behind: its rows have not reached the engine yet';
      exchange.sendError(Unavailable(reason), log);
      (api.identify ?? options.identify)?.(exchange);
      options.audit?.record(exchange);
      options.answered?.(api.name, exchange);
      return;
    }
    let match: Dispatch;
    try {
      if (exchange.headerBytes > HEADER_BYTES_MAX) {
        const size = `${exchange.headerBytes} bytes, over ${HEADER_BYTES_MAX}`;
        throw HeadersTooLarge(`the request headers are ${size}`);
      }
      match = api.dispatch(exchange);
      const doc = match.doc;
      exchange.routeDoc = doc;
      // Operations without a bearer or signed-URL check of their own are checked at once; the
      // others when their caller is authenticated (Exchange.refuseUnclearQuery).
      if (doc?.auth === 'none' || doc?.auth === 'basic-or-body') exchange.refuseUnclearQuery();
    } catch (error) {
      if (exchange.routeDoc === undefined) (api.identify ?? options.identify)?.(exchange);
      exchange.sendError(error, log);
      options.audit?.record(exchange);
      options.answered?.(api.name, exchange);
      crashOnInvariantFailure(error);
      return;
    }
    exchange.audit.action = match.operationId;
    inFlight.add(exchange);
    const finish = (): void => {
      inFlight.delete(exchange);
      options.audit?.record(exchange);
      options.answered?.(api.name, exchange);
    };
    let pending: Promise<void> | undefined;
    try {
      pending = run(exchange, match, log);
    } finally {
      if (!pending) finish();
    }
    if (pending) void pending.finally(finish);
  });
  return new Promise((resolve, reject) => {
    // The native listen(host, port, options, callback) exists; the typings omit it.
    const flags = options.sharedPort
      ? 0
      : (uWS as unknown as { LIBUS_LISTEN_EXCLUSIVE_PORT: number }).LIBUS_LISTEN_EXCLUSIVE_PORT;
    const listenWithOptions = app.listen.bind(app) as unknown as (
      host: string,
      port: number,
      options: number,
      cb: (socket: uWS.us_listen_socket | false) => void,
    ) => void;
    listenWithOptions(options.host, options.port, flags, (socket) => {
      if (!socket) {
        reject(
          Unavailable(
            `cannot listen on ${options.host}:${options.port} (address in use or not available)`,
          ),
        );
        return;
      }
      const port = uWS.us_socket_local_port(socket);
      if (options.receiveBufferBytes) capReceiveBuffer(port, options.receiveBufferBytes, log);
      resolve({
        port,
        close: async (graceMs = 10_000) => {
          draining = true;
          uWS.us_listen_socket_close(socket);
          const deadline = Date.now() + graceMs;
          while (inFlight.size > 0 && Date.now() < deadline)
            await new Promise((r) => setTimeout(r, 25));
          app.close();
        },
      });
    });
  });
}

function capReceiveBuffer(port: number, bytes: number, log: Logger): void {
  const result = setReceiveBuffer(port, bytes);
  if (!result.set) {
    log.warn({ port, reason: result.reason }, 'receive buffer left to the kernel');
    return;
  }
  const fields = { port, requested: bytes, kernel: result.kernelBytes };
  // The kernel caps the value at net.core.rmem_max before doubling it.
  if (result.kernelBytes < 2 * bytes)
    log.warn(fields, 'receive buffer capped by the kernel (net.core.rmem_max)');
  else log.info(fields, 'receive buffer set');
}

/**
 * Runs the route's handler and answers any failure with a problem object. A handler that
 * answered before it returned (it returned nothing) is settled at once, with no promise: most
 * small reads are; one that returned a promise is settled when the promise is.
 */
function run(exchange: Exchange, match: Dispatch, log: Logger): Promise<void> | undefined {
  let pending: Promise<void> | void;
  try {
    pending = match.handler(exchange, match.params);
  } catch (error) {
    settle(exchange, match, log, { error });
    return undefined;
  }
  if (pending === undefined) {
    settle(exchange, match, log, undefined);
    return undefined;
  }
  return pending.then(
    () => settle(exchange, match, log, undefined),
    (error: unknown) => settle(exchange, match, log, { error }),
  );
}

function settle(
  exchange: Exchange,
  match: Dispatch,
  log: Logger,
  failed: { error: unknown } | undefined,
): void {
  if (failed) {
    exchange.sendError(failed.error, log);
    // Answered (a 500), then the process ends: its state may be wrong (util/invariant.ts).
    crashOnInvariantFailure(failed.error);
  } else if (exchange.open)
    exchange.sendError(new TypeError(`${match.operationId} returned without answering`), log);
  if (!exchange.aborted && log.isLevelEnabled('debug')) {
    log.debug(
      {
        op: match.operationId,
        status: exchange.status,
        ms: Math.round(performance.now() - exchange.startedAt),
        requestId: exchange.requestId,
      },
      'request',
    );
  }
}

/**
 * uWebSockets.js answers a certificate or key it cannot load (missing, unreadable, not PEM, not
 * a pair) with a bare "App construction failed": the operating error names the two files.
 */
function tlsApp(tls: { readonly certFile: string; readonly keyFile: string }): uWS.TemplatedApp {
  try {
    return uWS.SSLApp({ cert_file_name: tls.certFile, key_file_name: tls.keyFile });
  } catch (cause) {
    throw BadRequest(
      `cannot load the TLS certificate ${tls.certFile} with the key ${tls.keyFile}`,
      {},
      { cause },
    );
  }
}
