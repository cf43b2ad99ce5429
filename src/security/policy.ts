// Bucket policies: the one evaluator every transport's authorization goes through, for both
// forms a bucket's policy is stored in.
//
// - AWS's policy language (S3 PutBucketPolicy): `{Version, Statement: [{Sid?, Effect: Allow |
//   Deny, Principal, Action | NotAction, Resource | NotResource, Condition?}]}`. Principals are
//   `*` (anyone, anonymous included) or tenants (the S3 accounts: `{"AWS": "<tenant>"}`,
//   `arn:aws:iam::<tenant>:root`, `{"CanonicalUser": "<tenant>"}`) or one access key of a tenant
//   (`arn:aws:iam::<tenant>:user/<accessKeyId>`), or a service (`{"Service": "logging.s3.
//   amazonaws.com"}`: only that service acting matches it, never `*`); `NotPrincipal` (with
//   Deny only) names who a statement is not about. Actions and resources take `*` and `?`; a resource ARN may carry
//   an account (`arn:aws:s3::<tenant>:bucket`), which is ignored (bucket names are global).
//   Operators: String*, Numeric*, Date*, Bool, IpAddress/NotIpAddress, Arn* (globs on whole
//   ARNs), BinaryEquals and Null, each with IfExists and ForAnyValue/ForAllValues accepted.
//   Condition keys are not restricted by name: the keys a request carries are the transport's
//   (docs/s3.md lists them); any other key is absent, so it fails closed.
// - The native API's explicit-deny form (data-api.md): `{version: 1, statements: [{effect:
//   "Deny", actions: [verbs], principals: [access key ids | *], prefix?}]}`, what the console
//   sets. It is compiled into the same statements (a verb matcher and a key-prefix matcher
//   beside the action and resource ones), so both forms are evaluated by `evaluatePolicy`.
//
// Evaluation (AWS's order): a matching Deny wins over everything; else a matching Allow allows;
// else the policy says nothing ('none') and the caller decides by ownership, scopes and ACLs.
//
// Invariants:
// - Pure: no I/O, no clock of its own (the request gives aws:CurrentTime); condition values
//   come from the request through `conditionValue`, looked up lazily.
// - A document is at most 20 KiB (AWS's limit) and is validated whole before it is stored:
//   unknown effects, operators or malformed principals, actions and resources refuse it with
//   `bad_request` naming what is wrong (S3 answers MalformedPolicy).
// - A condition key the request does not carry fails its test (only `...IfExists` and `Null`
//   treat absence as a match), so an unknown key can never widen an Allow.
//
// Persists: nothing itself; the engine stores the document text on the bucket record.

import { isIP } from 'node:net';
import { BadRequest } from '../util/errors.js';
import type { BucketPolicy as NativePolicy } from './bucket-policy.js';
import type { Verb } from './scopes.js';

export const POLICY_DOCUMENT_BYTES_MAX = 20 * 1024;
const STATEMENTS_MAX = 100;
const VALUES_MAX = 100;

/** A condition test of one statement: operator, key and the values it accepts. */
interface ConditionTest {
  readonly operator: string;
  readonly key: string;
  readonly values: readonly string[];
  readonly ifExists: boolean;
  readonly negated: boolean;
}

/**
 * Who a statement is about: anyone, or these tenants, access keys and AWS service principals
 * (`logging.s3.amazonaws.com`, which Lightwell's own log delivery acts as).
 */
type PrincipalSet =
  | '*'
  | {
      readonly tenants: ReadonlySet<string>;
      readonly keys: ReadonlySet<string>;
      readonly services: ReadonlySet<string>;
    };

interface Statement {
  readonly effect: 'Allow' | 'Deny';
  readonly principals: PrincipalSet;
  /** NotPrincipal: the statement is about everyone but `principals`. */
  readonly notPrincipal?: boolean;
  /** Action patterns (`s3:Get*`); undefined: every action. */
  readonly actions?: readonly RegExp[] | undefined;
  readonly notActions?: readonly RegExp[] | undefined;
  readonly resources?: readonly RegExp[] | undefined;
  readonly notResources?: readonly RegExp[] | undefined;
  /** Native form: the verbs it denies (undefined: every verb) and the key prefix. */
  readonly verbs?: ReadonlySet<string> | undefined;
  readonly keyPrefix?: string | undefined;
  readonly conditions: readonly ConditionTest[];
}

