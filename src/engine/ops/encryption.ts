// S3's view of server-side encryption, as the engine stores it: a bucket's default encryption
// configuration and the encryption a new version reports. Every chunk is encrypted at rest
// under its tenant's data key whatever is configured here (docs/on-disk-format.md); these
// records only say which S3 encryption a client asked for and is answered (service/
// encryption.ts checks what clients send).
//
// Persists: BucketRecord.encryption, ObjectVersionRecord.sse and MultipartUploadRecord.sse.

import {
  DB,
  tenantChildKey,
  type BucketRecord,
  type ObjectVersionRecord,
  type ServerSideEncryption,
  type SseCustomerRecord,
} from '../index/schema.js';
import type { EngineContext } from './context.js';
import { requireActiveTenant } from './control.js';
import { requireBucket } from './objects.js';
import { BadRequest } from '../../util/errors.js';

/** Characters of a KMS key id at most. */
const KMS_KEY_ID_CHARS_MAX = 2048;

/** Checks an encryption record received over the engine's socket. */
export function checkSse(value: unknown): ServerSideEncryption {
  const { algorithm, kmsKeyId } = (value ?? {}) as Record<string, unknown>;
  if (algorithm !== 'AES256' && algorithm !== 'aws:kms')
    throw BadRequest('the encryption algorithm is AES256 or aws:kms');
  if (kmsKeyId === undefined) return { algorithm };
  if (algorithm !== 'aws:kms' || typeof kmsKeyId !== 'string' || kmsKeyId.length === 0)
    throw BadRequest('a KMS key id goes with aws:kms only');
  if (kmsKeyId.length > KMS_KEY_ID_CHARS_MAX) throw BadRequest('the KMS key id is too long');
  return { algorithm, kmsKeyId };
}

/** Bytes of an SSE-C salt and of its verifier (service/customer-key.ts). */
export const SSE_C_SALT_BYTES = 16;
export const SSE_C_VERIFIER_BYTES = 32;

/** Checks an SSE-C salt received over the engine's socket. */
export function checkSseSalt(value: unknown): Buffer {
  if (!(value instanceof Uint8Array) || value.length !== SSE_C_SALT_BYTES)
    throw BadRequest(`an SSE-C salt is ${SSE_C_SALT_BYTES} bytes`);
  return Buffer.from(value);
}

/**
 * Checks an SSE-C record received over the engine's socket: a salt and a verifier, and the part
 * salts of a multipart version (a cluster member writing a copy of one sends them).
 */
export function checkSseCustomer(value: unknown): SseCustomerRecord {
  const { salt, verifier, partSalts } = (value ?? {}) as Record<string, unknown>;
  if (!(verifier instanceof Uint8Array) || verifier.length !== SSE_C_VERIFIER_BYTES)
    throw BadRequest(`an SSE-C verifier is ${SSE_C_VERIFIER_BYTES} bytes`);
  const record: SseCustomerRecord = { salt: checkSseSalt(salt), verifier: Buffer.from(verifier) };
  if (partSalts === undefined) return record;
  if (!(partSalts instanceof Uint8Array) || partSalts.length % SSE_C_SALT_BYTES !== 0)
    throw BadRequest(`SSE-C part salts are ${SSE_C_SALT_BYTES} bytes each`);
  return { ...record, partSalts: Buffer.from(partSalts) };
}

/** Sets (or, with `encryption` null, removes) a bucket's default encryption. */
export function setBucketEncryption(
  context: EngineContext,
  args: { tenantId: string; bucket: string; encryption?: unknown },
): BucketRecord {
  requireActiveTenant(context, args.tenantId);
  const bucket = requireBucket(context, args.tenantId, args.bucket);
  if (args.encryption === undefined || args.encryption === null) delete bucket.encryption;
  else bucket.encryption = checkSse(args.encryption);
  context.store.put(DB.buckets, tenantChildKey(args.tenantId, args.bucket), bucket);
  return bucket;
}

/**
 * The encryption a new version reports: the request's, else the bucket's default; nothing for
 * SSE-S3 (AES256), which every version reports without a record.
 */
export function newVersionSse(
  bucket: BucketRecord,
  requested: unknown,
): Pick<ObjectVersionRecord, 'sse'> {
  const sse = requested === undefined ? bucket.encryption : checkSse(requested);
  return sse === undefined || sse.algorithm === 'AES256' ? {} : { sse: { ...sse } };
}
