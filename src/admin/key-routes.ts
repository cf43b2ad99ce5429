// Service accounts and access keys of a tenant.
//
// A key's secret is in the create and rotate answers only (with Cache-Control: no-store) and is
// never readable again; lists return metadata. Rotating replaces the sealed secret, so the old
// secret stops minting tokens at once. Scopes follow admin-api.md's syntax (a bad one is a 400
// naming the problem); expiresAt is RFC 3339 or YYYY-MM-DD (end of that day, UTC).

import type { Route } from '../http/router.js';
import type { Handler } from '../http/server.js';
import type { Exchange } from '../http/exchange.js';
import {
  DB,
  tenantChildRange,
  type AccountRecord,
  type AccessKeyRecord,
} from '../engine/index/schema.js';
import { parseExpiresAt } from '../security/expiry.js';
import { parseScopes } from '../security/scopes.js';
import { validateAccountId } from '../security/names.js';
import {
  type AdminServices,
  type Body,
  readBody,
  requiredString,
  optionalString,
  requiredReason,
  optionalReason,
  isDryRun,
  mutate,
  dryRunQuery,
  optionalText,
  textSchema,
  reasonSchema,
} from './request.js';
import {
  accountJson,
  keyJson,
  accountSchema,
  keySchema,
  keyWithSecretSchema,
  dryRunSchema,
  problems,
  str,
} from './json.js';
import { answerMutation, createDoc, listDoc } from './shapes.js';
import { liveTenant } from './tenant-routes.js';

const bearer = 'bearer' as const;
const noStore = { 'Cache-Control': 'no-store' } as const;

export function keyRoutes(services: AdminServices): Route<Handler>[] {
  const { auth, store } = services;
  return [
    {
      method: 'GET',
      path: '/tenants/{id}/accounts',
      operationId: 'listTenantAccounts',
      doc: listDoc('List service accounts', 'accounts', 'accounts', accountSchema),
      handler: (exchange, params) => {
        auth.authenticate(exchange, 'viewer', params['id']);
        const tenant = liveTenant(services, params['id'] ?? '');
        const accounts = [
          ...store.range<AccountRecord>(DB.accounts, tenantChildRange(tenant.id)),
        ].map((entry) => accountJson(entry.value));
        exchange.sendJson(200, { accounts });
      },
    },
    {
      method: 'POST',
      path: '/tenants/{id}/accounts',
      operationId: 'createTenantAccount',
      doc: createDoc({
        summary: 'Create a service account',
        idPattern: '^[A-Za-z0-9._@-]{1,64}$',
        text: 'name',
        record: accountSchema,
        problems: [400, 404, 409],
      }),
      handler: async (exchange, params) => {
        auth.authenticate(exchange, 'operator', params['id']);
        const tenant = liveTenant(services, params['id'] ?? '');
        const body = await readBody(exchange);
        const id = requiredString(body, 'id');
        validateAccountId(id);
        const name = optionalText(body, 'name');
        optionalReason(exchange, body);
        const dryRun = isDryRun(exchange);
        const account = await mutate(
          services,
          exchange,
          'createAccount',
          { tenantId: tenant.id, id, name, dryRun },
          dryRun ? 200 : 201,
        );
        const target = `tenants/${tenant.id}/accounts/${id}`;
        const plan = { action: 'createTenantAccount', target, counts: { accounts: 1 } };
        const view = accountJson(account);
        answerMutation(exchange, dryRun, plan, view, () => exchange.sendJson(201, view));
      },
    },
    {
      method: 'GET',
      path: '/tenants/{id}/keys',
      operationId: 'listTenantKeys',
      doc: listDoc('List access keys (metadata only, never a secret)', 'keys', 'keys', keySchema),
      handler: (exchange, params) => {
        auth.authenticate(exchange, 'viewer', params['id']);
        const tenant = liveTenant(services, params['id'] ?? '');
        const now = Date.now();
        const keys = [...store.range<AccessKeyRecord>(DB.accessKeys, {})]
          .map((entry) => entry.value)
          .filter((key) => key.tenantId === tenant.id);
        exchange.sendJson(200, { keys: keys.map((key) => keyJson(key, now)) });
      },
    },
    createKeyRoute(services),
    rotateKeyRoute(services),
    revokeKeyRoute(services),
  ];
}

/** `scopes` parsed here too, so a bad one is a 400 before anything else is looked at. */
/** `scopes` of a key's body, checked here for a 400 before the engine sees it. */
function scopesOf(body: Body, required: true): string;
function scopesOf(body: Body, required: false): string | undefined;
function scopesOf(body: Body, required: boolean): string | undefined {
  const scopes = required
    ? requiredString(
        body,
        'scopes',
        ' (for example "read,write" or "op=read:bucket=logs:prefix=2026/")',
      )
    : optionalString(body, 'scopes');
  if (scopes !== undefined) parseScopes(scopes);
  return scopes;
}

function expiresAtOf(body: Body): number | undefined {
  const value = body['expiresAt'];
  return value === undefined ? undefined : parseExpiresAt(value, Date.now());
}

function sendKey(
  exchange: Exchange,
  status: number,
  created: { key: AccessKeyRecord; secretKey: string },
): void {
  exchange.sendJson(status, { ...keyJson(created.key), secretKey: created.secretKey }, noStore);
}

const createKeyBody = {
  type: 'object',
  required: ['accountId', 'scopes'],
  properties: {
    accountId: str,
    externalRef: textSchema,
    scopes: str,
    expiresAt: { type: 'string', description: 'RFC 3339 or YYYY-MM-DD (end of that day, UTC)' },
    reason: reasonSchema,
  },
} as const;

