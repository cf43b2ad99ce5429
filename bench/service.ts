// The Lightwell under test: either a service this harness starts for the run, or one that is
// already running (`--endpoint URL`).
//
// Started: `node dist/bin/lightwell.js serve` (found relative to this module, or `--lightwell-bin`)
// on two free loopback ports with a fresh data directory in a temp directory (or under
// `--data-parent`, which should be the disk that production data would live on: a tmpfs makes
// fdatasync free). Its output goes to `serve.log` beside the data directory; readiness is the
// two lines `public listener ready` and `admin listener ready`. Then an owner admin token from
// `lightwell admin-token create`, then through the admin API a tenant `bench`, an account
// `loader` and an access key, then a bearer token from `POST /api/v1/auth/token`. SIGTERM stops
// the service; the temp directory is removed unless `--keep-data`.
//
// Running: bring a bearer token (`--token`), an access key (`--access-key`, `--secret-key`), or
// an admin URL and token (`--admin-url`, `--admin-token`) with which the same tenant, account and
// key are created. `--server-pid` names the serve process when it runs on this machine, so its
// CPU and RSS can be sampled; without it those columns stay empty.

import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BenchError } from './bench-error.js';
import { jsonRequest, parseTarget, type JsonResponse, type Target } from './http1.js';

export interface ServiceOptions {
  readonly endpoint?: string | undefined;
  readonly token?: string | undefined;
  readonly accessKey?: string | undefined;
  readonly secretKey?: string | undefined;
  readonly adminUrl?: string | undefined;
  readonly adminToken?: string | undefined;
  readonly serverPid?: number | undefined;
  readonly lightwellBin?: string | undefined;
  readonly dataParent?: string | undefined;
  readonly keepData?: boolean | undefined;
  readonly logLevel?: string | undefined;
  /** Gateway processes of a started service (`serve --gateways`); serve's default when unset. */
  readonly gateways?: number | undefined;
  /** Ports of a started service; free ones found by the OS when unset. */
  readonly ports?: { readonly public: number; readonly admin: number } | undefined;
  readonly insecure?: boolean | undefined;
  readonly readyTimeoutMs?: number | undefined;
}

export interface Credentials {
  readonly accessKeyId: string;
  readonly secretKey: string;
}

/** What the scenarios need: where to send requests, and how to authenticate them. */
export interface Service {
  readonly mode: 'started' | 'endpoint';
  readonly target: Target;
  /** The serve process, for CPU and RSS sampling; null when unknown. */
  readonly pid: number | null;
  readonly dataDir: string | null;
  readonly logFile: string | null;
  /** `Authorization: Bearer …\r\n`, re-minted when the token nears expiry. */
  authHeader(): Promise<string>;
  /** The access key pair (the S3 credential), when the run has one (not with --token). */
  readonly credentials?: Credentials | null;
  stop(): Promise<void>;
  /** Synchronous SIGTERM for signal handlers; leaves the data directory in place. */
  kill(): void;
}

export const TENANT_ID = 'bench';
export const ACCOUNT_ID = 'loader';
const READY_TIMEOUT_MS = 60_000;
/** Re-mint when less than this (or half the token's lifetime) remains. */
const TOKEN_REFRESH_MARGIN_MS = 20 * 60_000;

/** Starts Lightwell or connects to a running one, per the options. */
export async function openService(options: ServiceOptions): Promise<Service> {
  return options.endpoint === undefined ? startService(options) : connectService(options);
}

/** The lightwell CLI beside this module: dist/bench/service.js → dist/bin/lightwell.js. */
export function defaultLightwellBin(): string {
  return fileURLToPath(new URL('../bin/lightwell.js', import.meta.url));
}

/** Starts of the service tried when a port turns out to be taken. */
const PORT_ATTEMPTS = 3;
/**
 * How a start fails on a taken port: the supervisor's own check (`EADDRINUSE`), or a listener
 * that lost the port after that check (src/http/server.ts).
 */
const PORT_TAKEN = /EADDRINUSE|address in use/;

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      assert.ok(address !== null && typeof address === 'object');
      server.close(() => resolve(address.port));
    });
  });
}

