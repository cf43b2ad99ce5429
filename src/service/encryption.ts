// Server-side encryption as S3 clients ask for it. Every chunk Lightwell stores is encrypted at
// rest under its tenant's data key (docs/on-disk-format.md), so SSE-S3 (`AES256`) is what every
// object already has and is always reported; SSE-KMS (`aws:kms`) is accepted with the tenant's
// own key as the only key id (the data key the console rotates), stored on the version so it is
// reported back; a bucket's default encryption applies to new versions that ask for none.
// SSE-C (customer-provided keys) is customer-key.ts's; here its fields are only checked beside
// the other encryption headers.
//
// Persists: nothing itself; BucketRecord.encryption and ObjectVersionRecord.sse through the
// engine (`setBucketEncryption`, the write commands' `sse`).

import type { CommandArgs } from '../engine/commands.js';
import type { BucketRecord, ServerSideEncryption, TenantRecord } from '../engine/index/schema.js';
import { BadRequest } from '../util/errors.js';
import { CustomerKey, type CustomerKeyFields } from './customer-key.js';
import type { RequestContext } from './context.js';
import type { ObjectService } from './objects.js';

/** What a request says about encryption, as sent (absent: not sent). */
export interface SseRequest {
  readonly algorithm?: string | undefined;
  readonly kmsKeyId?: string | undefined;
  /** The object's SSE-C fields as sent (x-amz-server-side-encryption-customer-*). */
  readonly customer?: CustomerKeyFields;
}

/** The KMS key id that names a tenant's data key: the tenant's id. */
export function tenantKmsKeyId(tenantId: string): string {
  return tenantId;
}

/**
 * The SSE-C fields are checked as S3 checks them (customer-key.ts: an AES256 algorithm, a
 * 256-bit base64 key and its MD5), and never go with another encryption: the key itself is
 * taken by the operation that stores or reads the bytes under it.
 */
function checkCustomerFields(input: SseRequest): void {
  if (input.customer === undefined) return;
  if (CustomerKey.parse(input.customer, 'object') === undefined) return;
  if (input.algorithm !== undefined || input.kmsKeyId !== undefined)
    throw BadRequest('SSE-C cannot be combined with x-amz-server-side-encryption');
}

/** What a KMS key id is checked against: the tenant's id and its named keys. */
export type KmsKeyOwner = Pick<TenantRecord, 'id' | 'kmsKeys'>;

/**
 * The encryption a write asks for (undefined: none, the bucket's default applies): `AES256`, or
 * `aws:kms` with one of this tenant's keys (named, or its own by default).
 */
export function requestedSse(
  input: SseRequest,
  tenant: KmsKeyOwner,
): ServerSideEncryption | undefined {
  checkCustomerFields(input);
  const { algorithm, kmsKeyId } = input;
  if (algorithm === undefined) {
    if (kmsKeyId !== undefined)
      throw BadRequest('a KMS key id needs x-amz-server-side-encryption: aws:kms');
    return undefined;
  }
  if (algorithm === 'AES256') {
    if (kmsKeyId !== undefined) throw BadRequest('a KMS key id goes with aws:kms only');
    return { algorithm };
  }
  if (algorithm !== 'aws:kms') throw BadRequest('the server-side encryption is AES256 or aws:kms');
  return { algorithm, kmsKeyId: checkKmsKeyId(kmsKeyId, tenant) };
}

/**
 * A KMS key id of this tenant: its own id (also without a key id), or a named key an operator
 * created (engine/ops/kms-keys.ts). Any other id is a 400 that S3 answers as AWS does,
 * `KMS.NotFoundException`.
 */
export function checkKmsKeyId(kmsKeyId: string | undefined, tenant: KmsKeyOwner): string {
  const own = tenantKmsKeyId(tenant.id);
  if (kmsKeyId === undefined || kmsKeyId === own) return own;
  if (tenant.kmsKeys?.some((key) => key.id === kmsKeyId) === true) return kmsKeyId;
  throw BadRequest(`Invalid keyId ${kmsKeyId.slice(0, 64)}`, {
    s3Code: 'KMS.NotFoundException',
  });
}

/** A read names no encryption (S3 refuses SSE headers on GET and HEAD). */
export function checkReadSse(input: SseRequest): void {
  checkCustomerFields(input);
  if (input.algorithm !== undefined || input.kmsKeyId !== undefined)
    throw BadRequest('server-side encryption headers are for writes, not reads');
}

/** The encryption S3 reports for a version: its record, else SSE-S3. */
export function reportedSse(version: { readonly sse?: ServerSideEncryption | undefined }): {
  algorithm: string;
  kmsKeyId?: string | undefined;
} {
  return version.sse ?? { algorithm: 'AES256' };
}

/** Sets (or, undefined, removes) a bucket's default encryption. */
export function putBucketEncryption(
  objects: ObjectService,
  ctx: RequestContext,
  bucket: BucketRecord,
  encryption: ServerSideEncryption | undefined,
  status = 200,
): Promise<BucketRecord> {
  const args: CommandArgs<'setBucketEncryption'> = {
    tenantId: ctx.principal.tenant.id,
    bucket: bucket.name,
  };
  if (encryption !== undefined) args.encryption = { ...encryption };
  return objects.commit(ctx, 'setBucketEncryption', args, status);
}
