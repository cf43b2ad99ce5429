// The S3-compatible API's entry point on the public listener: every request outside the native
// API's `/api/v1` comes here. It finds the bucket, key and operation (request.ts), has the
// request authenticated (auth.ts), runs the operation's handler from the dispatch table and
// answers every failure as S3's XML error (errors.ts, render.ts).
//
// Adding an operation: write a handler `(request: S3Request) => Promise<void> | void` that
// answers through `request.send`/`request.sendXml` (which add `x-amz-request-id` and
// `x-amz-id-2`) and throws `s3Error(...)` or any Lightwell error to refuse, then register it
// under its AWS name with `api.register('PutObject', handler)` in a module's `register*`
// function called from `s3Api` (see buckets.ts). An operation without a handler answers 501
// `NotImplemented`; an unknown sub-resource does too. docs/s3.md lists each operation's status.
//
// Invariants:
// - Every response, error or not, carries `x-amz-request-id` (the exchange's request id, which
//   the audit row names too) and `x-amz-id-2`.
// - The audit row's action is `s3:<Operation>` once the operation is known.
// - Nothing is read from the body before authentication has passed (or been refused).
//
// Persists: nothing itself; handlers commit through the engine with an audit row (`mutate`).

import { randomBytes } from 'node:crypto';
import type { Exchange } from '../http/exchange.js';
import type { Logger } from '../util/log.js';
import type { Settings } from '../util/config.js';
import type { EngineClient } from '../engine/protocol.js';
import type {
  CommandArgs,
  CommandExtras,
  CommandResult,
  TransactionalName,
} from '../engine/commands.js';
import type { TenantRecord } from '../engine/index/schema.js';
import type { Scope } from '../security/scopes.js';
import { auditRowOf } from '../http/audit.js';
import type { Authenticator } from '../service/auth.js';
import type { UploadServices } from '../service/upload.js';
import type { DownloadServices } from '../service/download.js';
import type { IndexView } from '../service/services.js';
import type { Api, Dispatch } from '../http/api.js';
import type { ErrorRenderer } from '../http/error-answer.js';
import { s3Error, s3ErrorHeaders, s3ErrorOf } from './errors.js';
import { XmlWriter } from './xml.js';
import { addressOf, operationOf, type OperationSpec, type S3Address } from './request.js';
import type { S3ObjectStore } from './object-port.js';
import { actingPrincipal } from './access.js';
import { actualCorsHeaders } from './cors.js';
import { attachAccessLog } from './logging.js';

/** Who sent a request: the access key, its tenant (the S3 account) and the key's scopes. */
export interface S3Principal {
  readonly accessKeyId: string;
  readonly tenant: TenantRecord;
  readonly scope: Scope;
}

/** A live access key: its secret (the SigV4 signing secret) and the principal it stands for. */
export interface S3Credential {
  readonly secretKey: string;
  readonly principal: S3Principal;
}

/** What the S3 adapter uses of the process that mounts it (the gateway's listener). */
export interface S3Services {
  readonly settings: Settings;
  readonly store: IndexView;
  readonly engine: EngineClient;
  /**
   * Access keys and tenants: `credential(id)` gives a live key with its secret, its state
   * checked now (a revoked key or a disabled tenant is refused at once); `keysOf` the tenant's
   * data keys for the upload and download pipelines.
   */
  readonly auth: Authenticator;
  readonly upload: UploadServices;
  readonly download: DownloadServices;
  readonly log: Logger;
  /** The service's objects (object-port.ts); object operations answer 501 without it. */
  readonly objects?: S3ObjectStore | undefined;
}

/** One S3 request on its way through the adapter. */
export interface S3Request {
  readonly exchange: Exchange;
  readonly address: S3Address;
  readonly operation: OperationSpec;
  /** The authenticated sender; undefined for an anonymous request. */
  readonly principal: S3Principal | undefined;
  readonly services: S3Services;
  /** Sends a response with the S3 request-id headers. */
  send(status: number, headers: Readonly<Record<string, string>>, body?: string | Buffer): void;
  /** Sends `xml` as `application/xml`. */
  sendXml(status: number, xml: XmlWriter, headers?: Readonly<Record<string, string>>): void;
  /**
   * The principal the operation acts as: the requester, or in another tenant's bucket for an
   * operation a grant may allow, the requester's key with that tenant (access.ts); an anonymous
   * request is refused with `AccessDenied` for every other operation.
   */
  requirePrincipal(): S3Principal;
}

