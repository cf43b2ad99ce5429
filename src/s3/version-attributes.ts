// What an S3 write asks of its new version besides the bytes and the representation: its lock
// (x-amz-object-lock-*, object-lock.ts), its S3 encryption (encryption.ts) and its tags (x-amz-tagging, and for a copy the tagging
// directive, tagging.ts). PutObject, CopyObject and CreateMultipartUpload read them here.
//
// Persists: nothing.

import type { S3Request } from './api.js';
import { writeSseOf } from './encryption.js';
import { writeLockOf } from './object-lock.js';
import { copyTagsOf, taggingHeaderOf } from './tagging.js';
import type { NewVersionAttributes } from '../service/object-lock.js';

/** The new version's attributes from the request's headers (`copy`: a CopyObject's rules). */
export function newVersionAttributesOf(
  request: S3Request,
  options: { readonly copy?: boolean } = {},
): NewVersionAttributes {
  return {
    lock: writeLockOf(request),
    tags: options.copy === true ? copyTagsOf(request) : taggingHeaderOf(request),
    sse: writeSseOf(request),
  };
}
