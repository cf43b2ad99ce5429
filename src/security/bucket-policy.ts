// Bucket policies: explicit denials that override what an access key's scopes grant.
//
// A policy is `{version: 1, statements: [{effect: 'Deny', actions, principals, prefix?}]}`.
// `actions` are verbs (`read`, `write`, `delete`, `admin`) or `*`; `principals` are access key
// ids or `*`; `prefix` limits a statement to keys that start with it (and to listings of such
// keys). Only denials exist: a policy can take rights away, never grant them, so a mistake in a
// policy can never open a bucket.

import { BadRequest } from '../util/errors.js';
import { VERBS, type Verb } from './scopes.js';

export const POLICY_STATEMENTS_MAX = 100;
export const POLICY_PRINCIPALS_MAX = 100;

export interface PolicyStatement {
  readonly effect: 'Deny';
  readonly actions: readonly (Verb | '*')[];
  readonly principals: readonly string[];
  readonly prefix?: string;
}

export interface BucketPolicy {
  readonly version: 1;
  readonly statements: readonly PolicyStatement[];
}

export function parseBucketPolicy(value: unknown): BucketPolicy {
  const policy = value as { version?: unknown; statements?: unknown } | null;
  if (typeof policy !== 'object' || policy === null) throw BadRequest('a policy is a JSON object');
  if (policy.version !== 1) throw BadRequest('policy version must be 1');
  if (!Array.isArray(policy.statements) || policy.statements.length > POLICY_STATEMENTS_MAX) {
    throw BadRequest(`statements must be an array of at most ${POLICY_STATEMENTS_MAX}`);
  }
  return { version: 1, statements: policy.statements.map(parseStatement) };
}

function parseStatement(value: unknown, index: number): PolicyStatement {
  const statement = (value ?? {}) as Record<string, unknown>;
  const where = `statements[${index}]`;
  if (statement['effect'] !== 'Deny')
    throw BadRequest(`${where}.effect must be "Deny" (policies only deny)`);
  const actions = statement['actions'];
  if (
    !Array.isArray(actions) ||
    actions.length === 0 ||
    !actions.every((a) => a === '*' || (VERBS as readonly unknown[]).includes(a))
  ) {
    throw BadRequest(`${where}.actions must list read, write, delete, admin or *`);
  }
  const principals = statement['principals'];
  if (
    !Array.isArray(principals) ||
    principals.length === 0 ||
    principals.length > POLICY_PRINCIPALS_MAX ||
    !principals.every((p) => typeof p === 'string' && p.length > 0 && p.length <= 128)
  ) {
    throw BadRequest(`${where}.principals must list access key ids or *`);
  }
  const prefix = statement['prefix'];
  if (prefix !== undefined && (typeof prefix !== 'string' || prefix.length > 1024))
    throw BadRequest(`${where}.prefix must be a string`);
  const parsed: PolicyStatement = {
    effect: 'Deny',
    actions: actions as PolicyStatement['actions'],
    principals: principals as string[],
  };
  return prefix === undefined ? parsed : { ...parsed, prefix };
}

/** True when a statement denies this request. */
export function policyDenies(
  policy: BucketPolicy | undefined,
  request: {
    accessKeyId: string;
    verb: Verb;
    key?: string | undefined;
    listPrefix?: string | undefined;
  },
): boolean {
  if (!policy) return false;
  return policy.statements.some((statement) => {
    if (!statement.principals.includes('*') && !statement.principals.includes(request.accessKeyId))
      return false;
    if (!statement.actions.includes('*') && !statement.actions.includes(request.verb)) return false;
    if (statement.prefix === undefined || statement.prefix === '') return true;
    if (request.key !== undefined) return request.key.startsWith(statement.prefix);
    // A listing is denied when it could reveal a key under the denied prefix.
    const listPrefix = request.listPrefix ?? '';
    return listPrefix.startsWith(statement.prefix) || statement.prefix.startsWith(listPrefix);
  });
}
