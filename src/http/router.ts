// The route table: one declaration per operation serves requests and generates the OpenAPI
// document, so the two cannot drift.
//
// A path pattern is a list of segments: literals, `{name}` (one segment) and a final `{key...}`
// (the rest of the path, slashes kept). Matching works on the raw path and decodes each
// parameter once; a literal may carry a suffix after a colon in the last segment
// (`objects:batchDelete`).

import { NotFound, MethodNotAllowed, BadRequest } from '../util/errors.js';

export type Method = 'GET' | 'HEAD' | 'PUT' | 'POST' | 'DELETE' | 'OPTIONS';

export interface JsonSchema {
  readonly [field: string]: unknown;
}

export interface RouteDoc {
  readonly summary: string;
  readonly tags?: readonly string[];
  /** Query parameters: name → schema. */
  readonly query?: Readonly<Record<string, JsonSchema>>;
  /** Query parameters of `query` that the operation cannot do without. */
  readonly requiredQuery?: readonly string[];
  /** Path parameters that are not plain strings: name → schema. */
  readonly pathParams?: Readonly<Record<string, JsonSchema>>;
  /** Request headers the operation reads: name → description. */
  readonly headers?: Readonly<Record<string, string>>;
  readonly requestBody?: {
    readonly contentType: string;
    readonly schema: JsonSchema;
    readonly required?: boolean;
  };
  /**
   * Status → description, optional JSON schema (or a raw content type) and the response
   * headers it sends besides X-Request-Id (which every response carries): name → description.
   */
  readonly responses: Readonly<
    Record<
      number,
      {
        readonly description: string;
        readonly schema?: JsonSchema;
        readonly contentType?: string;
        readonly headers?: Readonly<Record<string, string>>;
      }
    >
  >;
  readonly auth: 'none' | 'bearer' | 'basic-or-body' | 'signed-url';
}

export interface Route<H> {
  readonly method: Method;
  readonly path: string;
  readonly operationId: string;
  readonly doc: RouteDoc;
  readonly handler: H;
}

interface Segment {
  readonly literal?: string;
  readonly param?: string;
  readonly rest?: boolean;
  /** An integer parameter (its doc says `type: 'integer'`): digits only, never percent-encoded. */
  readonly integer?: boolean;
}

interface CompiledRoute<H> {
  readonly route: Route<H>;
  readonly segments: readonly Segment[];
}

export interface Match<H> {
  readonly route: Route<H>;
  readonly params: Readonly<Record<string, string>>;
}

export class Router<H> {
  private readonly compiled: CompiledRoute<H>[] = [];
  /**
   * The routes that answer each method, in declaration order: a request is matched against its
   * own method's routes only (HEAD: its own and each GET without a HEAD on the same path, in
   * declaration order); the rest are scanned only to tell a 405 from a 404.
   */
  private readonly byMethod = new Map<string, CompiledRoute<H>[]>();

  constructor(
    readonly prefix: string,
    routes: readonly Route<H>[],
  ) {
    const seen = new Set<string>();
    for (const route of routes) {
      if (seen.has(route.operationId))
        throw new TypeError(`duplicate operationId ${route.operationId}`);
      seen.add(route.operationId);
      this.compiled.push({ route, segments: compile(route.path, route.doc.pathParams) });
    }
    const headPaths = new Set(
      routes.filter((route) => route.method === 'HEAD').map((route) => route.path),
    );
    for (const entry of this.compiled) {
      const { method, path } = entry.route;
      const methods = method === 'GET' && !headPaths.has(path) ? ['GET', 'HEAD'] : [method];
      for (const name of methods) {
        const list = this.byMethod.get(name) ?? [];
        list.push(entry);
        this.byMethod.set(name, list);
      }
    }
  }

  get routes(): readonly Route<H>[] {
    return this.compiled.map((entry) => entry.route);
  }

  /** Finds the route; 404 for an unknown path, 405 for a known path with another method. */
  match(method: string, rawPath: string): Match<H> {
    // The prefix is whole path segments: `/api/v1x/buckets` is not under `/api/v1`.
    const rest = rawPath.startsWith(this.prefix) ? rawPath.slice(this.prefix.length) : undefined;
    if (rest === undefined || (rest !== '' && !rest.startsWith('/')))
      throw NotFound(`no route for ${rawPath}`);
    // The raw path reaches us decoded as UTF-8, with U+FFFD for every invalid byte: two keys
    // that differ only in such bytes would be one key. (A raw U+FFFD is refused too; keys that
    // hold it arrive percent-encoded.)
    if (rawPath.includes('\uFFFD'))
      throw BadRequest('the path is not valid UTF-8; percent-encode the key');
    const parts = rest.split('/').slice(1);
    for (const entry of this.byMethod.get(method) ?? []) {
      const params = matchSegments(entry.segments, parts);
      if (params) return { route: entry.route, params };
    }
    const allowed = new Set<string>();
    for (const entry of this.compiled)
      if (matchSegments(entry.segments, parts)) allowed.add(entry.route.method);
    if (allowed.size > 0) {
      if (allowed.has('GET')) allowed.add('HEAD');
      throw MethodNotAllowed(`${method} is not allowed on ${rawPath}`, {
        allow: [...allowed].join(', '),
      });
    }
    throw NotFound(`no route for ${method} ${rawPath}`);
  }
}

function compile(path: string, docs: RouteDoc['pathParams']): Segment[] {
  return path
    .split('/')
    .slice(1)
    .map((part, index, all) => {
      const rest = /^\{(\w+)\.\.\.\}$/.exec(part);
      if (rest) {
        if (index !== all.length - 1) throw new TypeError(`${path}: {name...} must be last`);
        return { param: rest[1] ?? '', rest: true };
      }
      const param = /^\{(\w+)\}$/.exec(part);
      if (param) {
        const name = param[1] ?? '';
        return docs?.[name]?.['type'] === 'integer'
          ? { param: name, integer: true }
          : { param: name };
      }
      return { literal: part };
    });
}

function matchSegments(
  segments: readonly Segment[],
  parts: readonly string[],
): Record<string, string> | undefined {
  // The literals and the shape first, without a decode or an allocation: most routes tried
  // fail here.
  const last = segments.length - 1;
  const restAt = segments[last]?.rest ? last : -1;
  if (restAt < 0 ? parts.length !== segments.length : parts.length < segments.length)
    return undefined;
  for (let index = 0; index < segments.length; index += 1) {
    if (index === restAt) break;
    const segment = segments[index] as Segment;
    const part = parts[index] as string;
    if (segment.literal !== undefined ? part !== segment.literal : part.length === 0)
      return undefined;
  }
  const rest = restAt < 0 ? undefined : parts.slice(restAt).join('/');
  if (rest?.length === 0) return undefined;
  const params: Record<string, string> = {};
  for (let index = 0; index < segments.length; index += 1) {
    const { param, integer } = segments[index] as Segment;
    if (param === undefined) continue;
    // `%31` is `1` once decoded; a number spelled with escapes is refused, not guessed.
    if (integer && !/^\d+$/.test(parts[index] as string))
      throw BadRequest(`path parameter ${param} must be written as plain decimal digits`);
    params[param] = decode(index === restAt ? (rest as string) : (parts[index] as string));
  }
  return params;
}

function decode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw BadRequest('malformed percent-encoding in the path');
  }
}
