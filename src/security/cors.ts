// Bucket CORS rules (data-api.md §2 "CORS configuration"): the one validator for every route
// that stores them (the native `PUT /buckets/{bucket}/cors` now, the S3 CORS route later), and
// the matching that answers a browser's preflight.
//
// Shape (camelCase JSON): `{rules: [{id?, allowedOrigins, allowedMethods, allowedHeaders?,
// exposeHeaders?, maxAgeSeconds?}]}`.
//
// Invariants:
// - Methods are GET, HEAD, PUT, POST and DELETE, spelled in capitals. An origin and an allowed
//   header contain at most one `*`, which matches any run of characters (S3's rule); expose
//   headers contain none. Every string is visible ASCII, so none can split a response header.
// - Validation refuses what it does not know (unknown fields, wrong types) with `bad_request`
//   naming the field; it returns a normalised copy (absent lists become empty lists).
// - CORS never grants access: matching only decides whether a response carries the
//   Access-Control-* headers. The caller authorizes the request first, and a request that no
//   rule matches gets none of those headers.
// - Origins match case-sensitively (RFC 6454 serialises them in lower case); header names
//   case-insensitively.
//
// Persists: nothing itself; the engine stores the normalised rules on the bucket record.

import { BadRequest } from '../util/errors.js';
import { refuseUnknownFields } from './names.js';

export const CORS_RULES_MAX = 100;
export const CORS_VALUES_PER_LIST_MAX = 100;
export const CORS_VALUE_CHARS_MAX = 256;
export const CORS_RULE_ID_CHARS_MAX = 255;
export const CORS_MAX_AGE_SECONDS_MAX = 2 ** 31 - 1;
export const CORS_METHODS = ['GET', 'HEAD', 'PUT', 'POST', 'DELETE'] as const;
export type CorsMethod = (typeof CORS_METHODS)[number];

export interface CorsRule {
  readonly id?: string;
  readonly allowedOrigins: readonly string[];
  readonly allowedMethods: readonly CorsMethod[];
  readonly allowedHeaders: readonly string[];
  readonly exposeHeaders: readonly string[];
  readonly maxAgeSeconds?: number;
}

export interface CorsConfiguration {
  readonly rules: readonly CorsRule[];
}

/** What a preflight (or an actual cross-origin request) asks for. */
export interface CorsRequest {
  readonly origin: string;
  readonly method: string;
  /** Lower-case header names from Access-Control-Request-Headers. */
  readonly headers: readonly string[];
}

/** The fields of a configuration, and of one of its rules. */
const CONFIGURATION_FIELDS: ReadonlySet<string> = new Set(['rules']);
const ruleFields = new Set([
  'id',
  'allowedOrigins',
  'allowedMethods',
  'allowedHeaders',
  'exposeHeaders',
  'maxAgeSeconds',
]);
const visiblePattern = /^[\x21-\x7e]+$/;
/** RFC 9110 token characters, plus `*` where a wildcard is allowed. */
const headerNamePattern = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

export function parseCorsConfiguration(value: unknown): CorsConfiguration {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw BadRequest('a CORS configuration is a JSON object {rules: [...]}');
  const fields = value as Record<string, unknown>;
  refuseUnknownFields(fields, CONFIGURATION_FIELDS);
  const rules = fields['rules'];
  if (!Array.isArray(rules) || rules.length === 0 || rules.length > CORS_RULES_MAX) {
    throw BadRequest(
      `rules must be an array of 1 to ${CORS_RULES_MAX} rules (DELETE clears the configuration)`,
    );
  }
  const parsed = rules.map((rule, index) => parseRule(rule, `rules[${index}]`));
  const ids = parsed.flatMap((rule) => (rule.id === undefined ? [] : [rule.id]));
  if (new Set(ids).size !== ids.length) throw BadRequest('rule ids must be unique');
  return { rules: parsed };
}

function parseRule(value: unknown, where: string): CorsRule {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw BadRequest(`${where} must be an object`);
  const fields = value as Record<string, unknown>;
  refuseUnknownFields(fields, ruleFields, where);
  const allowedOrigins = stringList(fields['allowedOrigins'], `${where}.allowedOrigins`, {
    required: true,
    wildcard: true,
    header: false,
  });
  const methods = stringList(fields['allowedMethods'], `${where}.allowedMethods`, {
    required: true,
    wildcard: false,
    header: false,
  });
  for (const method of methods) {
    if (!(CORS_METHODS as readonly string[]).includes(method)) {
      throw BadRequest(
        `${where}.allowedMethods: ${JSON.stringify(method.slice(0, 16))} is not one of ${CORS_METHODS.join(', ')}`,
      );
    }
  }
  const rule: { -readonly [K in keyof CorsRule]: CorsRule[K] } = {
    allowedOrigins,
    allowedMethods: methods as CorsMethod[],
    allowedHeaders: stringList(fields['allowedHeaders'], `${where}.allowedHeaders`, {
      required: false,
      wildcard: true,
      header: true,
    }),
    exposeHeaders: stringList(fields['exposeHeaders'], `${where}.exposeHeaders`, {
      required: false,
      wildcard: false,
      header: true,
    }),
  };
  const id = fields['id'];
  if (id !== undefined) {
    if (
      typeof id !== 'string' ||
      id.length === 0 ||
      id.length > CORS_RULE_ID_CHARS_MAX ||
      !/^[\x20-\x7e]+$/.test(id)
    ) {
      throw BadRequest(
        `${where}.id must be 1 to ${CORS_RULE_ID_CHARS_MAX} printable ASCII characters`,
      );
    }
    rule.id = id;
  }
  const maxAge = fields['maxAgeSeconds'];
  if (maxAge !== undefined) {
    if (
      !Number.isSafeInteger(maxAge) ||
      (maxAge as number) < 0 ||
      (maxAge as number) > CORS_MAX_AGE_SECONDS_MAX
    ) {
      throw BadRequest(
        `${where}.maxAgeSeconds must be an integer from 0 to ${CORS_MAX_AGE_SECONDS_MAX}`,
      );
    }
    rule.maxAgeSeconds = maxAge as number;
  }
  return rule;
}

