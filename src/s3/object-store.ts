// The object port of the S3 handlers (object-port.ts) on the data-plane service: the same
// bucket resolution (global names, scopes, bucket policy), read resolution, preconditions,
// ranges, listing pages, upload and download pipelines and audited engine commits as the native
// API, so an S3 request obeys every rule a native one does (quota, versioning, object lock,
// notifications and audit through the engine's commit).
//
// What is S3's own here is only what S3 stores beside the bytes: its representation headers
// (Content-Encoding, Content-Disposition, ...) in the version's `headers`; a version written by
// another transport has none. Before a write commits, the signed payload's check (payload.ts)
// must have passed, and a trailing x-amz-checksum-* must match what was hashed.
//
// Persists: nothing itself; versions through the engine's `putObject` and `deleteObject`.

import { s3IdHeaders, type S3Request, type S3Services } from './api.js';
import { payloadCheckOf } from './auth.js';
import { bucketFor } from './buckets.js';
import { freshenForList, freshenForRead, versionsPageOf } from '../service/cluster-read.js';
import { s3Error, s3ErrorOf } from './errors.js';
import type {
  CopyInput,
  CopyOutcome,
  DeleteInput,
  DeleteOutcome,
  ListInput,
  ListPage,
  PutInput,
  ReadInput,
  ResolvedRead,
  S3ObjectStore,
  StoredVersion,
  VersionsInput,
  VersionsPage,
} from './object-port.js';
import { S3_DEFAULT_CONTENT_TYPE } from './object-headers.js';
import type { BucketRecord, ObjectVersionRecord } from '../engine/index/schema.js';
import { validateObjectKey } from '../security/names.js';
import { contextOf } from '../service/context.js';
import { ObjectService, type DeleteResult } from '../service/objects.js';
import {
  checkReadConditions,
  hasCurrentEntry,
  partToServe,
  rangeToServe,
  resolveForRead,
} from '../service/read.js';
import { isLightwellError } from '../util/errors.js';
import { listObjectEntries } from '../service/list.js';
import { sendObject } from '../service/download.js';
import { copyObject } from '../service/copy.js';
import { governanceBypass } from '../service/object-lock.js';
import { serviceMultipartStore } from './object-store-multipart.js';
import { customerKeyOf } from './encryption.js';
import {
  CustomerCipher,
  requireCustomerKeyFor,
  type CustomerKey,
} from '../service/customer-key.js';

export function storedOf(
  version: ObjectVersionRecord,
  bucket: BucketRecord,
  customerKey?: CustomerKey,
): StoredVersion {
  return {
    customerKey,
    version,
    representation: {
      contentType: version.contentType === '' ? S3_DEFAULT_CONTENT_TYPE : version.contentType,
      headers: version.headers ?? {},
      metadata: version.metadata,
    },
    versioned: bucket.versioning !== 'Unversioned',
  };
}

/** Refuses a body whose signed payload failed, or whose trailing checksum does not match. */
export function checkPayload(
  request: S3Request,
  checksums: Readonly<Record<string, string>>,
): void {
  const check = payloadCheckOf(request.exchange);
  if (!check) return;
  check.verify();
  for (const [name, value] of check.trailers) {
    if (!name.startsWith('x-amz-checksum-')) continue;
    const alg = name.slice('x-amz-checksum-'.length).toUpperCase();
    if (checksums[alg] !== value)
      throw s3Error('BadDigest', `The ${alg} you specified did not match the calculated checksum.`);
  }
}

/**
 * Runs a write with an If-Match: when it fails its precondition because no current object is
 * there at all, S3 answers 404 `NoSuchKey` rather than 412 (a tag cannot match nothing).
 */
async function ifMatchWrite<T>(
  store: S3Services['store'],
  target: { bucket: BucketRecord; key: string; ifMatch: string | undefined },
  write: () => Promise<T>,
): Promise<T> {
  try {
    return await write();
  } catch (error) {
    if (
      target.ifMatch !== undefined &&
      isLightwellError(error) &&
      error.code === 'precondition_failed' &&
      !hasCurrentEntry(store, target.bucket, target.key)
    )
      throw s3Error('NoSuchKey', 'If-Match: no object has this key');
    throw error;
  }
}

