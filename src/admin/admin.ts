// The admin process: the admin listener (/admin/api/v1). Slower and separate by design: it reads
// the index read-only and sends every mutation through the engine, so it cannot bypass a gate of
// the data plane, and its heavy scans (delete plans, per-bucket usage) never run on the engine's
// writer. Routes: routes.ts; the operator guide: docs/admin-api.md.

import { IndexStore } from '../engine/index/store.js';
import { EngineClient } from '../engine/protocol.js';
import {
  dataDirPaths,
  checkDataDirFormat,
  requireStore,
  noEngineError,
  RELEASE,
} from '../engine/data-dir.js';
import { Router, type Route } from '../http/router.js';
import { listen, type Handler } from '../http/server.js';
import { routedApi, type Api } from '../http/api.js';
import { openApiDocument } from '../http/openapi.js';
import { readyzRoute } from '../http/readiness.js';
import { processRegistry, RequestMetrics } from '../http/metrics.js';
import { accessLogger, bothAnswered } from '../http/access-log.js';
import { metricsApi } from './metrics-route.js';
import { adminRoutes } from './routes.js';
import { AuditSink } from '../http/audit.js';
import { AdminAuth } from './auth.js';
import { componentLogger } from '../util/log.js';
import { tlsFilesOf, type Settings } from '../util/config.js';
import { consoleApis } from '../console/console.js';

export const ADMIN_PREFIX = '/admin/api/v1';

export async function startAdmin(options: {
  dataDir: string;
  settings: Settings;
}): Promise<{ port: number; stop(): Promise<void> }> {
  const { settings } = options;
  const log = componentLogger('admin');
  const paths = dataDirPaths(options.dataDir);
  requireStore(paths, 'admin process');
  await checkDataDirFormat(paths);
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
  const node = await engine.call('nodeIdentity', {});
  const address = settings.listen('admin_listen');
  const auth = new AdminAuth(store, settings.rate('admin.rate_limit'));
  const audit = new AuditSink(engine, componentLogger('admin.audit'));
  const host = address.host.includes(':') ? `[${address.host}]` : address.host;
  // Port 0 asks the kernel for one: the address reported is the bound one, once it is known.
  let boundPort = address.port;
  const closers: Array<() => void> = [];
  const routes: Route<Handler>[] = adminRoutes({
    store,
    engine,
    settings,
    auth,
    audit,
    node,
    address: () => `${host}:${boundPort}`,
    onClose: (stop) => closers.push(stop),
  });
  let indexOpen = true;
  routes.push(readyzRoute({ engine, indexOpen: () => indexOpen }));
  let text = '';
  routes.push({
    method: 'GET',
    path: '/openapi.json',
    operationId: 'getOpenApi',
    doc: {
      summary: 'This OpenAPI document',
      auth: 'none',
      responses: { 200: { description: 'OpenAPI 3', schema: { type: 'object' } } },
    },
    handler: (exchange) => exchange.send(200, { 'Content-Type': 'application/json' }, text),
  });
  text = JSON.stringify(
    openApiDocument({
      title: 'Lightwell admin API',
      version: RELEASE,
      prefix: ADMIN_PREFIX,
      routes,
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'lwadm_ admin token' },
      },
    }),
  );
  // The admin port's APIs. The console (`/admin/console`) and `/metrics` mount here beside the
  // admin API, each with its own errors and query rules (src/http/api.ts).
  const registry = processRegistry('admin', true);
  const requests = new RequestMetrics(registry);
  const apis: Api[] = [
    routedApi({ name: 'admin', router: new Router(ADMIN_PREFIX, routes) }),
    metricsApi(engine, registry),
    ...(await consoleApis({
      store,
      engine,
      settings,
      authenticate: auth.authenticate.bind(auth),
    })),
  ];
  const access = settings.bool('log.access') ? accessLogger(componentLogger('access')) : undefined;
  const listener = await listen(
    {
      host: address.host,
      port: address.port,
      sharedPort: false,
      audit,
      identify: (exchange) => auth.identify(exchange),
      tls: tlsFilesOf(settings),
      bodyRateMin: settings.bytes('limits.body_rate_min'),
      answered: bothAnswered((api, exchange) => requests.observe(api, exchange), access),
    },
    apis,
    log,
  );
  boundPort = listener.port;
  return {
    port: listener.port,
    stop: async () => {
      for (const close of closers.splice(0)) close();
      engine.stopWaiting();
      await listener.close(settings.duration('shutdown.grace'));
      await audit.close();
      engine.close();
      indexOpen = false;
      await store.close();
    },
  };
}
