// What the console API's handlers share: the JSON body, the optional `reason` of a mutation
// (noted on its audit row) and the `?dryRun=true` switch (noted on the row too).

import type { Exchange } from '../http/exchange.js';
import { refuseControlChars } from '../security/names.js';
import { BadRequest, Forbidden } from '../util/errors.js';

const REASON_CHARS_MAX = 1024;

/** The JSON object body; an empty body is `{}`. */
export async function readObject(exchange: Exchange): Promise<Record<string, unknown>> {
  const value = await exchange.readJson();
  if (value === undefined) return {};
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw BadRequest('the body must be a JSON object');
  return value as Record<string, unknown>;
}

/** The optional `reason` of a mutation, for its audit row. */
export function reasonOf(exchange: Exchange, body: Record<string, unknown>): void {
  const reason = body['reason'];
  if (reason === undefined) return;
  if (typeof reason !== 'string' || reason.length > REASON_CHARS_MAX)
    throw BadRequest(`reason must be a string of at most ${REASON_CHARS_MAX} characters`);
  refuseControlChars(reason, 'reason');
  exchange.audit.reason = reason;
}

/** `?dryRun=true` (also 1 or no value); false or absent: a real call; anything else is a 400. */
export function dryRunOf(exchange: Exchange): boolean {
  const value = exchange.query.get('dryRun')?.toLowerCase();
  if (value === undefined || value === 'false' || value === '0') return false;
  if (value !== 'true' && value !== '1' && value !== '')
    throw BadRequest('dryRun must be true or false');
  exchange.audit.dryRun = true;
  return true;
}

/** 403 when a tenant-scoped token names another tenant; the audit row gets the tenant. */
export function requireTenantScope(
  exchange: Exchange,
  token: { readonly tenant?: string | undefined },
  tenantId: string,
): void {
  exchange.audit.tenantId = tenantId;
  if (token.tenant !== undefined && token.tenant !== tenantId)
    throw Forbidden(`this token is limited to tenant ${token.tenant}`);
}
