// CORS on the S3 surface: Put/Get/DeleteBucketCors over the rules the native API stores (the
// same engine commands and the one validator, src/security/cors.ts), the browser's preflight
// `OPTIONS` on bucket and object paths, and the Access-Control-* headers of actual responses.
//
// - Preflight: `Origin` and `Access-Control-Request-Method` are required (400 otherwise); a
//   bucket without rules, or no rule matching the origin, method and requested headers, is 403
//   `CORSForbidden`. A preflight carries no credentials and is not authenticated (a presigned
//   URL's signature covers the method it was made for, not OPTIONS).
// - Actual responses (errors included) carry Access-Control-Allow-Origin and -Methods when the
//   request has an Origin and a rule matches it and the method (the request's, or the
//   Access-Control-Request-Method it names). A rule whose origin is `*` answers `*`.
// - CORS never grants access: the request is authorized as any other.
//
// Persists: nothing itself; BucketRecord.cors through the engine (ops/cors.ts).

import type { Exchange } from '../http/exchange.js';
import { mutate, type S3Api, type S3Request } from './api.js';
import { bucketFor, readBody } from './buckets.js';
import { s3Error } from './errors.js';
import { parseXml, xmlList, xmlText, XmlWriter, type XmlValue } from './xml.js';
import {
  matchCorsRule,
  parseRequestHeaderList,
  preflightHeaders,
  type CorsRule,
} from '../security/cors.js';
import { bucketByName } from '../service/bucket-access.js';
import { isLightwellError } from '../util/errors.js';

type IndexStore = Parameters<typeof bucketByName>[0];

const CORS_XML_BYTES_MAX = 64 * 1024;

export function registerCors(api: S3Api): void {
  api.register('GetBucketCors', getBucketCors);
  api.register('PutBucketCors', putBucketCors);
  api.register('DeleteBucketCors', deleteBucketCors);
  api.register('PreflightCors', preflight);
}

function getBucketCors(request: S3Request): void {
  request.requirePrincipal();
  const bucket = bucketFor(request, { verb: 'read' });
  const rules = bucket.cors ?? [];
  if (rules.length === 0)
    throw s3Error('NoSuchCORSConfiguration', undefined, { bucketName: bucket.name });
  const xml = new XmlWriter().start('CORSConfiguration');
  for (const rule of rules) {
    xml.start('CORSRule').leaf('ID', rule.id);
    for (const header of rule.allowedHeaders) xml.leaf('AllowedHeader', header);
    for (const method of rule.allowedMethods) xml.leaf('AllowedMethod', method);
    for (const origin of rule.allowedOrigins) xml.leaf('AllowedOrigin', origin);
    for (const header of rule.exposeHeaders) xml.leaf('ExposeHeader', header);
    xml.leaf('MaxAgeSeconds', rule.maxAgeSeconds).end('CORSRule');
  }
  request.sendXml(200, xml.end('CORSConfiguration'));
}

/** The rules of a CORSConfiguration document, in the native API's JSON form. */
function rulesOf(bytes: Buffer): unknown {
  const doc = parseXml(bytes, CORS_XML_BYTES_MAX);
  const config = doc['CORSConfiguration'];
  if (config === undefined || typeof config === 'string' || Array.isArray(config))
    throw s3Error('MalformedXML', 'the body must be a CORSConfiguration');
  const texts = (rule: XmlValue, name: string): string[] =>
    xmlList(rule, name).map((value) => {
      if (typeof value !== 'string') throw s3Error('MalformedXML', `<${name}> must hold text`);
      return value.trim();
    });
  return {
    rules: xmlList(config, 'CORSRule').map((rule) => {
      const id = xmlText(rule, 'ID');
      const maxAge = xmlText(rule, 'MaxAgeSeconds');
      if (maxAge !== undefined && !/^\d{1,10}$/.test(maxAge.trim()))
        throw s3Error('MalformedXML', 'MaxAgeSeconds must be a whole number');
      return {
        ...(id === undefined ? {} : { id }),
        allowedOrigins: texts(rule, 'AllowedOrigin'),
        allowedMethods: texts(rule, 'AllowedMethod'),
        allowedHeaders: texts(rule, 'AllowedHeader'),
        exposeHeaders: texts(rule, 'ExposeHeader'),
        ...(maxAge === undefined ? {} : { maxAgeSeconds: Number(maxAge.trim()) }),
      };
    }),
  };
}