export interface CompiledPolicy {
  readonly statements: readonly Statement[];
  /** True when an Allow opens the bucket to anyone (GetBucketPolicyStatus, public access). */
  readonly isPublic: boolean;
}

/** The stored AWS form: the document as the owner sent it. */
export interface AwsPolicyRecord {
  readonly document: string;
}

/** What a bucket record keeps as its policy: either form. */
export type StoredPolicy = NativePolicy | AwsPolicyRecord;

/** A request as the evaluator sees it. */
export interface PolicyRequest {
  /** Undefined for an anonymous request. */
  readonly principal: { readonly tenantId: string; readonly accessKeyId: string } | undefined;
  /**
   * An AWS service principal acting (`logging.s3.amazonaws.com`): only statements naming it
   * under `Service` match it, never `*` (AWS grants services nothing by a wildcard principal).
   */
  readonly service?: string | undefined;
  /** The IAM action, `s3:GetObject`. */
  readonly action: string;
  /** The native verb the action needs. */
  readonly verb: Verb;
  readonly bucket: string;
  readonly key?: string | undefined;
  /** For a listing: its prefix. */
  readonly listPrefix?: string | undefined;
  /** The value of a condition key (lower-case name), or undefined when the request has none. */
  conditionValue(key: string): string | undefined;
  /**
   * True for a transport that cannot tell condition values (the native API): a conditioned
   * Deny then applies and a conditioned Allow does not, so that no condition opens a way round.
   */
  readonly conditionsUnknown?: boolean;
}

export type PolicyDecision = 'allow' | 'deny' | 'none';

const compiled = new WeakMap<object, CompiledPolicy>();

/** The compiled form of a stored policy (cached per record object). */
export function compilePolicy(stored: StoredPolicy, bucket: string): CompiledPolicy {
  const cached = compiled.get(stored);
  if (cached) return cached;
  const policy =
    'document' in stored ? parseAwsPolicy(stored.document, bucket) : compileNative(stored);
  compiled.set(stored, policy);
  return policy;
}

/** Decides what `policy` says about `request`. */
export function evaluatePolicy(
  policy: StoredPolicy | undefined,
  request: PolicyRequest,
): PolicyDecision {
  if (policy === undefined) return 'none';
  let decision: PolicyDecision = 'none';
  for (const statement of compilePolicy(policy, request.bucket).statements) {
    if (!statementMatches(statement, request)) continue;
    if (statement.effect === 'Deny') return 'deny';
    decision = 'allow';
  }
  return decision;
}

/**
 * The S3 action a native request stands for, by its verb and target, for AWS statements that
 * name actions: reads of objects are s3:GetObject, listings s3:ListBucket, and so on.
 */
export function actionOfVerb(access: { verb: Verb; key?: string | undefined }): string {
  const object = access.key !== undefined;
  switch (access.verb) {
    case 'read':
      return object ? 's3:GetObject' : 's3:ListBucket';
    case 'write':
      return object ? 's3:PutObject' : 's3:PutBucketVersioning';
    case 'delete':
      return object ? 's3:DeleteObject' : 's3:DeleteBucket';
    case 'admin':
      return object ? 's3:PutObjectAcl' : 's3:PutBucketPolicy';
  }
}

// ---------------------------------------------------------------------------------------------
// Parsing the AWS form.

/** Validates and compiles an AWS policy document for `bucket`; `bad_request` when malformed. */
export function parseAwsPolicy(text: string, bucket: string): CompiledPolicy {
  if (Buffer.byteLength(text) > POLICY_DOCUMENT_BYTES_MAX)
    throw BadRequest(`a policy is at most ${POLICY_DOCUMENT_BYTES_MAX} bytes`);
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw BadRequest('the policy is not JSON');
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc))
    throw BadRequest('a policy is a JSON object');
  const fields = doc as Record<string, unknown>;
  for (const name of Object.keys(fields))
    if (!['Version', 'Id', 'Statement'].includes(name))
      throw BadRequest(`unknown field ${name.slice(0, 32)} in the policy`);
  const version = fields['Version'];
  if (version !== undefined && version !== '2012-10-17' && version !== '2008-10-17')
    throw BadRequest('Version must be 2012-10-17 or 2008-10-17');
  const list = asList(fields['Statement'], 'Statement');
  if (list.length === 0 || list.length > STATEMENTS_MAX)
    throw BadRequest(`Statement must hold 1 to ${STATEMENTS_MAX} statements`);
  const statements = list.map((value, index) =>
    parseStatement(value, `Statement[${index}]`, bucket),
  );
  return { statements, isPublic: statements.some(opensToAnyone) };
}

