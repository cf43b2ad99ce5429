// Bucket CORS rules (data-api.md §4 "Buckets"): GET (read scope), PUT and DELETE (admin scope).
// PUT is validated by src/security/cors.ts, the validator every CORS route shares; the engine
// validates again before it stores. GET of a bucket without rules answers `{rules: []}`.

import type { Route, RouteDoc, JsonSchema } from '../http/router.js';
import type { Handler } from '../http/server.js';
import { authorize } from './auth.js';
import type { RouteKit } from './routes.js';
import { parseCorsConfiguration, CORS_METHODS, CORS_RULES_MAX } from '../security/cors.js';

const str = { type: 'string' } as const;
const strings = { type: 'array', items: str } as const;
export const corsSchema: JsonSchema = {
  type: 'object',
  required: ['rules'],
  properties: {
    rules: {
      type: 'array',
      maxItems: CORS_RULES_MAX,
      items: {
        type: 'object',
        required: ['allowedOrigins', 'allowedMethods'],
        properties: {
          id: str,
          allowedOrigins: { ...strings, description: 'at most one * each' },
          allowedMethods: { type: 'array', items: { type: 'string', enum: [...CORS_METHODS] } },
          allowedHeaders: { ...strings, description: 'at most one * each' },
          exposeHeaders: strings,
          maxAgeSeconds: { type: 'integer', minimum: 0 },
        },
      },
    },
  },
};
const doc = (
  summary: string,
  responses: RouteDoc['responses'],
  extra: Partial<RouteDoc> = {},
): RouteDoc => ({ summary, auth: 'bearer', tags: ['cors'], responses, ...extra });

export function corsRoutes(kit: RouteKit): Route<Handler>[] {
  const { bearer, bucketOf, mutate } = kit;
  return [
    {
      method: 'GET',
      path: '/buckets/{bucket}/cors',
      operationId: 'getBucketCors',
      doc: doc('Read the CORS rules (empty when none)', {
        200: { description: 'rules', schema: corsSchema },
      }),
      handler: (exchange, params) => {
        const principal = bearer(exchange);
        authorize(principal, { verb: 'read', bucket: params['bucket'] });
        exchange.sendJson(200, {
          rules: bucketOf(principal, params['bucket'] ?? '', { verb: 'read' }).cors ?? [],
        });
      },
    },
    {
      method: 'PUT',
      path: '/buckets/{bucket}/cors',
      operationId: 'setBucketCors',
      doc: doc(
        'Store the CORS rules; needs an admin-scoped key',
        { 200: { description: 'the stored rules', schema: corsSchema } },
        { requestBody: { contentType: 'application/json', schema: corsSchema } },
      ),
      handler: async (exchange, params) => {
        const principal = bearer(exchange);
        authorize(principal, { verb: 'admin', bucket: params['bucket'] });
        const bucket = bucketOf(principal, params['bucket'] ?? '', { verb: 'admin' });
        const rules = parseCorsConfiguration(await exchange.readJson()).rules;
        const stored = await mutate<{ cors?: unknown[] }>(
          exchange,
          'putBucketCors',
          { tenantId: principal.tenant.id, bucket: bucket.name, cors: { rules } },
          200,
        );
        exchange.sendJson(200, { rules: stored.cors ?? [] });
      },
    },
    {
      method: 'DELETE',
      path: '/buckets/{bucket}/cors',
      operationId: 'deleteBucketCors',
      doc: doc('Clear the CORS rules; needs an admin-scoped key', {
        204: { description: 'cleared' },
      }),
      handler: async (exchange, params) => {
        const principal = bearer(exchange);
        authorize(principal, { verb: 'admin', bucket: params['bucket'] });
        const bucket = bucketOf(principal, params['bucket'] ?? '', { verb: 'admin' });
        await mutate(
          exchange,
          'deleteBucketCors',
          { tenantId: principal.tenant.id, bucket: bucket.name },
          204,
        );
        exchange.send(204, {});
      },
    },
  ];
}
