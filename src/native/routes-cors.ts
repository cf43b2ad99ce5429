// Bucket CORS rules (data-api.md §4 "Buckets"): GET (read scope), PUT and DELETE (admin scope),
// as JSON over the service's operations (service/cors.ts). PUT is validated by
// src/security/cors.ts, the validator every CORS route shares; the engine validates again before
// it stores. GET of a bucket without rules answers `{rules: []}`.

import type { Route, JsonSchema } from '../http/router.js';
import type { Handler } from '../http/server.js';
import type { RouteKit } from './routes.js';
import { bearerDocs } from './route-docs.js';
import { contextOf } from '../service/context.js';
import { corsRulesOf, deleteBucketCors, putBucketCors } from '../service/cors.js';
import {
  CORS_METHODS,
  CORS_RULES_MAX,
  CORS_VALUES_PER_LIST_MAX,
  CORS_VALUE_CHARS_MAX,
  CORS_RULE_ID_CHARS_MAX,
  CORS_MAX_AGE_SECONDS_MAX,
} from '../security/cors.js';

// The bounds of src/security/cors.ts, published: a list holds 1 (origins, methods) or 0 (headers)
// to CORS_VALUES_PER_LIST_MAX distinct entries of 1 to CORS_VALUE_CHARS_MAX visible ASCII
// characters.
const value = {
  type: 'string',
  minLength: 1,
  maxLength: CORS_VALUE_CHARS_MAX,
  pattern: '^[\\x21-\\x7e]+$',
} as const;
const list = (minItems: number, items: JsonSchema, description?: string): JsonSchema => ({
  type: 'array',
  minItems,
  maxItems: CORS_VALUES_PER_LIST_MAX,
  uniqueItems: true,
  items,
  ...(description === undefined ? {} : { description }),
});

/** A configuration of `rulesMin` to CORS_RULES_MAX rules. */
function corsSchemaOf(rulesMin: number): JsonSchema {
  return {
    type: 'object',
    required: ['rules'],
    properties: {
      rules: {
        type: 'array',
        minItems: rulesMin,
        maxItems: CORS_RULES_MAX,
        items: {
          type: 'object',
          required: ['allowedOrigins', 'allowedMethods'],
          properties: {
            id: {
              type: 'string',
              minLength: 1,
              maxLength: CORS_RULE_ID_CHARS_MAX,
              pattern: '^[\\x20-\\x7e]+$',
              description: 'unique among the rules',
            },
            allowedOrigins: list(1, value, 'at most one * each'),
            allowedMethods: list(1, { type: 'string', enum: [...CORS_METHODS] }),
            allowedHeaders: list(
              0,
              value,
              'header names, at most one * each; once each in any case',
            ),
            exposeHeaders: list(0, value, 'header names, once each in any case'),
            maxAgeSeconds: { type: 'integer', minimum: 0, maximum: CORS_MAX_AGE_SECONDS_MAX },
          },
        },
      },
    },
  };
}
/** A PUT body and answer: at least one rule (DELETE clears the configuration). */
export const corsSchema = corsSchemaOf(1);
/** What GET answers: `{rules: []}` for a bucket without rules. */
const corsReadSchema = corsSchemaOf(0);
const doc = bearerDocs('cors');

export function corsRoutes(kit: RouteKit): Route<Handler>[] {
  const { bearer, access, objects } = kit;
  return [
    {
      method: 'GET',
      path: '/buckets/{bucket}/cors',
      operationId: 'getBucketCors',
      doc: doc('Read the CORS rules (empty when none)', {
        200: { description: 'rules', schema: corsReadSchema },
      }),
      handler: (exchange, params) => {
        const principal = bearer(exchange);
        const bucket = access.bucket(principal, params['bucket'] ?? '', { verb: 'read' });
        exchange.sendJson(200, { rules: corsRulesOf(bucket) });
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
        const bucket = access.bucket(principal, params['bucket'] ?? '', { verb: 'admin' });
        const ctx = contextOf(exchange, principal);
        const rules = await putBucketCors(objects, ctx, bucket, await exchange.readJson());
        exchange.sendJson(200, { rules });
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
        const bucket = access.bucket(principal, params['bucket'] ?? '', { verb: 'admin' });
        await deleteBucketCors(objects, contextOf(exchange, principal), bucket);
        exchange.send(204, {});
      },
    },
  ];
}
