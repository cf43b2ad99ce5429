// What an S3 write asks of its new version besides the bytes and the representation: its lock
// (x-amz-object-lock-*, object-lock.ts), its S3 encryption (encryption.ts) and its tags
// (x-amz-tagging, and for a copy the tagging directive, tagging.ts). PutObject, CopyObject and
// CreateMultipartUpload read them here.
//
// Persists: nothing.

import type { S3Request } from './api.js';
import { bucketFor } from './buckets.js';
import { writeSseOf } from './encryption.js';
import { writeLockOf } from './object-lock.js';
import { copyTagsOf, taggingHeaderOf } from './tagging.js';
import type { NewVersionAttributes } from '../service/object-lock.js';

/**
 * The new version's attributes from the request's headers (`copy`: a CopyObject's rules). A
 * request refused for these headers is first checked for access to its bucket: as on AWS, a
 * bucket policy that denies it (one whose conditions are on these very headers among them)
 * answers AccessDenied before the headers' own error.
 */
export function newVersionAttributesOf(
  request: S3Request,
  options: { readonly copy?: boolean } = {},
): NewVersionAttributes {
  try {
    return {
      lock: writeLockOf(request),
      tags: options.copy === true ? copyTagsOf(request) : taggingHeaderOf(request),
      sse: writeSseOf(request),
    };
  } catch (error) {
    const { bucket, key } = request.address;
    if (bucket !== undefined)
      bucketFor(request, key === undefined ? { verb: 'write' } : { verb: 'write', key });
    throw error;
  }
}
