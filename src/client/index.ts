// lightwell/client: the TypeScript client of a Lightwell service's public listener. The native
// API (typed from its OpenAPI document: src/client/openapi-types.ts, generated) and the binary
// ingest stream (ingest-stream.ts, docs/ingest-protocol.md).
//
//   const client = new LightwellClient({ endpoint: 'http://127.0.0.1:9000', accessKeyId, secretKey });
//   const stream = client.ingest('logs');
//   await stream.put('a.txt', 'hello');
//   await stream.close();
//
// With an access key and secret the client mints its bearer token (POST /api/v1/auth/token) and
// mints a new one before it expires; with a token it uses that one.

import type { components, operations } from './openapi-types.js';
import { IngestStream, type IngestOptions, type TokenSource } from './ingest-stream.js';
import { clientProblem, problemOf } from './problem.js';

export {
  IngestStream,
  type Body,
  type BodyFile,
  type IngestOptions,
  type Progress,
  type PutItem,
  type PutOptions,
  type PutOutcome,
  type PutResult,
} from './ingest-stream.js';
export { LightwellProblem, type ProblemFields } from './problem.js';
export type { paths, components, operations } from './openapi-types.js';

export type ClientOptions =
  | { readonly endpoint: string; readonly token: string }
  | { readonly endpoint: string; readonly accessKeyId: string; readonly secretKey: string };

type JsonOf<Op extends keyof operations, Status extends number> = operations[Op] extends {
  responses: { [S in Status]: { content: { 'application/json': infer Body } } };
}
  ? Body
  : never;

export type ObjectMetadata = JsonOf<'putObject', 200>;
export type Bucket = JsonOf<'createBucket', 201>;
export type ObjectList = JsonOf<'listObjects', 200>;
export type TokenAnswer = JsonOf<'createToken', 200>;
export type ProblemDocument = components extends { schemas: { Problem: infer P } } ? P : unknown;

/** A token is renewed once this share of its life has passed. */
const RENEW_AT_LIFE_SHARE = 0.8;
const API_PREFIX = '/api/v1';

export class LightwellClient implements TokenSource {
  readonly endpoint: string;
  readonly renewable: boolean;
  private current: { token: string; expiresAt: number | undefined; renewAt: number } | undefined;
  private minting: Promise<string> | undefined;

  constructor(private readonly options: ClientOptions) {
    this.endpoint = options.endpoint.replace(/\/+$/, '');
    this.renewable = 'accessKeyId' in options;
    if ('token' in options)
      this.current = { token: options.token, expiresAt: undefined, renewAt: Infinity };
  }

  /** A bearer token: the given one, or one minted (again when `renew` or near its expiry). */
  async token(renew = false): Promise<string> {
    const current = this.current;
    if (current && (!this.renewable || (!renew && Date.now() < current.renewAt)))
      return current.token;
    this.minting ??= this.mint().finally(() => (this.minting = undefined));
    return this.minting;
  }

  tokenExpiresAt(): number | undefined {
    return this.current?.expiresAt;
  }

  private async mint(): Promise<string> {
    if (!('accessKeyId' in this.options)) throw clientProblem('no_credentials', 'no access key');
    const { accessKeyId, secretKey } = this.options;
    const basic = Buffer.from(`${accessKeyId}:${secretKey}`).toString('base64');
    const now = Date.now();
    const answer = await this.fetchJson<TokenAnswer>('POST', '/auth/token', {
      headers: { Authorization: `Basic ${basic}` },
      auth: false,
    });
    const expiresAt = Date.parse(answer.expiresAt);
    this.current = {
      token: answer.token,
      expiresAt,
      renewAt: now + (expiresAt - now) * RENEW_AT_LIFE_SHARE,
    };
    return answer.token;
  }

  /** Opens an ingest stream bound to `bucket` (objects may name another). */
  ingest(bucket: string, options: IngestOptions = {}): IngestStream {
    return new IngestStream(this, bucket, options);
  }

  createBucket(name: string, options: { versioning?: boolean } = {}): Promise<Bucket> {
    const json: Record<string, unknown> = { name };
    if (options.versioning) json['versioning'] = 'Enabled';
    return this.fetchJson<Bucket>('POST', '/buckets', { json });
  }

  async putObject(
    bucket: string,
    key: string,
    body: Uint8Array | string,
    headers: Record<string, string> = {},
  ): Promise<ObjectMetadata> {
    return this.fetchJson<ObjectMetadata>('PUT', objectPath(bucket, key), { body, headers });
  }

  /** The object's bytes, or undefined when it does not exist. */
  async getObject(bucket: string, key: string): Promise<Buffer | undefined> {
    const response = await this.fetch('GET', objectPath(bucket, key), {});
    if (response.status === 404) return undefined;
    if (!response.ok)
      throw problemOf(await response.json().catch(() => undefined), response.status);
    return Buffer.from(await response.arrayBuffer());
  }

  /** The object's headers, or undefined when it does not exist. */
  async headObject(bucket: string, key: string): Promise<Headers | undefined> {
    const response = await this.fetch('HEAD', objectPath(bucket, key), {});
    if (response.status === 404) return undefined;
    if (!response.ok) throw problemOf(undefined, response.status);
    return response.headers;
  }

  async deleteObject(bucket: string, key: string): Promise<void> {
    const response = await this.fetch('DELETE', objectPath(bucket, key), {});
    if (!response.ok)
      throw problemOf(await response.json().catch(() => undefined), response.status);
  }

  listObjects(
    bucket: string,
    query: { prefix?: string; continuationToken?: string; maxKeys?: number } = {},
  ): Promise<ObjectList> {
    const search = new URLSearchParams();
    if (query.prefix !== undefined) search.set('prefix', query.prefix);
    if (query.continuationToken !== undefined)
      search.set('continuationToken', query.continuationToken);
    if (query.maxKeys !== undefined) search.set('maxKeys', String(query.maxKeys));
    const text = search.toString();
    return this.fetchJson<ObjectList>(
      'GET',
      `/buckets/${encodeURIComponent(bucket)}/objects${text ? `?${text}` : ''}`,
      {},
    );
  }

  private async fetch(
    method: string,
    path: string,
    init: {
      body?: Uint8Array | string;
      json?: unknown;
      headers?: Record<string, string>;
      auth?: boolean;
    },
  ): Promise<Response> {
    const headers: Record<string, string> = { ...init.headers };
    if (init.auth !== false) headers['Authorization'] = `Bearer ${await this.token()}`;
    let body: Uint8Array | string | undefined = init.body;
    if (init.json !== undefined) {
      headers['Content-Type'] = 'application/json';
      body = JSON.stringify(init.json);
    }
    return fetch(this.endpoint + API_PREFIX + path, {
      method,
      headers,
      ...(body === undefined ? {} : { body }),
    });
  }

  private async fetchJson<T>(
    method: string,
    path: string,
    init: {
      body?: Uint8Array | string;
      json?: unknown;
      headers?: Record<string, string>;
      auth?: boolean;
    },
  ): Promise<T> {
    const response = await this.fetch(method, path, init);
    const json: unknown = await response.json().catch(() => undefined);
    if (!response.ok) throw problemOf(json, response.status);
    return json as T;
  }
}

function objectPath(bucket: string, key: string): string {
  return `/buckets/${encodeURIComponent(bucket)}/objects/${key.split('/').map(encodeURIComponent).join('/')}`;
}
