// Server-side copy as every transport asks for it: the source must be readable and the
// destination writable (the transport has resolved both buckets with their access checks), a
// copy onto itself must change something, and the engine's `copyObject` shares the source's
// chunks, checks the source's and the destination's conditions and the quota, and commits the
// version audited, as the native API's object-copy does.
//
// Persists: nothing itself; the version through the engine's `copyObject`.

import type { BucketRecord, ObjectVersionRecord } from '../engine/index/schema.js';
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
}

export function copyObject(
  objects: ObjectService,
  ctx: RequestContext,
  input: CopyRequest,
): Promise<ObjectVersionRecord> {
  const { source } = input;
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
