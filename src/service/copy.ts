// Server-side copy as every transport asks for it: the source must be readable and the
// destination writable (the transport has resolved both buckets with their access checks), a
// copy onto itself must change something, and the engine's `copyObject` shares the source's
// chunks, checks the source's and the destination's conditions and the quota, and commits the
// version audited, as the native API's object-copy does.
//
// Two kinds of copy share no chunks and write the bytes again (`copyRewritten`), through the
// same put as an upload (quota, conditions, lock, audit), with the copy's metadata and tags:
// - a source in another tenant's bucket (shared with the destination's tenant by a policy or an
//   ACL): its bytes are sealed under its own tenant's keys, so they are read with those and
//   stored anew under the destination's;
// - a source or a destination under an SSE-C key (customer-key.ts): the source is decrypted with
//   the copy-source key, and the copy is stored under the destination's key if the request
//   sends one, else as a plain object.
//
// Persists: nothing itself; the version through the engine's `copyObject` or `putObject`.

import type { CommandArgs } from '../engine/commands.js';
import type { BucketRecord, ObjectVersionRecord } from '../engine/index/schema.js';
import type { IndexStore } from '../engine/index/store.js';
import { DIGEST_ALGS, type DigestAlg } from '../engine/checksums.js';
import { checkSourceConditions } from '../engine/ops/object-meta.js';
import { NotFound } from '../util/errors.js';
import { checkCopyChanges } from './attributes.js';
import type { Authenticator } from './auth.js';
import { tenantById } from './bucket-access.js';
import type { RequestContext } from './context.js';
import { CopiedBody } from './copy-body.js';
import {
  CustomerCipher,
  decrypted,
  requireCustomerKeyFor,
  type CustomerKey,
} from './customer-key.js';
import { versionBytes, type DownloadServices } from './download.js';
import { addNewVersionAttributes, type NewVersionAttributes } from './object-lock.js';
import { addDestinationConditions, type ObjectService, type WriteConditions } from './objects.js';
import { resolveForRead } from './read.js';

export interface CopySource {
  readonly bucket: BucketRecord;
  readonly key: string;
  readonly versionId?: string | undefined;
  readonly ifMatch?: string | undefined;
  readonly ifNoneMatch?: string | undefined;
  /** Epoch milliseconds. */
  readonly ifModifiedSince?: number | undefined;
  readonly ifUnmodifiedSince?: number | undefined;
}

export interface CopyRequest {
  readonly source: CopySource;
  readonly bucket: BucketRecord;
  readonly key: string;
  /** COPY keeps the source's type, metadata and headers; REPLACE stores those given here. */
  readonly directive: 'COPY' | 'REPLACE';
  readonly contentType?: string | undefined;
  readonly metadata?: Readonly<Record<string, string>> | undefined;
  readonly headers?: Readonly<Record<string, string>> | undefined;
  /** The destination's preconditions: the request's, and the native body's own two. */
  readonly conditions: WriteConditions;
  readonly requireAbsent?: boolean | undefined;
  readonly requireMatchEtag?: string | undefined;
  /** The copy's lock, and its tags when they replace the source's (object-lock.ts). */
  readonly attributes?: NewVersionAttributes | undefined;
  /** SSE-C: the key the source is under, and the one the copy is to be stored under. */
  readonly sourceCustomerKey?: CustomerKey | undefined;
  readonly customerKey?: CustomerKey | undefined;
}

/** What a copy that writes its bytes again reads the source with. */
export interface CopyReaders {
  readonly store: IndexStore;
  readonly auth: Authenticator;
  readonly download: DownloadServices;
}

