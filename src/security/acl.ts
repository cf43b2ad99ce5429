// S3 access control lists: canned ACLs, `x-amz-grant-*` headers and the grants they make, in
// the compact form bucket and version records keep, and the check of a permission against them.
//
// Grantees are tenants (S3 accounts: canonical user id = tenant id) and S3's two public groups,
// AllUsers (anyone, anonymous included) and AuthenticatedUsers (any signed request). Grants by
// e-mail address are refused (Lightwell knows no tenant's e-mail: UnresolvableGrantByEmailAddress)
// and so is the LogDelivery group, which only bucket logging uses.
//
// Invariants:
// - An ACL lists every grant, the owner's own included (a canned ACL grants the owner
//   FULL_CONTROL; an ACL from grant headers or a document holds exactly what they list). The
//   owner may always read and write the ACL (READ_ACP, WRITE_ACP), as on S3.
// - FULL_CONTROL implies every other permission; nothing else implies anything.
// - A record holds at most GRANTS_MAX grants.
//
// Persists: nothing itself; `AclRecord` is stored on bucket records and in version records.

import { BadRequest } from '../util/errors.js';

export const PERMISSIONS = ['FULL_CONTROL', 'READ', 'WRITE', 'READ_ACP', 'WRITE_ACP'] as const;
export type Permission = (typeof PERMISSIONS)[number];
export const GRANTS_MAX = 100;

export const ALL_USERS_URI = 'http://acs.amazonaws.com/groups/global/AllUsers';
export const AUTHENTICATED_USERS_URI = 'http://acs.amazonaws.com/groups/global/AuthenticatedUsers';

export type Grantee =
  | { readonly type: 'user'; readonly id: string }
  | { readonly type: 'group'; readonly group: 'AllUsers' | 'AuthenticatedUsers' };

export interface Grant {
  readonly grantee: Grantee;
  readonly permission: Permission;
}

/** An ACL: its owner (a tenant id) and its grants, in the order S3 lists them. */
export interface Acl {
  readonly owner: string;
  readonly grants: readonly Grant[];
}

/** The stored form: owner, and grants as [kind, id or group, permission]. */
export interface AclRecord {
  o: string;
  g: Array<[kind: 'u' | 'g', who: string, permission: Permission]>;
}

export const CANNED_ACLS = [
  'private',
  'public-read',
  'public-read-write',
  'authenticated-read',
  'bucket-owner-read',
  'bucket-owner-full-control',
  'aws-exec-read',
  'log-delivery-write',
] as const;
export type CannedAcl = (typeof CANNED_ACLS)[number];

const ALL_USERS: Grantee = { type: 'group', group: 'AllUsers' };
const AUTHENTICATED: Grantee = { type: 'group', group: 'AuthenticatedUsers' };

/**
 * The ACL a canned name stands for. `bucketOwner` is the owner of the bucket an object is in
 * (the bucket-owner-* names grant it; for a bucket they grant nothing more than private).
 */
export function cannedAcl(name: string, owner: string, bucketOwner: string = owner): Acl {
  const grants: Grant[] = [];
  const own: Grant = { grantee: { type: 'user', id: owner }, permission: 'FULL_CONTROL' };
  switch (name as CannedAcl) {
    case 'private':
    case 'aws-exec-read':
    case 'log-delivery-write':
      break;
    case 'public-read':
      grants.push({ grantee: ALL_USERS, permission: 'READ' });
      break;
    case 'public-read-write':
      grants.push({ grantee: ALL_USERS, permission: 'READ' });
      grants.push({ grantee: ALL_USERS, permission: 'WRITE' });
      break;
    case 'authenticated-read':
      grants.push({ grantee: AUTHENTICATED, permission: 'READ' });
      break;
    case 'bucket-owner-read':
    case 'bucket-owner-full-control':
      break;
    default:
      throw BadRequest(`${name.slice(0, 64)} is not a canned ACL`);
  }
  // S3 lists the public groups' grants first, then the owner's, then the bucket owner's.
  grants.push(own);
  if (bucketOwner !== owner && name === 'bucket-owner-read')
    grants.push({ grantee: { type: 'user', id: bucketOwner }, permission: 'READ' });
  if (bucketOwner !== owner && name === 'bucket-owner-full-control')
    grants.push({ grantee: { type: 'user', id: bucketOwner }, permission: 'FULL_CONTROL' });
  return { owner, grants };
}

