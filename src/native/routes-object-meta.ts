// Data-plane routes beyond the byte path: bucket versioning, the versions listing, object tags,
// retention and legal hold, server-side copy and batch delete. Mutations go to the engine with
// their audit row.

import type { Exchange } from '../http/exchange.js';
import type { Route, RouteDoc, JsonSchema } from '../http/router.js';
import type { Handler } from '../http/server.js';
import type { IndexView } from '../service/services.js';
import { type BucketRecord, type ObjectVersionRecord } from '../engine/index/schema.js';
import { batchDelete, parseBatchEntries, BATCH_DELETE_KEYS_MAX } from '../service/batch-delete.js';
import { parsePageSize } from '../service/list.js';
import { VERSIONS_PAGE_MAX } from '../service/versions.js';
import { versionsPageOf } from '../service/cluster-read.js';
import type { EngineClient } from '../engine/protocol.js';
import { resolveForAttributes } from '../service/read.js';
import {
  checkRetainUntil,
  TAGS_MAX,
  TAG_KEY_CHARS_MAX,
  TAG_VALUE_CHARS_MAX,
} from '../service/attributes.js';
import type { Principal } from '../service/auth.js';
import { contextOf } from '../service/context.js';
import { copyObject } from '../service/copy.js';
import { putLegalHold, putRetention } from '../service/object-lock.js';
import { putObjectTags } from '../service/tagging.js';
import {
  keyQuery,
  writeConditionsOf,
  objectJson,
  writtenHeaders,
  type RouteKit,
} from './routes.js';
import { bearerDocs, objectSchema, writeHeaders } from './route-docs.js';
import {
  NO_CONTROL_CHARS_PATTERN,
  validateContentType,
  validateObjectKey,
  validateUserMetadata,
} from '../security/names.js';
import { parseDateTime } from '../security/expiry.js';
import { BadRequest, NotFound } from '../util/errors.js';

/** Longest text field of a copy body (keys are validated on their own). */
const COPY_TEXT_CHARS_MAX = 2048;

const str = { type: 'string' } as const;
const bool = { type: 'boolean' } as const;
const tagsSchemaOf = (key: JsonSchema, value: JsonSchema): JsonSchema => ({
  type: 'object',
  required: ['tags'],
  properties: {
    tags: {
      type: 'array',
      maxItems: TAGS_MAX,
      items: { type: 'object', required: ['key', 'value'], properties: { key, value } },
    },
  },
});
const tagsSchema = tagsSchemaOf(str, str);
/** What PUT takes: S3's limits, and no control characters (see parseTags). */
const tagsRequestSchema = tagsSchemaOf(
  {
    type: 'string',
    minLength: 1,
    maxLength: TAG_KEY_CHARS_MAX,
    pattern: NO_CONTROL_CHARS_PATTERN,
  },
  { type: 'string', maxLength: TAG_VALUE_CHARS_MAX, pattern: NO_CONTROL_CHARS_PATTERN },
);
const retentionSchema: JsonSchema = {
  type: 'object',
  required: ['mode', 'retainUntil'],
  properties: {
    mode: { type: 'string', enum: ['GOVERNANCE', 'COMPLIANCE'] },
    retainUntil: { type: 'string', format: 'date-time' },
  },
};
const legalHoldSchema: JsonSchema = {
  type: 'object',
  required: ['status'],
  properties: { status: { type: 'string', enum: ['ON', 'OFF'] } },
};
const versioningSchema: JsonSchema = {
  type: 'object',
  required: ['status'],
  properties: { status: { type: 'string', enum: ['Enabled', 'Suspended', 'Unversioned'] } },
};
/** A bucket can be versioned or suspended, never made unversioned again (as in S3). */
const versioningRequestSchema: JsonSchema = {
  type: 'object',
  required: ['status'],
  properties: { status: { type: 'string', enum: ['Enabled', 'Suspended'] } },
};
const versionQuery = { versionId: str };
const doc = bearerDocs(undefined);
const json = (schema: JsonSchema): NonNullable<RouteDoc['requestBody']> => ({
  contentType: 'application/json',
  schema,
});

