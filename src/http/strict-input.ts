// Input is checked against the operation's own declaration (its RouteDoc), so a misspelt field or
// parameter is refused instead of silently ignored: `{"versionID": …}` in a batch delete would
// otherwise delete the current version, `?dryrun=true` would apply what was meant as a dry run.
//
// - JSON bodies: an object schema that lists `properties` and says nothing of
//   `additionalProperties` is closed. A field it does not list answers 400 `bad_request`, at
//   any depth the schema describes (objects within objects and within arrays). The OpenAPI
//   document publishes the same rule as `additionalProperties: false` (`closedSchema`).
// - Query parameters: an operation that changes state (any method but GET, HEAD and OPTIONS)
//   refuses a query parameter its document does not list. Reads ignore unknown ones, as caches
//   and browsers add their own. Any operation refuses a parameter it declares given twice
//   (`?dryRun=false&dryRun=true`, `?versionId=a&versionId=b`): which one was meant is unclear,
//   and reading the first would apply what the client may have meant as a dry run.

import { BadRequest } from '../util/errors.js';
import { QUOTED_CHARS_MAX, unknownField } from '../security/names.js';
import type { JsonSchema, RouteDoc } from './router.js';

const READS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

function isObjectSchema(schema: JsonSchema): schema is JsonSchema & {
  properties: Readonly<Record<string, JsonSchema>>;
} {
  return typeof schema['properties'] === 'object' && schema['properties'] !== null;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Throws `bad_request` for the first field of `value` that `schema` does not declare (see the
 * header). Values of the wrong type are left to the operation's own validation.
 */
export function refuseUndeclaredFields(value: unknown, schema: JsonSchema, where = ''): void {
  if (Array.isArray(value)) {
    const items = schema['items'] as JsonSchema | undefined;
    if (items)
      value.forEach((item, index) => refuseUndeclaredFields(item, items, `${where}[${index}]`));
    return;
  }
  if (!isPlainObject(value)) return;
  const properties = isObjectSchema(schema) ? schema.properties : undefined;
  const open = schema['additionalProperties'];
  const values = typeof open === 'object' && open !== null ? (open as JsonSchema) : undefined;
  // Closed: lists its properties and says nothing of others, or says `false`.
  const closed = open === false || (properties !== undefined && open === undefined);
  for (const [name, field] of Object.entries(value)) {
    const path = where === '' ? name : `${where}.${name}`;
    const declared = properties && Object.hasOwn(properties, name) ? properties[name] : values;
    if (declared) refuseUndeclaredFields(field, declared, path);
    else if (closed) throw unknownField(name, where);
  }
}

/** The schema as published: every closed object schema says `additionalProperties: false`. */
export function closedSchema(schema: JsonSchema): JsonSchema {
  const closed: Record<string, unknown> = { ...schema };
  if (isObjectSchema(schema)) {
    closed['properties'] = Object.fromEntries(
      Object.entries(schema.properties).map(([name, field]) => [name, closedSchema(field)]),
    );
    closed['additionalProperties'] ??= false;
  }
  const items = schema['items'] as JsonSchema | undefined;
  if (items) closed['items'] = closedSchema(items);
  return closed;
}

/**
 * Throws `bad_request` for a query parameter a state-changing operation does not declare, and
 * for a declared one given more than once (see the header).
 */
export function refuseUnclearQuery(method: string, doc: RouteDoc, query: URLSearchParams): void {
  const reading = READS.has(method);
  for (const name of query.keys()) {
    const quoted = JSON.stringify(name.slice(0, QUOTED_CHARS_MAX));
    if (!doc.query || !Object.hasOwn(doc.query, name)) {
      if (reading) continue;
      throw BadRequest(`unknown query parameter ${quoted}`);
    }
    if (query.getAll(name).length > 1)
      throw BadRequest(`query parameter ${quoted} is given more than once`);
  }
}