async function startService(options: ServiceOptions): Promise<Service> {
  const bin = options.lightwellBin ?? defaultLightwellBin();
  if (!existsSync(bin)) {
    throw new BenchError(
      `${bin} not found: build Lightwell first (npm run build), or pass --endpoint URL`,
    );
  }
  const runDir = mkdtempSync(join(options.dataParent ?? tmpdir(), 'lightwell-bench-'));
  const dataDir = join(runDir, 'data');
  const logFile = join(runDir, 'serve.log');
  // A port that freePort found free can be taken before the service binds it (by any socket
  // on the machine, an outgoing connection's local port included): then try new ports. Ports
  // that the caller chose are tried once.
  const attemptsMax = options.ports === undefined ? PORT_ATTEMPTS : 1;
  let attempt = 0;
  let child: ChildProcess;
  let publicPort: number;
  let adminPort: number;
  for (;;) {
    [publicPort, adminPort] =
      options.ports === undefined
        ? [await freePort(), await freePort()]
        : [options.ports.public, options.ports.admin];
    writeFileSync(logFile, '');
    child = spawnServe({
      bin,
      dataDir,
      logFile,
      publicPort,
      adminPort,
      logLevel: options.logLevel,
      gateways: options.gateways,
    });
    try {
      await waitReady(child, logFile, options.readyTimeoutMs ?? READY_TIMEOUT_MS);
      break;
    } catch (error) {
      await stopChild(child);
      attempt += 1;
      if (attempt >= attemptsMax || !PORT_TAKEN.test(readFileSync(logFile, 'utf8'))) {
        // Keep the directory: its serve.log explains the failure.
        const message = `${(error as Error).message}\n(service log and data kept in ${runDir})`;
        throw new BenchError(message, { cause: error });
      }
    }
  }
  const stop = async (): Promise<void> => {
    await stopChild(child);
    if (options.keepData !== true) rmSync(runDir, { recursive: true, force: true });
  };
  const onExit = (): void => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  };
  process.once('exit', onExit);
  try {
    const adminToken = await createAdminToken(bin, dataDir);
    const admin = parseTarget(`http://127.0.0.1:${adminPort}`);
    const credentials = await provisionKey(admin, adminToken);
    const target = parseTarget(`http://127.0.0.1:${publicPort}`);
    const tokens = new TokenSource(target, credentials, null);
    assert.ok(child.pid !== undefined);
    return {
      mode: 'started',
      target,
      pid: child.pid,
      dataDir,
      logFile,
      authHeader: () => tokens.header(),
      credentials,
      stop: async () => {
        process.off('exit', onExit);
        await stop();
      },
      kill: onExit,
    };
  } catch (error) {
    process.off('exit', onExit);
    await stopChild(child);
    // Keep the directory: its serve.log explains the failure.
    const message = `${(error as Error).message}\n(service log and data kept in ${runDir})`;
    throw new BenchError(message, { cause: error });
  }
}

function spawnServe(options: {
  bin: string;
  dataDir: string;
  logFile: string;
  publicPort: number;
  adminPort: number;
  logLevel: string | undefined;
  gateways: number | undefined;
}): ChildProcess {
  const log = openSync(options.logFile, 'a');
  const env = { ...process.env };
  if (options.logLevel !== undefined) env['LIGHTWELL_LOG_LEVEL'] = options.logLevel;
  const args = [
    options.bin,
    'serve',
    '--data-dir',
    options.dataDir,
    '--public-listen',
    `127.0.0.1:${options.publicPort}`,
    '--admin-listen',
    `127.0.0.1:${options.adminPort}`,
    ...(options.gateways === undefined ? [] : ['--gateways', String(options.gateways)]),
  ];
  try {
    // Output goes straight to a file: the harness spends no CPU on the service's logs.
    return spawn(process.execPath, args, { stdio: ['ignore', log, log], env });
  } finally {
    closeSync(log);
  }
}

/** SIGTERM, then SIGKILL after 30 s; resolves when the child has exited. */
export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  await exited;
  clearTimeout(timer);
}

