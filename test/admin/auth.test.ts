// Goal: admin authentication and authorization work as admin-api.md §5 and DECISIONS.md say:
// `lightwell admin-token` mints, lists and revokes tokens with the documented JSON; missing,
// unknown, revoked and expired tokens get 401; every route refuses a role below its minimum
// with 403; a tenant-scoped token gets 403 (never 404) for any other tenant, existing or not,
// on every tenant route; the OpenAPI document lists every operation once; neither listener
// serves the other's API; denied requests leave audit rows.
// Method: the real service on loopback (`lightwell serve`), tokens minted with the CLI, plain
// fetch against every route of the table for every role and scope.
import t from 'tap';
import { Service, type Problem } from '../helpers/service.js';
import { call, mintToken, cli, auditRowOf } from './admin-testing.js';

interface RouteCase {
  readonly method: string;
  readonly path: string;
  readonly role: 'viewer' | 'operator' | 'owner' | 'token';
  readonly operationId: string;
  /** Names a tenant: the scoped-token rule applies. */
  readonly tenant: boolean;
}

// {t} is replaced by a tenant id. Role 'token' = any valid token.
const table: readonly RouteCase[] = [
  { method: 'GET', path: '/tenants', role: 'viewer', operationId: 'listTenants', tenant: false },
  {
    method: 'POST',
    path: '/tenants',
    role: 'operator',
    operationId: 'createTenant',
    tenant: false,
  },
  { method: 'GET', path: '/tenants/{t}', role: 'viewer', operationId: 'getTenant', tenant: true },
  {
    method: 'POST',
    path: '/tenants/{t}/disable',
    role: 'owner',
    operationId: 'disableTenant',
    tenant: true,
  },
  {
    method: 'POST',
    path: '/tenants/{t}/delete',
    role: 'owner',
    operationId: 'deleteTenant',
    tenant: true,
  },
  {
    method: 'GET',
    path: '/tenants/{t}/accounts',
    role: 'viewer',
    operationId: 'listTenantAccounts',
    tenant: true,
  },
  {
    method: 'POST',
    path: '/tenants/{t}/accounts',
    role: 'operator',
    operationId: 'createTenantAccount',
    tenant: true,
  },
  {
    method: 'GET',
    path: '/tenants/{t}/keys',
    role: 'viewer',
    operationId: 'listTenantKeys',
    tenant: true,
  },
  {
    method: 'POST',
    path: '/tenants/{t}/keys',
    role: 'operator',
    operationId: 'createTenantKey',
    tenant: true,
  },
  {
    method: 'POST',
    path: '/tenants/{t}/keys/LWAAAAAAAAAAAAAAAAAA/rotate',
    role: 'operator',
    operationId: 'rotateTenantKey',
    tenant: true,
  },
  {
    method: 'POST',
    path: '/tenants/{t}/keys/LWAAAAAAAAAAAAAAAAAA/revoke',
    role: 'operator',
    operationId: 'revokeTenantKey',
    tenant: true,
  },
  {
    method: 'GET',
    path: '/tenants/{t}/quota',
    role: 'viewer',
    operationId: 'getTenantQuota',
    tenant: true,
  },
  {
    method: 'PUT',
    path: '/tenants/{t}/quota',
    role: 'operator',
    operationId: 'setTenantQuota',
    tenant: true,
  },
  {
    method: 'DELETE',
    path: '/tenants/{t}/quota',
    role: 'operator',
    operationId: 'deleteTenantQuota',
    tenant: true,
  },
  {
    method: 'GET',
    path: '/tenants/{t}/usage',
    role: 'viewer',
    operationId: 'getTenantUsage',
    tenant: true,
  },
  { method: 'GET', path: '/audit', role: 'viewer', operationId: 'queryAuditLog', tenant: false },
  {
    method: 'GET',
    path: '/cluster/consensus/membership',
    role: 'token',
    operationId: 'getConsensusMembership',
    tenant: false,
  },
  {
    method: 'POST',
    path: '/cluster/consensus/join',
    role: 'owner',
    operationId: 'joinConsensus',
    tenant: false,
  },
  {
    method: 'POST',
    path: '/cluster/consensus/drain',
    role: 'owner',
    operationId: 'drainConsensus',
    tenant: false,
  },
  {
    method: 'POST',
    path: '/cluster/consensus/remove',
    role: 'owner',
    operationId: 'removeConsensus',
    tenant: false,
  },
  {
    method: 'POST',
    path: '/cluster/consensus/replace',
    role: 'owner',
    operationId: 'replaceConsensus',
    tenant: false,
  },
  {
    method: 'POST',
    path: '/cluster/repair/rebalance',
    role: 'owner',
    operationId: 'rebalanceRepair',
    tenant: false,
  },
];

const rank = { token: -1, viewer: 0, operator: 1, owner: 2 } as const;

