// Multipart uploads as every transport sees them: create, upload a part through the object
// upload pipeline, copy a part from an object, complete, abort, and the pages of parts and
// uploads read from the index. A transport adds only its protocol (its ETag form, its codes and
// its documents); the rules (quota before a byte is read, checksums verified before a part
// commits, a copied part's source conditions and range, the complete list's checks, audited
// commits) are here and in the engine's multipart ops.
//
// Persists: nothing itself; uploads and parts through the engine's multipart commands.

import type { CommandArgs } from '../engine/commands.js';
import type { DigestAlg } from '../engine/checksums.js';
import {
  DB,
  objectKey,
  prefixRange,
  multipartUploadKey,
  multipartPartRange,
  type BucketRecord,
  type MultipartPartRecord,
  type MultipartUploadRecord,
  type ObjectVersionRecord,
} from '../engine/index/schema.js';
import type { IndexStore } from '../engine/index/store.js';
import type { EngineClient } from '../engine/protocol.js';
import { META_CLUSTER_REVISION } from '../engine/command-router.js';
import {
  checkPartQuotaIn,
  findUploadIn,
  isUploadId,
  partView,
  MULTIPART_PART_BYTES_MAX,
  MULTIPART_PARTS_MAX,
  type CompletePart,
  type PartView,
} from '../engine/ops/multipart.js';
import { checkSourceConditions, type SourceConditions } from '../engine/ops/object-meta.js';
import {
  BadRequest,
  ChecksumMismatch,
  InvalidRange,
  NotFound,
  PayloadTooLarge,
} from '../util/errors.js';
import { CopiedBody } from './copy-body.js';
import { versionBytes, type DownloadServices } from './download.js';
import { resolveForRead } from './read.js';
import { objectAcl, tenantById } from './bucket-access.js';
import type { BodySource } from './body.js';
import type { RequestContext } from './context.js';
import { addWriteConditions, type ObjectService, type ObjectServiceDeps } from './objects.js';
import { receiveBody, type ReceivedBody } from './upload.js';
import {
  CustomerCipher,
  decrypted,
  requireCustomerKeyFor,
  sealedUpload,
  type CustomerKey,
} from './customer-key.js';
import type { WriteConditions } from './objects.js';
import { addNewVersionAttributes, type NewVersionAttributes } from './object-lock.js';

// The engine's multipart limits and shapes, as a transport sees them.
export { isUploadId, MULTIPART_PARTS_MAX, MULTIPART_PART_BYTES_MAX };
export type { CompletePart, PartView };

/** A part number as its canonical decimal: `01` is not part 1 (one object, one spelling). */
export function parsePartNumber(text: string): number {
  if (!/^[1-9]\d{0,4}$/.test(text) || Number(text) > MULTIPART_PARTS_MAX) {
    throw BadRequest(`part numbers are integers from 1 to ${MULTIPART_PARTS_MAX}`);
  }
  return Number(text);
}

export interface UploadAddress {
  readonly bucket: BucketRecord;
  readonly key: string;
  readonly uploadId: string;
}

export interface PartRequest extends UploadAddress {
  readonly partNumber: number;
  readonly contentLength: number;
  /** Checksums the client declared, verified before the part commits. */
  readonly expected: ReadonlyMap<string, Buffer>;
  /** Digests to compute beside them (MD5: the part's ETag is then its hex MD5). */
  readonly digests: readonly DigestAlg[];
  /** The transport's own checks of what was received, before the commit. */
  readonly check?: (received: ReceivedBody) => void;
  /** SSE-C: the upload's customer key, which the part is stored under. */
  readonly customerKey?: CustomerKey | undefined;
}

export interface PartCopyRequest extends UploadAddress {
  readonly partNumber: number;
  /** The source object: its bucket resolved by the transport with read access. */
  readonly source: {
    readonly bucket: BucketRecord;
    readonly key: string;
    readonly versionId?: string | undefined;
  } & SourceConditions;
  /** Inclusive byte offsets in the source; it must lie inside (`invalid_range`). */
  readonly range?: { readonly start: number; readonly end: number } | undefined;
  /** Digests to compute beside the part's own (MD5: its ETag is then its hex MD5). */
  readonly digests: readonly DigestAlg[];
  /** SSE-C: the source's customer key, and the upload's (the part is stored under it). */
  readonly sourceCustomerKey?: CustomerKey | undefined;
  readonly customerKey?: CustomerKey | undefined;
}