export type S3Handler = (request: S3Request) => Promise<void> | void;

/**
 * Authenticates a request: the principal, or undefined when the request carries no credentials
 * at all (anonymous); throws the S3 error for bad credentials. Set by auth.ts.
 */
export type S3Authenticate = (exchange: Exchange, services: S3Services) => S3Principal | undefined;

/** `x-amz-id-2`: which process answered, as S3's extended request id tells AWS support. */
const HOST_ID = randomBytes(24).toString('base64');

/** S3's request-id headers of `exchange`, for an answer not sent through `sendS3` (a body stream). */
export function s3IdHeaders(exchange: Exchange): Record<string, string> {
  return {
    ...corsHeaders.get(exchange),
    'x-amz-request-id': exchange.requestId,
    'x-amz-id-2': HOST_ID,
  };
}

/** The Access-Control-* headers every answer to a cross-origin request carries (cors.ts). */
const corsHeaders = new WeakMap<Exchange, Record<string, string>>();

export class S3Api {
  private readonly handlers = new Map<string, S3Handler>();
  private readonly domains: readonly string[];

  constructor(
    readonly services: S3Services,
    private readonly authenticate: S3Authenticate,
  ) {
    this.domains = services.settings
      .string('s3.domains')
      .split(',')
      .map((domain) => domain.trim().toLowerCase())
      .filter((domain) => domain !== '');
  }

  /** Registers the handler of operation `name` (an AWS operation name, once). */
  register(name: string, handler: S3Handler): void {
    if (this.handlers.has(name)) throw new TypeError(`S3 operation ${name} registered twice`);
    this.handlers.set(name, handler);
  }

  /** The operations with a handler, for docs/s3.md's test. */
  get registered(): readonly string[] {
    return [...this.handlers.keys()];
  }

  /**
   * The API the public listener mounts at '' (every path outside /api/v1): it hands every
   * request to `handle`, which answers its own failures as S3 XML; `errors` renders only what
   * the listener itself refuses (a stop in progress, oversized headers).
   */
  mount(): Api {
    const dispatch: Dispatch = {
      operationId: 's3',
      handler: (exchange) => this.handle(exchange),
      params: {},
    };
    return {
      name: 's3',
      prefix: '',
      errors: s3Errors,
      strictQuery: false,
      dispatch: () => dispatch,
    };
  }

  /** Serves one request; never throws, never rejects: every failure is an S3 error answer. */
  handle(exchange: Exchange): Promise<void> | void {
    let target: S3Address | undefined;
    try {
      const address = addressOf({
        path: exchange.path,
        host: exchange.header('host'),
        domains: this.domains,
      });
      target = address;
      const operation = operationOf({
        method: exchange.method,
        level: address.level,
        query: exchange.query,
        headers: exchange.headers,
      });
      exchange.audit.action = `s3:${operation.name}`;
      exchange.audit.resource = resourceOf(address);
      // HTTP's Content-Length is one or more digits (RFC 9110); uWS reads any other as 0.
      const length = exchange.header('content-length');
      if (length !== undefined && !/^\d+$/.test(length))
        throw s3Error('InvalidArgument', 'Content-Length is not a decimal number');
      // A preflight carries no credentials (a presigned URL's are for another method).
      const principal =
        operation.name === 'PreflightCors' ? undefined : this.authenticate(exchange, this.services);
      if (address.bucket !== undefined)
        attachAccessLog(
          this.services,
          exchange,
          { bucket: address.bucket, key: address.key, operation: operation.name, hostId: HOST_ID },
          principal,
        );
      if (exchange.header('origin') !== undefined && operation.name !== 'PreflightCors')
        corsHeaders.set(exchange, actualCorsHeaders(exchange, this.services.store, address.bucket));
      const handler = this.handlers.get(operation.name);
      if (!handler)
        throw s3Error('NotImplemented', `${operation.name} is not implemented by Lightwell`);
      const request = this.request(exchange, address, operation, principal);
      const pending = handler(request);
      if (pending === undefined) {
        this.settle(exchange, address, operation.name);
        return undefined;
      }
      return pending.then(
        () => this.settle(exchange, address, operation.name),
        (error: unknown) => this.fail(exchange, address, error),
      );
    } catch (error) {
      this.fail(exchange, target, error);
      return undefined;
    }
  }

