// S3's access-control operations: Get/PutBucketAcl, Get/PutObjectAcl, Put/Get/DeleteBucketPolicy,
// GetBucketPolicyStatus and Put/Get/DeletePublicAccessBlock, and the ACL a write asks for with
// `x-amz-acl` or `x-amz-grant-*` (CreateBucket, PutObject, CopyObject, CreateMultipartUpload).
//
// Grantees are tenants by canonical id (the tenant id) and S3's public groups; a grant to an id
// no tenant holds is `InvalidArgument`, one by e-mail `UnresolvableGrantByEmailAddress`. While
// the bucket's (or its tenant's) public access block has BlockPublicAcls, a public ACL is
// refused (`AccessDenied`), and with BlockPublicPolicy a public policy.
//
// Persists: nothing itself; ACLs, policies and blocks through the engine (ops/access.ts).

import { mutate, type S3Api, type S3Request } from './api.js';
import { bucketFor, readBody } from './buckets.js';
import { s3Error } from './errors.js';
import { parseXml, xmlList, xmlText, XmlWriter, type XmlValue } from './xml.js';
import type { BucketRecord, TenantRecord } from '../engine/index/schema.js';
import {
  aclIsPublic,
  aclRecordOf,
  ALL_USERS_URI,
  AUTHENTICATED_USERS_URI,
  cannedAcl,
  granteeOf,
  grantsFromHeaders,
  hasGrantHeaders,
  PERMISSIONS,
  GRANTS_MAX,
  type Acl,
  type Grant,
  type Permission,
} from '../security/acl.js';
import {
  parseAwsPolicy,
  POLICY_DOCUMENT_BYTES_MAX,
  type StoredPolicy,
} from '../security/policy.js';
import { compilePolicy } from '../security/policy.js';
import type { PublicAccessBlock } from '../security/public-access.js';
import {
  blockOf,
  bucketAcl,
  bucketByName,
  objectAcl,
  OBJECT_ACL_HEADER,
  tenantById,
} from '../service/bucket-access.js';
import { resolveForRead } from '../service/read.js';
import { isLightwellError } from '../util/errors.js';
import type { ObjectRepresentation } from './object-headers.js';
import { checkAclsEnabled, writeOwnerOf } from './ownership.js';
import { aclsDisabled } from '../service/ownership.js';

const ACL_XML_BYTES_MAX = 64 * 1024;

export function registerAccessOps(api: S3Api): void {
  api.register('GetBucketAcl', getBucketAcl);
  api.register('PutBucketAcl', putBucketAcl);
  api.register('GetObjectAcl', getObjectAcl);
  api.register('PutObjectAcl', putObjectAcl);
  api.register('GetBucketPolicy', getBucketPolicy);
  api.register('PutBucketPolicy', putBucketPolicy);
  api.register('DeleteBucketPolicy', deleteBucketPolicy);
  api.register('GetBucketPolicyStatus', getBucketPolicyStatus);
  api.register('GetPublicAccessBlock', getPublicAccessBlock);
  api.register('PutPublicAccessBlock', putPublicAccessBlock);
  api.register('DeletePublicAccessBlock', deletePublicAccessBlock);
}

// ---------------------------------------------------------------------------------------------
// ACLs.

function tenantOf(request: S3Request, id: string): TenantRecord | undefined {
  return tenantById(request.services.store, id);
}

/** Grants to tenants must name existing ones (S3: InvalidArgument). */
function checkGrantees(request: S3Request, acl: Acl): void {
  for (const { grantee } of acl.grants)
    if (grantee.type === 'user' && tenantOf(request, grantee.id)?.state !== 'active')
      throw s3Error(
        'InvalidArgument',
        `no account has the canonical id ${grantee.id.slice(0, 64)}`,
      );
}

/** An ACL from an S3 error of the validator: e-mail grants are S3's own code. */
function aclError(error: unknown): unknown {
  if (isLightwellError(error) && error.code === 'bad_request' && !error.details['s3Code'])
    return error.details['unresolvable'] === true
      ? s3Error('UnresolvableGrantByEmailAddress', error.message)
      : s3Error('InvalidArgument', error.message);
  return error;
}

/**
 * The ACL a request's headers ask for (`x-amz-acl` or `x-amz-grant-*`), owned by `owner`;
 * undefined when it asks for none. Both at once is `InvalidRequest`, as on S3.
 */