export interface CompleteRequest extends UploadAddress {
  readonly parts: readonly CompletePart[];
  readonly conditions: WriteConditions;
  /** The object's ETag in the transport's form, else the engine's own multipart tag. */
  readonly etag?: string | undefined;
  /** The object's checksum as the client computed it; it must be the one the object gets. */
  readonly checksum?: { readonly alg: string; readonly value: string } | undefined;
  /** SSE-C: the upload's customer key, required when the upload has one. */
  readonly customerKey?: CustomerKey | undefined;
}

/** The upload `uploadId` of `key`, or a 404 that names an upload. */
export function requireUploadIn(store: IndexStore, address: UploadAddress): MultipartUploadRecord {
  const found = findUploadIn(store, address.bucket.id, address.key, address.uploadId);
  if (!found) throw NotFound(`upload ${address.uploadId.slice(0, 64)} of ${address.key} not found`);
  return found;
}

/**
 * On a cluster member that does not hold the upload (it missed the create, or is no replica of
 * the bucket): the engine takes its record from a replica first (cluster/replicated-commands.ts),
 * so a part, completion or abort sent to any node finds it. Undefined when there is nothing to
 * wait for: a single node, or the upload already here.
 */
export function uploadHereFirst(
  deps: { store: IndexStore; engine: EngineClient },
  address: UploadAddress,
): Promise<void> | undefined {
  const { store, engine } = deps;
  if (!store.has(DB.meta, META_CLUSTER_REVISION)) return undefined;
  if (findUploadIn(store, address.bucket.id, address.key, address.uploadId)) return undefined;
  return engine
    .call('clusterEnsureUpload', {
      tenantId: address.bucket.tenantId,
      bucket: address.bucket.name,
      key: address.key,
      uploadId: address.uploadId,
    })
    .then(() => store.refresh());
}

/**
 * Who an upload is of, as S3 names them: its initiator (the tenant that created it) and its
 * owner (the tenant that will own the completed object: the ACL the create recorded, as for
 * an object, else the bucket's tenant).
 */
export function uploadParties(
  upload: MultipartUploadRecord,
  bucket: BucketRecord,
): { initiator: string; owner: string } {
  const owner = objectAcl(upload, bucket).owner;
  return { initiator: upload.initiator ?? upload.tenantId, owner };
}

export class MultipartService {
  constructor(
    private readonly deps: ObjectServiceDeps,
    private readonly objects: ObjectService,
  ) {}

  create(
    ctx: RequestContext,
    input: {
      bucket: BucketRecord;
      key: string;
      contentType: string;
      metadata: Readonly<Record<string, string>>;
      /** Representation headers the completed object keeps (S3's). */
      headers?: Readonly<Record<string, string>>;
      /** The checksum chosen at create: parts are hashed with it, a COMPOSITE one kept. */
      checksum?: { alg: string; type: 'COMPOSITE' | 'FULL_OBJECT' } | undefined;
      /** The completed object's lock and tags (object-lock.ts). */
      attributes?: NewVersionAttributes | undefined;
      /** SSE-C: every part and the completed object are stored under this customer key. */
      customerKey?: CustomerKey | undefined;
      /** The tenant whose key asks, when it writes into another tenant's bucket. */
      initiator?: string | undefined;
    },
    /** The status the transport answers with, for the audit row (native 201, S3 200). */
    status = 200,
  ): Promise<MultipartUploadRecord> {
    const args: CommandArgs<'createMultipartUpload'> = {
      tenantId: ctx.principal.tenant.id,
      bucket: input.bucket.name,
      key: input.key,
      contentType: input.contentType,
      metadata: input.metadata,
    };
    if (input.headers !== undefined && Object.keys(input.headers).length > 0)
      args.headers = { ...input.headers };
    if (input.checksum !== undefined) args.checksum = { ...input.checksum };
    addNewVersionAttributes(input.attributes, args);
    if (input.customerKey !== undefined) args.sseCustomer = input.customerKey.seal();
    if (input.initiator !== undefined && input.initiator !== input.bucket.tenantId)
      args.initiator = input.initiator;
    return this.objects.commit(ctx, 'createMultipartUpload', args, status);
  }