export function objectMetaRoutes(kit: RouteKit): Route<Handler>[] {
  const { services, bearer, access, mutate, objects } = kit;
  const { store } = services;
  const versionIdOf = (exchange: Exchange): string | undefined =>
    exchange.queryParam('versionId') ?? undefined;

  /** Authenticates, authorizes, and resolves the target for a `{bucket}/{key...}` route. */
  const target = (
    exchange: Exchange,
    params: Readonly<Record<string, string>>,
    verb: 'read' | 'write' | 'delete',
  ): { principal: Principal; bucket: BucketRecord; key: string; args: Record<string, unknown> } => {
    const principal = bearer(exchange);
    const key = params['key'] ?? '';
    validateObjectKey(key);
    const bucket = access.bucket(principal, params['bucket'] ?? '', { verb, key });
    const args: Record<string, unknown> = {
      tenantId: principal.tenant.id,
      bucket: bucket.name,
      key,
    };
    const versionId = exchange.queryParam('versionId');
    if (versionId !== null) args['versionId'] = versionId;
    return { principal, bucket, key, args };
  };
  const readVersion = (
    bucket: BucketRecord,
    key: string,
    exchange: Exchange,
  ): ObjectVersionRecord => {
    return resolveForAttributes(store, bucket, key, exchange.queryParam('versionId'));
  };
  const jsonBody = async (exchange: Exchange): Promise<Record<string, unknown>> => {
    const body = await exchange.readJson();
    if (typeof body !== 'object' || body === null || Array.isArray(body))
      throw BadRequest('the body must be a JSON object');
    return body as Record<string, unknown>;
  };

  return [
    {
      method: 'GET',
      path: '/buckets/{bucket}/versioning',
      operationId: 'getBucketVersioning',
      doc: doc('Read the versioning state', {
        200: { description: 'state', schema: versioningSchema },
      }),
      handler: (exchange, params) => {
        const principal = bearer(exchange);
        exchange.sendJson(200, {
          status: access.bucket(principal, params['bucket'] ?? '', { verb: 'read' }).versioning,
        });
      },
    },
    {
      method: 'PUT',
      path: '/buckets/{bucket}/versioning',
      operationId: 'setBucketVersioning',
      doc: doc(
        'Set the versioning state (Enabled or Suspended)',
        { 200: { description: 'state', schema: versioningSchema } },
        { requestBody: json(versioningRequestSchema) },
      ),
      handler: async (exchange, params) => {
        const principal = bearer(exchange);
        const target = access.bucket(principal, params['bucket'] ?? '', { verb: 'write' });
        const body = await jsonBody(exchange);
        const bucket = await mutate(
          exchange,
          'setVersioning',
          { tenantId: principal.tenant.id, bucket: target.name, status: body['status'] },
          200,
        );
        exchange.sendJson(200, { status: bucket.versioning });
      },
    },
    {
      method: 'GET',
      path: '/buckets/{bucket}/versions',
      operationId: 'listObjectVersions',
      doc: doc(
        'List versions and delete markers',
        {
          200: {
            description: 'a page of versions',
            schema: {
              type: 'object',
              required: ['versions', 'isTruncated'],
              properties: {
                versions: {
                  type: 'array',
                  items: {
                    type: 'object',
                    required: ['key', 'versionId', 'isLatest', 'isDeleteMarker', 'lastModified'],
                    properties: {
                      key: str,
                      versionId: str,
                      isLatest: bool,
                      isDeleteMarker: bool,
                      size: { type: 'integer' },
                      etag: str,
                      lastModified: str,
                    },
                  },
                },
                isTruncated: bool,
                nextKeyMarker: str,
                nextVersionIdMarker: str,
              },
            },
          },
        },
        {
          query: {
            prefix: str,
            keyMarker: str,
            versionIdMarker: str,
            maxKeys: { type: 'integer', minimum: 1, maximum: VERSIONS_PAGE_MAX },
          },
        },
      ),
      handler: async (exchange, params) => {
        const principal = bearer(exchange);
        const prefix = keyQuery(exchange.query, 'prefix') ?? '';
        exchange.sendJson(
          200,
          await listVersions(
            { store, engine: services.engine },
            access.bucket(principal, params['bucket'] ?? '', { verb: 'read', listPrefix: prefix }),
            exchange.query,
          ),
        );
      },
    },
    {
      method: 'GET',
      path: '/buckets/{bucket}/object-tags/{key...}',
      operationId: 'getObjectTags',
      doc: doc(
        'Read the tag set',
        { 200: { description: 'tags', schema: tagsSchema } },
        { query: versionQuery },
      ),
      handler: (exchange, params) => {
        const { bucket, key } = target(exchange, params, 'read');
        exchange.sendJson(200, { tags: readVersion(bucket, key, exchange).tags ?? [] });
      },
    },
    {
      method: 'PUT',
      path: '/buckets/{bucket}/object-tags/{key...}',
      operationId: 'putObjectTags',
      doc: doc(
        'Replace the tag set',
        { 200: { description: 'tags', schema: tagsSchema } },
        { query: versionQuery, requestBody: json(tagsRequestSchema) },
      ),
      handler: async (exchange, params) => {
        const { principal, bucket, key } = target(exchange, params, 'write');
        const tags = (await jsonBody(exchange))['tags'];
        const address = { bucket, key, versionId: versionIdOf(exchange) };
        const version = await putObjectTags(objects, contextOf(exchange, principal), address, tags);
        exchange.sendJson(200, { tags: version.tags ?? [] });
      },
    },
    {
      method: 'DELETE',
      path: '/buckets/{bucket}/object-tags/{key...}',
      operationId: 'deleteObjectTags',
      doc: doc('Clear the tag set', { 204: { description: 'cleared' } }, { query: versionQuery }),
      handler: async (exchange, params) => {
        const { principal, bucket, key } = target(exchange, params, 'write');
        const address = { bucket, key, versionId: versionIdOf(exchange) };
        await putObjectTags(objects, contextOf(exchange, principal), address, [], 204);
        exchange.send(204, {});
      },
    },
    {
      method: 'GET',
      path: '/buckets/{bucket}/object-retention/{key...}',
      operationId: 'getObjectRetention',
      doc: doc(
        'Read retention',
        { 200: { description: 'retention', schema: retentionSchema } },
        { query: versionQuery },
      ),
      handler: (exchange, params) => {
        const { bucket, key } = target(exchange, params, 'read');
        requireObjectLock(bucket);
        const retention = readVersion(bucket, key, exchange).retention;
        if (!retention) throw NotFound(`${key} has no retention`);
        exchange.sendJson(200, {
          mode: retention.mode,
          retainUntil: new Date(retention.retainUntil).toISOString(),
        });
      },
    },
    {
      method: 'PUT',
      path: '/buckets/{bucket}/object-retention/{key...}',
      operationId: 'putObjectRetention',
      doc: doc(
        'Set or extend retention (never shorten)',
        { 200: { description: 'retention', schema: retentionSchema } },
        { query: versionQuery, requestBody: json(retentionSchema) },
      ),
      handler: async (exchange, params) => {
        const { principal, bucket, key } = target(exchange, params, 'write');
        const body = await jsonBody(exchange);
        const retainUntil = parseDateTime(body['retainUntil'], 'retainUntil');
        checkRetainUntil(retainUntil, Date.now());
        const mode = body['mode'];
        if (mode !== 'GOVERNANCE' && mode !== 'COMPLIANCE')
          throw BadRequest('mode must be GOVERNANCE or COMPLIANCE');
        // The native API never bypasses GOVERNANCE retention: it is only ever extended.
        const version = await putRetention(
          objects,
          contextOf(exchange, principal),
          { bucket, key, versionId: versionIdOf(exchange) },
          { mode, retainUntil },
          false,
        );
        exchange.sendJson(200, {
          mode: version.retention?.mode,
          retainUntil: new Date(version.retention?.retainUntil ?? 0).toISOString(),
        });
      },
    },
    {
      method: 'GET',
      path: '/buckets/{bucket}/object-legal-hold/{key...}',
      operationId: 'getObjectLegalHold',
      doc: doc(
        'Read legal hold',
        { 200: { description: 'legal hold', schema: legalHoldSchema } },
        { query: versionQuery },
      ),
      handler: (exchange, params) => {
        const { bucket, key } = target(exchange, params, 'read');
        requireObjectLock(bucket);
        exchange.sendJson(200, { status: readVersion(bucket, key, exchange).legalHold ?? 'OFF' });
      },
    },
    {
      method: 'PUT',
      path: '/buckets/{bucket}/object-legal-hold/{key...}',
      operationId: 'putObjectLegalHold',
      doc: doc(
        'Set legal hold ON or OFF',
        { 200: { description: 'legal hold', schema: legalHoldSchema } },
        { query: versionQuery, requestBody: json(legalHoldSchema) },
      ),
      handler: async (exchange, params) => {
        const { principal, bucket, key } = target(exchange, params, 'write');
        const status = (await jsonBody(exchange))['status'];
        if (status !== 'ON' && status !== 'OFF') throw BadRequest('status must be ON or OFF');
        const version = await putLegalHold(
          objects,
          contextOf(exchange, principal),
          { bucket, key, versionId: versionIdOf(exchange) },
          status,
        );
        exchange.sendJson(200, { status: version.legalHold ?? 'OFF' });
      },
    },
    {
      method: 'POST',
      path: '/buckets/{bucket}/object-copy/{key...}',
      operationId: 'copyObject',
      doc: doc(
        'Same-tenant server-side copy; shares the source chunks',
        { 200: { description: 'the new object', schema: objectSchema, headers: writeHeaders } },
        {
          requestBody: json(copySchema),
          headers: {
            'If-Match': 'copy only if the destination ETag matches (as requireMatchEtag)',
            'If-None-Match': 'copy only if the destination is absent (*) or not matching',
            'If-Unmodified-Since': 'copy only if the destination is not newer (HTTP-date)',
          },
        },
      ),
      handler: async (exchange, params) => {
        // No ?versionId here (refused as undeclared): the source version is in the body.
        const { principal, bucket, key } = target(exchange, params, 'write');
        const copy = parseCopyBody(await jsonBody(exchange));
        const sourceKey = copy['sourceKey'] as string;
        const sourceBucket = access.bucket(principal, copy['sourceBucket'] as string, {
          verb: 'read',
          key: sourceKey,
        });
        const text = (name: string): string | undefined => copy[name] as string | undefined;
        const time = (name: string): number | undefined => copy[name] as number | undefined;
        // The body's ifMatch and friends test the source; the headers, as on every other
        // write, test the destination.
        const version = await copyObject(
          kit.objects,
          contextOf(exchange, principal),
          {
            source: {
              bucket: sourceBucket,
              key: sourceKey,
              versionId: text('sourceVersionId'),
              ifMatch: text('ifMatch'),
              ifNoneMatch: text('ifNoneMatch'),
              ifModifiedSince: time('ifModifiedSince'),
              ifUnmodifiedSince: time('ifUnmodifiedSince'),
            },
            bucket,
            key,
            directive: copy['metadataDirective'] as 'COPY' | 'REPLACE',
            contentType: text('contentType'),
            metadata: copy['metadata'] as Record<string, string> | undefined,
            conditions: writeConditionsOf(exchange),
            requireAbsent: copy['requireAbsent'] as boolean | undefined,
            requireMatchEtag: text('requireMatchEtag'),
          },
          kit.services,
        );
        exchange.sendJson(200, objectJson(version, bucket), writtenHeaders(version, bucket));
      },
    },
    {
      method: 'POST',
      path: '/buckets/{bucket}/objects:batchDelete',
      operationId: 'batchDeleteObjects',
      doc: doc(
        'Delete up to 1000 keys with per-key results',
        { 200: { description: 'results', schema: batchResultSchema } },
        { requestBody: json(batchSchema) },
      ),
      handler: async (exchange, params) => {
        const principal = bearer(exchange);
        const bucket = access.existing(principal, params['bucket'] ?? '');
        const entries = parseBatchEntries((await jsonBody(exchange))['objects']);
        const deps = { engine: services.engine, access };
        const result = await batchDelete(deps, contextOf(exchange, principal), bucket, entries);
        exchange.sendJson(200, result);
      },
    },
  ];
}

