// Authentication and authorization of admin requests (admin-api.md §5).
//
// Order of checks, so that answers never leak what a caller may not see:
// 1. 401 for a missing, unknown, revoked or expired token (looked up by SHA-256 on every
//    request, so a revoke takes effect at once).
// 2. 429 when the token's own bucket (`admin.rate_limit`) is empty; buckets are per token, so
//    one token's burst never slows another's requests.
// 3. 403 when the token's role is below the operation's minimum (viewer < operator < owner).
// 4. 403 when a tenant-scoped token names another tenant. This comes before any lookup of the
//    tenant or its resources, so a scoped token gets 403, never 404, whether or not they exist.
//
// Persists: nothing (tokens are minted offline by `lightwell admin-token`).

import type { Exchange } from '../http/exchange.js';
import type { IndexStore } from '../engine/index/store.js';
import { DB, type AdminTokenRecord, type AdminRole } from '../engine/index/schema.js';
import { hashAdminToken } from '../security/access-keys.js';
import { RateLimiter } from '../security/rate-limit.js';
import { Unauthorized, Forbidden, RateLimited } from '../util/errors.js';
import type { Rate } from '../util/config.js';

export const ROLE_RANK: Readonly<Record<AdminRole, number>> = { viewer: 0, operator: 1, owner: 2 };

/** Tokens longer than this are refused before hashing. */
const TOKEN_CHARS_MAX = 256;

export class Caller {
  constructor(
    readonly token: AdminTokenRecord,
    private readonly exchange: Exchange,
  ) {}

  /** The tenant this token is limited to, if any. */
  get tenant(): string | undefined {
    return this.token.tenant;
  }

  /** 403 unless the token may act on `tenantId`; records the tenant on the audit row. */
  requireTenant(tenantId: string): string {
    this.exchange.audit.tenantId = tenantId;
    if (this.token.tenant !== undefined && this.token.tenant !== tenantId) {
      throw Forbidden(`this token is limited to tenant ${this.token.tenant}`);
    }
    return tenantId;
  }

  /**
   * 403 for a tenant-scoped token naming a resource, such as an access key, that belongs to
   * another tenant (`owner`: its tenant, undefined when there is no such resource), even under
   * its own tenant's path: such a token gets 403 for another tenant's resources, never 404.
   */
  requireOwned(owner: string | undefined): void {
    if (owner !== undefined && this.token.tenant !== undefined && owner !== this.token.tenant)
      throw Forbidden(`this token is limited to tenant ${this.token.tenant}`);
  }

  /** 403 for a tenant-scoped token: the operation concerns the whole service. */
  requireGlobal(): void {
    if (this.token.tenant !== undefined)
      throw Forbidden('this operation needs a token that is not limited to one tenant');
  }
}

export class AdminAuth {
  private readonly limiter: RateLimiter;

  constructor(
    private readonly store: IndexStore,
    rate: Rate,
  ) {
    this.limiter = new RateLimiter(rate);
  }

  /**
   * Checks token, rate and role (steps 1–3 above). When the route names a tenant, pass it:
   * the audit row gets it and the scope is checked (step 4) before the handler looks anything up.
   */
  authenticate(exchange: Exchange, role: AdminRole, tenantId?: string): Caller {
    const token = this.verify(exchange);
    const limited = this.limiter.take(token.tokenId, Date.now());
    if (!limited.ok)
      throw RateLimited('admin rate limit exceeded for this token', {
        retryAfterSeconds: limited.retryAfterSeconds,
      });
    const caller = new Caller(token, exchange);
    if (tenantId !== undefined) exchange.audit.tenantId = tenantId;
    if (ROLE_RANK[token.role] < ROLE_RANK[role])
      throw Forbidden(`this operation needs the ${role} role (the token has ${token.role})`);
    if (tenantId !== undefined) caller.requireTenant(tenantId);
    exchange.refuseUnclearQuery();
    return caller;
  }

  /**
   * For a request that matched no route: names its caller on the audit row when it carries a
   * live admin token (no rate limit, role or scope: the request is refused anyway).
   */
  identify(exchange: Exchange): void {
    try {
      this.verify(exchange);
    } catch {
      // No live admin token: the row stays anonymous.
    }
  }

  /** The live admin token of the request (step 1), named on its audit row; else 401. */
  private verify(exchange: Exchange): AdminTokenRecord {
    const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(exchange.header('authorization') ?? '');
    const secret = match?.[1];
    if (secret === undefined || !secret.startsWith('lwadm_')) {
      throw Unauthorized('an admin bearer token is required (Authorization: Bearer lwadm_…)');
    }
    const token =
      secret.length > TOKEN_CHARS_MAX
        ? undefined
        : this.store.get<AdminTokenRecord>(DB.adminTokens, Buffer.from(hashAdminToken(secret)));
    if (!token || token.revokedAt !== undefined)
      throw Unauthorized('invalid or revoked admin token');
    if (token.expiresAt !== undefined && token.expiresAt <= Date.now())
      throw Unauthorized('the admin token has expired');
    exchange.audit.actor = `admin:${token.tokenId}`;
    if (token.tenant !== undefined) exchange.audit.tenantId = token.tenant;
    return token;
  }
}
