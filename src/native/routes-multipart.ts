// Multipart upload routes (data-api.md §4 "Multipart"): create, upload part, list parts,
// complete, abort, list in-progress uploads.
//
// A part body runs through the same pipeline as an object PUT (receiveBody: content-defined
// chunking, dedup, encryption, group fsync, on the shared pool), so parts of one upload
// stream in parallel at full speed; SHA-256 is always computed and kept with the part, and
// every X-Service-Checksum-<alg> the client sent is verified before the part is committed.
// Complete assembles the object in the engine from the parts' chunk references.
//
// Route order matters: `POST …/multipart/{uploadId}/complete/{key...}` is declared before
// `POST …/multipart/{key...}`, which would match it too. A path whose `{uploadId}` segment is
// not an upload id (32 hex digits) is a create for the whole rest of the path, so only keys
// of the form `<32 hex digits>/complete/…` cannot be multipart-created; but when its body has
// `parts`, which no create body has, the client meant a complete and gets the 404 of an
// unknown upload.

import type { Exchange } from '../http/exchange.js';
import type { Route, JsonSchema } from '../http/router.js';
import type { Handler } from '../http/server.js';
import { refuseUndeclaredFields } from '../http/strict-input.js';
import type { BucketRecord, MultipartUploadRecord } from '../engine/index/schema.js';
import { contextOf } from '../service/context.js';
import { HeldBody } from '../service/body.js';
import { partsPageOf, uploadsPageOf } from '../service/cluster-read.js';
import {
  isUploadId,
  MultipartService,
  parsePartNumber,
  partNumberMarkerOf,
  requireUploadIn,
  uploadHereFirst,
  uploadsMarkersOf,
  MULTIPART_PARTS_MAX,
  MULTIPART_PART_BYTES_MAX,
  type CompletePart,
  type PartView,
  type UploadAddress,
} from '../service/multipart.js';
import { parsePageSize } from '../service/list.js';
import type { Principal } from '../service/auth.js';
import {
  keyQuery,
  objectJson,
  writtenHeaders,
  parseContentLength,
  parseChecksumHeaders,
  parseMetadata,
  writeConditionsOf,
  type RouteKit,
} from './routes.js';
import { ANY_CONTENT_TYPE, bearerDocs, objectSchema, writeHeaders } from './route-docs.js';
import { validateContentType, validateObjectKey, validateUserMetadata } from '../security/names.js';

/** The fields of a multipart create body. */
import { BadRequest, NotFound } from '../util/errors.js';

const LIST_PAGE_MAX = 1000;

const str = { type: 'string' } as const;
const int = { type: 'integer' } as const;
const bool = { type: 'boolean' } as const;
const time = { type: 'string', format: 'date-time' } as const;
const checksumsSchema: JsonSchema = {
  type: 'object',
  additionalProperties: str,
  description: 'persisted base64 digests by algorithm; CRC32C and SHA256 always',
};
const partSchema: JsonSchema = {
  type: 'object',
  required: ['partNumber', 'etag', 'size', 'checksums'],
  properties: {
    partNumber: int,
    etag: str,
    size: int,
    checksums: checksumsSchema,
    lastModified: time,
  },
};
const uploadSchema: JsonSchema = {
  type: 'object',
  required: ['bucket', 'key', 'uploadId', 'initiatedAt'],
  properties: { bucket: str, key: str, uploadId: str, initiatedAt: time },
};
const createSchema: JsonSchema = {
  type: 'object',
  properties: {
    contentType: {
      ...str,
      description:
        "the completed object's Content-Type; a create without a body takes its Content-Type header instead (application/json excepted), else application/octet-stream",
    },
    metadata: {
      type: 'object',
      additionalProperties: str,
      description: 'user metadata of the completed object; or X-Service-Meta-* headers, not both',
    },
  },
};
const completeSchema: JsonSchema = {
  type: 'object',
  required: ['parts'],
  properties: {
    parts: {
      type: 'array',
      minItems: 1,
      maxItems: MULTIPART_PARTS_MAX,
      items: {
        type: 'object',
        required: ['partNumber', 'etag'],
        description:
          "partNumber and etag; a listParts entry's other fields may come along (so its answer can be sent back), and what they say is checked against the uploaded part",
        properties: {
          partNumber: int,
          etag: str,
          size: { type: 'integer', minimum: 0, description: "if given, the part's size, else 400" },
          checksums: {
            ...checksumsSchema,
            description:
              "if given, each digest must be the uploaded part's of that algorithm (400 checksum_mismatch); an algorithm the part was uploaded without is 400",
          },
          lastModified: time,
        },
      },
    },
  },
};
const checksumHeaders = {
  'X-Service-Checksum-CRC32': 'base64 digest to verify',
  'X-Service-Checksum-CRC32C': 'base64 digest to verify',
  'X-Service-Checksum-CRC64NVME': 'base64 digest to verify',
  'X-Service-Checksum-SHA1': 'base64 digest to verify',
  'X-Service-Checksum-SHA256': 'base64 digest to verify',
};
const doc = bearerDocs('multipart');