const GRANT_HEADERS: Readonly<Record<string, Permission>> = {
  'x-amz-grant-read': 'READ',
  'x-amz-grant-write': 'WRITE',
  'x-amz-grant-read-acp': 'READ_ACP',
  'x-amz-grant-write-acp': 'WRITE_ACP',
  'x-amz-grant-full-control': 'FULL_CONTROL',
};

/** True when the request carries any x-amz-grant-* header. */
export function hasGrantHeaders(headers: Readonly<Record<string, string>>): boolean {
  return Object.keys(GRANT_HEADERS).some((name) => headers[name] !== undefined);
}

/**
 * The grants of `x-amz-grant-*` headers: each a comma-separated list of `id="tenant"`,
 * `uri="http://acs.amazonaws.com/groups/global/AllUsers"` or `emailAddress="…"` (refused).
 */
export function grantsFromHeaders(headers: Readonly<Record<string, string>>): Grant[] {
  const grants: Grant[] = [];
  for (const [name, permission] of Object.entries(GRANT_HEADERS)) {
    const value = headers[name];
    if (value === undefined) continue;
    for (const item of value.split(',')) {
      const match = /^\s*(id|uri|emailAddress)\s*=\s*"?([^"]*)"?\s*$/i.exec(item);
      if (!match) throw BadRequest(`${name}: ${item.trim().slice(0, 64)} is not a grantee`);
      grants.push({ grantee: granteeOf(match[1] ?? '', match[2] ?? ''), permission });
    }
  }
  if (grants.length > GRANTS_MAX) throw BadRequest(`an ACL holds at most ${GRANTS_MAX} grants`);
  return grants;
}

/** A grantee from its kind (`id`, `uri`, `emailAddress`, or the XML types) and value. */
export function granteeOf(kind: string, value: string): Grantee {
  switch (kind.toLowerCase()) {
    case 'id':
    case 'canonicaluser':
      if (!/^[A-Za-z0-9_.:-]{1,128}$/.test(value))
        throw BadRequest(`${value.slice(0, 64)} is not a canonical user id`);
      return { type: 'user', id: value };
    case 'uri':
    case 'group':
      if (value === ALL_USERS_URI) return ALL_USERS;
      if (value === AUTHENTICATED_USERS_URI) return AUTHENTICATED;
      throw BadRequest(`the group ${value.slice(0, 96)} is not supported`);
    case 'emailaddress':
    case 'amazoncustomerbyemail':
      throw BadRequest('grants by e-mail address cannot be resolved', { unresolvable: true });
    default:
      throw BadRequest(`${kind.slice(0, 32)} is not a grantee type`);
  }
}

export function aclRecordOf(acl: Acl): AclRecord {
  return {
    o: acl.owner,
    g: acl.grants.map(({ grantee, permission }) =>
      grantee.type === 'user' ? ['u', grantee.id, permission] : ['g', grantee.group, permission],
    ),
  };
}

export function aclOf(record: AclRecord): Acl {
  return {
    owner: record.o,
    grants: record.g.map(([kind, who, permission]) => ({
      grantee:
        kind === 'u'
          ? { type: 'user', id: who }
          : { type: 'group', group: who as 'AllUsers' | 'AuthenticatedUsers' },
      permission,
    })),
  };
}

/** The ACL of a resource with no stored one: its owner alone (private). */
export function privateAcl(owner: string): Acl {
  return cannedAcl('private', owner);
}

/**
 * True when `acl` grants `permission` to `requester` (a tenant id; undefined: anonymous).
 * `ignorePublic` leaves out the public groups' grants (IgnorePublicAcls).
 */
export function aclGrants(
  acl: Acl,
  requester: string | undefined,
  permission: Permission,
  ignorePublic = false,
): boolean {
  if (requester !== undefined && requester === acl.owner) {
    if (permission === 'READ_ACP' || permission === 'WRITE_ACP') return true;
  }
  return acl.grants.some((grant) => {
    if (grant.permission !== permission && grant.permission !== 'FULL_CONTROL') return false;
    const { grantee } = grant;
    if (grantee.type === 'user') return requester !== undefined && grantee.id === requester;
    if (ignorePublic) return false;
    return grantee.group === 'AllUsers' || requester !== undefined;
  });
}

/** True when an ACL grants anything to a public group (BlockPublicAcls refuses such). */
export function aclIsPublic(acl: Acl): boolean {
  return acl.grants.some((grant) => grant.grantee.type === 'group');
}
