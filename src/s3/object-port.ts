// What the S3 object handlers need of the data-plane service, in the service's terms: store a
// body, resolve and stream a read, delete, list. The handlers (objects.ts) speak S3 (headers,
// XML, codes); everything with a rule behind it (authorization, quota, versioning, conditions,
// ranges, notifications, audit) is behind this port, implemented by the service
// (src/service/s3-port.ts), so an S3 request obeys the same rules as a native one.
//
// Persists: nothing itself.

import type { CustomerKey } from '../service/customer-key.js';
import type {
  ObjectVersionRecord,
  ServerSideEncryption,
  SseCustomerRecord,
} from '../engine/index/schema.js';
import type { DigestAlg } from '../engine/checksums.js';
import type { S3Request } from './api.js';
import type { ObjectRepresentation } from './object-headers.js';
import type { NewVersionAttributes } from '../service/object-lock.js';

/** What a received body gives the handler to check before anything commits. */
export interface ReceivedDigests {
  /** The body's MD5 (asked for with `MD5` among the algorithms). */
  readonly md5?: Buffer | undefined;
  /** Base64 digests by algorithm. */
  readonly checksums: Readonly<Record<string, string>>;
}

export interface PutInput {
  readonly bucket: string;
  readonly key: string;
  readonly contentLength: number;
  /** Digests to compute while the body streams (MD5 makes the ETag the hex MD5). */
  readonly algs: readonly DigestAlg[];
  readonly representation: ObjectRepresentation;
  /** Write conditions (conditional PUT): `*` or an ETag list. */
  readonly ifMatch?: string | undefined;
  readonly ifNoneMatch?: string | undefined;
  /** Runs on the received digests before the commit; a throw commits nothing. */
  check(received: ReceivedDigests): void;
  /** The new version's lock and tags (x-amz-object-lock-*, x-amz-tagging). */
  readonly attributes?: NewVersionAttributes | undefined;
}

/** A version as S3 answers it: the record, its representation and its bucket's versioning. */
export interface StoredVersion {
  readonly version: ObjectVersionRecord;
  readonly representation: ObjectRepresentation;
  /** True when the bucket has ever had versioning (S3 then sends `x-amz-version-id`). */
  readonly versioned: boolean;
  /** SSE-C: the request's key, which the version is under (its MD5 is answered back). */
  readonly customerKey?: CustomerKey | undefined;
}

export interface ReadInput {
  readonly bucket: string;
  readonly key: string;
  readonly versionId: string | null;
  readonly ifMatch?: string | undefined;
  readonly ifNoneMatch?: string | undefined;
  readonly ifModifiedSince?: string | undefined;
  readonly ifUnmodifiedSince?: string | undefined;
  /** The Range header's value. */
  readonly range?: string | undefined;
  /** The `partNumber` query parameter (1..10000): the bytes of that part. */
  readonly partNumber?: number | undefined;
}

/** What a read resolved to: the version, and either 304 or the bytes to send. */
export interface ResolvedRead extends StoredVersion {
  readonly notModified: boolean;
  /** Inclusive byte range; undefined for the whole object. */
  readonly range?: { readonly start: number; readonly end: number } | undefined;
  /** With `partNumber`, the version's part count when it was uploaded in parts. */
  readonly partsCount?: number | undefined;
}

export interface DeleteInput {
  readonly bucket: string;
  readonly key: string;
  readonly versionId: string | null;
  /** x-amz-bypass-governance-retention was sent (the service decides whether it holds). */
  readonly bypassGovernance?: boolean | undefined;
}

export interface DeleteOutcome {
  /** The version removed, or the delete marker written (versioned buckets). */
  readonly versionId?: string | undefined;
  readonly deleteMarker: boolean;
}

export interface ListInput {
  readonly bucket: string;
  readonly prefix: string;
  readonly delimiter?: string | undefined;
  /** List keys after this one (a start-after, marker or continuation). */
  readonly after?: string | undefined;
  readonly maxKeys: number;
}

export interface ListPage {
  readonly entries: readonly ObjectVersionRecord[];
  readonly commonPrefixes: readonly string[];
  readonly isTruncated: boolean;
  /** The last key or common prefix of the page: where the next page starts. */
  readonly last?: string | undefined;
}

export interface S3ObjectStore extends Partial<S3ObjectStoreMore> {
  put(request: S3Request, input: PutInput): Promise<StoredVersion>;
  resolveRead(request: S3Request, input: ReadInput): ResolvedRead;
  /** On a cluster member, first makes this node's copy current (undefined: nothing to do). */
  freshen?(request: S3Request, input: ReadInput): Promise<void> | undefined;
  /** On a cluster member, first makes this node's copy of a listing's page current. */
  freshenList?(request: S3Request, input: ListInput): Promise<void> | undefined;
  /** Streams the resolved bytes with `headers`; settles when the response is complete. */
  sendBody(
    request: S3Request,
    read: ResolvedRead,
    headers: Readonly<Record<string, string>>,
  ): Promise<void> | undefined;
  delete(request: S3Request, input: DeleteInput): Promise<DeleteOutcome>;
  list(request: S3Request, input: ListInput): ListPage;
  /** The S3 owner of the request's tenant (canonical id = tenant id, name = tenant name). */
  owner(request: S3Request): { id: string; displayName: string };
}

// ---------------------------------------------------------------------------------------------
// Copies, versions and multipart uploads.