  private request(
    exchange: Exchange,
    address: S3Address,
    operation: OperationSpec,
    principal: S3Principal | undefined,
  ): S3Request {
    const request: S3Request = {
      exchange,
      address,
      operation,
      principal,
      services: this.services,
      send: (status, headers, body) => sendS3(exchange, status, headers, body),
      sendXml: (status, xml, headers = {}) =>
        sendS3(exchange, status, { ...headers, 'Content-Type': 'application/xml' }, xml.toString()),
      requirePrincipal: () => actingPrincipal(request),
    };
    return request;
  }

  private settle(exchange: Exchange, address: S3Address, name: string): void {
    if (exchange.open) this.fail(exchange, address, new TypeError(`${name} did not answer`));
  }

  /** Answers `error` as S3's XML error, logging failures of the service with their stack. */
  private fail(exchange: Exchange, address: S3Address | undefined, error: unknown): void {
    const problem = s3ErrorOf(error, { bucket: address?.bucket, key: address?.key });
    const log = this.services.log;
    if (problem.status >= 500 && problem.code !== 'NotImplemented' && problem.code !== 'SlowDown')
      log.error({ err: error, requestId: exchange.requestId }, 'S3 request failed');
    else
      log.info(
        { code: problem.code, status: problem.status, requestId: exchange.requestId },
        'S3 request refused',
      );
    if (!exchange.open) return;
    exchange.audit.reason ??= problem.code;
    const xml = new XmlWriter()
      .start('Error', false)
      .leaf('Code', problem.code)
      .leaf('Message', problem.message)
      .leaf('Resource', exchange.path.length > 1024 ? exchange.path.slice(0, 1024) : exchange.path)
      .leaf('RequestId', exchange.requestId)
      .leaf('HostId', HOST_ID)
      .end('Error');
    const headers: Record<string, string> = {
      'Content-Type': 'application/xml',
      ...s3ErrorHeaders(error, problem.status),
    };
    if (problem.status === 503) headers['Retry-After'] = '1';
    sendS3(exchange, problem.status, headers, xml.toString());
  }
}

/** The listener's own refusals in S3's form (their Lightwell code mapped, s3ErrorOf). */
const s3Errors: ErrorRenderer = {
  render(answer, request) {
    const code =
      answer.status === 503
        ? 'ServiceUnavailable'
        : answer.status === 431
          ? 'RequestHeaderSectionTooLarge'
          : answer.status >= 500
            ? 'InternalError'
            : 'InvalidRequest';
    const xml = new XmlWriter()
      .start('Error', false)
      .leaf('Code', code)
      .leaf('Message', answer.message)
      .leaf('Resource', request.path)
      .leaf('RequestId', request.requestId)
      .end('Error');
    return {
      status: answer.status,
      headers: {
        ...answer.headers,
        'Content-Type': 'application/xml',
        'x-amz-request-id': request.requestId,
        'x-amz-id-2': HOST_ID,
      },
      body: xml.toString(),
    };
  },
};

/** The audit row's resource: `bucket/key`, `bucket`, or `/`. */
function resourceOf(address: S3Address): string {
  if (address.bucket === undefined) return '/';
  return address.key === undefined ? address.bucket : `${address.bucket}/${address.key}`;
}

/** Sends a response with S3's request-id headers; every S3 answer goes through here. */
export function sendS3(
  exchange: Exchange,
  status: number,
  headers: Readonly<Record<string, string>>,
  body?: string | Buffer,
): void {
  exchange.send(
    status,
    { ...headers, ...s3IdHeaders(exchange) },
    status === 304 || exchange.method === 'HEAD' ? undefined : body,
  );
}

/**
 * The row a mutation commits with (its action `s3:<Operation>`), and the caller whose key the
 * engine checks again when the write commits: the same as the native API's `mutate`.
 */
export async function mutate<K extends TransactionalName>(
  request: S3Request,
  op: K,
  args: CommandArgs<K>,
  status: number,
): Promise<CommandResult<K>> {
  const exchange = request.exchange;
  const extras: CommandExtras = args;
  if (exchange.audit.actor !== undefined) extras.caller = exchange.audit.actor;
  extras.audit = auditRowOf(exchange, status);
  const result = await request.services.engine.call(op, args);
  exchange.audit.written = true;
  return result;
}
