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
import type { ServerSideEncryption, SseCustomerRecord } from '../engine/index/schema.js';
import {
  checkCustomerKeyTransport,
  CustomerKey,
  type CustomerKeyFields,
} from '../service/customer-key.js';
import { tlsFilesOf } from '../util/config.js';
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

const CUSTOMER_PREFIX = {
  object: 'x-amz-server-side-encryption-customer-',
  'copy source': 'x-amz-copy-source-server-side-encryption-customer-',
} as const;

/** The SSE-C fields of a request's headers, for the object or a copy's source. */
function customerFieldsOf(
  request: S3Request,
  which: keyof typeof CUSTOMER_PREFIX,
): CustomerKeyFields {
  const headers = request.exchange.headers;
  const prefix = CUSTOMER_PREFIX[which];
  return {
    algorithm: headers[`${prefix}algorithm`],
    key: headers[`${prefix}key`],
    keyMd5: headers[`${prefix}key-md5`],
  };
}

/** The SSE fields of a request's headers. */
function sseRequestOf(request: S3Request): SseRequest {
  const headers = request.exchange.headers;
  return {
    algorithm: headers['x-amz-server-side-encryption'],
    kmsKeyId: headers['x-amz-server-side-encryption-aws-kms-key-id'],
    customer: customerFieldsOf(request, 'object'),
  };
}

/**
 * The SSE-C key the request sends for the object or a copy's source (undefined: none), checked
 * against its MD5 (400 `InvalidArgument`) and refused over plain HTTP from a peer that is not
 * on loopback nor the trusted TLS proxy (400 `InvalidRequest`, as AWS refuses it).
 */
export function customerKeyOf(
  request: S3Request,
  which: keyof typeof CUSTOMER_PREFIX = 'object',
): CustomerKey | undefined {
  return checkedCustomerKey(request, customerFieldsOf(request, which), which);
}

function checkedCustomerKey(
  request: S3Request,
  fields: CustomerKeyFields,
  which: string,
): CustomerKey | undefined {
  const key = asInvalidArgument(() => CustomerKey.parse(fields, which));
  if (key === undefined) return undefined;
  const { settings } = request.services;
  checkCustomerKeyTransport({
    tls: tlsFilesOf(settings) !== undefined,
    remoteAddress: request.exchange.remoteAddress,
    trustedProxy: settings.string('security.trusted_proxy'),
  });
  return key;
}

/**
 * The encryption a POST object form asks for: its `x-amz-server-side-encryption*` fields, read
 * as a PutObject's headers are (`sse` undefined: the bucket's default; `customerKey`: SSE-C).
 */
export function formEncryptionOf(
  request: S3Request,
  fields: ReadonlyMap<string, string>,
  tenant: KmsKeyOwner,
): { sse: ServerSideEncryption | undefined; customerKey: CustomerKey | undefined } {
  const prefix = CUSTOMER_PREFIX.object;
  const customer = {
    algorithm: fields.get(`${prefix}algorithm`),
    key: fields.get(`${prefix}key`),
    keyMd5: fields.get(`${prefix}key-md5`),
  };
  const input = {
    algorithm: fields.get('x-amz-server-side-encryption'),
    kmsKeyId: fields.get('x-amz-server-side-encryption-aws-kms-key-id'),
    customer,
  };
  const sse = asInvalidArgument(() => requestedSse(input, tenant));
  return { sse, customerKey: checkedCustomerKey(request, customer, 'object') };
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

/** The SSE-C headers of an answer about bytes under a customer key (the request's, if known). */
function addCustomerKeyHeaders(
  headers: Record<string, string>,
  customerKey: CustomerKey | undefined,
): void {
  headers['x-amz-server-side-encryption-customer-algorithm'] = 'AES256';
  if (customerKey !== undefined)
    headers['x-amz-server-side-encryption-customer-key-md5'] = customerKey.keyMd5;
}

/**
 * The x-amz-server-side-encryption* headers of an answer about `version`; for an SSE-C version
 * the customer algorithm and the MD5 of the key the request sent (the index has no MD5 of it).
 */
export function addSseHeaders(
  version: {
    readonly sse?: ServerSideEncryption | undefined;
    readonly sseCustomer?: SseCustomerRecord | undefined;
  },
  headers: Record<string, string>,
  customerKey?: CustomerKey,
): void {
  if (version.sseCustomer !== undefined) {
    addCustomerKeyHeaders(headers, customerKey);
    return;
  }
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
