// The native data-plane API (/api/v1): the route table that serves requests and generates the
// OpenAPI document. Handlers parse and check everything a client controls before a body byte
// is read, then hand the body to the upload pipeline and the manifest to the engine.

import { BASIC_CHALLENGE, type Exchange } from '../http/exchange.js';
import type { Route } from '../http/router.js';
import type { Handler } from '../http/server.js';
import { JsonWriter, writeVersionJson } from './list-json.js';
import { ListTokens } from '../service/list-token.js';
import { PURPOSE_LIST_TOKEN } from '../security/keys.js';
import { freshenForList, freshenForRead } from '../service/cluster-read.js';
import { type BucketRecord, type ObjectVersionRecord } from '../engine/index/schema.js';
import type { DataServices, IndexView } from '../service/services.js';
import type { CommandArgs, CommandResult, TransactionalName } from '../engine/commands.js';
import { idempotencyOf, type IdempotencyClaim } from '../service/idempotency.js';
import { sendObject } from '../service/download.js';
import type { Principal } from '../service/auth.js';
import { Access } from '../service/access.js';
import { contextOf } from '../service/context.js';
import { ObjectService, type WriteConditions } from '../service/objects.js';
import { decodeListed, listObjectsPage, parsePageSize, LIST_KEYS_MAX } from '../service/list.js';
import {
  checkReadConditions,
  rangeToServe,
  resolveForRead,
  type ReadConditions,
} from '../service/read.js';
import {
  parseChecksumAlg,
  parseChecksumHeader,
  CHECKSUM_HEADER_PREFIX,
  type ChecksumAlg,
} from '../engine/checksums.js';
import {
  validateBucketName,
  validateContentType,
  validateObjectKey,
  validateUserMetadata,
} from '../security/names.js';
import { ACCESS_KEY_ID_PATTERN } from '../security/access-keys.js';
import {
  BadRequest,
  PayloadTooLarge,
  RateLimited,
  TlsRequired,
  LengthRequired,
  Unauthorized,
} from '../util/errors.js';
import * as docs from './route-docs.js';
import { objectMetaRoutes } from './routes-object-meta.js';
import { multipartRoutes } from './routes-multipart.js';
import { signedUrlRoutes } from './routes-signed.js';
import { corsRoutes } from './routes-cors.js';
import { notificationRoutes } from './routes-notifications.js';

/** What the native routes run on: the data-plane service's bag (service/services.ts). */
export type GatewayServices = DataServices;

const META_PREFIX = 'x-service-meta-';

/** What every data-plane handler uses: authentication, bucket look-up, audited mutations. */
export interface RouteKit {
  readonly services: GatewayServices;
  readonly bearer: (exchange: Exchange) => Principal;
  /** The one authorization resolver: scope and bucket policy (service/access.ts). */
  readonly access: Access;
  readonly objects: ObjectService;
  readonly mutate: <K extends TransactionalName>(
    exchange: Exchange,
    op: K,
    args: CommandArgs<K>,
    status: number,
  ) => Promise<CommandResult<K>>;
}

export function dataRoutes(services: GatewayServices): Route<Handler>[] {
  const kit = routeKit(services);
  return [
    ...coreRoutes(kit),
    ...objectMetaRoutes(kit),
    ...multipartRoutes(kit),
    ...signedUrlRoutes(kit),
    ...corsRoutes(kit),
    ...notificationRoutes(kit),
  ];
}

export function routeKit(services: GatewayServices): RouteKit {
  const { store, auth } = services;
  const bearer = (exchange: Exchange): Principal => {
    // Read-your-writes: a snapshot renewed earlier in this event-loop turn may predate a commit
    // that was acknowledged (by this or another gateway) before this request arrived.
    store.refresh();
    const principal = auth.authenticate(exchange.header('authorization'), exchange.audit);
    exchange.refuseUnclearQuery();
    return principal;
  };
  const objects = new ObjectService(services);
  /** Sends a mutation with its audit row (service/objects.ts `commit`). */
  const mutate = <K extends TransactionalName>(
    exchange: Exchange,
    op: K,
    args: CommandArgs<K>,
    status: number,
  ): Promise<CommandResult<K>> => objects.commit(exchange, op, args, status);
  return { services, bearer, access: new Access(store), objects, mutate };
}