  /**
   * Checks the upload and the quota before a byte is read, receives the part through the
   * object pipeline, verifies its checksums and commits it. Attaches to `source` before its
   * first await, as putObject does.
   */
  async uploadPart(ctx: RequestContext, input: PartRequest, source: BodySource): Promise<PartView> {
    const { store, auth } = this.deps;
    const tenantId = ctx.principal.tenant.id;
    const upload = requireUploadIn(store, input);
    const customerKey = requireCustomerKeyFor(upload, input.customerKey, 'upload');
    if (input.contentLength > MULTIPART_PART_BYTES_MAX)
      throw PayloadTooLarge(`a part is at most ${MULTIPART_PART_BYTES_MAX} bytes`);
    checkPartQuotaIn(store, {
      tenantId,
      bucketId: input.bucket.id,
      key: input.key,
      uploadId: input.uploadId,
      partNumber: input.partNumber,
      size: input.contentLength,
    });
    const algs = [
      ...new Set<DigestAlg>([
        'CRC32C',
        'SHA256',
        ...(input.expected.keys() as Iterable<DigestAlg>),
        ...input.digests,
      ]),
    ];
    const sealed =
      customerKey === undefined
        ? undefined
        : sealedUpload(source, customerKey, input.contentLength, algs, upload.sseCustomer?.salt);
    let received = await receiveBody(this.deps.upload, {
      source: sealed?.source ?? source,
      keys: auth.keysOf(ctx.principal.tenant),
      contentLength: input.contentLength,
      algs,
    });
    try {
      if (sealed) received = await sealed.plaintext(received);
      for (const [alg, digest] of input.expected) {
        if (received.checksums[alg] !== digest.toString('base64'))
          throw ChecksumMismatch(`the part does not match its ${alg} checksum`);
      }
      input.check?.(received);
      return await this.objects.commit(
        ctx,
        'uploadPart',
        {
          tenantId,
          bucket: input.bucket.name,
          key: input.key,
          uploadId: input.uploadId,
          partNumber: input.partNumber,
          size: input.contentLength,
          etag: received.etag,
          checksums: received.checksums,
          compressed: received.compressed,
          chunks: received.chunks,
          ...(sealed ? { sseSalt: sealed.record.salt } : {}),
        },
        200,
      );
    } finally {
      received.release();
    }
  }

  /**
   * A part copied from `range` of an object version (the whole version without one): the
   * upload and the source are checked first (the source readable, its conditions met, the range
   * inside it), then the bytes are read and stored as `uploadPart` stores a body, so the part
   * gets its own MD5, checksums and quota check, and shares chunks with the source where the
   * chunking meets. Answers the part and the source version it was copied from.
   */
  async uploadPartCopy(
    ctx: RequestContext,
    input: PartCopyRequest,
    download: DownloadServices,
  ): Promise<{ part: PartView; source: ObjectVersionRecord }> {
    const { store, auth } = this.deps;
    requireUploadIn(store, input);
    const { source } = input;
    const version = resolveForRead(store, source.bucket, source.key, source.versionId ?? null);
    checkSourceConditions(version, source);
    const sourceKey = requireCustomerKeyFor(version, input.sourceCustomerKey, 'copy source');
    const { range } = input;
    if (range !== undefined && (range.start > range.end || range.end >= version.size))
      throw InvalidRange(
        `the copy range ${range.start}-${range.end} is not inside the source's ${version.size} bytes`,
        { size: version.size },
      );
    const length = range === undefined ? version.size : range.end - range.start + 1;
    // The source's bytes are sealed under its own tenant's keys: the source bucket may be
    // another tenant's (shared by a policy or an ACL); the part is stored under the upload's.
    const owner = tenantById(store, source.bucket.tenantId);
    if (!owner) throw NotFound(`the copy source's tenant is gone`);
    const stored = versionBytes(download, auth.keysOf(owner), version, range);
    const bytes =
      sourceKey === undefined
        ? stored
        : decrypted(stored, CustomerCipher.forVersion(version, sourceKey), range?.start ?? 0);
    const body = new CopiedBody(bytes, length);
    try {
      const part = await this.uploadPart(
        ctx,
        {
          bucket: input.bucket,
          key: input.key,
          uploadId: input.uploadId,
          partNumber: input.partNumber,
          contentLength: length,
          expected: new Map(),
          digests: input.digests,
          customerKey: input.customerKey,
        },
        body,
      );
      return { part, source: version };
    } catch (error) {
      throw body.failure ?? error;
    } finally {
      body.close();
    }
  }