export interface CopyInput {
  readonly source: {
    readonly bucket: string;
    readonly key: string;
    readonly versionId?: string | undefined;
    readonly ifMatch?: string | undefined;
    readonly ifNoneMatch?: string | undefined;
    readonly ifModifiedSince?: number | undefined;
    readonly ifUnmodifiedSince?: number | undefined;
  };
  readonly bucket: string;
  readonly key: string;
  /** The destination's conditions (If-Match, If-None-Match), as on a PutObject. */
  readonly ifMatch?: string | undefined;
  readonly ifNoneMatch?: string | undefined;
  /** COPY keeps the source's representation; REPLACE stores `representation`. */
  readonly directive: 'COPY' | 'REPLACE';
  readonly representation: ObjectRepresentation;
  /** The copy's lock, and its tags when the tagging directive is REPLACE. */
  readonly attributes?: NewVersionAttributes | undefined;
}

export interface CopyOutcome extends StoredVersion {
  /** The source version copied (for `x-amz-copy-source-version-id`). */
  readonly sourceVersionId: string;
  readonly sourceVersioned: boolean;
}

export interface VersionsInput {
  readonly bucket: string;
  readonly prefix: string;
  readonly delimiter?: string | undefined;
  readonly keyMarker?: string | undefined;
  readonly versionIdMarker?: string | undefined;
  readonly maxKeys: number;
}

export interface VersionsPage {
  /** Versions and delete markers, by key, newest first within a key. */
  readonly entries: readonly (ObjectVersionRecord & { readonly isLatest: boolean })[];
  readonly commonPrefixes: readonly string[];
  readonly isTruncated: boolean;
  readonly nextKeyMarker?: string | undefined;
  readonly nextVersionIdMarker?: string | undefined;
}

export interface UploadTarget {
  readonly bucket: string;
  readonly key: string;
  readonly uploadId: string;
}

export interface PartInput extends UploadTarget {
  readonly partNumber: number;
  readonly contentLength: number;
  readonly algs: readonly DigestAlg[];
  /** The checksum algorithms the request declared (header or trailer). */
  readonly declared: readonly string[];
  check(received: ReceivedDigests): void;
}

export interface PartOutcome {
  readonly etag: string;
  readonly checksums: Readonly<Record<string, string>>;
  readonly lastModified: number;
  /** The upload's encryption, which the part is under (answered back). */
  readonly encryption: EncryptionOutcome;
}

/** What an answer reports of an upload's or a part's encryption (encryption.ts addSseHeaders). */
export interface EncryptionOutcome {
  readonly sse?: ServerSideEncryption | undefined;
  readonly sseCustomer?: SseCustomerRecord | undefined;
  readonly customerKey?: CustomerKey | undefined;
}

export interface CompleteInput extends UploadTarget {
  readonly parts: readonly {
    readonly partNumber: number;
    readonly etag: string;
    readonly checksums: Readonly<Record<string, string>>;
  }[];
  /**
   * The completed object's ETag (S3's `md5(part md5s)-N`, from the listed part ETags);
   * undefined when a listed ETag is not an MD5 (`InvalidPart` once the upload is found).
   */
  readonly etag: string | undefined;
  /** The object's checksum as the client gave it (x-amz-checksum-* on complete), checked. */
  readonly checksum?: { readonly alg: string; readonly value: string } | undefined;
}

export interface PartEntry {
  readonly partNumber: number;
  readonly etag: string;
  readonly size: number;
  readonly lastModified: number;
  readonly checksums: Readonly<Record<string, string>>;
}

/** An S3 owner: canonical id (the tenant id) and display name (the tenant name). */
export interface S3Owner {
  readonly id: string;
  readonly displayName: string;
}

/** Who created an upload, and who will own the object it completes into. */
export interface UploadParties {
  readonly initiator: S3Owner;
  readonly owner: S3Owner;
}

export interface UploadEntry extends UploadParties {
  readonly key: string;
  readonly uploadId: string;
  readonly initiated: number;
}

export interface S3MultipartStore {
  create(
    request: S3Request,
    input: {
      bucket: string;
      key: string;
      representation: ObjectRepresentation;
      checksum?: { alg: string; type: 'COMPOSITE' | 'FULL_OBJECT' } | undefined;
      attributes?: NewVersionAttributes | undefined;
    },
  ): Promise<{ uploadId: string; encryption: EncryptionOutcome }>;
  uploadPart(request: S3Request, input: PartInput): Promise<PartOutcome>;
  uploadPartCopy(
    request: S3Request,
    input: UploadTarget & {
      partNumber: number;
      source: CopyInput['source'];
      range?: { start: number; end: number } | undefined;
    },
  ): Promise<PartOutcome & { sourceVersionId?: string | undefined }>;
  complete(request: S3Request, input: CompleteInput): Promise<StoredVersion>;
  abort(request: S3Request, input: UploadTarget): Promise<void>;
  listParts(
    request: S3Request,
    input: UploadTarget & { partNumberMarker: number; maxParts: number },
  ): Promise<{ parts: readonly PartEntry[]; isTruncated: boolean } & UploadParties>;
  listUploads(
    request: S3Request,
    input: {
      bucket: string;
      prefix: string;
      keyMarker?: string | undefined;
      uploadIdMarker?: string | undefined;
      maxUploads: number;
    },
  ): Promise<{ uploads: readonly UploadEntry[]; isTruncated: boolean }>;
}

export interface S3ObjectStoreMore {
  copy(request: S3Request, input: CopyInput): Promise<CopyOutcome>;
  listVersions(request: S3Request, input: VersionsInput): Promise<VersionsPage>;
  readonly multipart: S3MultipartStore;
}