const copySchema: JsonSchema = {
  type: 'object',
  required: ['sourceBucket', 'sourceKey'],
  properties: {
    sourceBucket: str,
    sourceKey: str,
    sourceVersionId: str,
    metadataDirective: {
      type: 'string',
      enum: ['COPY', 'REPLACE'],
      default: 'COPY',
      description:
        "COPY keeps the source's content type and metadata; REPLACE takes contentType and metadata from this body. The source's tags are copied either way (S3's default tagging directive). A copy onto itself needs REPLACE or a sourceVersionId.",
    },
    contentType: { type: 'string', description: 'only with metadataDirective REPLACE' },
    metadata: {
      type: 'object',
      additionalProperties: str,
      description: 'only with metadataDirective REPLACE',
    },
    ifMatch: { type: 'string', description: "copy only if the source's ETag matches" },
    ifNoneMatch: { type: 'string', description: "copy only if the source's ETag does not match" },
    ifModifiedSince: {
      type: 'string',
      format: 'date-time',
      description: 'ignored when ifNoneMatch is given (RFC 9110)',
    },
    ifUnmodifiedSince: {
      type: 'string',
      format: 'date-time',
      description: 'ignored when ifMatch is given (RFC 9110)',
    },
    requireAbsent: bool,
    requireMatchEtag: str,
  },
};
const batchSchema: JsonSchema = {
  type: 'object',
  required: ['objects'],
  properties: {
    objects: {
      type: 'array',
      minItems: 1,
      maxItems: BATCH_DELETE_KEYS_MAX,
      items: {
        type: 'object',
        required: ['key'],
        // An empty or malformed key is answered in `errors`, as any key that cannot be deleted.
        properties: { key: str, versionId: str },
      },
    },
  },
};
const batchResultSchema: JsonSchema = {
  type: 'object',
  required: ['deleted', 'errors'],
  properties: {
    deleted: {
      type: 'array',
      items: {
        type: 'object',
        required: ['key'],
        properties: { key: str, versionId: str, deleteMarker: bool },
      },
    },
    errors: {
      type: 'array',
      items: {
        type: 'object',
        required: ['key', 'code', 'message'],
        properties: { key: str, versionId: str, code: str, message: str },
      },
    },
  },
};