function asList(value: unknown, where: string): unknown[] {
  if (value === undefined) throw BadRequest(`${where} is missing`);
  const list = Array.isArray(value) ? value : [value];
  if (list.length > VALUES_MAX) throw BadRequest(`${where} lists more than ${VALUES_MAX} values`);
  return list;
}

function stringList(value: unknown, where: string): string[] {
  const list = asList(value, where);
  if (list.length === 0) throw BadRequest(`${where} is empty`);
  for (const item of list)
    if (typeof item !== 'string' || item.length === 0 || item.length > 1024)
      throw BadRequest(`${where} must hold strings`);
  return list as string[];
}

const STATEMENT_FIELDS = new Set([
  'Sid',
  'Effect',
  'Principal',
  'NotPrincipal',
  'Action',
  'NotAction',
  'Resource',
  'NotResource',
  'Condition',
]);

function parseStatement(value: unknown, where: string, bucket: string): Statement {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw BadRequest(`${where} must be an object`);
  const fields = value as Record<string, unknown>;
  for (const name of Object.keys(fields))
    if (!STATEMENT_FIELDS.has(name))
      throw BadRequest(`${where}: unknown field ${name.slice(0, 32)}`);
  const effect = fields['Effect'];
  if (effect !== 'Allow' && effect !== 'Deny')
    throw BadRequest(`${where}.Effect must be Allow or Deny`);
  const notPrincipal = fields['NotPrincipal'] !== undefined;
  if (notPrincipal === (fields['Principal'] !== undefined))
    throw BadRequest(`${where} needs one of Principal and NotPrincipal`);
  // An Allow for everyone but someone would open the bucket to anyone, anonymous included.
  if (notPrincipal && effect === 'Allow')
    throw BadRequest(`${where}: NotPrincipal goes with Deny only`);
  const principalField = notPrincipal ? 'NotPrincipal' : 'Principal';
  const principals = parsePrincipal(fields[principalField], `${where}.${principalField}`);
  const hasAction = fields['Action'] !== undefined;
  if (hasAction === (fields['NotAction'] !== undefined))
    throw BadRequest(`${where} needs one of Action and NotAction`);
  const hasResource = fields['Resource'] !== undefined;
  if (hasResource === (fields['NotResource'] !== undefined))
    throw BadRequest(`${where} needs one of Resource and NotResource`);
  const actions = (name: string): RegExp[] =>
    stringList(fields[name], `${where}.${name}`).map((action) => {
      if (action !== '*' && !/^s3:[A-Za-z*?]+$/.test(action))
        throw BadRequest(`Policy has invalid action: ${action.slice(0, 64)}`);
      return wildcard(action, true);
    });
  const resources = (name: string): RegExp[] =>
    stringList(fields[name], `${where}.${name}`).map((resource) => {
      checkResource(resource, bucket);
      return wildcard(resourcePattern(resource), false);
    });
  return {
    effect,
    principals,
    notPrincipal,
    actions: hasAction ? actions('Action') : undefined,
    notActions: hasAction ? undefined : actions('NotAction'),
    resources: hasResource ? resources('Resource') : undefined,
    notResources: hasResource ? undefined : resources('NotResource'),
    conditions: parseConditions(fields['Condition'], `${where}.Condition`),
  };
}

/**
 * A bucket or object ARN: `arn:aws:s3:::bucket/key`, or with an account
 * (`arn:aws:s3::tenant:bucket/key`, the tenanted form Ceph RGW writes). Bucket names are
 * global in Lightwell, so the account adds nothing and is dropped before matching.
 */
const S3_ARN = /^arn:aws:s3::[^:/]*:([^/]*)(\/.*)?$/s;

/** A resource pattern as matched: the ARN without its account, or `*`. */
function resourcePattern(resource: string): string {
  const match = S3_ARN.exec(resource);
  return match ? `arn:aws:s3:::${match[1] ?? ''}${match[2] ?? ''}` : resource;
}

