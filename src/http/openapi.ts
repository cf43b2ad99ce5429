// Generates an OpenAPI 3.0 document from a route table, so the served contract and the routes
// that serve requests are one declaration.

import assert from 'node:assert';
import type { Route, RouteDoc } from './router.js';
import { closedSchema } from './strict-input.js';

export const problemSchema = {
  type: 'object',
  required: ['code', 'message', 'status', 'requestId'],
  properties: {
    type: { type: 'string' },
    title: { type: 'string' },
    status: { type: 'integer' },
    detail: { type: 'string' },
    instance: { type: 'string' },
    code: { type: 'string', description: 'stable machine-readable code' },
    message: { type: 'string' },
    requestId: { type: 'string', description: 'also sent as X-Request-Id' },
    counts: {
      type: 'object',
      description: 'a refused tenant delete: what it would touch, as in the plan',
      additionalProperties: { type: 'integer' },
    },
    blockers: {
      type: 'array',
      description: 'a refused tenant delete: what is in its way, as in the plan',
      items: {
        type: 'object',
        required: ['code', 'message'],
        properties: {
          code: { type: 'string' },
          message: { type: 'string' },
          count: { type: 'integer' },
        },
      },
    },
  },
} as const;

/** Response headers that many operations send, published once under components. */
const sharedHeaders = {
  RequestId: {
    description: 'the request id, also in problem objects as requestId',
    schema: { type: 'string' },
  },
  RetryAfter: {
    description: 'with 429 and 503: seconds to wait before trying again',
    schema: { type: 'integer' },
  },
  WwwAuthenticate: {
    description: 'with 401: the authentication scheme the operation takes',
    schema: { type: 'string' },
  },
} as const;

const requestIdHeader = { 'X-Request-Id': { $ref: '#/components/headers/RequestId' } };

export function openApiDocument(options: {
  title: string;
  version: string;
  prefix: string;
  routes: readonly Route<unknown>[];
  securitySchemes: Record<string, unknown>;
}): Record<string, unknown> {
  // Paths are relative to the prefix, which is the document's server (the specs: "All paths are
  // relative to /api/v1", "… to /admin/api/v1").
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of options.routes) {
    const path = route.path.replace(/\{(\w+)\.\.\.\}/g, '{$1}');
    paths[path] ??= {};
    paths[path][route.method.toLowerCase()] = operation(route, path);
  }
  // The router answers HEAD wherever it answers GET (RFC 9110 §9.1), from the GET's handler, so
  // a path without a HEAD route of its own documents one made from its GET.
  // No answer to a HEAD has content, a problem neither: its responses describe headers only.
  for (const item of Object.values(paths)) {
    const get = item['get'] as Record<string, unknown> | undefined;
    if (get && !item['head']) item['head'] = headOf(get);
    if (item['head']) item['head'] = withoutContent(item['head'] as Record<string, unknown>);
  }
  const operationIds = Object.values(paths).flatMap((item) =>
    Object.values(item).map((op) => (op as { operationId: string }).operationId),
  );
  assert(new Set(operationIds).size === operationIds.length, 'operationIds must be unique');
  return {
    openapi: '3.0.3',
    info: { title: options.title, version: options.version },
    servers: [{ url: options.prefix }],
    paths,
    components: {
      schemas: { Problem: problemSchema },
      headers: sharedHeaders,
      securitySchemes: options.securitySchemes,
    },
  };
}

/**
 * The HEAD that a GET answers: its parameters, statuses, headers and security. Its operationId
 * is the GET's with `get` turned into `head` (getBucket → headBucket), or `head` before it
 * (listBuckets → headListBuckets).
 */
function headOf(get: Record<string, unknown>): Record<string, unknown> {
  const id = get['operationId'] as string;
  return {
    ...get,
    operationId: /^get[A-Z]/.test(id)
      ? `head${id.slice(3)}`
      : `head${id.charAt(0).toUpperCase()}${id.slice(1)}`,
    summary: `${String(get['summary'])} (the headers of the GET, no content)`,
  };
}