/** Retention and legal hold exist only in a bucket with object lock (400 elsewhere, as S3). */
function requireObjectLock(bucket: BucketRecord): void {
  if (!bucket.objectLock)
    throw BadRequest(`bucket ${bucket.name} has no object lock: it has no retention or legal hold`);
}

/** The fields of a copy body; an undeclared one was refused by `readJson` (strict-input.ts). */
function parseCopyBody(body: Record<string, unknown>): Record<string, unknown> {
  const copy: Record<string, unknown> = {};
  const text = (field: string, required = false): void => {
    const value = body[field];
    if (value === undefined) {
      if (required) throw BadRequest(`${field} is required`);
      return;
    }
    if (typeof value !== 'string' || value.length > COPY_TEXT_CHARS_MAX)
      throw BadRequest(`${field} must be a string of at most ${COPY_TEXT_CHARS_MAX} characters`);
    copy[field] = field === 'contentType' ? validateContentType(value) : value;
  };
  text('sourceBucket', true);
  text('sourceKey', true);
  validateObjectKey(copy['sourceKey']);
  for (const field of [
    'sourceVersionId',
    'contentType',
    'ifMatch',
    'ifNoneMatch',
    'requireMatchEtag',
  ])
    text(field);
  const directive = body['metadataDirective'] === undefined ? 'COPY' : body['metadataDirective'];
  if (directive !== 'COPY' && directive !== 'REPLACE')
    throw BadRequest('metadataDirective must be COPY or REPLACE');
  copy['metadataDirective'] = directive;
  // Given with COPY they would be ignored (S3 ignores them); refused, so that nobody believes
  // the copy took them.
  if (directive === 'COPY' && (body['metadata'] !== undefined || copy['contentType'] !== undefined))
    throw BadRequest(
      "metadata and contentType replace the source's only with metadataDirective REPLACE",
    );
  if (body['metadata'] !== undefined) {
    validateUserMetadata(body['metadata']);
    copy['metadata'] = body['metadata'];
  }
  for (const field of ['ifModifiedSince', 'ifUnmodifiedSince']) {
    if (body[field] === undefined) continue;
    copy[field] = parseDateTime(body[field], field);
  }
  if (body['requireAbsent'] !== undefined) {
    if (typeof body['requireAbsent'] !== 'boolean')
      throw BadRequest('requireAbsent must be a boolean');
    copy['requireAbsent'] = body['requireAbsent'];
  }
  return copy;
}

