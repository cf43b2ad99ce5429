// Goal: the one policy evaluator decides as AWS does for both stored forms: a matching Deny
// wins, an Allow allows, nothing matching says nothing; principals, wildcard actions and
// resources, condition operators (string, IP, date, bool, negated, IfExists, Null) and the
// native explicit-deny form (verbs, key ids, prefixes) with unknown conditions failing closed.
// ACLs: canned ACLs and grant headers grant exactly their permissions; the public access block
// ORs bucket and tenant.
// Method: direct calls on pure functions.
import t from 'tap';
import {
  evaluatePolicy,
  ipInCidr,
  parseAwsPolicy,
  type PolicyRequest,
  type StoredPolicy,
} from '../../src/security/policy.js';
import { aclGrants, cannedAcl, grantsFromHeaders } from '../../src/security/acl.js';
import { effectiveBlock, parsePublicAccessBlock } from '../../src/security/public-access.js';
import { errorCode } from '../../src/util/errors.js';

function request(
  over: Partial<PolicyRequest> & { values?: Record<string, string> },
): PolicyRequest {
  const values = over.values ?? {};
  return {
    principal: { tenantId: 'bob', accessKeyId: 'KEYBOB' },
    action: 's3:GetObject',
    verb: 'read',
    bucket: 'b',
    key: 'k',
    conditionValue: (key) => values[key],
    ...over,
  };
}

function doc(...statements: unknown[]): StoredPolicy {
  return { document: JSON.stringify({ Version: '2012-10-17', Statement: statements }) };
}

t.test('Allow, Deny and nothing', async (t) => {
  const policy = doc(
    { Effect: 'Allow', Principal: '*', Action: 's3:Get*', Resource: 'arn:aws:s3:::b/*' },
    { Effect: 'Deny', Principal: { AWS: 'bob' }, Action: '*', Resource: 'arn:aws:s3:::b/secret*' },
  );
  t.equal(evaluatePolicy(policy, request({})), 'allow');
  t.equal(evaluatePolicy(policy, request({ principal: undefined })), 'allow', 'anyone');
  t.equal(evaluatePolicy(policy, request({ key: 'secret/x' })), 'deny', 'deny wins');
  t.equal(
    evaluatePolicy(policy, request({ key: 'secret/x', principal: undefined })),
    'allow',
    'the deny names bob only',
  );
  t.equal(evaluatePolicy(policy, request({ action: 's3:PutObject' })), 'none');
  t.equal(evaluatePolicy(policy, request({ key: undefined, action: 's3:GetBucketAcl' })), 'none');
  t.equal(evaluatePolicy(undefined, request({})), 'none');
});

t.test('principals: tenants, root ARNs, one key, canonical users', async (t) => {
  const allow = (principal: unknown): StoredPolicy =>
    doc({ Effect: 'Allow', Principal: principal, Action: 's3:*', Resource: 'arn:aws:s3:::b/*' });
  t.equal(evaluatePolicy(allow({ AWS: 'arn:aws:iam::bob:root' }), request({})), 'allow');
  t.equal(evaluatePolicy(allow({ CanonicalUser: 'bob' }), request({})), 'allow');
  t.equal(evaluatePolicy(allow({ AWS: 'arn:aws:iam::bob:user/KEYBOB' }), request({})), 'allow');
  t.equal(evaluatePolicy(allow({ AWS: 'arn:aws:iam::bob:user/OTHER' }), request({})), 'none');
  t.equal(evaluatePolicy(allow({ AWS: ['carol'] }), request({})), 'none');
  t.equal(evaluatePolicy(allow({ AWS: 'bob' }), request({ principal: undefined })), 'none');
});

