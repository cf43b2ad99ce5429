// The APIs a listener mounts, and how it picks one for a request.
//
// A listener serves several APIs side by side (docs/architecture.md, "Layers"): on the public
// port the native API at /api/v1 and the S3-compatible API on every other path; on the admin
// port the admin API, the console and /metrics. An API is mounted at a prefix of whole path
// segments, or at '' for every path no other API holds, and brings what differs between APIs:
// how it picks the operation for a request (a route table, or S3's dispatch on the query and
// headers), how it writes errors (problem+json, S3 XML), and whether the query is held to what
// the operation declares.

import type { WebSocketBehavior } from 'uWebSockets.js';
import type { Exchange } from './exchange.js';
import { problemJson, type ErrorRenderer } from './error-answer.js';
import type { Router, RouteDoc } from './router.js';
import { NotFound } from '../util/errors.js';

/** What serves one operation: it answers on `exchange` (or throws a catalogue error). */
export type Handler = (
  exchange: Exchange,
  params: Readonly<Record<string, string>>,
) => Promise<void> | void;

/** The operation an API picked for a request. */
export interface Dispatch {
  /** The audit row's action and the debug log's `op`. */
  readonly operationId: string;
  /**
   * The operation's description, when the API declares one: its query and JSON body are held to
   * it (strict-input.ts), and operations it marks `auth: 'none'` or `'basic-or-body'` have their
   * query checked before the handler runs.
   */
  readonly doc?: RouteDoc | undefined;
  readonly handler: Handler;
  readonly params: Readonly<Record<string, string>>;
}

export interface Api {
  /** For logs and documentation: `native`, `s3`, `admin`, ... */
  readonly name: string;
  /** Whole path segments (`/api/v1`), or '' for every path that no other API holds. */
  readonly prefix: string;
  readonly errors: ErrorRenderer;
  /** Whether a query parameter the operation does not declare is refused (Exchange). */
  readonly strictQuery: boolean;
  /**
   * Picks the operation for a request; throws a catalogue error for none (404, 405, a path that
   * is not UTF-8), which the listener answers through `errors`.
   */
  dispatch(exchange: Exchange): Dispatch;
  /**
   * Names the caller on the audit row of a request that was not dispatched, when its credentials
   * are valid; never throws. Without it, the listener's `identify`.
   */
  readonly identify?: ((exchange: Exchange) => void) | undefined;
  /**
   * WebSocket endpoints of this API (the ingest stream): uWS patterns under `prefix`, each with
   * its behavior, registered on the listener before its HTTP routes. The behavior's `upgrade`
   * authenticates and refuses in the API's own form.
   */
  readonly webSockets?: readonly WebSocketEndpoint[] | undefined;
}

export interface WebSocketEndpoint {
  readonly pattern: string;
  readonly behavior: WebSocketBehavior<unknown>;
}

/** An API served from a route table: the native and admin APIs (problem+json, strict query). */
export function routedApi(options: {
  router: Router<Handler>;
  name?: string;
  errors?: ErrorRenderer;
  strictQuery?: boolean;
  identify?: (exchange: Exchange) => void;
}): Api {
  const { router } = options;
  return {
    name: options.name ?? router.prefix,
    prefix: router.prefix,
    errors: options.errors ?? problemJson,
    strictQuery: options.strictQuery ?? true,
    identify: options.identify,
    dispatch: (exchange) => {
      const match = router.match(exchange.method, exchange.path);
      const { route } = match;
      return {
        operationId: route.operationId,
        doc: route.doc,
        handler: route.handler,
        params: match.params,
      };
    },
  };
}

/**
 * The API of paths that nothing serves: a 404 problem for every request, as a listener answers
 * outside its mounted APIs.
 */
export function unmountedApi(options: {
  prefix?: string;
  identify?: (exchange: Exchange) => void;
}): Api {
  return {
    name: 'unmounted',
    prefix: options.prefix ?? '',
    errors: problemJson,
    strictQuery: true,
    identify: options.identify,
    dispatch: (exchange) => {
      throw NotFound(`no route for ${exchange.path}`);
    },
  };
}

/** The APIs of one listener, by prefix. */
export class Mounts {
  /** Longest prefix first, so that `/admin/console/api` wins over `/admin/console`. */
  private readonly prefixed: readonly Api[];
  private readonly rest: Api;

  constructor(apis: readonly Api[]) {
    const seen = new Set<string>();
    for (const api of apis) {
      if (seen.has(api.prefix)) throw new TypeError(`two APIs are mounted at '${api.prefix}'`);
      if (api.prefix !== '' && (!api.prefix.startsWith('/') || api.prefix.endsWith('/')))
        throw new TypeError(`the prefix '${api.prefix}' is not whole path segments`);
      seen.add(api.prefix);
    }
    this.prefixed = apis
      .filter((api) => api.prefix !== '')
      .sort((a, b) => b.prefix.length - a.prefix.length);
    this.rest = apis.find((api) => api.prefix === '') ?? unmountedApi({});
  }

  /** The API that serves `path`: `/api/v1x` is not under `/api/v1`. */
  apiOf(path: string): Api {
    for (const api of this.prefixed) {
      const { prefix } = api;
      if (path.startsWith(prefix) && (path.length === prefix.length || path[prefix.length] === '/'))
        return api;
    }
    return this.rest;
  }
}
