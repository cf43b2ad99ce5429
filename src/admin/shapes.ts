// The shapes the admin API's simple resources share: the OpenAPI of a list, a create and a
// delete of a tenant's children (accounts, keys, KMS keys, the tenant itself), and the answer of
// a mutation under the `?dryRun` switch. One place, so that every such route documents and
// answers alike (admin-api.md §3: a dry run answers 200 with the plan, the real call its own
// status).

import type { Exchange } from '../http/exchange.js';
import type { JsonSchema, RouteDoc } from '../http/router.js';
import { dryRunSchema, problems } from './json.js';
import { dryRunAnswer, dryRunQuery, reasonSchema, textSchema } from './request.js';

/** What a dry run of a mutation reports: its action (the operationId), target and counts. */
export interface Plan {
  readonly action: string;
  readonly target: string;
  readonly counts: Readonly<Record<string, number>>;
}

/** Sends the plan with `view` as its result for a dry run (200); otherwise calls `real`. */
export function answerMutation(
  exchange: Exchange,
  dryRun: boolean,
  plan: Plan,
  view: unknown,
  real: () => void,
): void {
  if (dryRun) exchange.sendJson(200, dryRunAnswer(plan.action, plan.target, view, plan.counts));
  else real();
}

/** A list answered as `{<field>: [<item>…]}`. */
export function listDoc(
  summary: string,
  description: string,
  field: string,
  item: JsonSchema,
): RouteDoc {
  return {
    summary,
    auth: 'bearer',
    responses: {
      200: {
        description,
        schema: {
          type: 'object',
          required: [field],
          properties: { [field]: { type: 'array', items: item } },
        },
      },
      ...problems(400, 404),
    },
  };
}

/**
 * A create of a named child: a body `{id, <text>?, reason?}` whose `id` matches `idPattern`,
 * answered 201 with the record (200 with the plan for a dry run).
 */
export function createDoc(shape: {
  readonly summary: string;
  readonly idPattern: string;
  readonly text: string;
  readonly record: JsonSchema;
  readonly problems: readonly number[];
}): RouteDoc {
  return {
    summary: shape.summary,
    auth: 'bearer',
    query: dryRunQuery,
    requestBody: {
      contentType: 'application/json',
      schema: {
        type: 'object',
        required: ['id'],
        properties: {
          id: { type: 'string', pattern: shape.idPattern },
          [shape.text]: textSchema,
          reason: reasonSchema,
        },
      },
    },
    responses: {
      201: { description: 'created', schema: shape.record },
      200: { description: 'dry run', schema: dryRunSchema },
      ...problems(...shape.problems),
    },
  };
}

/** A delete whose optional body is `{reason}`: 204, or 200 with the plan for a dry run. */
export function deleteDoc(summary: string, done: string): RouteDoc {
  return {
    summary,
    auth: 'bearer',
    query: dryRunQuery,
    requestBody: {
      contentType: 'application/json',
      required: false,
      schema: { type: 'object', properties: { reason: reasonSchema } },
    },
    responses: {
      204: { description: done },
      200: { description: 'dry run', schema: dryRunSchema },
      ...problems(400, 404),
    },
  };
}