function coreRoutes(kit: RouteKit): Route<Handler>[] {
  const { services, bearer, access, mutate } = kit;
  const { store, auth, settings } = services;
  const objectBytesMax = settings.bytes('limits.object_bytes_max');
  const listTokens = new ListTokens(auth.purposeKey(PURPOSE_LIST_TOKEN));

  return [
    {
      method: 'GET',
      path: '/healthz',
      operationId: 'healthz',
      doc: docs.healthz,
      handler: (exchange) => exchange.sendJson(200, { status: 'ok' }),
    },
    {
      method: 'POST',
      path: '/auth/token',
      operationId: 'createToken',
      doc: docs.createToken,
      handler: async (exchange) => {
        if (
          !services.tls &&
          !isLoopback(exchange.remoteAddress) &&
          exchange.remoteAddress !== settings.string('security.trusted_proxy')
        ) {
          throw TlsRequired('token minting requires TLS');
        }
        const basic = parseBasic(exchange.header('authorization'));
        const body = (await exchange.readJson()) as Record<string, unknown> | undefined;
        // One way or the other: with both, which key was meant is unclear.
        if (basic && body !== undefined)
          throw BadRequest('send the credentials as HTTP Basic or as a JSON body, not both');
        // No credentials at all is a 401 that asks for them, as for a missing bearer token.
        if (!basic && body === undefined)
          throw Unauthorized(
            'credentials are required: accessKeyId and secretKey as HTTP Basic or a JSON body',
            { challenge: BASIC_CHALLENGE },
          );
        const accessKeyId = basic?.accessKeyId ?? body?.['accessKeyId'];
        const secretKey = basic?.secretKey ?? body?.['secretKey'];
        if (
          typeof accessKeyId !== 'string' ||
          typeof secretKey !== 'string' ||
          accessKeyId.length > 128 ||
          secretKey.length > 256
        ) {
          throw BadRequest(
            'send accessKeyId and secretKey as HTTP Basic credentials or a JSON body',
          );
        }
        // Audited under the key and its tenant before any check (a look-up, no secret work), so
        // that a tenant's audit shows the refused and rate-limited requests for its keys too.
        // Only a well-formed id is written as the actor: anything else the caller typed (a
        // secret pasted into the wrong field, control characters) stays out of the audit log.
        if (ACCESS_KEY_ID_PATTERN.test(accessKeyId)) {
          exchange.audit.actor = accessKeyId;
          const tenantId = auth.tenantOfKey(accessKeyId);
          if (tenantId !== undefined) exchange.audit.tenantId = tenantId;
        }
        // The engine keeps the limit, so that it holds per key across all the gateways. It is
        // kept per key and peer address: someone who knows a key id and sends wrong secrets
        // from elsewhere spends their own bucket, never the owner's (behind a trusted proxy
        // every peer is the proxy, and the limit is per key as before). An id that cannot
        // exist fails the secret check below without costing the engine a round trip or the
        // limiter an entry.
        const limited = ACCESS_KEY_ID_PATTERN.test(accessKeyId)
          ? await services.engine.call('takeMintToken', {
              accessKeyId: `${accessKeyId}@${exchange.remoteAddress}`,
            })
          : ({ ok: true } as const);
        if (!limited.ok)
          throw RateLimited('too many token requests for this access key', {
            retryAfterSeconds: limited.retryAfterSeconds,
          });
        const { key } = auth.verifySecret(accessKeyId, secretKey);
        exchange.sendJson(200, auth.mint(key, settings.duration('security.native_api_token_ttl')));
      },
    },
    {
      method: 'GET',
      path: '/buckets',
      operationId: 'listBuckets',
      doc: docs.listBuckets,
      handler: (exchange) => {
        const principal = bearer(exchange);
        // A key scoped to some buckets lists those it may read in; one that reads nowhere
        // is refused.
        const buckets = [...access.readableBuckets(principal)].map(bucketJson);
        exchange.sendJson(200, { buckets });
      },
    },
    {
      method: 'POST',
      path: '/buckets',
      operationId: 'createBucket',
      doc: docs.createBucket,
      handler: async (exchange) => {
        const principal = bearer(exchange);
        const body = (await exchange.readJson()) as Record<string, unknown> | undefined;
        const name = body?.['name'];
        validateBucketName(name);
        access.tenant(principal, 'write', name);
        const versioning = body?.['versioning'];
        if (versioning !== undefined && versioning !== 'Enabled')
          throw BadRequest('versioning must be "Enabled" when given');
        const objectLock = body?.['objectLock'];
        if (objectLock !== undefined && typeof objectLock !== 'boolean')
          throw BadRequest('objectLock must be a boolean');
        const args: CommandArgs<'createBucket'> = { tenantId: principal.tenant.id, name };
        if (versioning !== undefined) args.versioning = versioning;
        if (objectLock !== undefined) args.objectLock = objectLock;
        const bucket = await mutate(exchange, 'createBucket', args, 201);
        exchange.sendJson(201, bucketJson(bucket), {
          Location: `/api/v1/buckets/${encodeURIComponent(name)}`,
        });
      },
    },
    {
      method: 'GET',
      path: '/buckets/{bucket}',
      operationId: 'getBucket',
      doc: docs.getBucket,
      handler: (exchange, params) => {
        const principal = bearer(exchange);
        exchange.sendJson(
          200,
          bucketJson(access.bucket(principal, params['bucket'] ?? '', { verb: 'read' })),
        );
      },
    },
    {
      method: 'DELETE',
      path: '/buckets/{bucket}',
      operationId: 'deleteBucket',
      doc: docs.deleteBucket,
      handler: async (exchange, params) => {
        const principal = bearer(exchange);
        const bucket = access.bucket(principal, params['bucket'] ?? '', { verb: 'delete' });
        await mutate(
          exchange,
          'deleteBucket',
          { tenantId: principal.tenant.id, name: bucket.name },
          204,
        );
        exchange.send(204, {});
      },
    },
    {
      method: 'GET',
      path: '/buckets/{bucket}/objects',
      operationId: 'listObjects',
      doc: docs.listObjects,
      handler: async (exchange, params) => {
        const principal = bearer(exchange);
        const prefix = keyQuery(exchange.query, 'prefix') ?? '';
        const bucket = access.bucket(principal, params['bucket'] ?? '', {
          verb: 'read',
          listPrefix: prefix,
        });
        const range = listRangeOf(bucket, exchange.query, listTokens);
        await freshenForList(store, services.engine, bucket, range);
        exchange.send(
          200,
          { 'Content-Type': 'application/json' },
          listObjects(store, bucket, exchange.query, listTokens),
        );
      },
    },
    {
      method: 'PUT',
      path: '/buckets/{bucket}/objects/{key...}',
      operationId: 'putObject',
      doc: docs.putObject,
      handler: async (exchange, params) => {
        const principal = bearer(exchange);
        const bucketName = params['bucket'] ?? '';
        const key = params['key'] ?? '';
        validateObjectKey(key);
        const bucket = access.bucket(principal, bucketName, { verb: 'write', key });
        const contentLength = parseContentLength(exchange, objectBytesMax);
        const expected = parseChecksumHeaders(exchange);
        const metadata = parseMetadata(exchange);
        const contentType = validateContentType(
          exchange.header('content-type') ?? 'application/octet-stream',
          'Content-Type',
        );
        const idempotency = idempotencyOf(exchange, {
          objectKey: key,
          expected,
          contentLength,
          metadata,
          contentType,
        });
        const version = await storeObject(kit, exchange, {
          principal,
          bucket,
          key,
          contentLength,
          expected,
          metadata,
          contentType,
          idempotency,
        });
        // Read again: the versioning state may have changed while the body came in.
        const now = access.current(principal, bucketName);
        exchange.sendJson(200, objectJson(version, now), writtenHeaders(version, now));
      },
    },
    {
      method: 'GET',
      path: '/buckets/{bucket}/objects/{key...}',
      operationId: 'getObject',
      doc: docs.getObject,
      handler: (exchange, params) => readObject(exchange, params),
    },
    {
      method: 'HEAD',
      path: '/buckets/{bucket}/objects/{key...}',
      operationId: 'headObject',
      doc: docs.headObject,
      handler: (exchange, params) => readObject(exchange, params),
    },
    {
      method: 'DELETE',
      path: '/buckets/{bucket}/objects/{key...}',
      operationId: 'deleteObject',
      doc: docs.deleteObject,
      handler: async (exchange, params) => {
        const principal = bearer(exchange);
        const key = params['key'] ?? '';
        validateObjectKey(key);
        const bucket = access.bucket(principal, params['bucket'] ?? '', { verb: 'delete', key });
        const result = await kit.objects.deleteObject(
          contextOf(exchange, principal),
          {
            bucket,
            key,
            versionId: exchange.queryParam('versionId'),
            conditions: writeConditionsOf(exchange),
          },
          204,
        );
        const headers: Record<string, string> = {};
        if (result.versionId !== undefined) headers['X-Service-Version-Id'] = result.versionId;
        if (result.deleteMarker) headers['X-Service-Delete-Marker'] = 'true';
        exchange.send(204, headers);
      },
    },
  ];

  /** GET and HEAD; answers as sendObject does (undefined when the response is complete). */
  function readObject(
    exchange: Exchange,
    params: Readonly<Record<string, string>>,
  ): Promise<void> | undefined {
    const principal = bearer(exchange);
    const key = params['key'] ?? '';
    validateObjectKey(key);
    const bucket = access.bucket(principal, params['bucket'] ?? '', { verb: 'read', key });
    const versionId = exchange.queryParam('versionId');
    const conditions = readConditionsOf(exchange);
    const fresh = freshenForRead(store, services.engine, bucket, key, versionId);
    if (fresh !== undefined)
      return fresh.then(() => serveRead(exchange, principal, bucket, key, versionId, conditions));
    return serveRead(exchange, principal, bucket, key, versionId, conditions);
  }

  function serveRead(
    exchange: Exchange,
    principal: Principal,
    bucket: BucketRecord,
    key: string,
    versionId: string | null,
    conditions: ReturnType<typeof readConditionsOf>,
  ): Promise<void> | undefined {
    const version = resolveForRead(store, bucket, key, versionId);
    const headers = objectHeaders(version, bucket);
    const notModified = checkReadConditions(conditions, version);
    if (notModified) {
      exchange.send(notModified, headers);
      return undefined;
    }
    return sendObject(services.download, exchange, {
      keys: auth.keysOf(principal.tenant),
      version,
      range: rangeToServe(conditions, version),
      headers,
    });
  }
}

