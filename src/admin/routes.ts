// The admin JSON API (/admin/api/v1): tenants, service accounts and access keys. Reads come from
// the read-only index; every mutation is a command to the engine, so no gate is bypassed.

import type { Exchange } from '../http/exchange.js';
import type { Route, RouteDoc, JsonSchema } from '../http/router.js';
import type { Handler } from '../http/server.js';
import type { IndexStore } from '../engine/index/store.js';
import type { EngineClient } from '../engine/protocol.js';
import { DB, tenantKey, tenantChildRange, type TenantRecord, type AccountRecord, type AccessKeyRecord, type AdminTokenRecord, type AdminRole } from '../engine/index/schema.js';
import { hashAdminToken } from '../security/access-keys.js';
import { parseExpiresAt } from '../security/expiry.js';
import { RateLimiter } from '../security/rate-limit.js';
import { Unauthorized, Forbidden, NotFound, BadRequest, RateLimited } from '../util/errors.js';
import type { Settings } from '../util/config.js';

const roleRank: Record<AdminRole, number> = { viewer: 0, operator: 1, owner: 2 };

interface Caller {
  readonly token: AdminTokenRecord;
}

const str = { type: 'string' } as const;
const time = { type: 'string', format: 'date-time' } as const;
const tenantSchema: JsonSchema = { type: 'object', properties: { id: str, name: str, state: { type: 'string', enum: ['active', 'disabled', 'deleted'] }, createdAt: time, disabledAt: time } };
const accountSchema: JsonSchema = { type: 'object', properties: { id: str, tenantId: str, name: str, createdAt: time } };
const keySchema: JsonSchema = {
  type: 'object',
  properties: { accessKeyId: str, tenantId: str, accountId: str, scopes: str, externalRef: str, state: { type: 'string', enum: ['active', 'revoked', 'expired'] }, createdAt: time, expiresAt: time, rotatedAt: time, revokedAt: time, secretKey: { type: 'string', description: 'only in create and rotate responses' } },
};
const doc = (summary: string, responses: RouteDoc['responses'], requestBody?: JsonSchema): RouteDoc =>
  requestBody ? { summary, auth: 'bearer', responses, requestBody: { contentType: 'application/json', schema: requestBody } } : { summary, auth: 'bearer', responses };