export function copyObject(
  objects: ObjectService,
  ctx: RequestContext,
  input: CopyRequest,
  readers: CopyReaders,
): Promise<ObjectVersionRecord> {
  const { source } = input;
  if (source.bucket.tenantId !== input.bucket.tenantId)
    return copyRewritten(objects, ctx, input, readers);
  if (input.sourceCustomerKey !== undefined || input.customerKey !== undefined)
    return copyRewritten(objects, ctx, input, readers);
  if (underCustomerKey(readers.store, source)) return copyRewritten(objects, ctx, input, readers);
  checkCopyChanges(
    {
      bucket: source.bucket.name,
      key: source.key,
      versionId: source.versionId,
      replacesMetadata: input.directive !== 'COPY',
    },
    { bucket: input.bucket.name, key: input.key },
  );
  const args: CommandArgs<'copyObject'> = {
    tenantId: ctx.principal.tenant.id,
    bucket: input.bucket.name,
    key: input.key,
    sourceBucket: source.bucket.name,
    sourceKey: source.key,
    metadataDirective: input.directive,
  };
  if (source.versionId !== undefined) args.sourceVersionId = source.versionId;
  if (source.ifMatch !== undefined) args.ifMatch = source.ifMatch;
  if (source.ifNoneMatch !== undefined) args.ifNoneMatch = source.ifNoneMatch;
  if (source.ifModifiedSince !== undefined) args.ifModifiedSince = source.ifModifiedSince;
  if (source.ifUnmodifiedSince !== undefined) args.ifUnmodifiedSince = source.ifUnmodifiedSince;
  if (input.directive === 'REPLACE') {
    if (input.contentType !== undefined) args.contentType = input.contentType;
    if (input.metadata !== undefined) args.metadata = { ...input.metadata };
    if (input.headers !== undefined) args.headers = { ...input.headers };
  }
  if (input.requireAbsent !== undefined) args.requireAbsent = input.requireAbsent;
  if (input.requireMatchEtag !== undefined) args.requireMatchEtag = input.requireMatchEtag;
  addDestinationConditions(input.conditions, args);
  addNewVersionAttributes(input.attributes, args);
  return objects.commit(ctx, 'copyObject', args, 200);
}

/** Whether the source version is under an SSE-C key (a missing one is the engine's to answer). */
function underCustomerKey(store: IndexStore, source: CopySource): boolean {
  try {
    const version = resolveForRead(store, source.bucket, source.key, source.versionId ?? null);
    return version.sseCustomer !== undefined;
  } catch {
    return false;
  }
}

/** The digests a rewritten copy keeps: MD5 (its ETag) and the source's checksum algorithms. */
function digestsOf(version: ObjectVersionRecord): DigestAlg[] {
  const algs = Object.keys(version.checksums).filter((alg): alg is DigestAlg =>
    DIGEST_ALGS.includes(alg as DigestAlg),
  );
  return [...new Set<DigestAlg>(['MD5', 'CRC32C', ...algs])];
}

/**
 * A copy that reads the source's bytes and writes them again (see the header): the source
 * version, resolved here, must meet the source conditions and be readable with the request's
 * source key (if under one); its bytes stream through the download pipeline under its owner's
 * keys into a put under the destination's. COPY keeps the source's type, metadata, headers and
 * tags (unless the request replaces the tags), as the engine's copy does.
 */
async function copyRewritten(
  objects: ObjectService,
  ctx: RequestContext,
  input: CopyRequest,
  readers: CopyReaders,
): Promise<ObjectVersionRecord> {
  const { source } = input;
  const version = resolveForRead(
    readers.store,
    source.bucket,
    source.key,
    source.versionId ?? null,
  );
  checkSourceConditions(version, source);
  const sourceKey = requireCustomerKeyFor(version, input.sourceCustomerKey, 'copy source');
  const owner = tenantById(readers.store, source.bucket.tenantId);
  if (!owner) throw NotFound("the copy source's tenant is gone");
  const stored = versionBytes(readers.download, readers.auth.keysOf(owner), version, undefined);
  const bytes =
    sourceKey === undefined
      ? stored
      : decrypted(stored, CustomerCipher.forVersion(version, sourceKey), 0);
  const keeps = input.directive === 'COPY';
  const headers = keeps ? version.headers : input.headers;
  const tags = input.attributes?.tags ?? version.tags;
  const body = new CopiedBody(bytes, version.size);
  try {
    return await objects.putObject(
      ctx,
      {
        bucket: input.bucket,
        key: input.key,
        contentLength: version.size,
        expected: new Map(),
        metadata: { ...(keeps ? version.metadata : (input.metadata ?? {})) },
        contentType: (keeps ? version.contentType : input.contentType) ?? version.contentType,
        idempotency: undefined,
        conditions: {
          ...input.conditions,
          ...(input.requireAbsent ? { ifNoneMatch: '*' } : {}),
          ...(input.requireMatchEtag === undefined ? {} : { ifMatch: input.requireMatchEtag }),
        },
        digests: digestsOf(version),
        ...(headers === undefined ? {} : { headers }),
        attributes: { ...input.attributes, ...(tags === undefined ? {} : { tags }) },
        customerKey: input.customerKey,
      },
      body,
    );
  } catch (error) {
    throw body.failure ?? error;
  } finally {
    body.close();
  }
}