/** `address` is canonical (see canonicalAddress): IPv4-mapped peers are dotted IPv4. */
function isLoopback(address: string): boolean {
  return address === '::1' || address.startsWith('127.');
}

function parseBasic(
  header: string | undefined,
): { accessKeyId: string; secretKey: string } | undefined {
  const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header ?? '');
  if (!match) return undefined;
  const decoded = Buffer.from(match[1] ?? '', 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) throw BadRequest('malformed Basic credentials');
  return { accessKeyId: decoded.slice(0, colon), secretKey: decoded.slice(colon + 1) };
}

export interface StoreObjectInput {
  readonly principal: Principal;
  readonly bucket: BucketRecord;
  readonly key: string;
  readonly contentLength: number;
  readonly expected: Map<ChecksumAlg, Buffer>;
  readonly metadata: Record<string, string>;
  readonly contentType: string;
  readonly idempotency: IdempotencyClaim | undefined;
}

/**
 * The object write of the bearer PUT and the signed-URL PUT: the service's `putObject` with the
 * request's write preconditions, reading the exchange's body. Attaches to the body at once, so
 * it must be called before the handler's first await.
 */
export function storeObject(
  kit: RouteKit,
  exchange: Exchange,
  input: StoreObjectInput,
): Promise<ObjectVersionRecord> {
  const { principal, ...request } = input;
  return kit.objects.putObject(
    contextOf(exchange, principal),
    { ...request, conditions: writeConditionsOf(exchange) },
    exchange,
  );
}