export function serviceObjectStore(services: S3Services): S3ObjectStore {
  const objects = new ObjectService(services);

  async function put(request: S3Request, input: PutInput): Promise<StoredVersion> {
    const principal = request.requirePrincipal();
    validateObjectKey(input.key);
    const bucket = bucketFor(request, { verb: 'write', key: input.key });
    const target = { bucket, key: input.key, ifMatch: input.ifMatch };
    const customerKey = customerKeyOf(request);
    const version = await ifMatchWrite(services.store, target, () =>
      objects.putObject(
        contextOf(request.exchange, principal),
        {
          bucket,
          key: input.key,
          contentLength: input.contentLength,
          expected: new Map(),
          metadata: { ...input.representation.metadata },
          contentType: input.representation.contentType,
          idempotency: undefined,
          conditions: { ifMatch: input.ifMatch, ifNoneMatch: input.ifNoneMatch },
          digests: input.algs,
          check: (received) => {
            checkPayload(request, received.checksums);
            input.check({ md5: received.md5, checksums: received.checksums });
          },
          headers: input.representation.headers,
          attributes: input.attributes,
          customerKey,
        },
        request.exchange,
      ),
    );
    return storedOf(version, bucket, customerKey);
  }

  function freshen(request: S3Request, input: ReadInput): Promise<void> | undefined {
    const bucket = bucketFor(request, { verb: 'read', key: input.key });
    return freshenForRead(services.store, services.engine, bucket, input.key, input.versionId);
  }

  function freshenList(request: S3Request, input: ListInput): Promise<void> | undefined {
    const bucket = bucketFor(request, { verb: 'read', listPrefix: input.prefix });
    const range = { prefix: input.prefix, after: input.after, limit: input.maxKeys };
    return freshenForList(services.store, services.engine, bucket, range);
  }

  function resolveRead(request: S3Request, input: ReadInput): ResolvedRead {
    const bucket = bucketFor(request, { verb: 'read', key: input.key });
    const version = resolveForRead(services.store, bucket, input.key, input.versionId);
    const notModified = checkReadConditions(input, version) === 304;
    if (input.partNumber !== undefined) {
      let part;
      try {
        part = partToServe(version, input.partNumber);
      } catch (error) {
        if (isLightwellError(error) && error.details['reason'] === 'part_missing')
          throw s3Error('InvalidPart', error.message);
        throw error;
      }
      // After the part number, as S3 answers InvalidPart before it asks for the key.
      const customerKey = requireCustomerKeyFor(version, customerKeyOf(request));
      const range = notModified ? undefined : part.range;
      const stored = storedOf(version, bucket, customerKey);
      return { ...stored, notModified, range, partsCount: part.partsCount };
    }
    const customerKey = requireCustomerKeyFor(version, customerKeyOf(request));
    const range = notModified ? undefined : rangeToServe(input, version);
    return { ...storedOf(version, bucket, customerKey), notModified, range };
  }

  function sendBody(
    request: S3Request,
    read: ResolvedRead,
    headers: Readonly<Record<string, string>>,
  ): Promise<void> | undefined {
    const principal = request.requirePrincipal();
    const { customerKey, version } = read;
    const cipher = customerKey && CustomerCipher.forVersion(version, customerKey);
    return sendObject(services.download, request.exchange, {
      keys: services.auth.keysOf(principal.tenant),
      version,
      range: read.range,
      headers: { ...headers, ...s3IdHeaders(request.exchange) },
      transform: cipher && ((bytes, offset) => cipher.apply(bytes, offset)),
    });
  }

  async function remove(request: S3Request, input: DeleteInput): Promise<DeleteOutcome> {
    const principal = request.requirePrincipal();
    const bucket = bucketFor(request, { verb: 'delete', key: input.key });
    const ctx = contextOf(request.exchange, principal);
    const bypassGovernance = governanceBypass(
      ctx,
      { bucket: bucket.name, key: input.key },
      input.bypassGovernance === true,
    );
    let result: DeleteResult;
    try {
      result = await objects.deleteObject(
        ctx,
        { bucket, key: input.key, versionId: input.versionId, conditions: {}, bypassGovernance },
        204,
      );
    } catch (error) {
      // S3's deletes are idempotent: a version that is not there (never was, or a concurrent
      // delete took it) is deleted, and AWS answers 204 naming it.
      const code = s3ErrorOf(error, { bucket: bucket.name, key: input.key }).code;
      if (input.versionId === null || (code !== 'NoSuchVersion' && code !== 'NoSuchKey'))
        throw error;
      return { versionId: input.versionId, deleteMarker: false };
    }
    return {
      versionId: bucket.versioning === 'Unversioned' ? undefined : result.versionId,
      deleteMarker: result.deleteMarker === true,
    };
  }

  function list(request: S3Request, input: ListInput): ListPage {
    const bucket = bucketFor(request, { verb: 'read', listPrefix: input.prefix });
    if (input.maxKeys === 0) return { entries: [], commonPrefixes: [], isTruncated: false };
    const delimiter = input.delimiter ?? '';
    const after = input.after;
    const { entries, outcome } = listObjectEntries(services.store, bucket, {
      prefix: input.prefix,
      delimiter,
      maxKeys: input.maxKeys,
      after:
        after === undefined
          ? undefined
          : {
              kind: delimiter !== '' && after.endsWith(delimiter) ? 'prefix' : 'key',
              value: after,
            },
    });
    const versions: ObjectVersionRecord[] = [];
    const prefixes: string[] = [];
    for (const entry of entries) {
      if (entry.kind === 'object') versions.push(entry.version);
      else prefixes.push(entry.prefix);
    }
    return {
      entries: versions,
      commonPrefixes: prefixes,
      isTruncated: outcome.truncated,
      last: outcome.last?.value,
    };
  }

  /**
   * The source is resolved first (read access, NoSuchKey/NoSuchVersion), for the version S3
   * names in `x-amz-copy-source-version-id`; the engine copies that version (by id when the
   * source bucket is versioned, else the key's only version).
   */
  async function copy(request: S3Request, input: CopyInput): Promise<CopyOutcome> {
    const principal = request.requirePrincipal();
    validateObjectKey(input.key);
    validateObjectKey(input.source.key);
    const sourceBucket = bucketFor(
      request,
      { verb: 'read', key: input.source.key },
      input.source.bucket,
    );
    const bucket = bucketFor(request, { verb: 'write', key: input.key });
    const sourceVersion = resolveForRead(
      services.store,
      sourceBucket,
      input.source.key,
      input.source.versionId ?? null,
    );
    const sourceVersioned = sourceBucket.versioning !== 'Unversioned';
    const target = { bucket, key: input.key, ifMatch: input.ifMatch };
    const customerKey = customerKeyOf(request);
    const version = await ifMatchWrite(services.store, target, () =>
      copyObject(
        objects,
        contextOf(request.exchange, principal),
        {
          source: {
            ...input.source,
            bucket: sourceBucket,
            versionId:
              input.source.versionId ?? (sourceVersioned ? sourceVersion.versionId : undefined),
          },
          bucket,
          key: input.key,
          directive: input.directive,
          contentType: input.representation.contentType,
          metadata: input.representation.metadata,
          headers: input.representation.headers,
          conditions: { ifMatch: input.ifMatch, ifNoneMatch: input.ifNoneMatch },
          attributes: input.attributes,
          sourceCustomerKey: customerKeyOf(request, 'copy source'),
          customerKey,
        },
        services,
      ),
    );
    return {
      ...storedOf(version, bucket, customerKey),
      sourceVersionId: sourceVersion.versionId,
      sourceVersioned,
    };
  }

  async function listVersions(request: S3Request, input: VersionsInput): Promise<VersionsPage> {
    const bucket = bucketFor(request, { verb: 'read', listPrefix: input.prefix });
    if (input.maxKeys === 0) return { entries: [], commonPrefixes: [], isTruncated: false };
    return versionsPageOf(services.store, services.engine, bucket, input);
  }

  return {
    put,
    copy,
    multipart: serviceMultipartStore(services, objects),
    resolveRead,
    freshen,
    freshenList,
    listVersions,
    sendBody,
    delete: remove,
    list,
    owner: (request) => {
      const { tenant } = request.requirePrincipal();
      return { id: tenant.id, displayName: tenant.name ?? tenant.id };
    },
  };
}
