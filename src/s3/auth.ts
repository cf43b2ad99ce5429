// Authentication of S3 requests: who sent a request, from its AWS signature.
//
// A request without any credentials (no Authorization header, no presigned query) is anonymous;
// handlers refuse it unless a grant allows it. Signed requests are verified in sigv4.ts.
//
// Persists: nothing.

import type { Exchange } from '../http/exchange.js';
import type { S3Principal, S3Services } from './api.js';
import { s3Error } from './errors.js';

export function authenticateS3(exchange: Exchange, _services: S3Services): S3Principal | undefined {
  const signed =
    exchange.header('authorization') !== undefined ||
    exchange.queryParam('X-Amz-Signature') !== null;
  if (!signed) return undefined;
  throw s3Error('NotImplemented', 'signed requests are not verified yet');
}