/**
 * The declared length of an upload. Without Content-Length the answer is 411, as S3's: a chunked
 * body is not taken, and a request with neither header has no body by HTTP's framing, so bytes
 * sent after it would not be the object (an empty object is `Content-Length: 0`).
 */
export function parseContentLength(exchange: Exchange, max: number): number {
  const header = exchange.header('content-length');
  if (header === undefined)
    throw LengthRequired('uploads need a Content-Length header (0 for an empty object)');
  if (!/^\d+$/.test(header)) throw BadRequest('malformed Content-Length');
  const length = Number(header);
  if (length > max) throw PayloadTooLarge(`objects are limited to ${max} bytes`);
  return length;
}

export function parseChecksumHeaders(exchange: Exchange): Map<ChecksumAlg, Buffer> {
  const expected = new Map<ChecksumAlg, Buffer>();
  for (const [name, value] of Object.entries(exchange.headers)) {
    if (!name.startsWith(CHECKSUM_HEADER_PREFIX)) continue;
    const algName = name.slice(CHECKSUM_HEADER_PREFIX.length);
    const alg = parseChecksumAlg(algName);
    if (!alg)
      throw BadRequest(
        `unsupported checksum algorithm ${algName.toUpperCase()}; use CRC32, CRC32C, CRC64NVME, SHA1 or SHA256`,
      );
    expected.set(alg, parseChecksumHeader(alg, value));
  }
  return expected;
}