function withoutContent(op: Record<string, unknown>): Record<string, unknown> {
  const responses: Record<string, unknown> = {};
  for (const [status, response] of Object.entries(op['responses'] as Record<string, object>)) {
    const { content: _content, ...bodiless } = response as Record<string, unknown>;
    responses[status] = bodiless;
  }
  return { ...op, responses };
}

function operation(route: Route<unknown>, path: string): Record<string, unknown> {
  const doc: RouteDoc = route.doc;
  const parameters: unknown[] = [];
  for (const match of path.matchAll(/\{(\w+)\}/g)) {
    const name = match[1] ?? '';
    const schema = doc.pathParams?.[name] ?? { type: 'string' };
    parameters.push({ name, in: 'path', required: true, schema });
  }
  for (const [name, schema] of Object.entries(doc.query ?? {}))
    parameters.push({
      name,
      in: 'query',
      required: doc.requiredQuery?.includes(name) ?? false,
      schema,
    });
  for (const [name, description] of Object.entries(doc.headers ?? {}))
    parameters.push({
      name,
      in: 'header',
      required: false,
      description,
      schema: { type: 'string' },
    });
  const responses: Record<string, unknown> = {};
  for (const [status, response] of Object.entries(doc.responses)) {
    const content = response.schema
      ? { [response.contentType ?? 'application/json']: { schema: response.schema } }
      : response.contentType
        ? { [response.contentType]: { schema: { type: 'string', format: 'binary' } } }
        : undefined;
    const headers: Record<string, unknown> = { ...requestIdHeader };
    for (const [name, description] of Object.entries(response.headers ?? {}))
      headers[name] = { description, schema: { type: 'string' } };
    if (status === '429' || status === '503')
      headers['Retry-After'] = { $ref: '#/components/headers/RetryAfter' };
    if (status === '401')
      headers['WWW-Authenticate'] = { $ref: '#/components/headers/WwwAuthenticate' };
    responses[status] = content
      ? { description: response.description, headers, content }
      : { description: response.description, headers };
  }
  responses['default'] = {
    description: 'problem',
    headers: {
      ...requestIdHeader,
      'Retry-After': { $ref: '#/components/headers/RetryAfter' },
      'WWW-Authenticate': { $ref: '#/components/headers/WwwAuthenticate' },
    },
    content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
  };
  const op: Record<string, unknown> = {
    operationId: route.operationId,
    summary: doc.summary,
    parameters,
    responses,
  };
  if (doc.tags) op['tags'] = doc.tags;
  if (doc.requestBody) {
    op['requestBody'] = {
      required: doc.requestBody.required ?? true,
      content: {
        [doc.requestBody.contentType]: {
          schema:
            doc.requestBody.contentType === 'application/json'
              ? closedSchema(doc.requestBody.schema)
              : doc.requestBody.schema,
        },
      },
    };
  }
  if (doc.auth === 'none') op['security'] = [];
  else if (doc.auth === 'basic-or-body') op['security'] = [{ basic: [] }, {}];
  else if (doc.auth === 'bearer') op['security'] = [{ bearer: [] }];
  else op['security'] = [{ signedUrl: [] }];
  return op;
}

/**
 * The problem answers of an API's authenticated operations, described in its own words
 * (`known`, by status): every operation can give 401, 403 and 429, and each names the others it
 * can. Each answer is `application/problem+json` with the shared Problem schema.
 */
export function problemResponses(
  known: Readonly<Record<number, string>>,
): (...statuses: number[]) => RouteDoc['responses'] {
  return (...statuses) => {
    const out: Record<number, RouteDoc['responses'][number]> = {};
    for (const status of [401, 403, 429, ...statuses])
      out[status] = {
        description: known[status] ?? 'error',
        schema: { $ref: '#/components/schemas/Problem' },
        contentType: 'application/problem+json',
      };
    return out;
  };
}
