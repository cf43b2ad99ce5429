// `GET /metrics` on the admin listener: every process's figures in Prometheus' text format
// (src/http/metrics.ts says how they are gathered). Mounted at `/metrics`, Prometheus' default
// path, as an API of its own beside the admin API.
//
// No token: Prometheus scrapes without one by default, and the admin listener is the private
// one (127.0.0.1 by default; docs/operations.md). The figures name tenants only by id, and
// carry no key, token or object name.

import type { Registry } from 'prom-client';
import { routedApi, type Api, type Handler } from '../http/api.js';
import { Router, type RouteDoc } from '../http/router.js';
import { exposition } from '../util/metrics.js';
import type { EngineClient } from '../engine/protocol.js';

const metricsDoc: RouteDoc = {
  summary: 'Metrics of every process, in the Prometheus text format',
  auth: 'none',
  responses: { 200: { description: 'the exposition', contentType: 'text/plain' } },
};

export function metricsApi(engine: EngineClient, own: Registry): Api {
  const router = new Router<Handler>('/metrics', [
    {
      method: 'GET',
      path: '',
      operationId: 'getMetrics',
      doc: metricsDoc,
      handler: async (exchange) => {
        const [engineFigures, ownFigures] = await Promise.all([
          engine.call('collectMetrics', {}),
          own.getMetricsAsJSON(),
        ]);
        const { contentType, text } = await exposition([ownFigures, ...engineFigures]);
        exchange.send(200, { 'Content-Type': contentType, 'Cache-Control': 'no-store' }, text);
      },
    },
  ]);
  return routedApi({ name: 'metrics', router });
}