/**
 * User metadata from `X-Service-Meta-*` headers, checked by validateUserMetadata (printable
 * ASCII: bytes above 0x7F could not arrive intact, and one inside a value is refused rather than
 * stored differently from what was sent).
 */
export function parseMetadata(exchange: Exchange): Record<string, string> {
  const metadata: Record<string, string> = {};
  for (const [name, value] of Object.entries(exchange.headers)) {
    if (name.startsWith(META_PREFIX)) metadata[name.slice(META_PREFIX.length)] = value;
  }
  validateUserMetadata(metadata);
  return metadata;
}

/** The preconditions of a write (PUT, DELETE, a copy's destination, a multipart completion). */
export function writeConditionsOf(exchange: Exchange): WriteConditions {
  return {
    ifMatch: exchange.header('if-match'),
    ifNoneMatch: exchange.header('if-none-match'),
    ifUnmodifiedSince: exchange.header('if-unmodified-since'),
  };
}

/** The conditional and Range headers of a read (GET, HEAD), for the service. */
export function readConditionsOf(exchange: Exchange): ReadConditions {
  return {
    ifMatch: exchange.header('if-match'),
    ifNoneMatch: exchange.header('if-none-match'),
    ifModifiedSince: exchange.header('if-modified-since'),
    ifUnmodifiedSince: exchange.header('if-unmodified-since'),
    ifRange: exchange.header('if-range'),
    range: exchange.header('range'),
  };
}

export function bucketJson(bucket: BucketRecord): Record<string, unknown> {
  return {
    name: bucket.name,
    createdAt: new Date(bucket.createdAt).toISOString(),
    versioning: bucket.versioning,
    objectLock: bucket.objectLock,
  };
}

export function objectJson(
  version: ObjectVersionRecord,
  bucket: BucketRecord | undefined,
): Record<string, unknown> {
  const json: Record<string, unknown> = {
    key: version.key,
    size: version.size,
    etag: version.etag,
    lastModified: new Date(version.lastModified).toISOString(),
    contentType: version.contentType,
    checksums: version.checksums,
    storageClass: 'STANDARD',
    metadata: version.metadata,
  };
  if (bucket && bucket.versioning !== 'Unversioned') json['versionId'] = version.versionId;
  return json;
}

/**
 * Headers of a write's answer (DECISIONS.md: the object's metadata): the new version's ETag,
 * Last-Modified and checksums, and in a versioned bucket its id.
 */
export function writtenHeaders(
  version: ObjectVersionRecord,
  bucket: BucketRecord | undefined,
): Record<string, string> {
  const headers: Record<string, string> = {
    ETag: version.etag,
    'Last-Modified': new Date(version.lastModified).toUTCString(),
  };
  for (const [alg, digest] of Object.entries(version.checksums))
    headers[`X-Service-Checksum-${alg}`] = digest;
  if (bucket && bucket.versioning !== 'Unversioned')
    headers['X-Service-Version-Id'] = version.versionId;
  return headers;
}