export function aclFromHeaders(
  request: S3Request,
  owner: string,
  bucketOwner: string,
  headers: Readonly<Record<string, string>> = request.exchange.headers,
): Acl | undefined {
  const canned = headers['x-amz-acl'];
  const grants = hasGrantHeaders(headers);
  if (canned !== undefined && grants)
    throw s3Error('InvalidRequest', 'specify either x-amz-acl or x-amz-grant-* headers, not both');
  try {
    if (canned !== undefined) return cannedAcl(canned.trim(), owner, bucketOwner);
    if (grants) return { owner, grants: grantsFromHeaders(headers) };
  } catch (error) {
    throw aclError(error);
  }
  return undefined;
}

/** Refuses a public ACL on a bucket whose public access block has BlockPublicAcls. */
function checkAclAllowed(acl: Acl, block: PublicAccessBlock): void {
  if (block.blockPublicAcls && aclIsPublic(acl))
    throw s3Error('AccessDenied', 'public ACLs are blocked on this bucket (BlockPublicAcls)');
}

/** An ACL from an AccessControlPolicy document. */
function aclFromXml(bytes: Buffer, owner: string): Acl {
  const doc = parseXml(bytes, ACL_XML_BYTES_MAX);
  const policy = doc['AccessControlPolicy'];
  if (policy === undefined || typeof policy === 'string' || Array.isArray(policy))
    throw s3Error('MalformedACLError', 'the body must be an AccessControlPolicy');
  const ownerId = xmlText((policy as Record<string, XmlValue>)['Owner'], 'ID');
  if (ownerId !== undefined && ownerId !== owner)
    throw s3Error('AccessDenied', 'the ACL names another owner');
  const list = (policy as Record<string, XmlValue>)['AccessControlList'];
  const grants: Grant[] = [];
  for (const grant of xmlList(list, 'Grant')) {
    const grantee =
      typeof grant === 'object' && !Array.isArray(grant)
        ? (grant as Record<string, XmlValue>)['Grantee']
        : undefined;
    const permission = xmlText(grant, 'Permission');
    if (grantee === undefined || !(PERMISSIONS as readonly string[]).includes(permission ?? ''))
      throw s3Error('MalformedACLError', 'every Grant needs a Grantee and a Permission');
    const id = xmlText(grantee, 'ID');
    const uri = xmlText(grantee, 'URI');
    const email = xmlText(grantee, 'EmailAddress');
    try {
      const who =
        id !== undefined
          ? granteeOf('id', id)
          : uri !== undefined
            ? granteeOf('uri', uri)
            : granteeOf(email !== undefined ? 'emailAddress' : '?', email ?? '');
      grants.push({ grantee: who, permission: permission as Permission });
    } catch (error) {
      throw aclError(error);
    }
  }
  if (grants.length > GRANTS_MAX) throw s3Error('MalformedACLError', 'too many grants');
  return { owner, grants };
}

/** The ACL of a Put*Acl request: its headers, else its AccessControlPolicy body. */
async function requestedAcl(
  request: S3Request,
  body: Promise<Buffer>,
  owner: string,
  bucketOwner: string,
): Promise<Acl> {
  const fromHeaders = aclFromHeaders(request, owner, bucketOwner);
  const bytes = await body;
  if (fromHeaders) return fromHeaders;
  if (bytes.length === 0)
    throw s3Error('MalformedACLError', 'send an AccessControlPolicy, x-amz-acl or x-amz-grant-*');
  return aclFromXml(bytes, owner);
}

