// S3's server-side encryption surface: Put/Get/DeleteBucketEncryption, the
// x-amz-server-side-encryption* headers of writes (PutObject, CopyObject,
// CreateMultipartUpload) and of answers (PUT, GET, HEAD, copy), and the refusal of SSE headers
// on reads. What is accepted and what it means is the service's (service/encryption.ts).
//
// Persists: nothing itself; through the service.

import type { S3Api, S3Request } from './api.js';
import { bucketFor } from './buckets.js';
import { s3Error } from './errors.js';
import { objectServiceOf, readXmlBody, rootOf } from './object-lock.js';
import { XmlWriter, xmlText, type XmlValue } from './xml.js';
import type { ServerSideEncryption } from '../engine/index/schema.js';
import { contextOf } from '../service/context.js';
import {
  checkKmsKeyId,
  checkReadSse,
  putBucketEncryption,
  reportedSse,
  requestedSse,
  type KmsKeyOwner,
  type SseRequest,
} from '../service/encryption.js';
import { isLightwellError } from '../util/errors.js';

export function registerEncryption(api: S3Api): void {
  api.register('PutBucketEncryption', putBucketEncryptionHandler);
  api.register('GetBucketEncryption', getBucketEncryption);
  api.register('DeleteBucketEncryption', deleteBucketEncryption);
}

const ENCRYPTION_XML_BYTES_MAX = 16 * 1024;

/** The SSE fields of a request's headers. */
function sseRequestOf(request: S3Request): SseRequest {
  const headers = request.exchange.headers;
  const customerKey = Object.keys(headers).some(
    (name) =>
      name.startsWith('x-amz-server-side-encryption-customer-') ||
      name.startsWith('x-amz-copy-source-server-side-encryption-customer-'),
  );
  return {
    algorithm: headers['x-amz-server-side-encryption'],
    kmsKeyId: headers['x-amz-server-side-encryption-aws-kms-key-id'],
    customerKey,
    customer: {
      algorithm: headers['x-amz-server-side-encryption-customer-algorithm'],
      key: headers['x-amz-server-side-encryption-customer-key'],
      keyMd5: headers['x-amz-server-side-encryption-customer-key-md5'],
    },
  };
}

/** A 400 of the service as S3's `InvalidArgument`. */
function asInvalidArgument<T>(run: () => T): T {
  try {
    return run();
  } catch (error) {
    if (isLightwellError(error) && error.code === 'bad_request' && !error.details['s3Code'])
      throw s3Error('InvalidArgument', error.message);
    throw error;
  }
}

/** The encryption a write's headers ask for (undefined: the bucket's default). */
export function writeSseOf(request: S3Request): ServerSideEncryption | undefined {
  const principal = request.requirePrincipal();
  return asInvalidArgument(() => requestedSse(sseRequestOf(request), principal.tenant));
}

/** Refuses SSE headers on a GET or HEAD. */
export function checkReadSseOf(request: S3Request): void {
  asInvalidArgument(() => checkReadSse(sseRequestOf(request)));
}

/** The x-amz-server-side-encryption* headers of an answer about `version`. */
export function addSseHeaders(
  version: { readonly sse?: ServerSideEncryption | undefined },
  headers: Record<string, string>,
): void {
  const sse = reportedSse(version);
  headers['x-amz-server-side-encryption'] = sse.algorithm;
  if (sse.kmsKeyId !== undefined)
    headers['x-amz-server-side-encryption-aws-kms-key-id'] = sse.kmsKeyId;
}

function defaultOf(config: XmlValue, tenant: KmsKeyOwner): ServerSideEncryption {
  const rule = (config as Record<string, XmlValue>)['Rule'];
  if (rule === undefined || typeof rule === 'string' || Array.isArray(rule))
    throw s3Error('MalformedXML', 'expected one <Rule>');
  const apply = (rule as Record<string, XmlValue>)['ApplyServerSideEncryptionByDefault'];
  if (apply === undefined || typeof apply === 'string' || Array.isArray(apply))
    throw s3Error('MalformedXML', 'expected <ApplyServerSideEncryptionByDefault>');
  const algorithm = xmlText(apply, 'SSEAlgorithm');
  const kmsKeyId = xmlText(apply, 'KMSMasterKeyID');
  if (algorithm === 'AES256' && kmsKeyId === undefined) return { algorithm };
  if (algorithm !== 'aws:kms')
    throw s3Error(
      'MalformedXML',
      'the SSEAlgorithm is AES256 or aws:kms (a key id only with aws:kms)',
    );
  return {
    algorithm,
    kmsKeyId: asInvalidArgument(() => checkKmsKeyId(kmsKeyId, tenant)),
  };
}

async function putBucketEncryptionHandler(request: S3Request): Promise<void> {
  const principal = request.requirePrincipal();
  const body = readXmlBody(request, ENCRYPTION_XML_BYTES_MAX);
  const bucket = bucketFor(request, { verb: 'write' });
  const config = rootOf(await body, 'ServerSideEncryptionConfiguration');
  const encryption = defaultOf(config, principal.tenant);
  await putBucketEncryption(
    objectServiceOf(request),
    contextOf(request.exchange, principal),
    bucket,
    encryption,
  );
  request.send(200, {});
}

function getBucketEncryption(request: S3Request): void {
  const bucket = bucketFor(request, { verb: 'read' });
  const encryption = bucket.encryption;
  if (!encryption)
    throw s3Error('ServerSideEncryptionConfigurationNotFoundError', undefined, {
      bucketName: bucket.name,
    });
  const xml = new XmlWriter()
    .start('ServerSideEncryptionConfiguration')
    .start('Rule')
    .start('ApplyServerSideEncryptionByDefault')
    .leaf('SSEAlgorithm', encryption.algorithm);
  if (encryption.kmsKeyId !== undefined) xml.leaf('KMSMasterKeyID', encryption.kmsKeyId);
  xml
    .end('ApplyServerSideEncryptionByDefault')
    .leaf('BucketKeyEnabled', 'false')
    .end('Rule')
    .end('ServerSideEncryptionConfiguration');
  request.sendXml(200, xml);
}

async function deleteBucketEncryption(request: S3Request): Promise<void> {
  const principal = request.requirePrincipal();
  const bucket = bucketFor(request, { verb: 'write' });
  await putBucketEncryption(
    objectServiceOf(request),
    contextOf(request.exchange, principal),
    bucket,
    undefined,
    204,
  );
  request.send(204, {});
}
