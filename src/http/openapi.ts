// Generates an OpenAPI 3.0 document from a route table, so the served contract and the routes
// that serve requests are one declaration.

import type { Route, RouteDoc } from './router.js';

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
  },
} as const;

export function openApiDocument(options: {
  title: string;
  version: string;
  prefix: string;
  routes: readonly Route<unknown>[];
  securitySchemes: Record<string, unknown>;
}): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of options.routes) {
    const path = options.prefix + route.path.replace(/\{(\w+)\.\.\.\}/g, '{$1}');
    paths[path] ??= {};
    paths[path][route.method.toLowerCase()] = operation(route, path);
  }
  return {
    openapi: '3.0.3',
    info: { title: options.title, version: options.version },
    paths,
    components: { schemas: { Problem: problemSchema }, securitySchemes: options.securitySchemes },
  };
}

function operation(route: Route<unknown>, path: string): Record<string, unknown> {
  const doc: RouteDoc = route.doc;
  const parameters: unknown[] = [];
  for (const match of path.matchAll(/\{(\w+)\}/g)) {
    parameters.push({ name: match[1], in: 'path', required: true, schema: { type: 'string' } });
  }
  for (const [name, schema] of Object.entries(doc.query ?? {}))
    parameters.push({ name, in: 'query', required: false, schema });
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
    responses[status] = content
      ? { description: response.description, content }
      : { description: response.description };
  }
  responses['default'] = {
    description: 'problem',
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
      content: { [doc.requestBody.contentType]: { schema: doc.requestBody.schema } },
    };
  }
  if (doc.auth === 'none') op['security'] = [];
  else if (doc.auth === 'basic-or-body') op['security'] = [{ basic: [] }, {}];
  else if (doc.auth === 'bearer') op['security'] = [{ bearer: [] }];
  return op;
}