async function putBucketCors(request: S3Request): Promise<void> {
  request.requirePrincipal();
  const body = readBody(request, CORS_XML_BYTES_MAX);
  const bucket = bucketFor(request, { verb: 'admin' });
  const cors = rulesOf(await body);
  try {
    await mutate(
      request,
      'putBucketCors',
      { tenantId: bucket.tenantId, bucket: bucket.name, cors },
      200,
    );
  } catch (error) {
    if (isLightwellError(error) && error.code === 'bad_request' && !error.details['s3Code'])
      throw s3Error('MalformedXML', error.message);
    throw error;
  }
  request.send(200, {});
}

async function deleteBucketCors(request: S3Request): Promise<void> {
  request.requirePrincipal();
  const bucket = bucketFor(request, { verb: 'admin' });
  await mutate(
    request,
    'deleteBucketCors',
    { tenantId: bucket.tenantId, bucket: bucket.name },
    204,
  );
  request.send(204, {});
}

/** The rules of bucket `name` (validated when stored: their methods are CORS methods). */
function corsRulesOf(store: IndexStore, name: string): readonly CorsRule[] | undefined {
  return bucketByName(store, name).bucket.cors as readonly CorsRule[] | undefined;
}

/** The answer's Access-Control-Allow-Origin for `rule`: `*` for a rule open to any origin. */
function allowOrigin(rule: CorsRule, origin: string): string {
  return rule.allowedOrigins.includes('*') ? '*' : origin;
}

function preflight(request: S3Request): void {
  const { exchange } = request;
  const origin = exchange.header('origin');
  const method = exchange.header('access-control-request-method');
  if (origin === undefined)
    throw s3Error('InvalidRequest', 'Insufficient information. Origin request header needed.');
  if (method === undefined)
    throw s3Error('InvalidRequest', 'Access-Control-Request-Method header needed');
  let rules: readonly CorsRule[] | undefined;
  try {
    rules = corsRulesOf(request.services.store, request.address.bucket ?? '');
  } catch {
    rules = undefined;
  }
  const ask = {
    origin,
    method,
    headers: parseRequestHeaderList(exchange.header('access-control-request-headers')),
  };
  const rule = matchCorsRule(rules, ask);
  if (!rule) throw s3Error('CORSForbidden');
  const headers = preflightHeaders(rule, ask);
  headers['Access-Control-Allow-Origin'] = allowOrigin(rule, origin);
  request.send(200, headers);
}

/**
 * The Access-Control-* headers of an actual (non-preflight) response to `exchange` in bucket
 * `name`; empty without an Origin or a matching rule.
 */
export function actualCorsHeaders(
  exchange: Exchange,
  store: IndexStore,
  name: string | undefined,
): Record<string, string> {
  const origin = exchange.header('origin');
  if (origin === undefined || name === undefined) return {};
  let rules: readonly CorsRule[] | undefined;
  try {
    rules = corsRulesOf(store, name);
  } catch {
    return {};
  }
  if (rules === undefined || rules.length === 0) return {};
  const method = exchange.header('access-control-request-method') ?? exchange.method;
  const rule = matchCorsRule(rules, { origin, method, headers: [] });
  if (!rule) return {};
  const headers: Record<string, string> = {
    'Access-Control-Allow-Origin': allowOrigin(rule, origin),
    'Access-Control-Allow-Methods': rule.allowedMethods.join(', '),
    Vary: 'Origin',
  };
  if (rule.exposeHeaders.length > 0)
    headers['Access-Control-Expose-Headers'] = rule.exposeHeaders.join(', ');
  if (rule.maxAgeSeconds !== undefined)
    headers['Access-Control-Max-Age'] = String(rule.maxAgeSeconds);
  return headers;
}