function aclXml(request: S3Request, acl: Acl): XmlWriter {
  const name = (id: string): string => tenantOf(request, id)?.name ?? id;
  const xml = new XmlWriter()
    .start('AccessControlPolicy')
    .start('Owner')
    .leaf('ID', acl.owner)
    .leaf('DisplayName', name(acl.owner))
    .end('Owner')
    .start('AccessControlList');
  const xsi = { 'xmlns:xsi': 'http://www.w3.org/2001/XMLSchema-instance' };
  // The public groups' grants first, as S3 lists them (clients sort by grantee name).
  const ordered = [
    ...acl.grants.filter((g) => g.grantee.type === 'group'),
    ...acl.grants.filter((g) => g.grantee.type === 'user'),
  ];
  for (const { grantee, permission } of ordered) {
    xml.start('Grant');
    if (grantee.type === 'user')
      xml
        .startWith('Grantee', { ...xsi, 'xsi:type': 'CanonicalUser' })
        .leaf('ID', grantee.id)
        .leaf('DisplayName', name(grantee.id));
    else
      xml
        .startWith('Grantee', { ...xsi, 'xsi:type': 'Group' })
        .leaf('URI', grantee.group === 'AllUsers' ? ALL_USERS_URI : AUTHENTICATED_USERS_URI);
    xml.end('Grantee').leaf('Permission', permission).end('Grant');
  }
  return xml.end('AccessControlList').end('AccessControlPolicy');
}

function getBucketAcl(request: S3Request): void {
  request.requirePrincipal();
  const bucket = bucketFor(request, { verb: 'read' });
  request.sendXml(200, aclXml(request, bucketAcl(bucket)));
}

async function putBucketAcl(request: S3Request): Promise<void> {
  request.requirePrincipal();
  const body = readBody(request, ACL_XML_BYTES_MAX);
  const bucket = bucketFor(request, { verb: 'admin' });
  checkAclsEnabled(bucket);
  const { owner } = bucketByName(request.services.store, bucket.name);
  const acl = await requestedAcl(request, body, bucket.tenantId, bucket.tenantId);
  checkGrantees(request, acl);
  checkAclAllowed(acl, blockOf(bucket, owner));
  await mutate(
    request,
    'putBucketAcl',
    { tenantId: bucket.tenantId, bucket: bucket.name, acl: aclRecordOf(acl) },
    200,
  );
  request.send(200, {});
}

function objectTarget(request: S3Request): { key: string; versionId: string | null } {
  const key = request.address.key;
  if (key === undefined) throw s3Error('InvalidRequest', 'no object named');
  return { key, versionId: request.exchange.queryParam('versionId') };
}

function getObjectAcl(request: S3Request): void {
  request.requirePrincipal();
  const { key, versionId } = objectTarget(request);
  const bucket = bucketFor(request, { verb: 'read', key });
  const version = resolveForRead(request.services.store, bucket, key, versionId);
  const headers: Record<string, string> =
    versionId !== null ? { 'x-amz-version-id': version.versionId } : {};
  request.sendXml(200, aclXml(request, objectAcl(version, bucket)), headers);
}

async function putObjectAcl(request: S3Request): Promise<void> {
  request.requirePrincipal();
  const body = readBody(request, ACL_XML_BYTES_MAX);
  const { key, versionId } = objectTarget(request);
  const bucket = bucketFor(request, { verb: 'admin', key });
  checkAclsEnabled(bucket);
  const { owner } = bucketByName(request.services.store, bucket.name);
  const version = resolveForRead(request.services.store, bucket, key, versionId);
  const current = objectAcl(version, bucket);
  const acl = await requestedAcl(request, body, current.owner, bucket.tenantId);
  checkGrantees(request, acl);
  checkAclAllowed(acl, blockOf(bucket, owner));
  await mutate(
    request,
    'putObjectAcl',
    {
      tenantId: bucket.tenantId,
      bucket: bucket.name,
      key,
      ...(versionId !== null ? { versionId } : {}),
      acl: aclRecordOf(acl),
    },
    200,
  );
  request.send(200, versionId !== null ? { 'x-amz-version-id': versionId } : {});
}

/**
 * The representation of a write with the ACL its headers ask for (in the version's headers,
 * engine/ops/access.ts); a write by another tenant or anyone records its writer as the owner.
 */
export function withRequestedAcl(
  request: S3Request,
  representation: ObjectRepresentation,
  headers: Readonly<Record<string, string>> = request.exchange.headers,
): ObjectRepresentation {
  const name = request.address.bucket;
  if (name === undefined) return representation;
  let found;
  try {
    found = bucketByName(request.services.store, name);
  } catch {
    return representation;
  }
  const { bucket, owner } = found;
  const writer = writeOwnerOf(bucket, request.principal?.tenant.id ?? bucket.tenantId, headers);
  // ACLs off: the object is the bucket tenant's, private to it (no ACL stored).
  if (aclsDisabled(bucket)) return representation;
  const acl = aclFromHeaders(request, writer, bucket.tenantId, headers);
  if (acl === undefined && writer === bucket.tenantId) return representation;
  const stored = acl ?? cannedAcl('private', writer);
  checkGrantees(request, stored);
  checkAclAllowed(stored, blockOf(bucket, owner));
  return {
    ...representation,
    headers: {
      ...representation.headers,
      [OBJECT_ACL_HEADER]: JSON.stringify(aclRecordOf(stored)),
    },
  };
}

