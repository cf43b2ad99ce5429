// The multipart half of the S3 object port (object-port.ts `S3MultipartStore`) on the service's
// multipart uploads (src/service/multipart.ts): the same upload records, part pipeline, quota,
// complete checks and audited commits as the native API. What is S3's own here: a part is
// hashed with MD5 (its ETag is its hex MD5), the completed object's ETag is the handler's
// `md5(part md5s)-N`, and the complete list's refusals carry S3's codes (`InvalidPart`,
// `InvalidPartOrder`, `EntityTooSmall`), mapped from the reason the service gives.
//
// Persists: nothing itself; uploads and parts through the service.

import { customerKeyOf } from './encryption.js';
import type { S3Request, S3Services } from './api.js';
import { bucketFor } from './buckets.js';
import { s3Error, type S3Code } from './errors.js';
import type { S3MultipartStore, S3Owner, StoredVersion, UploadParties } from './object-port.js';
import { checkPayload, storedOf } from './object-store.js';
import type { ObjectService } from '../service/objects.js';
import { contextOf } from '../service/context.js';
import { partsPageOf, uploadsPageOf } from '../service/cluster-read.js';
import {
  MultipartService,
  requireUploadIn,
  uploadHereFirst,
  uploadParties,
} from '../service/multipart.js';
import { HeldBody } from '../service/body.js';
import { tenantById } from '../service/bucket-access.js';
import type { BucketRecord, MultipartUploadRecord } from '../engine/index/schema.js';
import { isLightwellError } from '../util/errors.js';
import type { DigestAlg } from '../engine/checksums.js';
import { validateObjectKey } from '../security/names.js';

/** The S3 code of each reason the service refuses a complete list for. */
const COMPLETE_REFUSALS: Readonly<Record<string, S3Code>> = {
  part_missing: 'InvalidPart',
  part_order: 'InvalidPartOrder',
  part_too_small: 'EntityTooSmall',
};