function stringList(
  value: unknown,
  where: string,
  options: { required: boolean; wildcard: boolean; header: boolean },
): string[] {
  if (value === undefined && !options.required) return [];
  if (
    !Array.isArray(value) ||
    (options.required && value.length === 0) ||
    value.length > CORS_VALUES_PER_LIST_MAX
  ) {
    throw BadRequest(
      `${where} must be an array of ${options.required ? 1 : 0} to ${CORS_VALUES_PER_LIST_MAX} strings`,
    );
  }
  const seen = new Set<string>();
  return value.map((item: unknown) => {
    if (
      typeof item !== 'string' ||
      item.length === 0 ||
      item.length > CORS_VALUE_CHARS_MAX ||
      !visiblePattern.test(item)
    ) {
      throw BadRequest(
        `${where}: every entry is 1 to ${CORS_VALUE_CHARS_MAX} visible ASCII characters`,
      );
    }
    const stars = item.split('*').length - 1;
    if (stars > (options.wildcard ? 1 : 0)) {
      throw BadRequest(
        `${where}: ${JSON.stringify(item.slice(0, 64))} ${options.wildcard ? 'has more than one *' : 'may not contain *'}`,
      );
    }
    if (options.header && !headerNamePattern.test(item))
      throw BadRequest(`${where}: ${JSON.stringify(item.slice(0, 64))} is not a header name`);
    const normal = options.header ? item.toLowerCase() : item;
    if (seen.has(normal))
      throw BadRequest(`${where}: ${JSON.stringify(item.slice(0, 64))} is listed twice`);
    seen.add(normal);
    return item;
  });
}

/** `pattern` with at most one `*` (any run of characters) against `value`. */
export function wildcardMatches(pattern: string, value: string): boolean {
  const star = pattern.indexOf('*');
  if (star < 0) return pattern === value;
  const head = pattern.slice(0, star);
  const tail = pattern.slice(star + 1);
  return (
    value.length >= head.length + tail.length && value.startsWith(head) && value.endsWith(tail)
  );
}

/** Splits an Access-Control-Request-Headers value into lower-case names. */
export function parseRequestHeaderList(text: string | undefined): string[] {
  if (text === undefined) return [];
  return text
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter((name) => name.length > 0);
}

/** The first rule that allows the origin, the method and every requested header. */
export function matchCorsRule(
  rules: readonly CorsRule[] | undefined,
  request: CorsRequest,
): CorsRule | undefined {
  return (rules ?? []).find(
    (rule) =>
      rule.allowedOrigins.some((pattern) => wildcardMatches(pattern, request.origin)) &&
      (rule.allowedMethods as readonly string[]).includes(request.method) &&
      request.headers.every((header) =>
        rule.allowedHeaders.some((pattern) =>
          wildcardMatches(pattern.toLowerCase(), header.toLowerCase()),
        ),
      ),
  );
}

/** The headers of a successful preflight answered under `rule`. */
export function preflightHeaders(rule: CorsRule, request: CorsRequest): Record<string, string> {
  const headers: Record<string, string> = {
    'Access-Control-Allow-Origin': request.origin,
    'Access-Control-Allow-Methods': rule.allowedMethods.join(', '),
    Vary: 'Origin, Access-Control-Request-Method, Access-Control-Request-Headers',
  };
  if (request.headers.length > 0)
    headers['Access-Control-Allow-Headers'] = request.headers.join(', ');
  if (rule.maxAgeSeconds !== undefined)
    headers['Access-Control-Max-Age'] = String(rule.maxAgeSeconds);
  if (rule.exposeHeaders.length > 0)
    headers['Access-Control-Expose-Headers'] = rule.exposeHeaders.join(', ');
  return headers;
}

/** The headers an actual cross-origin response carries under `rule`. */
export function corsResponseHeaders(rule: CorsRule, origin: string): Record<string, string> {
  const headers: Record<string, string> = { 'Access-Control-Allow-Origin': origin, Vary: 'Origin' };
  if (rule.exposeHeaders.length > 0)
    headers['Access-Control-Expose-Headers'] = rule.exposeHeaders.join(', ');
  return headers;
}
