// The request context every service operation takes instead of a transport's request object:
// who asks (the principal, once authenticated), the request id, the peer address, the audit row
// being filled in, and the clock. A transport builds one per request (`contextOf`).

import type { AuditContext } from '../http/exchange.js';
import type { AuditedRequest } from '../http/audit.js';
import type { Principal } from './auth.js';

export interface RequestContext {
  readonly principal: Principal;
  readonly requestId: string;
  /** The peer's address, canonical (http/exchange.ts `canonicalAddress`). */
  readonly remoteAddress: string;
  /**
   * The audit row as the request fills it in: the service names the resource and marks a row
   * written with its mutation; the transport records the rest after its answer.
   */
  readonly audit: AuditContext;
  /** What the audit row names when the operation names no resource (the request path). */
  readonly path: string;
  /** Milliseconds since the epoch: `Date.now` but in tests. */
  readonly clock: () => number;
}

/** What a transport request gives a context (the HTTP Exchange has all of it). */
export type ContextSource = AuditedRequest;

export function contextOf(
  request: ContextSource,
  principal: Principal,
  clock: () => number = Date.now,
): RequestContext {
  return {
    principal,
    requestId: request.requestId,
    remoteAddress: request.remoteAddress,
    audit: request.audit,
    path: request.path,
    clock,
  };
}
