// The native API of one cluster node as the cluster tests use it: a client of a tenant's key
// that logs in on its node (a token is good on every member), PUTs and GETs objects of bucket `data`;
// and the tenant `acme` with an account and a key, made through a node's admin API.
import type { S3Client } from '@aws-sdk/client-s3';
import { s3ClientFor } from '../helpers/s3-sdk.js';
import { ClusterKit, waitFor, type KitNode } from './kit.js';

export class Client {
  token = '';
  constructor(
    readonly node: KitNode,
    private readonly keyId: string,
    private readonly secret: string,
  ) {}

  /** Logs in once this node has the key (a node applies new keys from etcd within moments). */
  async login(): Promise<void> {
    await waitFor(`a login on ${this.node.id}`, async () =>
      (await this.tryLogin()) ? true : undefined,
    );
  }

  private async tryLogin(): Promise<boolean> {
    const basic = Buffer.from(`${this.keyId}:${this.secret}`).toString('base64');
    const response = await fetch(`${this.node.publicUrl}/auth/token`, {
      method: 'POST',
      headers: { Authorization: `Basic ${basic}` },
      signal: AbortSignal.timeout(30_000),
    });
    const text = await response.text();
    if (response.status === 401) return false;
    if (response.status !== 200) throw new Error(`login on ${this.node.id}: ${text}`);
    this.token = (JSON.parse(text) as { token: string }).token;
    return true;
  }

  async send(
    method: string,
    path: string,
    body?: Uint8Array | string,
  ): Promise<{ status: number; bytes: Buffer }> {
    const response = await fetch(this.node.publicUrl + path, {
      method,
      headers: {
        Authorization: `Bearer ${this.token}`,
        ...(typeof body === 'string' ? { 'Content-Type': 'application/json' } : {}),
      },
      ...(body === undefined ? {} : { body }),
      signal: AbortSignal.timeout(60_000),
    });
    return { status: response.status, bytes: Buffer.from(await response.arrayBuffer()) };
  }

  put(key: string, body: Buffer): Promise<{ status: number; bytes: Buffer }> {
    return this.send('PUT', `/buckets/data/objects/${key}`, body);
  }

  get(key: string): Promise<{ status: number; bytes: Buffer }> {
    return this.send('GET', `/buckets/data/objects/${key}`);
  }
}

export async function makeKey(node: KitNode): Promise<[string, string]> {
  for (const [path, body] of [
    ['/tenants', { id: 'acme' }],
    ['/tenants/acme/accounts', { id: 'app' }],
  ] as const) {
    const answer = await node.admin('POST', path, body);
    if (answer.status !== 201) throw new Error(`${path}: ${JSON.stringify(answer.json)}`);
  }
  const key = await node.admin('POST', '/tenants/acme/keys', {
    accountId: 'app',
    scopes: 'read,write,delete,admin',
  });
  if (key.status !== 201) throw new Error(`key: ${JSON.stringify(key.json)}`);
  return [key.json['accessKeyId'] as string, key.json['secretKey'] as string];
}

/**
 * How the S3 cluster tests start: three nodes formed into a cluster, tenant `acme`'s key made on
 * n1 (`makeKey`), and an S3 client of that key on each node.
 */
export async function threeNodesWithS3(teardown: (fn: () => Promise<void>) => void): Promise<{
  nodes: [KitNode, KitNode, KitNode];
  key: [string, string];
  s3: [S3Client, S3Client, S3Client];
}> {
  const kit = await ClusterKit.create(3, teardown);
  const nodes = kit.nodes as [KitNode, KitNode, KitNode];
  await kit.formCluster(3);
  const key = await makeKey(nodes[0]);
  const s3 = nodes.map((node) =>
    s3ClientFor(new URL(node.publicUrl).origin, { accessKeyId: key[0], secretKey: key[1] }),
  ) as [S3Client, S3Client, S3Client];
  return { nodes, key, s3 };
}