/**
 * A page of the service's versions listing as JSON; the page size and the markers come from the
 * query (`maxKeys`, `keyMarker`, `versionIdMarker`).
 */
export async function listVersions(
  services: { store: IndexView; engine: EngineClient },
  bucket: BucketRecord,
  query: URLSearchParams,
): Promise<Record<string, unknown>> {
  const maxKeys = parsePageSize(query.get('maxKeys'), 'maxKeys', VERSIONS_PAGE_MAX);
  const keyMarker = keyQuery(query, 'keyMarker') ?? undefined;
  const page = await versionsPageOf(services.store, services.engine, bucket, {
    prefix: query.get('prefix') ?? '',
    maxKeys,
    keyMarker,
    versionIdMarker: query.get('versionIdMarker') ?? undefined,
  });
  const result: Record<string, unknown> = {
    versions: page.entries.map((entry) => versionEntry(entry, entry.isLatest)),
    isTruncated: page.isTruncated,
  };
  if (page.nextKeyMarker !== undefined) {
    result['nextKeyMarker'] = page.nextKeyMarker;
    result['nextVersionIdMarker'] = page.nextVersionIdMarker;
  }
  return result;
}

function versionEntry(version: ObjectVersionRecord, isLatest: boolean): Record<string, unknown> {
  const entry: Record<string, unknown> = {
    key: version.key,
    versionId: version.versionId,
    isLatest,
    isDeleteMarker: version.deleteMarker === true,
    lastModified: new Date(version.lastModified).toISOString(),
  };
  if (!version.deleteMarker) {
    entry['size'] = version.size;
    entry['etag'] = version.etag;
  }
  return entry;
}
