// The access log: one line per request when `log.access` is true (off by default: a busy
// gateway answers tens of thousands of requests a second, and the audit log already keeps every
// request's caller and outcome). Level info, component `access`, whatever `log.level` is.
//
// A line never carries a secret: the path without its query (a signed URL's token and an S3
// presigned signature live in the query), no header (Authorization, cookies), and the caller
// only by its public id (an access key id or admin token id, never the token).

import type { Exchange } from './exchange.js';
import type { Logger } from '../util/log.js';

export type Answered = (api: string, exchange: Exchange) => void;

/**
 * Lines at info even under a quieter `log.level` (the service's own notices at warn, say): an
 * operator who turned the access log on asked for them.
 */
export function accessLogger(component: Logger): Answered {
  const log = component.isLevelEnabled('info') ? component : component.child({}, { level: 'info' });
  return (api, exchange) => {
    const fields: Record<string, unknown> = {
      api,
      op: exchange.audit.action,
      method: exchange.method,
      path: exchange.path,
      status: exchange.aborted ? 'aborted' : exchange.status,
      ms: Math.round((performance.now() - exchange.startedAt) * 10) / 10,
      bytesIn: exchange.bytesIn,
      bytesOut: exchange.bytesOut,
      remote: exchange.remoteAddress,
      requestId: exchange.requestId,
    };
    if (exchange.audit.tenantId !== undefined) fields['tenant'] = exchange.audit.tenantId;
    if (exchange.audit.actor !== undefined) fields['actor'] = exchange.audit.actor;
    log.info(fields, 'request');
  };
}

/** Both, or either, of two observers. */
export function bothAnswered(first: Answered | undefined, second: Answered | undefined): Answered {
  return (api, exchange) => {
    first?.(api, exchange);
    second?.(api, exchange);
  };
}