/** Headers of a read (GET, HEAD): a write's headers and the rest of the object's metadata. */
export function objectHeaders(
  version: ObjectVersionRecord,
  bucket: BucketRecord,
): Record<string, string> {
  const headers = writtenHeaders(version, bucket);
  headers['Content-Type'] = version.contentType;
  headers['Accept-Ranges'] = 'bytes';
  headers['X-Service-Encryption'] = 'AES256-GCM';
  headers['X-Service-Compression'] = version.compressed ? 'LZ4' : 'NONE';
  headers['X-Service-Storage-Class'] = 'STANDARD';
  headers['X-Service-Content-Length'] = String(version.size);
  if (version.retention) {
    headers['X-Service-Object-Lock-Mode'] = version.retention.mode;
    headers['X-Service-Object-Lock-Retain-Until-Date'] = new Date(
      version.retention.retainUntil,
    ).toISOString();
  }
  if (bucket.objectLock) headers['X-Service-Object-Lock-Legal-Hold'] = version.legalHold ?? 'OFF';
  if (version.tags) headers['X-Service-Tagging-Count'] = String(version.tags.length);
  for (const [name, value] of Object.entries(version.metadata))
    headers[`X-Service-Meta-${name}`] = value;
  return headers;
}

/** The keys a listing's page is drawn from: what a cluster member makes current first. */
function listRangeOf(
  bucket: BucketRecord,
  query: URLSearchParams,
  tokens: ListTokens,
): { prefix: string; after: string | undefined; limit: number } {
  const prefix = keyQuery(query, 'prefix') ?? '';
  const delimiter = keyQuery(query, 'delimiter') ?? '';
  const token = query.get('continuationToken');
  const after = token
    ? tokens.decode({ bucketId: bucket.id, prefix, delimiter }, token)
    : undefined;
  const limit = parsePageSize(query.get('maxKeys'), 'maxKeys', LIST_KEYS_MAX);
  return { prefix, after: after?.value, limit };
}

/**
 * Prefix listing with delimiter; the continuation token is the last key or prefix returned,
 * signed (`ListTokens`). Returns the page as JSON bytes, `{objects, commonPrefixes, isTruncated,
 * nextContinuationToken?}`, each object as `objectJson` gives it. The bytes are a view of a
 * buffer that the next listing overwrites: send or copy them before listing again.
 */
export function listObjects(
  store: IndexView,
  bucket: BucketRecord,
  query: URLSearchParams,
  tokens: ListTokens,
): Buffer {
  const prefix = keyQuery(query, 'prefix') ?? '';
  const delimiter = keyQuery(query, 'delimiter') ?? '';
  const maxKeys = parsePageSize(query.get('maxKeys'), 'maxKeys', LIST_KEYS_MAX);
  const token = query.get('continuationToken');
  const binding = { bucketId: bucket.id, prefix, delimiter };
  const after = token ? tokens.decode(binding, token) : undefined;
  const page = listPageBytes;
  page.reset();
  page.ascii('{"objects":[');
  const versioned = bucket.versioning !== 'Unversioned';
  let objects = 0;
  const commonPrefixes: string[] = [];
  const outcome = listObjectsPage(
    store,
    bucket,
    { prefix, delimiter, maxKeys, after },
    {
      object: (entry) => {
        if (objects > 0) page.byte(0x2c); // ,
        if (!writeVersionJson(page, entry.valueBytes, entry.valueLength, versioned))
          // A record the in-place writer declines: decoded whole, as every record once was.
          page.utf8(JSON.stringify(objectJson(decodeListed(entry), bucket)));
        objects += 1;
      },
      commonPrefix: (common) => commonPrefixes.push(common),
    },
  );
  page.ascii('],"commonPrefixes":');
  page.utf8(JSON.stringify(commonPrefixes));
  page.ascii(outcome.truncated ? ',"isTruncated":true' : ',"isTruncated":false');
  if (outcome.last)
    page.ascii(`,"nextContinuationToken":"${tokens.encode(binding, outcome.last)}"`);
  page.byte(0x7d); // }
  return page.view();
}

/** The page buffer of every listing (they run one at a time, synchronously). */
const listPageBytes = new JsonWriter(256 * 1024);

/**
 * A query parameter that holds a key or the start of one (`prefix`, `keyMarker`): valid Unicode
 * of at most 1024 bytes, as keys are, so that it can be looked up in the index at all.
 */
export function keyQuery(query: URLSearchParams, name: string): string | null {
  const value = query.get(name);
  if (value === null) return null;
  // URLSearchParams decodes bytes that are not UTF-8 to U+FFFD: `%FF` and `%FE` would be one.
  if (value.includes('\uFFFD')) throw BadRequest(`${name} is not valid UTF-8 once percent-decoded`);
  validateObjectKey(value, { allowEmpty: true, what: name });
  return value;
}