/**
 * After a copy: a COPY directive keeps the source's representation headers, its ACL among
 * them, but a copy gets the ACL its request asks for (else private), as on S3.
 */
export async function settleCopyAcl(
  request: S3Request,
  version: { readonly versionId: string; readonly headers?: Readonly<Record<string, string>> },
  representation: ObjectRepresentation,
): Promise<void> {
  const wanted = representation.headers[OBJECT_ACL_HEADER];
  const got = version.headers?.[OBJECT_ACL_HEADER];
  if (wanted === got) return;
  const { bucket } = bucketByName(request.services.store, request.address.bucket ?? '');
  const acl =
    wanted === undefined
      ? aclRecordOf(cannedAcl('private', bucket.tenantId))
      : (JSON.parse(wanted) as unknown);
  await mutate(
    request,
    'putObjectAcl',
    {
      tenantId: bucket.tenantId,
      bucket: bucket.name,
      key: request.address.key ?? '',
      ...(version.versionId !== 'null' ? { versionId: version.versionId } : {}),
      acl,
    },
    200,
  );
}

/** After CreateBucket: the ACL its headers asked for, if any, stored on the new bucket. */
export async function applyCreateBucketAcl(request: S3Request, name: string): Promise<void> {
  const principal = request.requirePrincipal();
  const acl = aclFromHeaders(request, principal.tenant.id, principal.tenant.id);
  if (acl === undefined) return;
  checkGrantees(request, acl);
  checkAclAllowed(acl, blockOf({ name } as BucketRecord, principal.tenant));
  await mutate(
    request,
    'putBucketAcl',
    { tenantId: principal.tenant.id, bucket: name, acl: aclRecordOf(acl) },
    200,
  );
}

/** Refuses a CreateBucket whose ACL headers are malformed, before the bucket is made. */
export function checkCreateBucketAcl(request: S3Request): void {
  const principal = request.requirePrincipal();
  const acl = aclFromHeaders(request, principal.tenant.id, principal.tenant.id);
  if (acl) checkGrantees(request, acl);
  if (acl && principal.tenant.publicAccessBlock?.blockPublicAcls && aclIsPublic(acl))
    throw s3Error('AccessDenied', 'public ACLs are blocked for this account (BlockPublicAcls)');
}

// ---------------------------------------------------------------------------------------------
// Bucket policies.

/** The AWS JSON of a stored policy: the document, or the native form rendered as AWS's. */
function policyDocument(policy: StoredPolicy, bucket: BucketRecord): string {
  if ('document' in policy) return policy.document;
  const actions: Record<string, string[]> = {
    read: ['s3:GetObject', 's3:ListBucket'],
    write: ['s3:PutObject'],
    delete: ['s3:DeleteObject'],
    admin: ['s3:*'],
  };
  return JSON.stringify({
    Version: '2012-10-17',
    Statement: policy.statements.map((statement) => ({
      Effect: 'Deny',
      Principal: statement.principals.includes('*')
        ? '*'
        : { AWS: statement.principals.map((key) => `arn:aws:iam::${bucket.tenantId}:user/${key}`) },
      Action: statement.actions.includes('*')
        ? 's3:*'
        : statement.actions.flatMap((verb) => actions[verb] ?? []),
      Resource: [
        `arn:aws:s3:::${bucket.name}`,
        `arn:aws:s3:::${bucket.name}/${statement.prefix ?? ''}*`,
      ],
    })),
  });
}

function getBucketPolicy(request: S3Request): void {
  request.requirePrincipal();
  const bucket = bucketFor(request, { verb: 'admin' });
  const policy = bucket.policy as StoredPolicy | undefined;
  if (!policy) throw s3Error('NoSuchBucketPolicy', undefined, { bucketName: bucket.name });
  request.send(200, { 'Content-Type': 'application/json' }, policyDocument(policy, bucket));
}

