// Input is checked against the operation's own declaration (its RouteDoc), so a misspelt field or
// parameter is refused instead of silently ignored: `{"versionID": …}` in a batch delete would
// otherwise delete the current version, `?dryrun=true` would apply what was meant as a dry run.
//
// - JSON bodies: an object schema that lists `properties` and says nothing of
//   `additionalProperties` is closed. A field it does not list answers 400 `bad_request`, at
//   any depth the schema describes (objects within objects and within arrays). The OpenAPI
//   document publishes the same rule as `additionalProperties: false` (`closedSchema`).
// - JSON bodies: a declared field (or array item, or map value) whose schema names a `type` is
//   not `null` unless the schema says `nullable: true` (OpenAPI 3.0): 400 `bad_request` naming
//   it. Null is neither the field's type nor its absence, so it is refused, never taken for
//   "left out" (`{"name": null}` would otherwise create a tenant named after its id).
// - Query parameters: an operation that changes state (any method but GET, HEAD and OPTIONS)
//   refuses a query parameter its document does not list. Reads ignore unknown ones, as caches
//   and browsers add their own. Any operation refuses a parameter it declares given twice
//   (`?dryRun=false&dryRun=true`, `?versionId=a&versionId=b`): which one was meant is unclear,
//   and reading the first would apply what the client may have meant as a dry run.
// - JSON bodies: an object that names one field twice (`{"dryRun": false, "dryRun": true}`) is
//   refused for the same reason, at any depth and whatever the schema says. JSON.parse would
//   keep the last value silently, and a proxy or log that reads the first would see another
//   request than the one applied. Objects and arrays nest at most JSON_DEPTH_MAX deep.

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

/** Throws `bad_request` for a `null` that the field's schema does not allow (see the header). */
function refuseNull(value: unknown, schema: JsonSchema, path: string): void {
  const type = schema['type'];
  if (value !== null || typeof type !== 'string' || schema['nullable'] === true) return;
  const article = /^[aeiou]/.test(type) ? 'an' : 'a';
  throw BadRequest(`${path} must not be null: leave it out or give ${article} ${type}`);
}

/**
 * Throws `bad_request` for the first field of `value` that `schema` does not declare, or that is
 * a `null` its schema does not allow (see the header). Values of another wrong type are left to
 * the operation's own validation.
 */
export function refuseUndeclaredFields(value: unknown, schema: JsonSchema, where = ''): void {
  if (Array.isArray(value)) {
    const items = schema['items'] as JsonSchema | undefined;
    if (!items) return;
    value.forEach((item, index) => {
      refuseNull(item, items, `${where}[${index}]`);
      refuseUndeclaredFields(item, items, `${where}[${index}]`);
    });
    return;
  }
  if (!isPlainObject(value)) return;
  const properties = isObjectSchema(schema) ? schema.properties : undefined;
  const open = schema['additionalProperties'];
  const values = typeof open === 'object' && open !== null ? (open as JsonSchema) : undefined;
  // Closed: lists its properties and says nothing of others, or says `false`.
  const closed = open === false || (properties !== undefined && open === undefined);
  for (const [name, field] of Object.entries(value)) {
    const listed = properties !== undefined && Object.hasOwn(properties, name);
    // A map's keys are the client's: a message quotes at most QUOTED_CHARS_MAX of one.
    const label = listed ? name : name.slice(0, QUOTED_CHARS_MAX);
    const path = where === '' ? label : `${where}.${label}`;
    const declared = listed ? properties[name] : values;
    if (declared) {
      refuseNull(field, declared, path);
      refuseUndeclaredFields(field, declared, path);
    } else if (closed) throw unknownField(name, where);
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

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;

function isJsonWhitespace(code: number): boolean {
  return code === 0x20 || code === 0x0a || code === 0x0d || code === 0x09;
}

/**
 * How deep objects and arrays may nest in a JSON body: far beyond any body an operation
 * declares, and bounded so that nothing that decodes, checks or re-encodes a body (to the engine,
 * into the index) recurses without end.
 */
export const JSON_DEPTH_MAX = 32;

/**
 * What is unclear or unbounded in the JSON `text`, or undefined: an object that gives a field
 * twice (see the header), or nesting deeper than JSON_DEPTH_MAX. `text` must be valid JSON
 * (JSON.parse took it): one pass that only has to tell keys from string values. A string
 * directly inside an object and followed by a colon is a key; names are compared decoded, so
 * `"a"` and `"\u0061"` are the same field.
 */
export function jsonTextProblem(text: string): Error | undefined {
  // One set of names per open object; undefined for an open array.
  const open: Array<Set<string> | undefined> = [];
  for (let at = 0; at < text.length; at++) {
    const code = text.charCodeAt(at);
    if (code === 0x7b || code === 0x5b) {
      open.push(code === 0x7b ? new Set() : undefined);
      if (open.length > JSON_DEPTH_MAX)
        return BadRequest(
          `the request body nests objects and arrays deeper than ${JSON_DEPTH_MAX} levels`,
        );
    } else if (code === 0x7d || code === 0x5d) open.pop();
    else if (code === QUOTE) {
      const start = at;
      let escaped = false;
      for (at++; text.charCodeAt(at) !== QUOTE; at++) {
        if (text.charCodeAt(at) === BACKSLASH) {
          escaped = true;
          at++;
        }
      }
      const names = open[open.length - 1];
      if (names === undefined) continue;
      let next = at + 1;
      while (isJsonWhitespace(text.charCodeAt(next))) next++;
      if (text.charCodeAt(next) !== COLON) continue; // a value, not a name
      const name = escaped
        ? (JSON.parse(text.slice(start, at + 1)) as string)
        : text.slice(start + 1, at);
      if (names.has(name))
        return BadRequest(`the request body gives field ${quotedName(name)} more than once`);
      names.add(name);
    }
  }
  return undefined;
}

function quotedName(name: string): string {
  return JSON.stringify(name.slice(0, QUOTED_CHARS_MAX));
}

/**
 * Throws `bad_request` for a query parameter a state-changing operation does not declare, and
 * for a declared one given more than once (see the header).
 */
export function refuseUnclearQuery(method: string, doc: RouteDoc, query: URLSearchParams): void {
  const reading = READS.has(method);
  let seen: Set<string> | undefined;
  for (const name of query.keys()) {
    if (!doc.query || !Object.hasOwn(doc.query, name)) {
      if (reading) continue;
      throw BadRequest(`unknown query parameter ${quotedName(name)}`);
    }
    seen ??= new Set();
    if (seen.has(name))
      throw BadRequest(`query parameter ${quotedName(name)} is given more than once`);
    seen.add(name);
  }
}