/** A resource must be this bucket or objects in it (AWS: "Policy has invalid resource"). */
function checkResource(resource: string, bucket: string): void {
  if (resource === '*') return;
  const named = S3_ARN.exec(resource)?.[1];
  if (named === undefined || !wildcard(named, false).test(bucket))
    throw BadRequest(`Policy has invalid resource: ${resource.slice(0, 128)}`);
}

const TENANT_ARN = /^arn:aws:iam::([^:]+):(root|user\/(.+))$/;

function parsePrincipal(value: unknown, where: string): PrincipalSet {
  if (value === '*') return '*';
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw BadRequest(`${where} must be "*" or {"AWS": [...]}`);
  const tenants = new Set<string>();
  const keys = new Set<string>();
  const services = new Set<string>();
  for (const [kind, list] of Object.entries(value as Record<string, unknown>)) {
    if (kind !== 'AWS' && kind !== 'CanonicalUser' && kind !== 'Service')
      throw BadRequest(`${where}: principals of type ${kind.slice(0, 32)} are not supported`);
    const items = stringList(list, `${where}.${kind}`);
    // A service principal matches only that service acting (bucket logging's delivery).
    if (kind === 'Service') {
      for (const item of items) services.add(item.toLowerCase());
      continue;
    }
    for (const item of items) {
      if (item === '*') return '*';
      const arn = TENANT_ARN.exec(item);
      if (arn && arn[3] !== undefined) keys.add(`${arn[1] ?? ''}/${arn[3]}`);
      else if (arn) tenants.add(arn[1] ?? '');
      else if (/^[A-Za-z0-9_.-]{1,128}$/.test(item)) tenants.add(item);
      else throw BadRequest(`Invalid principal in policy: ${item.slice(0, 64)}`);
    }
  }
  if (tenants.size === 0 && keys.size === 0 && services.size === 0)
    throw BadRequest(`${where} names no principal`);
  return { tenants, keys, services };
}

const OPERATORS = new Set([
  'StringEquals',
  'StringNotEquals',
  'StringEqualsIgnoreCase',
  'StringNotEqualsIgnoreCase',
  'StringLike',
  'StringNotLike',
  'NumericEquals',
  'NumericNotEquals',
  'NumericLessThan',
  'NumericLessThanEquals',
  'NumericGreaterThan',
  'NumericGreaterThanEquals',
  'DateEquals',
  'DateNotEquals',
  'DateLessThan',
  'DateLessThanEquals',
  'DateGreaterThan',
  'DateGreaterThanEquals',
  'Bool',
  'IpAddress',
  'NotIpAddress',
  'ArnEquals',
  'ArnNotEquals',
  'ArnLike',
  'ArnNotLike',
  'BinaryEquals',
  'Null',
]);

function parseConditions(value: unknown, where: string): ConditionTest[] {
  if (value === undefined) return [];
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw BadRequest(`${where} must be an object`);
  const tests: ConditionTest[] = [];
  for (const [rawOperator, block] of Object.entries(value as Record<string, unknown>)) {
    let operator = rawOperator.replace(/^(ForAnyValue|ForAllValues):/, '');
    const ifExists = operator.endsWith('IfExists') && operator !== 'Null';
    if (ifExists) operator = operator.slice(0, -'IfExists'.length);
    if (!OPERATORS.has(operator))
      throw BadRequest(`${where}: unknown condition operator ${rawOperator.slice(0, 48)}`);
    if (typeof block !== 'object' || block === null || Array.isArray(block))
      throw BadRequest(`${where}.${operator} must be an object`);
    for (const [key, values] of Object.entries(block as Record<string, unknown>)) {
      const list = asList(values, `${where}.${operator}.${key}`).map((item) => {
        if (typeof item === 'string') return item;
        if (typeof item === 'number' || typeof item === 'boolean') return String(item);
        throw BadRequest(`${where}.${operator}.${key}: values are strings`);
      });
      if (list.length === 0) throw BadRequest(`${where}.${operator}.${key} is empty`);
      if (operator === 'IpAddress' || operator === 'NotIpAddress')
        for (const cidr of list) parseCidr(cidr, `${where}.${operator}.${key}`);
      tests.push({
        operator,
        key: key.toLowerCase(),
        values: list,
        ifExists,
        negated: /Not/.test(operator),
      });
    }
  }
  return tests;
}

