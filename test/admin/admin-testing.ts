// Helpers of the admin API tests: raw requests with any (or no) token, tokens of every role,
// polling, and a data-plane tenant bootstrap.

import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { CLI, type Service } from '../helpers/service.js';

const execFileAsync = promisify(execFile);

export interface Answer {
  status: number;
  /** The parsed body (the text when it is not JSON); a test states the shape it reads. */
  json: unknown;
  headers: Headers;
}

/** The fields of a tenant answer that tests read; t.match checks the rest. */
export interface TenantAnswer {
  id: string;
  state: string;
  deletion?: { state: string; completedAt?: string };
}

/** `GET /tenants`. */
export interface TenantList {
  tenants: TenantAnswer[];
}

/** The fields of a usage answer that tests read. */
export interface UsageAnswer {
  objects: number;
  physicalBytes: number;
}

/** One admin request; `token` undefined sends no Authorization header. */
export async function call(
  service: Service,
  method: string,
  path: string,
  options: { token?: string; body?: unknown; raw?: string } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { 'Content-Type': 'application/json' };
  if (options.token !== undefined) headers['Authorization'] = `Bearer ${options.token}`;
  const init: RequestInit = { method, headers };
  const bodyless = method === 'GET' || method === 'HEAD';
  if (options.raw !== undefined) init.body = options.raw;
  else if (options.body !== undefined && !bodyless) init.body = JSON.stringify(options.body);
  const response = await fetch(service.adminUrl + path, init);
  const text = await response.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = text;
  }
  return { status: response.status, json, headers: response.headers };
}

export interface MintedToken {
  token: string;
  tokenId: string;
  role: string;
  tenant: string | null;
  expiresAt: string | null;
}

/** `lightwell admin-token create … --json` (several may run at once). */
export async function mintToken(
  service: Service,
  role: 'viewer' | 'operator' | 'owner',
  extra: readonly string[] = [],
): Promise<MintedToken> {
  const { stdout } = await execFileAsync(
    process.execPath,
    [
      CLI,
      'admin-token',
      'create',
      '--data-dir',
      service.dataDir,
      '--role',
      role,
      '--json',
      ...extra,
    ],
    { encoding: 'utf8' },
  );
  return JSON.parse(stdout.trim().split('\n').pop() ?? '{}') as MintedToken;
}

export function cli(service: Service, args: readonly string[]): string {
  return execFileSync(
    process.execPath,
    [CLI, 'admin-token', ...args, '--data-dir', service.dataDir],
    { encoding: 'utf8' },
  );
}

export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** Audit events visible to `token` that carry `requestId` (rows of reads arrive in batches). */
export async function auditRowOf(
  service: Service,
  token: string,
  requestId: string,
  query = 'limit=1000',
): Promise<{ requestId: string }> {
  return waitFor(`audit row ${requestId}`, async () => {
    const answer = await call(service, 'GET', `/audit?${query}`, { token });
    const page = answer.json as { events?: Array<{ requestId: string }> } | undefined;
    return page?.events?.find((event) => event.requestId === requestId);
  });
}

/** Mints a data-plane bearer token for an access key; the status when it fails. */
export async function mintBearer(
  service: Service,
  accessKeyId: string,
  secretKey: string,
): Promise<{ status: number; token?: string }> {
  const basic = Buffer.from(`${accessKeyId}:${secretKey}`).toString('base64');
  const response = await fetch(`${service.publicUrl}/auth/token`, {
    method: 'POST',
    headers: { Authorization: `Basic ${basic}` },
  });
  const json = (await response.json()) as { token?: string };
  return json.token === undefined
    ? { status: response.status }
    : { status: response.status, token: json.token };
}

export async function dataRequest(
  service: Service,
  token: string,
  method: string,
  path: string,
  body?: string | Uint8Array,
  json?: unknown,
): Promise<{ status: number; json: unknown }> {
  const headers: Record<string, string> = { Authorization: `Bearer ${token}` };
  let payload: string | Uint8Array | undefined = body;
  if (json !== undefined) {
    headers['Content-Type'] = 'application/json';
    payload = JSON.stringify(json);
  }
  const response = await fetch(service.publicUrl + path, {
    method,
    headers,
    ...(payload === undefined ? {} : { body: payload as string }),
  });
  const text = await response.text();
  return {
    status: response.status,
    json:
      text && response.headers.get('content-type')?.includes('json') ? JSON.parse(text) : undefined,
  };
}
