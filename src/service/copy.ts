// Server-side copy as every transport asks for it: the source must be readable and the
// destination writable (the transport has resolved both buckets with their access checks), a
// copy onto itself must change something, and the engine's `copyObject` shares the source's
// chunks, checks the source's and the destination's conditions and the quota, and commits the
// version audited, as the native API's object-copy does.
//
// A copy from or to an SSE-C version cannot share chunks: its bytes are under the customer's
// key. It reads the source through the download pipeline (decrypted with the source's key),
// and writes it again as a PUT of those bytes does (encrypted under the destination's key, if
// any): the same quota, conditions, lock and audit, with the copy's metadata and tags
// (`copyRewritten`).
//
// Persists: nothing itself; the version through the engine's `copyObject` or `putObject`.

import assert from 'node:assert/strict';
import type { BucketRecord, ObjectVersionRecord } from '../engine/index/schema.js';
import type { IndexStore } from '../engine/index/store.js';
import { DIGEST_ALGS, type DigestAlg } from '../engine/checksums.js';
import { checkSourceConditions } from '../engine/ops/object-meta.js';
import type { TenantKeyMaterial } from '../workers/protocol.js';
import { CopiedBody } from './copy-body.js';
import {
  CustomerCipher,
  decrypted,
  requireCustomerKeyFor,
  type CustomerKey,
} from './customer-key.js';
import { versionBytes, type DownloadServices } from './download.js';
import { resolveForRead } from './read.js';
import { checkCopyChanges } from './attributes.js';
import type { RequestContext } from './context.js';
import { addNewVersionAttributes, type NewVersionAttributes } from './object-lock.js';
import { addWriteConditions, type ObjectService, type WriteConditions } from './objects.js';

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

/** What a copy that writes its bytes again reads them with. */
export interface RewriteDeps {
  readonly store: IndexStore;
  readonly keys: TenantKeyMaterial;
  readonly download: DownloadServices;
}

export function copyObject(
  objects: ObjectService,
  ctx: RequestContext,
  input: CopyRequest,
  rewrite?: RewriteDeps,
): Promise<ObjectVersionRecord> {
  const { source } = input;
  if (rewrite !== undefined) {
    const version = resolveForRead(
      rewrite.store,
      source.bucket,
      source.key,
      source.versionId ?? null,
    );
    if (version.sseCustomer || input.sourceCustomerKey || input.customerKey)
      return copyRewritten(objects, ctx, input, { ...rewrite, version });
  }
  checkCopyChanges(
    {
      bucket: source.bucket.name,
      key: source.key,
      versionId: source.versionId,
      replacesMetadata: input.directive !== 'COPY',
    },
    { bucket: input.bucket.name, key: input.key },
  );
  const args: Record<string, unknown> = {
    tenantId: ctx.principal.tenant.id,
    bucket: input.bucket.name,
    key: input.key,
    sourceBucket: source.bucket.name,
    sourceKey: source.key,
    metadataDirective: input.directive,
  };
  if (source.versionId !== undefined) args['sourceVersionId'] = source.versionId;
  for (const name of ['ifMatch', 'ifNoneMatch', 'ifModifiedSince', 'ifUnmodifiedSince'] as const)
    if (source[name] !== undefined) args[name] = source[name];
  if (input.directive === 'REPLACE') {
    if (input.contentType !== undefined) args['contentType'] = input.contentType;
    if (input.metadata !== undefined) args['metadata'] = { ...input.metadata };
    if (input.headers !== undefined) args['headers'] = { ...input.headers };
  }
  if (input.requireAbsent !== undefined) args['requireAbsent'] = input.requireAbsent;
  if (input.requireMatchEtag !== undefined) args['requireMatchEtag'] = input.requireMatchEtag;
  addWriteConditions(input.conditions, args, 'destination');
  addNewVersionAttributes(input.attributes, args);
  return objects.commit<ObjectVersionRecord>(ctx, 'copyObject', args, 200);
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
 * version, resolved once, must be readable with the request's source key and meet the source
 * conditions; the copy gets the source's representation (COPY) or the request's (REPLACE), the
 * source's tags unless the request replaces them, and the request's lock and encryption.
 */
async function copyRewritten(
  objects: ObjectService,
  ctx: RequestContext,
  input: CopyRequest,
  deps: RewriteDeps & { version: ObjectVersionRecord },
): Promise<ObjectVersionRecord> {
  const { source } = input;
  const { version } = deps;
  assert(input.requireAbsent === undefined && input.requireMatchEtag === undefined);
  checkSourceConditions(version, source);
  const sourceKey = requireCustomerKeyFor(version, input.sourceCustomerKey, 'copy source');
  const stored = versionBytes(deps.download, deps.keys, version, undefined);
  const bytes =
    sourceKey === undefined
      ? stored
      : decrypted(stored, CustomerCipher.forVersion(version, sourceKey), 0);
  const body = new CopiedBody(bytes, version.size);
  const replace = input.directive === 'REPLACE';
  const attributes = {
    ...input.attributes,
    tags: input.attributes?.tags ?? version.tags,
  };
  try {
    return await objects.putObject(
      ctx,
      {
        bucket: input.bucket,
        key: input.key,
        contentLength: version.size,
        expected: new Map(),
        metadata: { ...(replace ? (input.metadata ?? {}) : version.metadata) },
        contentType: replace
          ? (input.contentType ?? 'application/octet-stream')
          : version.contentType,
        idempotency: undefined,
        conditions: input.conditions,
        digests: digestsOf(version),
        headers: (replace ? input.headers : version.headers) ?? {},
        attributes,
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
