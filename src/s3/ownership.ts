// S3 Object Ownership on the S3 surface: Put/Get/DeleteBucketOwnershipControls, CreateBucket's
// `x-amz-object-ownership`, and the S3 errors of the service's ownership rules
// (service/ownership.ts).
//
// Persists: nothing itself; through the service.

import type { S3Api, S3Request } from './api.js';
import { bucketFor } from './buckets.js';
import { s3Error } from './errors.js';
import { objectServiceOf, readXmlBody, rootOf } from './object-lock.js';
import { XmlWriter, xmlList, xmlText } from './xml.js';
import type { BucketRecord } from '../engine/index/schema.js';
import { contextOf } from '../service/context.js';
import {
  aclsDisabled,
  objectOwnerOf,
  putBucketOwnership,
  type ObjectOwnership,
} from '../service/ownership.js';
import { isLightwellError } from '../util/errors.js';

export function registerOwnership(api: S3Api): void {
  api.register('PutBucketOwnershipControls', putOwnershipControls);
  api.register('GetBucketOwnershipControls', getOwnershipControls);
  api.register('DeleteBucketOwnershipControls', deleteOwnershipControls);
}

const OWNERSHIP_XML_BYTES_MAX = 4 * 1024;
const OWNERSHIPS = new Set(['BucketOwnerEnforced', 'BucketOwnerPreferred', 'ObjectWriter']);

function ownershipOf(text: string | undefined): ObjectOwnership {
  if (text === undefined || !OWNERSHIPS.has(text))
    throw s3Error(
      'MalformedXML',
      'ObjectOwnership is BucketOwnerEnforced, BucketOwnerPreferred or ObjectWriter',
    );
  return text as ObjectOwnership;
}

/** The service's ownership refusals as S3's errors. */
function asS3<T>(run: () => T): T {
  try {
    return run();
  } catch (error) {
    if (isLightwellError(error) && error.details['reason'] === 'acl_not_supported')
      throw s3Error('AccessControlListNotSupported', error.message);
    if (isLightwellError(error) && error.details['reason'] === 'acl_with_ownership')
      throw s3Error('InvalidBucketAclWithObjectOwnership', error.message);
    throw error;
  }
}

async function setOwnership(
  request: S3Request,
  bucket: BucketRecord,
  ownership: ObjectOwnership | undefined,
): Promise<void> {
  const principal = request.requirePrincipal();
  const context = contextOf(request.exchange, principal);
  await asS3(() => putBucketOwnership(objectServiceOf(request), context, bucket, ownership));
}

async function putOwnershipControls(request: S3Request): Promise<void> {
  request.requirePrincipal();
  const body = readXmlBody(request, OWNERSHIP_XML_BYTES_MAX);
  const bucket = bucketFor(request, { verb: 'admin' });
  const rules = xmlList(rootOf(await body, 'OwnershipControls'), 'Rule');
  const rule = rules[0];
  if (rules.length !== 1 || rule === undefined)
    throw s3Error('MalformedXML', 'OwnershipControls holds exactly one <Rule>');
  await setOwnership(request, bucket, ownershipOf(xmlText(rule, 'ObjectOwnership')));
  request.send(200, {});
}

function getOwnershipControls(request: S3Request): void {
  const bucket = bucketFor(request, { verb: 'read' });
  if (bucket.ownership === undefined)
    throw s3Error('OwnershipControlsNotFoundError', undefined, { bucketName: bucket.name });
  const xml = new XmlWriter()
    .start('OwnershipControls')
    .start('Rule')
    .leaf('ObjectOwnership', bucket.ownership)
    .end('Rule')
    .end('OwnershipControls');
  request.sendXml(200, xml);
}

async function deleteOwnershipControls(request: S3Request): Promise<void> {
  const bucket = bucketFor(request, { verb: 'admin' });
  await setOwnership(request, bucket, undefined);
  request.send(204, {});
}

/** CreateBucket's `x-amz-object-ownership`: checked before the bucket is made. */
export function requestedOwnership(request: S3Request): ObjectOwnership | undefined {
  const header = request.exchange.header('x-amz-object-ownership');
  if (header === undefined) return undefined;
  if (!OWNERSHIPS.has(header))
    throw s3Error('InvalidArgument', 'x-amz-object-ownership names no ObjectOwnership');
  return header as ObjectOwnership;
}

/** Sets a new bucket's ownership rule (a second commit, as CreateBucket's ACL). */
export async function applyCreateBucketOwnership(
  request: S3Request,
  bucket: BucketRecord,
  ownership: ObjectOwnership | undefined,
): Promise<void> {
  if (ownership === undefined) return;
  await setOwnership(request, bucket, ownership);
}

/** Refuses an ACL change on a bucket whose ACLs are off. */
export function checkAclsEnabled(bucket: BucketRecord): void {
  if (aclsDisabled(bucket))
    throw s3Error('AccessControlListNotSupported', 'the bucket does not allow ACLs');
}

/** The owner of an object the request writes into `bucket` (see service/ownership.ts). */
export function writeOwnerOf(
  bucket: BucketRecord,
  writer: string,
  headers: Readonly<Record<string, string>>,
): string {
  const grants = Object.keys(headers).some((name) => name.startsWith('x-amz-grant-'));
  return asS3(() => objectOwnerOf(bucket, writer, headers['x-amz-acl'], grants));
}