export function adminRoutes(services: { store: IndexStore; engine: EngineClient; settings: Settings }): Route<Handler>[] {
  const { store, engine, settings } = services;
  const limiter = new RateLimiter(settings.rate('admin.rate_limit'));

  const authenticate = (exchange: Exchange, role: AdminRole, tenantId?: string): Caller => {
    const match = /^Bearer\s+(lwadm_\S+)\s*$/i.exec(exchange.header('authorization') ?? '');
    if (!match) throw Unauthorized('an admin bearer token is required (Authorization: Bearer lwadm_…)');
    const token = store.get<AdminTokenRecord>(DB.adminTokens, Buffer.from(hashAdminToken(match[1] ?? '')));
    if (!token || token.revokedAt !== undefined) throw Unauthorized('invalid or revoked admin token');
    if (token.expiresAt !== undefined && token.expiresAt <= Date.now()) throw Unauthorized('the admin token has expired');
    const limited = limiter.take(token.tokenId, Date.now());
    if (!limited.ok) throw RateLimited('admin rate limit exceeded for this token', { retryAfterSeconds: limited.retryAfterSeconds });
    exchange.audit.actor = `admin:${token.tokenId}`;
    if (tenantId !== undefined) exchange.audit.tenantId = tenantId;
    else if (token.tenant !== undefined) exchange.audit.tenantId = token.tenant;
    if (roleRank[token.role] < roleRank[role]) throw Forbidden(`this operation needs the ${role} role`);
    if (tenantId !== undefined && token.tenant !== undefined && token.tenant !== tenantId) throw Forbidden('this token is scoped to another tenant');
    return { token };
  };
  const tenantOf = (id: string): TenantRecord => {
    const tenant = store.get<TenantRecord>(DB.tenants, tenantKey(id));
    if (!tenant || tenant.state === 'deleted') throw NotFound(`tenant ${id} not found`);
    return tenant;
  };
  const body = async (exchange: Exchange): Promise<Record<string, unknown>> => {
    const value = await exchange.readJson();
    if (value === undefined) return {};
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw BadRequest('the body must be a JSON object');
    return value as Record<string, unknown>;
  };
  const optionalString = (value: unknown, field: string): string | undefined => {
    if (value === undefined || value === null) return undefined;
    if (typeof value !== 'string' || value.length > 1024) throw BadRequest(`${field} must be a string of at most 1024 characters`);
    return value;
  };

  return [
    { method: 'GET', path: '/healthz', operationId: 'healthz', doc: { summary: 'Liveness', auth: 'none', responses: { 200: { description: 'alive' } } }, handler: (exchange) => exchange.sendJson(200, { status: 'ok' }) },
    {
      method: 'GET', path: '/tenants', operationId: 'listTenants', doc: doc('List tenants', { 200: { description: 'tenants', schema: { type: 'object', properties: { tenants: { type: 'array', items: tenantSchema } } } } }),
      handler: (exchange) => {
        const caller = authenticate(exchange, 'viewer');
        const tenants = [...store.range<TenantRecord>(DB.tenants, {})]
          .map((entry) => entry.value)
          .filter((tenant) => tenant.state !== 'deleted' && (caller.token.tenant === undefined || caller.token.tenant === tenant.id));
        exchange.sendJson(200, { tenants: tenants.map(tenantJson) });
      },
    },
    {
      method: 'POST', path: '/tenants', operationId: 'createTenant', doc: doc('Create a tenant', { 201: { description: 'created', schema: tenantSchema } }, { type: 'object', required: ['id'], properties: { id: str, name: str } }),
      handler: async (exchange) => {
        const request = await body(exchange);
        const id = request['id'];
        if (typeof id !== 'string') throw BadRequest('id is required');
        authenticate(exchange, 'operator', id);
        const name = optionalString(request['name'], 'name');
        const tenant = await engine.call<TenantRecord>('createTenant', name === undefined ? { id } : { id, name });
        exchange.sendJson(201, tenantJson(tenant));
      },
    },
    {
      method: 'GET', path: '/tenants/{id}', operationId: 'getTenant', doc: doc('Get a tenant', { 200: { description: 'tenant', schema: tenantSchema } }),
      handler: (exchange, params) => {
        authenticate(exchange, 'viewer', params['id']);
        exchange.sendJson(200, tenantJson(tenantOf(params['id'] ?? '')));
      },
    },
    {
      method: 'GET', path: '/tenants/{id}/accounts', operationId: 'listTenantAccounts', doc: doc('List service accounts', { 200: { description: 'accounts', schema: { type: 'object', properties: { accounts: { type: 'array', items: accountSchema } } } } }),
      handler: (exchange, params) => {
        authenticate(exchange, 'viewer', params['id']);
        const tenant = tenantOf(params['id'] ?? '');
        const accounts = [...store.range<AccountRecord>(DB.accounts, tenantChildRange(tenant.id))].map((e) => accountJson(e.value));
        exchange.sendJson(200, { accounts });
      },
    },
    {
      method: 'POST', path: '/tenants/{id}/accounts', operationId: 'createTenantAccount', doc: doc('Create a service account', { 201: { description: 'created', schema: accountSchema } }, { type: 'object', required: ['id'], properties: { id: str, name: str } }),
      handler: async (exchange, params) => {
        authenticate(exchange, 'operator', params['id']);
        const request = await body(exchange);
        if (typeof request['id'] !== 'string') throw BadRequest('id is required');
        const name = optionalString(request['name'], 'name');
        const args: Record<string, unknown> = { tenantId: params['id'], id: request['id'] };
        if (name !== undefined) args['name'] = name;
        exchange.sendJson(201, accountJson(await engine.call<AccountRecord>('createAccount', args)));
      },
    },
    {
      method: 'GET', path: '/tenants/{id}/keys', operationId: 'listTenantKeys', doc: doc('List access keys (metadata only)', { 200: { description: 'keys', schema: { type: 'object', properties: { keys: { type: 'array', items: keySchema } } } } }),
      handler: (exchange, params) => {
        authenticate(exchange, 'viewer', params['id']);
        const tenant = tenantOf(params['id'] ?? '');
        const keys = [...store.range<AccessKeyRecord>(DB.accessKeys, {})].map((e) => e.value).filter((key) => key.tenantId === tenant.id);
        exchange.sendJson(200, { keys: keys.map((key) => keyJson(key)) });
      },
    },
    {
      method: 'POST', path: '/tenants/{id}/keys', operationId: 'createTenantKey',
      doc: doc('Create an access key; the secret is returned once', { 201: { description: 'created', schema: keySchema } }, { type: 'object', required: ['accountId', 'scopes'], properties: { accountId: str, externalRef: str, scopes: str, expiresAt: str, reason: str } }),
      handler: async (exchange, params) => {
        authenticate(exchange, 'operator', params['id']);
        const request = await body(exchange);
        if (typeof request['accountId'] !== 'string') throw BadRequest('accountId is required');
        if (typeof request['scopes'] !== 'string') throw BadRequest('scopes is required (for example "read,write")');
        const args: Record<string, unknown> = { tenantId: params['id'], accountId: request['accountId'], scopes: request['scopes'] };
        const externalRef = optionalString(request['externalRef'], 'externalRef');
        if (externalRef !== undefined) args['externalRef'] = externalRef;
        if (request['expiresAt'] !== undefined) args['expiresAt'] = parseExpiresAt(request['expiresAt'], Date.now());
        const created = await engine.call<{ key: AccessKeyRecord; secretKey: string }>('createAccessKey', args);
        exchange.sendJson(201, { ...keyJson(created.key), secretKey: created.secretKey }, { 'Cache-Control': 'no-store' });
      },
    },
  ];
}

const iso = (ms: number | undefined): string | undefined => (ms === undefined ? undefined : new Date(ms).toISOString());

export function tenantJson(tenant: TenantRecord): Record<string, unknown> {
  return dropUndefined({ id: tenant.id, name: tenant.name, state: tenant.state, createdAt: iso(tenant.createdAt), disabledAt: iso(tenant.disabledAt) });
}

function accountJson(account: AccountRecord): Record<string, unknown> {
  return dropUndefined({ id: account.id, tenantId: account.tenantId, name: account.name, createdAt: iso(account.createdAt) });
}

function keyJson(key: AccessKeyRecord): Record<string, unknown> {
  const expired = key.state === 'active' && key.expiresAt !== undefined && key.expiresAt <= Date.now();
  return dropUndefined({
    accessKeyId: key.accessKeyId, tenantId: key.tenantId, accountId: key.accountId, scopes: key.scopes, externalRef: key.externalRef,
    state: expired ? 'expired' : key.state, createdAt: iso(key.createdAt), expiresAt: iso(key.expiresAt), rotatedAt: iso(key.rotatedAt), revokedAt: iso(key.revokedAt),
  });
}

function dropUndefined(value: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(value).filter(([, field]) => field !== undefined));
}