  /**
   * Completes the upload. A complete sent again after it succeeded (a client that lost the
   * answer retries) finds no upload; while the object it made is still the key's current
   * version, which the transport's ETag of the same part list names, it answers that version
   * again, as S3 does, instead of NoSuchUpload.
   */
  async complete(ctx: RequestContext, input: CompleteRequest): Promise<ObjectVersionRecord> {
    const { store } = this.deps;
    await uploadHereFirst(this.deps, input);
    if (!findUploadIn(store, input.bucket.id, input.key, input.uploadId)) {
      const current = store.get<ObjectVersionRecord>(
        DB.objects,
        objectKey(input.bucket.id, input.key),
      );
      if (input.etag !== undefined && current?.etag === input.etag) return current;
    }
    requireCustomerKeyFor(requireUploadIn(store, input), input.customerKey, 'upload');
    const args: CommandArgs<'completeMultipartUpload'> = {
      tenantId: ctx.principal.tenant.id,
      bucket: input.bucket.name,
      key: input.key,
      uploadId: input.uploadId,
      parts: [...input.parts],
    };
    if (input.etag !== undefined) args.etag = input.etag;
    if (input.checksum !== undefined) args.checksum = { ...input.checksum };
    addWriteConditions(input.conditions, args);
    return this.objects.commit(ctx, 'completeMultipartUpload', args, 200);
  }

  /**
   * The upload, after a cluster member that lacks it took it from a replica (`uploadHereFirst`),
   * or a 404: how a transport checks an upload before it reads a request's body.
   */
  async requireUpload(input: UploadAddress): Promise<MultipartUploadRecord> {
    await uploadHereFirst(this.deps, input);
    return requireUploadIn(this.deps.store, input);
  }

  async abort(ctx: RequestContext, input: UploadAddress): Promise<void> {
    await uploadHereFirst(this.deps, input);
    requireUploadIn(this.deps.store, input);
    await this.objects.commit(
      ctx,
      'abortMultipartUpload',
      {
        tenantId: ctx.principal.tenant.id,
        bucket: input.bucket.name,
        key: input.key,
        uploadId: input.uploadId,
      },
      204,
    );
  }
}

/**
 * The part a page of parts resumes after, from the marker's text: none, or `0` (as S3 takes
 * it), is before the first part; anything else is a part number (`parsePartNumber`), else 400.
 */
export function partNumberMarkerOf(text: string | null): number {
  return text === null || text === '0' ? 0 : parsePartNumber(text);
}

/** A page of an upload's parts, with the marker of the next page when there is one. */
export interface PartsPage {
  readonly parts: PartView[];
  readonly isTruncated: boolean;
  /** The last part of this page; set exactly when the page is truncated. */
  readonly nextPartNumberMarker?: number;
}