export function multipartRoutes(kit: RouteKit): Route<Handler>[] {
  const { services, bearer, access } = kit;
  const { store } = services;

  /** Authenticates, authorizes `verb` on the key and resolves the bucket. */
  const target = (
    exchange: Exchange,
    params: Readonly<Record<string, string>>,
    verb: 'read' | 'write',
    key = params['key'] ?? '',
  ): { principal: Principal; bucket: BucketRecord; key: string } => {
    const principal = bearer(exchange);
    validateObjectKey(key);
    return {
      principal,
      bucket: access.bucket(principal, params['bucket'] ?? '', { verb, key }),
      key,
    };
  };
  const multipart = new MultipartService(services, kit.objects);
  const upload = (bucket: BucketRecord, key: string, uploadId: string): MultipartUploadRecord =>
    requireUploadIn(store, { bucket, key, uploadId });

  /**
   * The Content-Type and user metadata the completed object will have: from the JSON body's
   * `contentType` and `metadata`, or as a single PUT takes them, from `X-Service-Meta-*` headers
   * and, on a create without a body, the `Content-Type` header (as S3's CreateMultipartUpload).
   * A bodiless create's `Content-Type: application/json` is taken for a JSON client's habit, not
   * for the object's type. Metadata given both ways is refused: which was meant is unclear.
   */
  const createdObjectFields = (
    exchange: Exchange,
    body: Record<string, unknown> | undefined,
  ): { contentType: string; metadata: Record<string, string> } => {
    const fromHeaders = parseMetadata(exchange);
    // `null` was refused with the fields (strict-input.ts): only an absent field takes its default.
    const fromBody = body?.['metadata'];
    if (fromBody !== undefined && Object.keys(fromHeaders).length > 0)
      throw BadRequest('give user metadata as X-Service-Meta-* headers or in the body, not both');
    const metadata = (fromBody ?? fromHeaders) as Record<string, string>;
    validateUserMetadata(metadata);
    const header = exchange.header('content-type');
    const fromHeader =
      body === undefined && header !== undefined && !/^application\/json\s*(;|$)/i.test(header)
        ? header
        : undefined;
    let contentType = 'application/octet-stream';
    if (body?.['contentType'] !== undefined) contentType = validateContentType(body['contentType']);
    else if (fromHeader !== undefined)
      contentType = validateContentType(fromHeader, 'Content-Type');
    return { contentType, metadata };
  };

  const create = async (
    exchange: Exchange,
    params: Readonly<Record<string, string>>,
    key: string,
    read?: { raw: unknown },
  ): Promise<void> => {
    exchange.audit.action = 'createMultipartUpload';
    const { principal, bucket } = target(exchange, params, 'write', key);
    const raw = read ? read.raw : await exchange.readJson();
    if (raw !== undefined && (typeof raw !== 'object' || raw === null || Array.isArray(raw)))
      throw BadRequest('the body must be a JSON object');
    // Read through the complete route, the body was not checked against this one's schema.
    if (read) refuseUndeclaredFields(raw, createSchema);
    const body = raw as Record<string, unknown> | undefined;
    const { contentType, metadata } = createdObjectFields(exchange, body);
    const created = await multipart.create(
      contextOf(exchange, principal),
      { bucket, key, contentType, metadata },
      201,
    );
    exchange.sendJson(201, uploadJson(created), {
      Location: `/api/v1/buckets/${encodeURIComponent(bucket.name)}/multipart/${created.uploadId}/parts/${encodeKey(key)}`,
    });
  };

  return [
    {
      method: 'GET',
      path: '/buckets/{bucket}/multipart',
      operationId: 'listMultipartUploads',
      doc: doc(
        'List in-progress multipart uploads',
        {
          200: {
            description: 'a page of uploads',
            schema: {
              type: 'object',
              required: ['uploads', 'isTruncated'],
              properties: {
                uploads: { type: 'array', items: uploadSchema },
                isTruncated: bool,
                nextKeyMarker: str,
                nextUploadIdMarker: str,
              },
            },
          },
        },
        {
          query: {
            prefix: str,
            keyMarker: str,
            uploadIdMarker: str,
            maxUploads: { type: 'integer', minimum: 1, maximum: LIST_PAGE_MAX },
          },
        },
      ),
      handler: async (exchange, params) => {
        const principal = bearer(exchange);
        const prefix = keyQuery(exchange.query, 'prefix') ?? '';
        const bucket = access.bucket(principal, params['bucket'] ?? '', {
          verb: 'read',
          listPrefix: prefix,
        });
        exchange.sendJson(200, await listUploads(bucket, exchange.query));
      },
    },
    {
      method: 'POST',
      path: '/buckets/{bucket}/multipart/{uploadId}/complete/{key...}',
      operationId: 'completeMultipartUpload',
      doc: doc(
        'Complete an upload: the object is assembled from the listed parts without copying bytes. Parts are listed in ascending order, each once; every part but the last must be at least 5 MiB (MULTIPART_PART_BYTES_MIN), else 400',
        { 200: { description: 'the new object', schema: objectSchema, headers: writeHeaders } },
        {
          requestBody: { contentType: 'application/json', schema: completeSchema },
          headers: {
            'If-Match': 'complete only if the current ETag matches',
            'If-None-Match': 'complete only if absent (*)',
            'If-Unmodified-Since': 'complete only if the current object is not newer (HTTP-date)',
          },
        },
      ),
      handler: async (exchange, params) => {
        const uploadId = params['uploadId'] ?? '';
        if (!isUploadId(uploadId)) {
          // A create body never has `parts`: a body with it completes an upload that does not
          // exist, which is a 404 as for any other unknown upload id, not a new upload.
          bearer(exchange);
          // The body is a create's (checked there), not this route's.
          const raw = await exchange.readJsonUnchecked();
          if (typeof raw === 'object' && raw !== null && 'parts' in raw) {
            target(exchange, params, 'write');
            throw NotFound(`upload ${uploadId.slice(0, 64)} of ${params['key'] ?? ''} not found`);
          }
          await create(exchange, params, `${uploadId}/complete/${params['key'] ?? ''}`, { raw });
          return;
        }
        const { principal, bucket, key } = target(exchange, params, 'write');
        // The body is read while a cluster member that lacks the upload takes it from a replica;
        // an unknown upload is still a 404 before the body is looked at.
        const reading = exchange.readJson();
        reading.catch(() => undefined);
        await multipart.requireUpload({ bucket, key, uploadId });
        const body = (await reading) as Record<string, unknown> | undefined;
        const parts = body?.['parts'];
        if (!Array.isArray(parts))
          throw BadRequest('the body must be {parts: [{partNumber, etag}]}');
        // The entries' shapes are checked by the engine, with the list (completePartOf).
        const version = await multipart.complete(contextOf(exchange, principal), {
          bucket,
          key,
          uploadId,
          parts: parts as CompletePart[],
          conditions: writeConditionsOf(exchange),
        });
        exchange.sendJson(200, objectJson(version, bucket), writtenHeaders(version, bucket));
      },
    },
    {
      method: 'POST',
      path: '/buckets/{bucket}/multipart/{key...}',
      operationId: 'createMultipartUpload',
      doc: doc(
        'Create a multipart upload',
        { 201: { description: 'the upload', schema: uploadSchema } },
        {
          headers: {
            'X-Service-Meta-*': 'user metadata of the completed object (or `metadata` in the body)',
          },
          requestBody: { contentType: 'application/json', schema: createSchema, required: false },
        },
      ),
      handler: (exchange, params) => create(exchange, params, params['key'] ?? ''),
    },
    {
      method: 'PUT',
      path: '/buckets/{bucket}/multipart/{uploadId}/parts/{partNumber}/{key...}',
      operationId: 'uploadPart',
      doc: doc(
        'Upload a part (part number 1 to 10000); supplied checksums are verified before the part is stored. Every part but the last of the completed object must be at least 5 MiB (checked at complete)',
        {
          200: {
            description: 'the part',
            schema: partSchema,
            headers: { ETag: 'the entity tag of the part' },
          },
        },
        {
          headers: checksumHeaders,
          pathParams: { partNumber: { type: 'integer', minimum: 1, maximum: 10_000 } },
          requestBody: {
            contentType: ANY_CONTENT_TYPE,
            schema: { type: 'string', format: 'binary' },
          },
        },
      ),
      handler: async (exchange, params) => {
        const { principal, bucket, key } = target(exchange, params, 'write');
        const uploadId = params['uploadId'] ?? '';
        const partNumber = parsePartNumber(params['partNumber'] ?? '');
        // A cluster member that lacks the upload takes it from a replica first, the body held.
        const fetching = uploadHereFirst(services, { bucket, key, uploadId });
        const source = fetching === undefined ? exchange : new HeldBody(exchange);
        if (fetching !== undefined) await fetching;
        upload(bucket, key, uploadId);
        const contentLength = parseContentLength(exchange, MULTIPART_PART_BYTES_MAX);
        const part = await multipart.uploadPart(
          contextOf(exchange, principal),
          {
            bucket,
            key,
            uploadId,
            partNumber,
            contentLength,
            expected: parseChecksumHeaders(exchange),
            digests: [],
          },
          source,
        );
        exchange.sendJson(200, partJson(part), { ETag: part.etag });
      },
    },
    {
      method: 'GET',
      path: '/buckets/{bucket}/multipart/{uploadId}/parts/{key...}',
      operationId: 'listParts',
      doc: doc(
        'List the parts of an upload with their persisted checksums',
        {
          200: {
            description: 'a page of parts',
            schema: {
              type: 'object',
              required: ['parts', 'isTruncated'],
              properties: {
                ...(uploadSchema['properties'] ?? {}),
                parts: { type: 'array', items: partSchema },
                isTruncated: bool,
                nextPartNumberMarker: int,
              },
            },
          },
        },
        {
          query: {
            partNumberMarker: int,
            maxParts: { type: 'integer', minimum: 1, maximum: LIST_PAGE_MAX },
          },
        },
      ),
      handler: async (exchange, params) => {
        const { bucket, key } = target(exchange, params, 'read');
        const uploadId = params['uploadId'] ?? '';
        exchange.sendJson(200, await listParts({ bucket, key, uploadId }, exchange.query));
      },
    },
    {
      method: 'DELETE',
      path: '/buckets/{bucket}/multipart/{uploadId}/{key...}',
      operationId: 'abortMultipartUpload',
      doc: doc('Abort an upload; its parts are released', { 204: { description: 'aborted' } }),
      handler: async (exchange, params) => {
        const { principal, bucket, key } = target(exchange, params, 'write');
        const uploadId = params['uploadId'] ?? '';
        await multipart.abort(contextOf(exchange, principal), { bucket, key, uploadId });
        exchange.send(204, {});
      },
    },
  ];

  async function listUploads(
    bucket: BucketRecord,
    query: URLSearchParams,
  ): Promise<Record<string, unknown>> {
    const prefix = query.get('prefix') ?? '';
    const max = parsePageSize(query.get('maxUploads'), 'maxUploads', LIST_PAGE_MAX);
    const keyMarker = keyQuery(query, 'keyMarker');
    const markers = uploadsMarkersOf(keyMarker, query.get('uploadIdMarker'));
    const page = await uploadsPageOf(store, services.engine, bucket, { prefix, ...markers, max });
    const uploads = page.uploads.map(uploadJson);
    const result: Record<string, unknown> = { uploads, isTruncated: page.isTruncated };
    if (page.nextKeyMarker !== undefined) {
      result['nextKeyMarker'] = page.nextKeyMarker;
      result['nextUploadIdMarker'] = page.nextUploadIdMarker;
    }
    return result;
  }

  async function listParts(
    address: UploadAddress,
    query: URLSearchParams,
  ): Promise<Record<string, unknown>> {
    const max = parsePageSize(query.get('maxParts'), 'maxParts', LIST_PAGE_MAX);
    const marker = partNumberMarkerOf(query.get('partNumberMarker'));
    const page = await partsPageOf(store, services.engine, address, { marker, max });
    const found = page.upload;
    const parts = page.parts.map(partJson);
    const result: Record<string, unknown> = {
      ...uploadJson(found),
      parts,
      isTruncated: page.isTruncated,
    };
    if (page.nextPartNumberMarker !== undefined)
      result['nextPartNumberMarker'] = page.nextPartNumberMarker;
    return result;
  }
}

function uploadJson(upload: MultipartUploadRecord): Record<string, unknown> {
  return {
    bucket: upload.bucket,
    key: upload.key,
    uploadId: upload.uploadId,
    initiatedAt: new Date(upload.initiatedAt).toISOString(),
  };
}

function partJson(part: PartView): Record<string, unknown> {
  return {
    partNumber: part.partNumber,
    etag: part.etag,
    size: part.size,
    checksums: part.checksums,
    lastModified: new Date(part.lastModified).toISOString(),
  };
}

function encodeKey(key: string): string {
  return key.split('/').map(encodeURIComponent).join('/');
}