/** A glob (`*` any run, `?` one character) as an anchored regular expression. */
function wildcard(pattern: string, ignoreCase: boolean): RegExp {
  const source = pattern
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${source}$`, ignoreCase ? 'is' : 's');
}

/** An Allow that anyone matches without a condition restricting who (AWS's "public"). */
function opensToAnyone(statement: Statement): boolean {
  if (statement.effect !== 'Allow' || statement.principals !== '*' || statement.notPrincipal)
    return false;
  return !statement.conditions.some(
    (test) =>
      [
        'aws:sourceip',
        'aws:sourcevpc',
        'aws:sourcevpce',
        'aws:sourcearn',
        'aws:sourceaccount',
        'aws:principalaccount',
        'aws:principalorgid',
        'aws:userid',
      ].includes(test.key) &&
      !(test.key === 'aws:sourceip' && test.values.some((cidr) => /\/0$/.test(cidr))),
  );
}

// ---------------------------------------------------------------------------------------------
// The native form.

function compileNative(policy: NativePolicy): CompiledPolicy {
  return {
    isPublic: false,
    statements: policy.statements.map((statement) => {
      const everyone = statement.principals.includes('*');
      return {
        effect: 'Deny' as const,
        principals: everyone
          ? ('*' as const)
          : {
              tenants: new Set<string>(),
              keys: new Set(statement.principals.map((k) => `*/${k}`)),
              services: new Set<string>(),
            },
        verbs: statement.actions.includes('*') ? undefined : new Set<string>(statement.actions),
        keyPrefix: statement.prefix === '' ? undefined : statement.prefix,
        conditions: [],
      };
    }),
  };
}

// ---------------------------------------------------------------------------------------------
// Matching.

function statementMatches(statement: Statement, request: PolicyRequest): boolean {
  if (principalMatches(statement.principals, request) === (statement.notPrincipal === true))
    return false;
  if (statement.verbs !== undefined && !statement.verbs.has(request.verb)) return false;
  if (statement.keyPrefix !== undefined && !prefixMatches(statement.keyPrefix, request))
    return false;
  if (statement.actions && !statement.actions.some((re) => re.test(request.action))) return false;
  if (statement.notActions?.some((re) => re.test(request.action))) return false;
  const resource =
    request.key === undefined
      ? `arn:aws:s3:::${request.bucket}`
      : `arn:aws:s3:::${request.bucket}/${request.key}`;
  if (statement.resources && !statement.resources.some((re) => re.test(resource))) return false;
  if (statement.notResources?.some((re) => re.test(resource))) return false;
  if (request.conditionsUnknown === true && statement.conditions.length > 0)
    return statement.effect === 'Deny';
  return statement.conditions.every((test) => conditionHolds(test, request));
}

function principalMatches(principals: PrincipalSet, request: PolicyRequest): boolean {
  if (request.service !== undefined)
    return principals !== '*' && principals.services.has(request.service);
  if (principals === '*') return true;
  const who = request.principal;
  if (who === undefined) return false;
  return (
    principals.tenants.has(who.tenantId) ||
    principals.keys.has(`${who.tenantId}/${who.accessKeyId}`) ||
    principals.keys.has(`*/${who.accessKeyId}`)
  );
}

/** The native prefix rule: a key under it, or a listing that could reveal one. */
function prefixMatches(prefix: string, request: PolicyRequest): boolean {
  if (request.key !== undefined) return request.key.startsWith(prefix);
  const listPrefix = request.listPrefix ?? '';
  return listPrefix.startsWith(prefix) || prefix.startsWith(listPrefix);
}

function conditionHolds(test: ConditionTest, request: PolicyRequest): boolean {
  const value = request.conditionValue(test.key);
  if (test.operator === 'Null') {
    const wantAbsent = test.values.some((v) => v.toLowerCase() === 'true');
    return wantAbsent === (value === undefined);
  }
  // AWS: a key the request lacks matches no value, so a negated test holds.
  if (value === undefined) return test.ifExists || test.negated;
  const hit = test.values.some((expected) => valueMatches(test.operator, expected, value));
  return test.negated ? !hit : hit;
}

/** The operator a negated one negates (`StringNotLike` → `StringLike`). */
function positive(operator: string): string {
  return operator === 'NotIpAddress' ? 'IpAddress' : operator.replace('Not', '');
}

function valueMatches(operator: string, expected: string, actual: string): boolean {
  switch (operator) {
    case 'StringEquals':
      return expected === actual;
    case 'StringEqualsIgnoreCase':
      return expected.toLowerCase() === actual.toLowerCase();
    case 'StringLike':
    case 'ArnLike':
    // AWS's ArnEquals takes wildcards too; both compare whole ARNs here.
    case 'ArnEquals':
      return wildcard(expected, false).test(actual);
    case 'BinaryEquals':
      return expected === actual;
    case 'Bool':
      return expected.toLowerCase() === actual.toLowerCase();
    case 'IpAddress':
      return ipInCidr(actual, expected);
    case 'StringNotEquals':
    case 'StringNotEqualsIgnoreCase':
    case 'StringNotLike':
    case 'NumericNotEquals':
    case 'DateNotEquals':
    case 'ArnNotEquals':
    case 'ArnNotLike':
    case 'NotIpAddress':
      return valueMatches(positive(operator), expected, actual);
    default:
      return compareMatches(operator, expected, actual);
  }
}

/** Numeric and date comparisons: `actual <op> expected`. */
function compareMatches(operator: string, expected: string, actual: string): boolean {
  const date = operator.startsWith('Date');
  const a = date ? dateOf(actual) : Number(actual);
  const e = date ? dateOf(expected) : Number(expected);
  if (Number.isNaN(a) || Number.isNaN(e)) return false;
  const relation = operator.replace(/^(Numeric|Date)/, '');
  switch (relation) {
    case 'Equals':
      return a === e;
    case 'LessThan':
      return a < e;
    case 'LessThanEquals':
      return a <= e;
    case 'GreaterThan':
      return a > e;
    case 'GreaterThanEquals':
      return a >= e;
    default:
      return false;
  }
}

/** An ISO 8601 date or epoch seconds, in milliseconds. */
function dateOf(text: string): number {
  return /^\d+$/.test(text) ? Number(text) * 1000 : Date.parse(text);
}

// ---------------------------------------------------------------------------------------------
// IP ranges.

function parseCidr(text: string, where: string): { bytes: Buffer; bits: number } {
  const [address = '', bitsText] = text.split('/');
  const family = isIP(address);
  if (family === 0) throw BadRequest(`${where}: ${text.slice(0, 64)} is not an IP range`);
  const bytes = ipBytes(address);
  const bits = bitsText === undefined ? bytes.length * 8 : Number(bitsText);
  if (!Number.isInteger(bits) || bits < 0 || bits > bytes.length * 8)
    throw BadRequest(`${where}: ${text.slice(0, 64)} has a bad prefix length`);
  return { bytes, bits };
}

function ipBytes(address: string): Buffer {
  if (isIP(address) === 4) return Buffer.from(address.split('.').map(Number));
  const [head = '', tail] = address.split('::');
  const groups = (part: string): string[] => (part === '' ? [] : part.split(':'));
  const left = groups(head);
  const right = tail === undefined ? [] : groups(tail);
  // An embedded IPv4 tail (::ffff:1.2.3.4) is two groups.
  const expand = (list: string[]): number[] =>
    list.flatMap((group) => {
      if (!group.includes('.')) return [parseInt(group, 16)];
      const [a = 0, b = 0, c = 0, d = 0] = group.split('.').map(Number);
      return [(a << 8) | b, (c << 8) | d];
    });
  const l = expand(left);
  const r = expand(right);
  const all = [...l, ...new Array<number>(8 - l.length - r.length).fill(0), ...r];
  const out = Buffer.alloc(16);
  all.forEach((group, index) => out.writeUInt16BE(group & 0xffff, index * 2));
  return out;
}

/** True when `address` lies in `cidr`; an IPv4-mapped IPv6 address counts as its IPv4 one. */
export function ipInCidr(address: string, cidr: string): boolean {
  let actual = address;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(actual);
  if (mapped?.[1] !== undefined) actual = mapped[1];
  if (isIP(actual) === 0) return false;
  let range;
  try {
    range = parseCidr(cidr, 'range');
  } catch {
    return false;
  }
  const bytes = ipBytes(actual);
  if (bytes.length !== range.bytes.length) return false;
  for (let bit = 0; bit < range.bits; bit++) {
    const index = bit >> 3;
    const mask = 0x80 >> (bit & 7);
    if (((bytes[index] ?? 0) & mask) !== ((range.bytes[index] ?? 0) & mask)) return false;
  }
  return true;
}