/** A page of an upload's parts after part `marker` (0: from the first). */
export function listPartsPage(
  store: IndexStore,
  upload: MultipartUploadRecord,
  page: { marker: number; max: number },
): PartsPage {
  const range = multipartPartRange(upload.bucketId, upload.key, upload.uploadId);
  const start = Buffer.concat([range.start, Buffer.alloc(4)]);
  start.writeUInt32BE(page.marker + 1, start.length - 4);
  const parts: PartView[] = [];
  let isTruncated = false;
  for (const { value } of store.range<MultipartPartRecord>(DB.multipartParts, {
    start,
    end: range.end,
    limit: page.max + 1,
  })) {
    if (parts.length >= page.max) {
      isTruncated = true;
      break;
    }
    parts.push(partView(value));
  }
  return partsPage(parts, isTruncated);
}

/** A page of parts with the marker of the next page: its last part, when it is truncated. */
export function partsPage(parts: PartView[], isTruncated: boolean): PartsPage {
  const last = parts[parts.length - 1];
  if (!isTruncated || last === undefined) return { parts, isTruncated };
  return { parts, isTruncated, nextPartNumberMarker: last.partNumber };
}

/** The markers a page of uploads resumes after (absent: from the first upload). */
export interface UploadsMarkers {
  readonly keyMarker?: string;
  readonly uploadIdMarker?: string;
}

/**
 * The markers of a page of uploads as a client sent them (null: not sent), checked: an upload
 * id marker belongs to the key marker it was answered with, and is an upload id; else 400.
 * The key marker is a key, checked as such by the transport (it decodes it).
 */
export function uploadsMarkersOf(
  keyMarker: string | null,
  uploadIdMarker: string | null,
): UploadsMarkers {
  if (uploadIdMarker !== null && keyMarker === null)
    throw BadRequest('uploadIdMarker needs the keyMarker it belongs to');
  if (uploadIdMarker !== null && !isUploadId(uploadIdMarker))
    throw BadRequest('malformed uploadIdMarker');
  if (keyMarker === null) return {};
  return uploadIdMarker === null ? { keyMarker } : { keyMarker, uploadIdMarker };
}

/** A page of a bucket's uploads, with the markers of the next page when there is one. */
export interface UploadsPage {
  readonly uploads: MultipartUploadRecord[];
  readonly isTruncated: boolean;
  /** The key and upload id of this page's last upload; set exactly when it is truncated. */
  readonly nextKeyMarker?: string;
  readonly nextUploadIdMarker?: string;
}

/**
 * A page of a bucket's in-progress uploads under `prefix`, by key then upload id, after the
 * markers. An upload id marker that is no upload id (S3 takes any; `uploadsMarkersOf` refuses
 * it) resumes after every upload of the key marker.
 */
export function listUploadsPage(
  store: IndexStore,
  bucket: BucketRecord,
  page: UploadsMarkers & { prefix: string; max: number },
): UploadsPage {
  const range = prefixRange(bucket.id, page.prefix);
  let start = range.start;
  if (page.keyMarker !== undefined) {
    const after =
      page.uploadIdMarker !== undefined && isUploadId(page.uploadIdMarker)
        ? Buffer.concat([
            multipartUploadKey(bucket.id, page.keyMarker, page.uploadIdMarker),
            Buffer.from([0]),
          ])
        : Buffer.concat([objectKey(bucket.id, page.keyMarker), Buffer.from([1])]);
    if (Buffer.compare(after, start) > 0) start = after;
  }
  const uploads: MultipartUploadRecord[] = [];
  let isTruncated = false;
  for (const { value } of store.range<MultipartUploadRecord>(DB.multipart, {
    start,
    end: range.end,
    limit: page.max + 1,
  })) {
    if (uploads.length >= page.max) {
      isTruncated = true;
      break;
    }
    uploads.push(value);
  }
  return uploadsPage(uploads, isTruncated);
}

/** A page of uploads with the markers of the next page: its last upload's, when truncated. */
export function uploadsPage(uploads: MultipartUploadRecord[], isTruncated: boolean): UploadsPage {
  const last = uploads[uploads.length - 1];
  if (!isTruncated || last === undefined) return { uploads, isTruncated };
  return { uploads, isTruncated, nextKeyMarker: last.key, nextUploadIdMarker: last.uploadId };
}