function createKeyRoute(services: AdminServices): Route<Handler> {
  return {
    method: 'POST',
    path: '/tenants/{id}/keys',
    operationId: 'createTenantKey',
    doc: {
      summary: 'Create an access key; the secret is returned once',
      auth: bearer,
      query: dryRunQuery,
      requestBody: { contentType: 'application/json', schema: createKeyBody },
      responses: {
        201: { description: 'created, with secretKey', schema: keyWithSecretSchema },
        200: { description: 'dry run', schema: dryRunSchema },
        ...problems(400, 404, 409),
      },
    },
    handler: async (exchange, params) => {
      services.auth.authenticate(exchange, 'operator', params['id']);
      const tenant = liveTenant(services, params['id'] ?? '');
      const body = await readBody(exchange);
      const accountId = requiredString(body, 'accountId');
      const scopes = scopesOf(body, true);
      const externalRef = optionalText(body, 'externalRef');
      const expiresAt = expiresAtOf(body);
      optionalReason(exchange, body);
      const dryRun = isDryRun(exchange);
      const args = { tenantId: tenant.id, accountId, scopes, externalRef, expiresAt, dryRun };
      const created = await mutate(services, exchange, 'createAccessKey', args, dryRun ? 200 : 201);
      const target = `tenants/${tenant.id}/keys`;
      const plan = { action: 'createTenantKey', target, counts: { accessKeys: 1 } };
      answerMutation(exchange, dryRun, plan, keyJson(created.key), () =>
        sendKey(exchange, 201, created),
      );
    },
  };
}

function rotateKeyRoute(services: AdminServices): Route<Handler> {
  return {
    method: 'POST',
    path: '/tenants/{id}/keys/{keyId}/rotate',
    operationId: 'rotateTenantKey',
    doc: {
      summary: 'Rotate a key: a new secret, returned once; the old secret stops working at once',
      auth: bearer,
      query: dryRunQuery,
      requestBody: {
        contentType: 'application/json',
        required: false,
        schema: {
          type: 'object',
          properties: {
            scopes: { type: 'string', description: 'new scopes; unchanged when absent' },
            expiresAt: { type: 'string', description: 'new expiry; unchanged when absent' },
            reason: reasonSchema,
          },
        },
      },
      responses: {
        200: {
          description: 'rotated, with the new secretKey (or the dry-run answer)',
          schema: { oneOf: [keyWithSecretSchema, dryRunSchema] },
        },
        ...problems(400, 404, 409),
      },
    },
    handler: async (exchange, params) => {
      services.auth
        .authenticate(exchange, 'operator', params['id'])
        .requireOwned(keyOf(services, params['keyId'])?.tenantId);
      const tenant = liveTenant(services, params['id'] ?? '');
      const body = await readBody(exchange);
      const scopes = scopesOf(body, false);
      const expiresAt = expiresAtOf(body);
      optionalReason(exchange, body);
      const dryRun = isDryRun(exchange);
      const accessKeyId = params['keyId'] ?? '';
      const args = { tenantId: tenant.id, accessKeyId, scopes, expiresAt, dryRun };
      const rotated = await mutate(services, exchange, 'rotateAccessKey', args, 200);
      const target = `tenants/${tenant.id}/keys/${params['keyId'] ?? ''}`;
      const plan = { action: 'rotateTenantKey', target, counts: { accessKeys: 1 } };
      answerMutation(exchange, dryRun, plan, keyJson(rotated.key), () =>
        sendKey(exchange, 200, rotated),
      );
    },
  };
}

function revokeKeyRoute(services: AdminServices): Route<Handler> {
  return {
    method: 'POST',
    path: '/tenants/{id}/keys/{keyId}/revoke',
    operationId: 'revokeTenantKey',
    doc: {
      summary: 'Revoke a key: it stops working at once',
      auth: bearer,
      query: dryRunQuery,
      requestBody: {
        contentType: 'application/json',
        schema: { type: 'object', required: ['reason'], properties: { reason: reasonSchema } },
      },
      responses: {
        200: {
          description: 'the revoked key (or the dry-run answer)',
          schema: { oneOf: [keySchema, dryRunSchema] },
        },
        ...problems(400, 404),
      },
    },
    handler: async (exchange, params) => {
      const existing = keyOf(services, params['keyId']);
      services.auth
        .authenticate(exchange, 'operator', params['id'])
        .requireOwned(existing?.tenantId);
      const tenant = liveTenant(services, params['id'] ?? '');
      const body = await readBody(exchange);
      const reason = requiredReason(exchange, body);
      const dryRun = isDryRun(exchange);
      const accessKeyId = params['keyId'] ?? '';
      const args = { tenantId: tenant.id, accessKeyId, reason, dryRun };
      // A key already revoked stays as it is: the call would change nothing.
      const changes = existing?.state === 'revoked' ? 0 : 1;
      const key = await mutate(services, exchange, 'revokeAccessKey', args, 200);
      const target = `tenants/${tenant.id}/keys/${key.accessKeyId}`;
      const plan = { action: 'revokeTenantKey', target, counts: { accessKeys: changes } };
      answerMutation(exchange, dryRun, plan, keyJson(key), () =>
        exchange.sendJson(200, keyJson(key)),
      );
    },
  };
}

/** The access key named by a path, if it exists (of whichever tenant). */
function keyOf(
  services: AdminServices,
  accessKeyId: string | undefined,
): AccessKeyRecord | undefined {
  return services.store.get<AccessKeyRecord>(DB.accessKeys, Buffer.from(accessKeyId ?? ''));
}