t.test('conditions', async (t) => {
  const when = (condition: unknown): StoredPolicy =>
    doc({
      Effect: 'Allow',
      Principal: '*',
      Action: 's3:ListBucket',
      Resource: 'arn:aws:s3:::b',
      Condition: condition,
    });
  const list = (values: Record<string, string>): PolicyRequest =>
    request({ key: undefined, action: 's3:ListBucket', values });
  const prefix = when({ StringLike: { 's3:prefix': ['home/*', 'pub'] } });
  t.equal(evaluatePolicy(prefix, list({ 's3:prefix': 'home/a' })), 'allow');
  t.equal(evaluatePolicy(prefix, list({ 's3:prefix': 'pub' })), 'allow');
  t.equal(evaluatePolicy(prefix, list({ 's3:prefix': 'other' })), 'none');
  t.equal(evaluatePolicy(prefix, list({})), 'none', 'a missing key fails a positive test');
  const notPrefix = when({ StringNotEquals: { 's3:prefix': 'x' } });
  t.equal(evaluatePolicy(notPrefix, list({})), 'allow', 'and passes a negated one');
  t.equal(evaluatePolicy(notPrefix, list({ 's3:prefix': 'x' })), 'none');
  const ifExists = when({ StringEqualsIfExists: { 's3:prefix': 'x' } });
  t.equal(evaluatePolicy(ifExists, list({})), 'allow');
  const ip = when({ IpAddress: { 'aws:SourceIp': ['10.0.0.0/8', '2001:db8::/32'] } });
  t.equal(evaluatePolicy(ip, list({ 'aws:sourceip': '10.1.2.3' })), 'allow');
  t.equal(evaluatePolicy(ip, list({ 'aws:sourceip': '2001:db8::1' })), 'allow');
  t.equal(evaluatePolicy(ip, list({ 'aws:sourceip': '11.0.0.1' })), 'none');
  const secure = when({ Bool: { 'aws:SecureTransport': 'true' } });
  t.equal(evaluatePolicy(secure, list({ 'aws:securetransport': 'true' })), 'allow');
  t.equal(evaluatePolicy(secure, list({ 'aws:securetransport': 'false' })), 'none');
  const before = when({ DateLessThan: { 'aws:CurrentTime': '2030-01-01T00:00:00Z' } });
  t.equal(evaluatePolicy(before, list({ 'aws:currenttime': '2026-12-07T00:00:00Z' })), 'allow');
  t.equal(evaluatePolicy(before, list({ 'aws:currenttime': '2031-01-01T00:00:00Z' })), 'none');
  const absent = when({ Null: { 's3:prefix': 'true' } });
  t.equal(evaluatePolicy(absent, list({})), 'allow');
  t.equal(evaluatePolicy(absent, list({ 's3:prefix': 'a' })), 'none');
  t.ok(ipInCidr('::ffff:127.0.0.1', '127.0.0.0/8'), 'a mapped IPv4 address is its IPv4 one');
});

t.test('malformed documents are refused', async (t) => {
  for (const bad of [
    '{',
    '[]',
    JSON.stringify({ Statement: [] }),
    JSON.stringify({
      Statement: [{ Effect: 'Maybe', Principal: '*', Action: '*', Resource: '*' }],
    }),
    JSON.stringify({ Statement: [{ Effect: 'Allow', Principal: '*', Resource: '*' }] }),
    JSON.stringify({
      Statement: [{ Effect: 'Allow', Principal: '*', Action: 'ec2:Run', Resource: '*' }],
    }),
    JSON.stringify({
      Statement: [
        { Effect: 'Allow', Principal: '*', Action: 's3:*', Resource: 'arn:aws:s3:::other' },
      ],
    }),
    JSON.stringify({
      Statement: [
        {
          Effect: 'Allow',
          Principal: '*',
          Action: 's3:*',
          Resource: 'arn:aws:s3:::b/*',
          Condition: { IpAddress: { 'aws:SourceIp': 'not-an-ip' } },
        },
      ],
    }),
    'x'.repeat(21 * 1024),
  ])
    t.throws(() => parseAwsPolicy(bad, 'b'), { code: 'bad_request' }, bad.slice(0, 60));
  t.equal(
    parseAwsPolicy(
      JSON.stringify({
        Statement: { Effect: 'Allow', Principal: '*', Action: 's3:GetObject', Resource: '*' },
      }),
      'b',
    ).isPublic,
    true,
  );
});