/** Polls the log file for both ready lines; fails early if the service exits. */
async function waitReady(child: ChildProcess, logFile: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const log = readFileSync(logFile, 'utf8');
    if (log.includes('public listener ready') && log.includes('admin listener ready')) return;
    if (child.exitCode !== null || child.signalCode !== null) {
      const status = child.exitCode ?? child.signalCode;
      throw new BenchError(
        `lightwell serve exited (${String(status)}) before it was ready:\n${tail(log)}`,
      );
    }
    if (Date.now() > deadline) {
      throw new BenchError(`lightwell serve not ready after ${timeoutMs} ms:\n${tail(log)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The last lines of a log, for error messages. */
export function tail(text: string, lines = 20): string {
  return text.trimEnd().split('\n').slice(-lines).join('\n');
}

/** `lightwell admin-token create --role owner`: the token is the last line of stdout. */
async function createAdminToken(bin: string, dataDir: string): Promise<string> {
  const args = [bin, 'admin-token', 'create', '--data-dir', dataDir, '--role', 'owner'];
  const stdout = await new Promise<string>((resolve, reject) => {
    execFile(process.execPath, args, { timeout: 60_000 }, (error, out, err) => {
      if (error) reject(new BenchError(`admin-token create failed: ${error.message}\n${err}`));
      else resolve(out);
    });
  });
  const token = stdout.trimEnd().split('\n').pop()?.trim() ?? '';
  if (!token.startsWith('lwadm_')) {
    throw new BenchError(
      `admin-token create printed no lwadm_ token on its last line:\n${tail(stdout)}`,
    );
  }
  return token;
}

function expectStatus(response: JsonResponse, accepted: readonly number[], what: string): void {
  if (!accepted.includes(response.status)) {
    throw new BenchError(`${what}: HTTP ${response.status} ${response.text.slice(0, 300)}`);
  }
}

/** Creates (or reuses) tenant `bench` and account `loader`, then a fresh access key. */
export async function provisionKey(admin: Target, adminToken: string): Promise<Credentials> {
  const headers = `Authorization: Bearer ${adminToken}\r\n`;
  const base = '/admin/api/v1';
  const tenant = await jsonRequest(admin, {
    method: 'POST',
    path: `${base}/tenants`,
    headers,
    json: { id: TENANT_ID },
  });
  expectStatus(tenant, [201, 409], 'create tenant');
  const account = await jsonRequest(admin, {
    method: 'POST',
    path: `${base}/tenants/${TENANT_ID}/accounts`,
    headers,
    json: { id: ACCOUNT_ID },
  });
  expectStatus(account, [201, 409], 'create account');
  const key = await jsonRequest(admin, {
    method: 'POST',
    path: `${base}/tenants/${TENANT_ID}/keys`,
    headers,
    json: { accountId: ACCOUNT_ID, scopes: 'read,write,delete,admin' },
  });
  expectStatus(key, [201], 'create access key');
  const body = key.json as { accessKeyId?: unknown; secretKey?: unknown } | null;
  if (typeof body?.accessKeyId !== 'string' || typeof body.secretKey !== 'string') {
    const text = key.text.slice(0, 300);
    throw new BenchError(`create access key: no accessKeyId/secretKey in ${text}`);
  }
  return { accessKeyId: body.accessKeyId, secretKey: body.secretKey };
}

/** Mints bearer tokens with an access key and re-mints them before they expire. */
export class TokenSource {
  private token: string | null;
  private expiresAtMs = Infinity;
  private marginMs = 0;

  constructor(
    private readonly target: Target,
    private readonly credentials: Credentials | null,
    fixedToken: string | null,
  ) {
    this.token = fixedToken;
  }

  async header(): Promise<string> {
    // Scenarios capture the header when they start, so a token must outlive the longest one.
    const fresh = this.token !== null && Date.now() < this.expiresAtMs - this.marginMs;
    if (!fresh && this.credentials !== null) await this.mint(this.credentials);
    assert.ok(this.token !== null, 'a token or credentials');
    return `Authorization: Bearer ${this.token}\r\n`;
  }

  private async mint(credentials: Credentials): Promise<void> {
    const pair = `${credentials.accessKeyId}:${credentials.secretKey}`;
    const basic = Buffer.from(pair).toString('base64');
    const response = await jsonRequest(this.target, {
      method: 'POST',
      path: '/api/v1/auth/token',
      headers: `Authorization: Basic ${basic}\r\n`,
    });
    expectStatus(response, [200], 'POST /api/v1/auth/token');
    const body = response.json as { token?: unknown; expiresAt?: unknown } | null;
    if (typeof body?.token !== 'string') {
      throw new BenchError(`POST /api/v1/auth/token: no token in ${response.text.slice(0, 300)}`);
    }
    this.token = body.token;
    const now = Date.now();
    const expires = typeof body.expiresAt === 'string' ? Date.parse(body.expiresAt) : NaN;
    this.expiresAtMs = Number.isFinite(expires) ? expires : now + 30 * 60_000;
    this.marginMs = Math.min(TOKEN_REFRESH_MARGIN_MS, (this.expiresAtMs - now) / 2);
  }
}

async function connectService(options: ServiceOptions): Promise<Service> {
  assert.ok(options.endpoint !== undefined);
  const target = parseTarget(options.endpoint, options.insecure === true);
  let tokens: TokenSource;
  let credentials: Credentials | null = null;
  if (options.token !== undefined) {
    tokens = new TokenSource(target, null, options.token);
  } else if (options.accessKey !== undefined && options.secretKey !== undefined) {
    credentials = { accessKeyId: options.accessKey, secretKey: options.secretKey };
    tokens = new TokenSource(target, credentials, null);
  } else if (options.adminUrl !== undefined && options.adminToken !== undefined) {
    const admin = parseTarget(options.adminUrl, options.insecure === true);
    credentials = await provisionKey(admin, options.adminToken);
    tokens = new TokenSource(target, credentials, null);
  } else {
    throw new BenchError(
      '--endpoint needs --token, or --access-key and --secret-key, ' +
        'or --admin-url and --admin-token',
    );
  }
  await tokens.header();
  return {
    mode: 'endpoint',
    target,
    pid: options.serverPid ?? null,
    dataDir: null,
    logFile: null,
    authHeader: () => tokens.header(),
    credentials,
    stop: () => Promise.resolve(),
    kill: () => undefined,
  };
}
