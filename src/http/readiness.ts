// Liveness and readiness, the same on both listeners. `/healthz` answers 200 while the process
// runs its event loop (liveness: restart it when this fails). `/readyz` answers 200 only when
// the process can serve a request: its engine answers a ping, its index is open, and it is not
// draining; 503 otherwise (readiness: send it no traffic while this fails). A draining listener
// answers every request 503 before any route runs (server.ts), so `/readyz` then fails too.
//
// A ping is one small round trip to the engine, and probes come every few seconds: the check
// costs nothing on the data path. While the engine connection is down the probe answers 503 at
// once and starts a reconnect in the background, so that a probe never waits out the engine
// client's connect time-out.

import type { EngineClient } from '../engine/protocol.js';
import type { Route, RouteDoc } from './router.js';
import type { Handler } from './server.js';
import { EngineUnavailable, Unavailable } from '../util/errors.js';

/** How long a probe waits for the engine's ping. */
export const READY_PING_MS = 2_000;

const statusSchema = { type: 'object', properties: { status: { type: 'string' } } } as const;

export const readyzDoc: RouteDoc = {
  summary:
    'Readiness: 200 when this process can serve (engine reachable, index open, not draining)',
  auth: 'none',
  responses: {
    200: { description: 'ready', schema: statusSchema },
    503: { description: 'not ready: draining, engine unreachable or index closed' },
  },
};

/** What `/readyz` checks besides the listener's own draining. */
export interface ReadinessChecks {
  readonly engine: EngineClient;
  /** False once the process has closed its index (it is stopping). */
  readonly indexOpen: () => boolean;
}

export function readyzRoute(checks: ReadinessChecks): Route<Handler> {
  return {
    method: 'GET',
    path: '/readyz',
    operationId: 'readyz',
    doc: readyzDoc,
    handler: async (exchange) => {
      if (!checks.indexOpen())
        throw Unavailable('not ready: the index is closed', { index: 'closed' });
      if (!checks.engine.connected) {
        checks.engine.call('ping', {}).catch(() => undefined);
        throw EngineUnavailable('not ready: no connection to the engine', { engine: 'down' });
      }
      await pingWithin(checks.engine, READY_PING_MS);
      exchange.sendJson(200, { status: 'ready' }, { 'Cache-Control': 'no-store' });
    },
  };
}

async function pingWithin(engine: EngineClient, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(EngineUnavailable(`not ready: the engine did not answer within ${ms} ms`)),
      ms,
    );
  });
  try {
    await Promise.race([engine.call('ping', {}), late]);
  } finally {
    clearTimeout(timer);
  }
}