t.test('the native explicit-deny form, through the same evaluator', async (t) => {
  const native: StoredPolicy = {
    version: 1,
    statements: [{ effect: 'Deny', actions: ['write'], principals: ['KEYBOB'], prefix: 'ro/' }],
  };
  t.equal(evaluatePolicy(native, request({ verb: 'write', key: 'ro/a' })), 'deny');
  t.equal(evaluatePolicy(native, request({ verb: 'write', key: 'rw/a' })), 'none');
  t.equal(evaluatePolicy(native, request({ verb: 'read', key: 'ro/a' })), 'none');
  t.equal(
    evaluatePolicy(
      native,
      request({ verb: 'write', key: 'ro/a', principal: { tenantId: 'x', accessKeyId: 'OTHER' } }),
    ),
    'none',
  );
  t.equal(
    evaluatePolicy(native, request({ verb: 'write', key: undefined, listPrefix: 'r' })),
    'deny',
    'a listing that could reveal a denied key',
  );
  const conditioned = doc(
    {
      Effect: 'Deny',
      Principal: '*',
      Action: 's3:GetObject',
      Resource: 'arn:aws:s3:::b/*',
      Condition: { NotIpAddress: { 'aws:SourceIp': '10.0.0.0/8' } },
    },
    {
      Effect: 'Allow',
      Principal: '*',
      Action: 's3:PutObject',
      Resource: 'arn:aws:s3:::b/*',
      Condition: { IpAddress: { 'aws:SourceIp': '0.0.0.0/0' } },
    },
  );
  t.equal(
    evaluatePolicy(conditioned, request({ conditionsUnknown: true })),
    'deny',
    'a conditioned deny applies where conditions are unknown',
  );
  t.equal(
    evaluatePolicy(conditioned, request({ action: 's3:PutObject', conditionsUnknown: true })),
    'none',
    'a conditioned allow does not',
  );
});

t.test('ACLs and the public access block', async (t) => {
  const publicRead = cannedAcl('public-read', 'alice');
  t.ok(aclGrants(publicRead, undefined, 'READ'));
  t.notOk(aclGrants(publicRead, undefined, 'WRITE'));
  t.notOk(aclGrants(publicRead, undefined, 'READ', true), 'IgnorePublicAcls');
  t.ok(aclGrants(publicRead, 'alice', 'WRITE_ACP'), 'the owner may always change the ACL');
  const authenticated = cannedAcl('authenticated-read', 'alice');
  t.ok(aclGrants(authenticated, 'bob', 'READ'));
  t.notOk(aclGrants(authenticated, undefined, 'READ'));
  const ownerRead = cannedAcl('bucket-owner-read', 'bob', 'alice');
  t.ok(aclGrants(ownerRead, 'alice', 'READ'));
  t.notOk(aclGrants(ownerRead, 'alice', 'WRITE'));
  const grants = grantsFromHeaders({
    'x-amz-grant-write': 'id="bob", uri="http://acs.amazonaws.com/groups/global/AllUsers"',
    'x-amz-grant-full-control': 'id=carol',
  });
  t.same(
    grants.map((g) => [g.grantee.type === 'user' ? g.grantee.id : g.grantee.group, g.permission]),
    [
      ['bob', 'WRITE'],
      ['AllUsers', 'WRITE'],
      ['carol', 'FULL_CONTROL'],
    ],
  );
  t.ok(aclGrants({ owner: 'alice', grants }, 'carol', 'READ_ACP'), 'FULL_CONTROL implies all');
  t.throws(() => grantsFromHeaders({ 'x-amz-grant-read': 'emailAddress="a@b.c"' }));
  t.throws(() => cannedAcl('world-writable', 'alice'), { code: 'bad_request' });
  t.equal(errorCode(catchOf(() => parsePublicAccessBlock({ blockPublicAcls: 1 }))), 'bad_request');
  t.same(
    effectiveBlock(parsePublicAccessBlock({ blockPublicAcls: true }), {
      blockPublicAcls: false,
      ignorePublicAcls: true,
      blockPublicPolicy: false,
      restrictPublicBuckets: false,
    }),
    {
      blockPublicAcls: true,
      ignorePublicAcls: true,
      blockPublicPolicy: false,
      restrictPublicBuckets: false,
    },
  );
});