t.test('admin tokens, roles and scopes', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const [owner, viewer, operator, scoped, doomed] = await Promise.all([
    mintToken(service, 'owner', ['--name', 'root']),
    mintToken(service, 'viewer'),
    mintToken(service, 'operator'),
    mintToken(service, 'owner', ['--tenant', 'alpha', '--expires', '30d']),
    mintToken(service, 'owner'),
  ]);
  t.match(
    owner,
    {
      token: /^lwadm_[A-Za-z0-9_-]{43}$/,
      tokenId: /^adm_[0-9a-f]{16}$/,
      role: 'owner',
      tenant: null,
      expiresAt: null,
    },
    '--json shape',
  );
  t.same(Object.keys(owner).sort(), ['expiresAt', 'role', 'tenant', 'token', 'tokenId']);
  const tokens = { viewer: viewer.token, operator: operator.token, owner: owner.token };
  t.equal(scoped.tenant, 'alpha');
  t.ok(
    Math.abs(Date.parse(scoped.expiresAt ?? '') - Date.now() - 30 * 86_400_000) < 60_000,
    '--expires 30d',
  );
  for (const id of ['alpha', 'beta'])
    t.equal(
      (await call(service, 'POST', '/tenants', { token: owner.token, body: { id } })).status,
      201,
    );

  await t.test('401: missing, malformed, unknown, revoked and expired tokens', async (t) => {
    const cases: Array<[string, Record<string, string>]> = [
      ['no header', {}],
      ['not bearer', { Authorization: `Basic ${Buffer.from('a:b').toString('base64')}` }],
      ['data-plane token', { Authorization: 'Bearer lwtk_abc' }],
      ['unknown admin token', { Authorization: `Bearer lwadm_${'A'.repeat(43)}` }],
    ];
    for (const [name, headers] of cases) {
      const response = await fetch(`${service.adminUrl}/tenants`, { headers });
      const body = (await response.json()) as { code: string; requestId: string };
      t.equal(response.status, 401, name);
      t.equal(body.code, 'unauthorized', name);
      t.equal(response.headers.get('www-authenticate'), 'Bearer realm="lightwell"', name);
      t.equal(response.headers.get('content-type'), 'application/problem+json');
      t.equal(
        body.requestId,
        response.headers.get('x-request-id'),
        'problem requestId equals X-Request-Id',
      );
    }
    t.equal((await call(service, 'GET', '/tenants', { token: doomed.token })).status, 200);
    t.match(cli(service, ['revoke', doomed.tokenId]), /revoked/);
    t.equal(
      (await call(service, 'GET', '/tenants', { token: doomed.token })).status,
      401,
      'revoked at once',
    );
    const brief = await mintToken(service, 'viewer', ['--expires', '3s']);
    t.equal(
      (await call(service, 'GET', '/tenants', { token: brief.token })).status,
      200,
      'valid until it expires',
    );
    await new Promise((resolve) =>
      setTimeout(resolve, Math.max(0, Date.parse(brief.expiresAt ?? '') - Date.now() + 50)),
    );
    const expired = await call(service, 'GET', '/tenants', { token: brief.token });
    t.equal(expired.status, 401, 'expired');
    t.match((expired.json as Problem).message, /expired/);
    const listed = JSON.parse(cli(service, ['list', '--json'])) as {
      tokens: Array<Record<string, unknown>>;
    };
    t.match(
      listed.tokens.find((token) => token['tokenId'] === doomed.tokenId),
      { state: 'revoked', role: 'owner', revokedAt: String },
    );
    t.match(
      listed.tokens.find((token) => token['tokenId'] === brief.tokenId),
      { state: 'expired', role: 'viewer' },
    );
    t.match(
      listed.tokens.find((token) => token['tokenId'] === owner.tokenId),
      { state: 'active', name: 'root', tenant: null },
    );
    t.notOk(JSON.stringify(listed).includes('hash'), 'list never shows hashes');
    t.notOk(JSON.stringify(listed).includes(doomed.token), 'list never shows tokens');
  });

  await t.test('every route refuses roles below its minimum with 403', async (t) => {
    for (const route of table) {
      const path = route.path.replace('{t}', 'alpha');
      for (const role of ['viewer', 'operator', 'owner'] as const) {
        const answer = await call(service, route.method, path, { token: tokens[role], body: {} });
        if (rank[role] < rank[route.role]) {
          t.equal(answer.status, 403, `${role} on ${route.operationId}`);
          t.equal((answer.json as Problem).code, 'forbidden');
        } else {
          t.notOk(
            [401, 403, 429].includes(answer.status),
            `${role} may ${route.operationId} (got ${answer.status})`,
          );
        }
      }
    }
  });

  await t.test(
    'a scoped token gets 403, never 404, for other tenants, existing or not',
    async (t) => {
      for (const route of table.filter((entry) => entry.tenant)) {
        for (const other of ['beta', 'ghost']) {
          const answer = await call(service, route.method, route.path.replace('{t}', other), {
            token: scoped.token,
            body: { reason: 'r', confirm: other },
          });
          t.equal(answer.status, 403, `${route.operationId} on ${other}`);
        }
        const own = await call(service, route.method, route.path.replace('{t}', 'alpha'), {
          token: scoped.token,
          body: {},
        });
        t.not(own.status, 403, `${route.operationId} on its own tenant`);
      }
      // Another tenant's key named under the scoped token's own tenant: 403 as well, while a
      // global token that names it under the wrong tenant finds nothing there (404).
      await call(service, 'POST', '/tenants/beta/accounts', {
        token: owner.token,
        body: { id: 'svc' },
      });
      const betaKey = (
        await call(service, 'POST', '/tenants/beta/keys', {
          token: owner.token,
          body: { accountId: 'svc', scopes: 'read' },
        })
      ).json as { accessKeyId: string };
      for (const action of ['rotate', 'revoke', 'revoke?dryRun=true']) {
        const path = `/tenants/alpha/keys/${betaKey.accessKeyId}/${action}`;
        const body = { reason: 'r' };
        t.equal(
          (await call(service, 'POST', path, { token: scoped.token, body })).status,
          403,
          `${action} of another tenant's key under its own tenant`,
        );
        t.equal((await call(service, 'POST', path, { token: owner.token, body })).status, 404);
      }
      let answer = await call(service, 'GET', '/tenants', { token: scoped.token });
      t.same(
        (answer.json as { tenants: Array<{ id: string }> }).tenants.map((tenant) => tenant.id),
        ['alpha'],
        'a scoped token lists only its tenant',
      );
      answer = await call(service, 'GET', '/tenants', { token: owner.token });
      t.same(
        (answer.json as { tenants: Array<{ id: string }> }).tenants.map((tenant) => tenant.id),
        ['alpha', 'beta'],
        'a global token lists all',
      );
      answer = await call(service, 'POST', '/tenants', {
        token: scoped.token,
        body: { id: 'gamma' },
      });
      t.equal(answer.status, 403, 'a scoped token cannot create another tenant');
      for (const other of ['beta', 'ghost']) {
        answer = await call(service, 'POST', '/cluster/repair/rebalance', {
          token: scoped.token,
          body: { tenantId: other, reason: 'r', confirmTenant: other },
        });
        t.equal(answer.status, 403, `rebalance of ${other}`);
      }
      answer = await call(service, 'POST', '/cluster/consensus/join', {
        token: scoped.token,
        body: { id: 'n2', address: 'a:1', reason: 'r', confirm: 'n2' },
      });
      t.equal(answer.status, 403, 'membership changes need an unscoped token');
      answer = await call(service, 'GET', '/cluster/consensus/membership', { token: scoped.token });
      t.equal(answer.status, 200, 'membership is readable by any valid token');
      answer = await call(service, 'GET', '/audit?tenant=beta', { token: scoped.token });
      t.equal(answer.status, 403, 'audit of another tenant');
      const denied = await call(service, 'GET', '/tenants/beta', { token: scoped.token });
      const row = await auditRowOf(service, owner.token, denied.headers.get('x-request-id') ?? '');
      t.match(
        row,
        {
          outcome: 'denied',
          status: 403,
          action: 'getTenant',
          tenantId: 'beta',
          actor: `admin:${scoped.tokenId}`,
        },
        'the refusal is audited',
      );
    },
  );

  await t.test('OpenAPI: unauthenticated, every operation once, with schemas', async (t) => {
    const response = await fetch(`${service.adminUrl}/openapi.json`);
    t.equal(response.status, 200);
    const document = (await response.json()) as {
      paths: Record<
        string,
        Record<
          string,
          {
            operationId: string;
            requestBody?: unknown;
            responses: Record<string, { content?: unknown }>;
          }
        >
      >;
    };
    const operations = Object.values(document.paths).flatMap((methods) => Object.values(methods));
    const ids = operations.map((operation) => operation.operationId);
    t.equal(new Set(ids).size, ids.length, 'operationIds are unique');
    for (const route of table) t.ok(ids.includes(route.operationId), route.operationId);
    for (const operation of operations) {
      const success = Object.entries(operation.responses).filter(([status]) =>
        status.startsWith('2'),
      );
      t.ok(success.length > 0, `${operation.operationId} documents a success`);
    }
    for (const [path, methods] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        if ((method === 'post' || method === 'put') && !path.endsWith('/rotate'))
          t.ok(operation.requestBody, `${operation.operationId} has a request body schema`);
      }
    }
    t.equal((await fetch(`${service.adminUrl}/healthz`)).status, 200, 'healthz needs no token');
  });

  await t.test('neither listener serves the other API', async (t) => {
    const adminOrigin = service.adminUrl.replace('/admin/api/v1', '');
    const publicOrigin = service.publicUrl.replace('/api/v1', '');
    t.equal(
      (
        await fetch(`${adminOrigin}/api/v1/buckets`, {
          headers: { Authorization: `Bearer ${owner.token}` },
        })
      ).status,
      404,
    );
    t.equal((await fetch(`${adminOrigin}/api/v1/healthz`)).status, 404);
    // On the public port every path outside /api/v1 is S3 (DECISIONS.md): an admin token there
    // is no S3 credential, and nothing of the admin API answers.
    const onPublic = await fetch(`${publicOrigin}/admin/api/v1/tenants`, {
      headers: { Authorization: `Bearer ${owner.token}` },
    });
    t.equal(onPublic.status, 400);
    t.match(await onPublic.text(), /<Code>AuthorizationHeaderMalformed<\/Code>/);
  });
});
