// The APIs of the public port, in one place: the native API at /api/v1 and the API of every
// other path, which is the S3-compatible API (src/s3/: prefix '', its own XML errors, a query
// that is not held to a declaration).

import { routedApi, type Api, type Handler } from '../http/api.js';
import { s3Api } from '../s3/mount.js';
import { componentLogger } from '../util/log.js';
import type { Exchange } from '../http/exchange.js';
import { Router, type Route } from '../http/router.js';
import type { GatewayServices } from '../native/routes.js';

export const API_PREFIX = '/api/v1';

/**
 * The public port's APIs for one listener: `native` is the route table of /api/v1 (routes.ts
 * and the OpenAPI route); `identify` names a caller whose request was not dispatched.
 */
export function publicApis(options: {
  native: readonly Route<Handler>[];
  services: GatewayServices;
  identify: (exchange: Exchange) => void;
}): Api[] {
  return [
    routedApi({
      name: 'native',
      router: new Router(API_PREFIX, options.native),
      identify: options.identify,
    }),
    // Every other path is S3 (DECISIONS.md), `/api/v2/…` and `/admin/…` included: the admin API
    // and the console are never on this port, and a path there names a bucket like any other
    // (`api` is a reserved bucket name, names.ts, so `/api/…` outside /api/v1 is NoSuchBucket).
    otherPathsApi(options.services),
  ];
}

/** The API of every path outside /api/v1: the S3-compatible API (DECISIONS.md). */
function otherPathsApi(services: GatewayServices): Api {
  return s3Api({ ...services, log: componentLogger('gateway.s3') }).mount();
}
