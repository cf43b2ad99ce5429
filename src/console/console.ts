// The HTML admin console on the admin listener: the page and its assets at /admin/console/, and
// the console API at /admin/console/api/ with its own OpenAPI document. The admin process mounts
// what this returns beside its admin API, lending the console its index, engine and
// authenticator (so the console has exactly the admin API's RBAC, scope checks and audit).

import { Router } from '../http/router.js';
import { routedApi, type Api } from '../http/api.js';
import { openApiDocument } from '../http/openapi.js';
import { RELEASE } from '../engine/data-dir.js';
import { CONSOLE_PREFIX, consoleAssetRoutes, loadConsoleBundle } from './assets.js';
import { CONSOLE_API_PREFIX, consoleApiRoutes, type ConsoleServices } from './api.js';
import { ScrubJobs } from './scrub-jobs.js';

export { CONSOLE_PREFIX } from './assets.js';
export { CONSOLE_API_PREFIX, type ConsoleServices } from './api.js';

/** The console's two APIs, the page and the console API, to mount on the admin listener. */
export async function consoleApis(services: ConsoleServices): Promise<Api[]> {
  const api = consoleApiRoutes(services, new ScrubJobs(services.engine));
  let text = '';
  api.push({
    method: 'GET',
    path: '/openapi.json',
    operationId: 'getConsoleOpenApi',
    doc: {
      summary: 'This OpenAPI document',
      auth: 'none',
      responses: { 200: { description: 'OpenAPI 3', schema: { type: 'object' } } },
    },
    handler: (exchange) => exchange.send(200, { 'Content-Type': 'application/json' }, text),
  });
  text = JSON.stringify(
    openApiDocument({
      title: 'Lightwell console API',
      version: RELEASE,
      prefix: CONSOLE_API_PREFIX,
      routes: api,
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'lwadm_ admin token' },
      },
    }),
  );
  return [
    routedApi({
      name: 'console',
      router: new Router(CONSOLE_PREFIX, consoleAssetRoutes(await loadConsoleBundle())),
    }),
    routedApi({ name: 'console-api', router: new Router(CONSOLE_API_PREFIX, api) }),
  ];
}