async function putBucketPolicy(request: S3Request): Promise<void> {
  request.requirePrincipal();
  const body = readBody(request, POLICY_DOCUMENT_BYTES_MAX);
  const bucket = bucketFor(request, { verb: 'admin' });
  const { owner } = bucketByName(request.services.store, bucket.name);
  const document = (await body).toString('utf8');
  let compiled;
  try {
    compiled = parseAwsPolicy(document, bucket.name);
  } catch (error) {
    throw s3Error('MalformedPolicy', isLightwellError(error) ? error.message : undefined);
  }
  if (compiled.isPublic && blockOf(bucket, owner).blockPublicPolicy)
    throw s3Error('AccessDenied', 'public policies are blocked on this bucket (BlockPublicPolicy)');
  await mutate(
    request,
    'putBucketS3Policy',
    { tenantId: bucket.tenantId, bucket: bucket.name, document },
    204,
  );
  request.send(204, {});
}

async function deleteBucketPolicy(request: S3Request): Promise<void> {
  request.requirePrincipal();
  const bucket = bucketFor(request, { verb: 'admin' });
  await mutate(
    request,
    'putBucketS3Policy',
    { tenantId: bucket.tenantId, bucket: bucket.name, document: null },
    204,
  );
  request.send(204, {});
}

function getBucketPolicyStatus(request: S3Request): void {
  request.requirePrincipal();
  const bucket = bucketFor(request, { verb: 'admin' });
  // Public by its policy or, as RGW reports it, by a public bucket ACL.
  const policy = bucket.policy as StoredPolicy | undefined;
  const isPublic =
    (policy !== undefined && compilePolicy(policy, bucket.name).isPublic) ||
    aclIsPublic(bucketAcl(bucket));
  request.sendXml(
    200,
    new XmlWriter().start('PolicyStatus').leaf('IsPublic', isPublic).end('PolicyStatus'),
  );
}

// ---------------------------------------------------------------------------------------------
// Public access block.

const BLOCK_FIELDS = [
  ['BlockPublicAcls', 'blockPublicAcls'],
  ['IgnorePublicAcls', 'ignorePublicAcls'],
  ['BlockPublicPolicy', 'blockPublicPolicy'],
  ['RestrictPublicBuckets', 'restrictPublicBuckets'],
] as const;

function getPublicAccessBlock(request: S3Request): void {
  request.requirePrincipal();
  const bucket = bucketFor(request, { verb: 'admin' });
  const block = bucket.publicAccessBlock;
  if (!block)
    throw s3Error('NoSuchPublicAccessBlockConfiguration', undefined, { bucketName: bucket.name });
  const xml = new XmlWriter().start('PublicAccessBlockConfiguration');
  for (const [element, field] of BLOCK_FIELDS) xml.leaf(element, block[field]);
  request.sendXml(200, xml.end('PublicAccessBlockConfiguration'));
}

async function putPublicAccessBlock(request: S3Request): Promise<void> {
  request.requirePrincipal();
  const body = readBody(request, ACL_XML_BYTES_MAX);
  const bucket = bucketFor(request, { verb: 'admin' });
  const doc = parseXml(await body, ACL_XML_BYTES_MAX);
  const config = doc['PublicAccessBlockConfiguration'];
  if (config === undefined || typeof config === 'string' || Array.isArray(config))
    throw s3Error('MalformedXML', 'the body must be a PublicAccessBlockConfiguration');
  const block: Record<string, boolean> = {};
  for (const [element, field] of BLOCK_FIELDS) {
    const value = xmlText(config, element)?.trim().toLowerCase();
    if (value !== undefined && value !== 'true' && value !== 'false')
      throw s3Error('MalformedXML', `${element} must be true or false`);
    block[field] = value === 'true';
  }
  await mutate(
    request,
    'putPublicAccessBlock',
    { tenantId: bucket.tenantId, bucket: bucket.name, block },
    200,
  );
  request.send(200, {});
}

async function deletePublicAccessBlock(request: S3Request): Promise<void> {
  request.requirePrincipal();
  const bucket = bucketFor(request, { verb: 'admin' });
  await mutate(
    request,
    'putPublicAccessBlock',
    { tenantId: bucket.tenantId, bucket: bucket.name, block: null },
    204,
  );
  request.send(204, {});
}