function catchOf(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  return undefined;
}

t.test('NotPrincipal: everyone but the named', async (t) => {
  const policy = doc({
    Effect: 'Deny',
    NotPrincipal: { AWS: 'alice' },
    Action: 's3:*',
    Resource: 'arn:aws:s3:::b/*',
  });
  t.equal(evaluatePolicy(policy, request({})), 'deny', 'bob is not alice');
  t.equal(evaluatePolicy(policy, request({ principal: undefined })), 'deny', 'nor is anyone');
  const alice = { tenantId: 'alice', accessKeyId: 'KEYALICE' };
  t.equal(evaluatePolicy(policy, request({ principal: alice })), 'none');
  const both = JSON.stringify({
    Version: '2012-10-17',
    Statement: [
      { Effect: 'Deny', Principal: '*', NotPrincipal: { AWS: 'a' }, Action: '*', Resource: '*' },
    ],
  });
  t.throws(() => parseAwsPolicy(both, 'b'), /one of Principal and NotPrincipal/);
  const allowAllBut = JSON.stringify({
    Version: '2012-10-17',
    Statement: [{ Effect: 'Allow', NotPrincipal: { AWS: 'a' }, Action: '*', Resource: '*' }],
  });
  t.throws(() => parseAwsPolicy(allowAllBut, 'b'), /NotPrincipal goes with Deny only/);
});

t.test('service principals, Arn operators and tenanted resource ARNs', async (t) => {
  const policy = doc({
    Effect: 'Allow',
    Principal: { Service: 'logging.s3.amazonaws.com' },
    Action: ['s3:PutObject'],
    Resource: 'arn:aws:s3::owner:b/log/',
    Condition: {
      ArnLike: { 'aws:SourceArn': 'arn:aws:s3:::src*' },
      StringEquals: { 'aws:SourceAccount': 'bob' },
    },
  });
  const service = (values: Record<string, string>, key = 'log/'): PolicyRequest =>
    request({
      principal: undefined,
      service: 'logging.s3.amazonaws.com',
      action: 's3:PutObject',
      verb: 'write',
      key,
      values,
    });
  const good = { 'aws:sourcearn': 'arn:aws:s3:::src1', 'aws:sourceaccount': 'bob' };
  t.equal(evaluatePolicy(policy, service(good)), 'allow');
  t.equal(evaluatePolicy(policy, service({ ...good, 'aws:sourcearn': 'arn:aws:s3:::x' })), 'none');
  t.equal(evaluatePolicy(policy, service({ ...good, 'aws:sourceaccount': 'eve' })), 'none');
  t.equal(evaluatePolicy(policy, service(good, 'other/')), 'none', 'another prefix');
  t.equal(evaluatePolicy(policy, request({ action: 's3:PutObject', key: 'log/' })), 'none');
  const anyone = doc({
    Effect: 'Allow',
    Principal: { AWS: '*' },
    Action: 's3:PutObject',
    Resource: 'arn:aws:s3:::b/*',
  });
  t.equal(evaluatePolicy(anyone, service(good)), 'none', 'a wildcard principal is no service');
  const notLike = doc({
    Effect: 'Deny',
    Principal: '*',
    Action: 's3:*',
    Resource: 'arn:aws:s3:::b/*',
    Condition: { ArnNotLike: { 'aws:SourceArn': 'arn:aws:s3:::src*' } },
  });
  t.equal(
    evaluatePolicy(notLike, request({ values: { 'aws:sourcearn': 'arn:aws:s3:::x' } })),
    'deny',
  );
  t.equal(
    evaluatePolicy(notLike, request({ values: { 'aws:sourcearn': 'arn:aws:s3:::src2' } })),
    'none',
  );
});