export function serviceMultipartStore(
  services: S3Services,
  objects: ObjectService,
): S3MultipartStore {
  const multipart = new MultipartService(services, objects);

  const target = (
    request: S3Request,
    input: { key: string; uploadId: string },
    verb: 'read' | 'write',
  ): { bucket: ReturnType<typeof bucketFor>; key: string; uploadId: string } => {
    validateObjectKey(input.key);
    const bucket = bucketFor(request, { verb, key: input.key });
    return { bucket, key: input.key, uploadId: input.uploadId };
  };

  const complete: S3MultipartStore['complete'] = async (request, input) => {
    const principal = request.requirePrincipal();
    const address = target(request, input, 'write');
    if (input.etag === undefined) {
      requireUploadIn(services.store, address);
      throw s3Error('InvalidPart', "a part's ETag is not one Lightwell gave");
    }
    const customerKey = customerKeyOf(request);
    let version;
    try {
      version = await multipart.complete(contextOf(request.exchange, principal), {
        ...address,
        parts: input.parts.map((part) => ({
          partNumber: part.partNumber,
          etag: part.etag,
          ...(Object.keys(part.checksums).length > 0 ? { checksums: { ...part.checksums } } : {}),
        })),
        conditions: {},
        etag: input.etag,
        checksum: input.checksum,
        customerKey,
      });
    } catch (error) {
      const reason = isLightwellError(error) ? error.details['reason'] : undefined;
      const code = typeof reason === 'string' ? COMPLETE_REFUSALS[reason] : undefined;
      if (code !== undefined && isLightwellError(error)) throw s3Error(code, error.message);
      throw error;
    }
    return storedOf(version, address.bucket, customerKey) satisfies StoredVersion;
  };

  const ownerOf = (id: string): S3Owner => {
    const tenant = tenantById(services.store, id);
    return { id, displayName: tenant?.name ?? id };
  };
  const partiesOf = (upload: MultipartUploadRecord, bucket: BucketRecord): UploadParties => {
    const { initiator, owner } = uploadParties(upload, bucket);
    return { initiator: ownerOf(initiator), owner: ownerOf(owner) };
  };

  return {
    create: async (request, input) => {
      const principal = request.requirePrincipal();
      validateObjectKey(input.key);
      const bucket = bucketFor(request, { verb: 'write', key: input.key });
      const customerKey = customerKeyOf(request);
      const created = await multipart.create(contextOf(request.exchange, principal), {
        bucket,
        key: input.key,
        contentType: input.representation.contentType,
        metadata: { ...input.representation.metadata },
        headers: input.representation.headers,
        checksum: input.checksum,
        attributes: input.attributes,
        customerKey,
        initiator: request.principal?.tenant.id,
      });
      const { sse, sseCustomer } = created;
      return { uploadId: created.uploadId, encryption: { sse, sseCustomer, customerKey } };
    },
    uploadPart: async (request, input) => {
      const principal = request.requirePrincipal();
      const address = target(request, input, 'write');
      const customerKey = customerKeyOf(request);
      // A cluster member that lacks the upload takes it from a replica first, the body held.
      const fetching = uploadHereFirst(services, address);
      const source = fetching === undefined ? request.exchange : new HeldBody(request.exchange);
      if (fetching !== undefined) await fetching;
      const upload = requireUploadIn(services.store, address);
      const chosen = upload.checksum?.alg as DigestAlg | undefined;
      // AWS's rule: a part of an upload created with a checksum algorithm that declares a
      // checksum declares that one (a part without any is hashed with it all the same).
      if (chosen !== undefined && input.declared.length > 0 && !input.declared.includes(chosen))
        throw s3Error(
          'InvalidRequest',
          `Checksum Type mismatch occurred, expected checksum Type: ${chosen.toLowerCase()}, actual checksum Type: ${(input.declared[0] ?? '').toLowerCase()}`,
        );
      const part = await multipart.uploadPart(
        contextOf(request.exchange, principal),
        {
          ...address,
          partNumber: input.partNumber,
          contentLength: input.contentLength,
          expected: new Map(),
          digests: [...input.algs, 'MD5', ...(chosen === undefined ? [] : [chosen])],
          check: (received) => {
            checkPayload(request, received.checksums);
            input.check({ md5: received.md5, checksums: received.checksums });
          },
          customerKey,
        },
        source,
      );
      const { etag, checksums, lastModified } = part;
      const { sse, sseCustomer } = upload;
      return { etag, checksums, lastModified, encryption: { sse, sseCustomer, customerKey } };
    },
    uploadPartCopy: async (request, input) => {
      const principal = request.requirePrincipal();
      const address = target(request, input, 'write');
      validateObjectKey(input.source.key);
      const customerKey = customerKeyOf(request);
      const sourceBucket = bucketFor(
        request,
        { verb: 'read', key: input.source.key },
        input.source.bucket,
      );
      const { part, source } = await multipart.uploadPartCopy(
        contextOf(request.exchange, principal),
        {
          ...address,
          partNumber: input.partNumber,
          source: { ...input.source, bucket: sourceBucket },
          range: input.range,
          digests: ['MD5'],
          sourceCustomerKey: customerKeyOf(request, 'copy source'),
          customerKey,
        },
        services.download,
      );
      const { sse, sseCustomer } = requireUploadIn(services.store, address);
      return {
        etag: part.etag,
        checksums: part.checksums,
        lastModified: part.lastModified,
        encryption: { sse, sseCustomer, customerKey },
        sourceVersionId: sourceBucket.versioning === 'Unversioned' ? undefined : source.versionId,
      };
    },
    complete,
    abort: async (request, input) => {
      const principal = request.requirePrincipal();
      await multipart.abort(
        contextOf(request.exchange, principal),
        target(request, input, 'write'),
      );
    },
    listParts: async (request, input) => {
      const address = target(request, input, 'read');
      const { upload, ...page } = await partsPageOf(services.store, services.engine, address, {
        marker: input.partNumberMarker,
        max: input.maxParts,
      });
      return { ...page, ...partiesOf(upload, address.bucket) };
    },
    listUploads: async (request, input) => {
      const bucket = bucketFor(request, { verb: 'read', listPrefix: input.prefix });
      if (input.maxUploads === 0) return { uploads: [], isTruncated: false };
      const page = await uploadsPageOf(services.store, services.engine, bucket, {
        prefix: input.prefix,
        ...(input.keyMarker !== undefined ? { keyMarker: input.keyMarker } : {}),
        ...(input.uploadIdMarker !== undefined ? { uploadIdMarker: input.uploadIdMarker } : {}),
        max: input.maxUploads,
      });
      return {
        uploads: page.uploads.map((upload) => ({
          key: upload.key,
          uploadId: upload.uploadId,
          initiated: upload.initiatedAt,
          ...partiesOf(upload, bucket),
        })),
        isTruncated: page.isTruncated,
      };
    },
  };
}
