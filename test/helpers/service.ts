// A real Lightwell for integration tests: `lightwell serve` as a child process on loopback,
// with a fresh data directory and free ports, plus helpers to bootstrap a tenant and talk to
// both APIs with fetch. Nothing is mocked.

import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
/** The compiled CLI: dist/bin/lightwell.js (this file runs from dist/test/helpers). */
export const CLI = resolve(here, '../../bin/lightwell.js');

const PORT_ATTEMPTS = 3;
/** How long a start may take before it fails (see `launch`). */
const START_LIMIT_MS = 120_000;

export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}

/** The fields of an `application/problem+json` answer that tests read. */
export interface Problem {
  code: string;
  message: string;
}

/** The fields of an object answer (PUT, copy, complete) that tests read. */
export interface ObjectAnswer {
  key: string;
  versionId: string;
  etag: string;
  size: number;
}

/** The fields of an objects listing page that tests read. */
export interface ObjectsPage {
  objects: Array<{ key: string }>;
}

export interface ServiceOptions {
  readonly dataDir?: string;
  readonly gateways?: number;
  readonly env?: Record<string, string>;
  readonly args?: readonly string[];
  /** `serve` leads a process group of its own, which `signalGroup` signals as a terminal would. */
  readonly detached?: boolean;
}

/**
 * The command line that runs `command` so that it gets SIGKILL when this test process dies: tap
 * kills a file that overran its time limit with SIGKILL, which runs no teardown, and a service
 * left running would hold its ports and CPU for the rest of the suite. `serve`'s own children
 * stop when their supervisor is gone. Without util-linux's `setpriv` the command runs as is.
 */
function tiedToThisProcess(command: string, args: readonly string[]): [string, string[]] {
  if (!existsSync(SETPRIV)) return [command, [...args]];
  return [SETPRIV, ['--pdeathsig', 'KILL', command, ...args]];
}
const SETPRIV = '/usr/bin/setpriv';

export class Service {
  child: ChildProcess | undefined;
  output = '';
  /** What the service printed while it started (logs at the chosen `--log-level`). */
  startOutput = '';
  publicUrl = '';
  adminUrl = '';
  /** The process tree as of the last launch: the supervisor, then its descendants. */
  private tree: number[] = [];

  private constructor(
    readonly dataDir: string,
    readonly publicPort: number,
    readonly adminPort: number,
    private readonly options: ServiceOptions,
  ) {
    this.publicUrl = `http://127.0.0.1:${publicPort}/api/v1`;
    this.adminUrl = `http://127.0.0.1:${adminPort}/admin/api/v1`;
  }

  static async start(options: ServiceOptions = {}): Promise<Service> {
    const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'lw-test-'));
    // A port found free can be taken by another test process before the service binds it:
    // start again on new ports when that happens.
    for (let attempt = 1; ; attempt += 1) {
      const service = new Service(dataDir, await freePort(), await freePort(), options);
      try {
        await service.launch();
        return service;
      } catch (error) {
        const taken = /EADDRINUSE|address in use|is already in use/.test(String(error));
        if (attempt === PORT_ATTEMPTS || !taken) throw error;
      }
    }
  }

  /** Starts (or restarts) `lightwell serve`; resolves when both listeners are ready. */
  async launch(): Promise<void> {
    const args = [
      CLI,
      'serve',
      '--data-dir',
      this.dataDir,
      '--public-listen',
      `127.0.0.1:${this.publicPort}`,
      '--admin-listen',
      `127.0.0.1:${this.adminPort}`,
      '--gateways',
      String(this.options.gateways ?? 1),
      '--log-level',
      'warn',
      ...(this.options.args ?? []),
    ];
    const child = spawn(...tiedToThisProcess(process.execPath, args), {
      detached: this.options.detached === true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...this.options.env },
    });
    this.child = child;
    await new Promise<void>((resolveReady, reject) => {
      // Far above a start on a loaded machine, and below tap's limit for a file (180 s): a
      // start that hangs fails here, saying what it waited for, not with tap's handle dump.
      const timer = setTimeout(
        () =>
          reject(
            new Error(`waited ${START_LIMIT_MS / 1000} s for both ready lines:\n${this.output}`),
          ),
        START_LIMIT_MS,
      );
      const onData = (data: Buffer): void => {
        this.output += data.toString();
        if (
          this.output.includes('public listener ready') &&
          this.output.includes('admin listener ready')
        ) {
          clearTimeout(timer);
          resolveReady();
        }
      };
      child.stdout.on('data', onData);
      child.stderr.on('data', (data: Buffer) => {
        this.output += data.toString();
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`service exited with ${String(code)} during start:\n${this.output}`));
      });
    });
    this.startOutput = this.output;
    this.output = '';
    this.tree = [child.pid as number, ...descendants(child.pid as number)];
  }

  /**
   * SIGKILL the whole process tree: the supervisor and every child. Every process is first
   * stopped (SIGSTOP), so none of them sees another die (a child that lost its supervisor would
   * otherwise begin a clean shutdown) and all die at the same instant of their work. The tree
   * known since the launch is stopped at once, before anything slow (listing processes) runs.
   */
  kill9(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null) return Promise.resolve();
    const signal = (pids: readonly number[], name: NodeJS.Signals): void => {
      for (const pid of pids) {
        try {
          process.kill(pid, name);
        } catch {
          // already gone
        }
      }
    };
    signal(this.tree, 'SIGSTOP');
    // Anything started since the launch (a restarted child) is stopped too.
    const all = [
      ...new Set([...this.tree, child.pid as number, ...descendants(child.pid as number)]),
    ];
    signal(all, 'SIGSTOP');
    const pids = all.filter((pid) => pid !== child.pid);
    return new Promise<void>((resolveExit) => {
      child.once('exit', () => resolveExit());
      signal(all, 'SIGKILL');
    }).then(() => waitGone(pids));
  }

  /** The pids of the running tree: the supervisor first, then its descendants. */
  pids(): number[] {
    const child = this.child;
    if (!child || child.exitCode !== null) return [];
    return [child.pid as number, ...descendants(child.pid as number)];
  }

  /**
   * Signals serve's whole process group, as a terminal's Ctrl-C does (only with `detached`), and
   * waits for serve's exit; returns its exit code.
   */
  signalGroup(signal: NodeJS.Signals): Promise<number | null> {
    const child = this.child;
    if (!child || child.exitCode !== null) return Promise.resolve(child?.exitCode ?? null);
    if (this.options.detached !== true) throw new Error('signalGroup needs a detached service');
    return new Promise((resolveExit) => {
      child.once('exit', (code) => resolveExit(code));
      process.kill(-(child.pid as number), signal);
    });
  }

  /** SIGTERM and wait for a clean exit; returns the exit code. */
  stop(): Promise<number | null> {
    const child = this.child;
    if (!child || child.exitCode !== null) return Promise.resolve(child?.exitCode ?? null);
    return new Promise((resolveExit) => {
      child.once('exit', (code) => resolveExit(code));
      child.kill('SIGTERM');
    });
  }

  async close(): Promise<void> {
    await this.stop();
    if (!this.options.dataDir) rmSync(this.dataDir, { recursive: true, force: true });
  }

  /** `lightwell admin-token create`; returns the token. */
  adminToken(
    role: 'viewer' | 'operator' | 'owner' = 'owner',
    extra: readonly string[] = [],
  ): string {
    const out = execFileSync(
      process.execPath,
      [CLI, 'admin-token', 'create', '--data-dir', this.dataDir, '--role', role, ...extra],
      { encoding: 'utf8' },
    );
    return out.trim().split('\n').pop() ?? '';
  }

  async admin(
    method: string,
    path: string,
    token: string,
    body?: unknown,
  ): Promise<{ status: number; json: unknown; headers: Headers }> {
    const init: RequestInit = {
      method,
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    };
    if (body !== undefined) init.body = JSON.stringify(body);
    const response = await fetch(this.adminUrl + path, init);
    const text = await response.text();
    return {
      status: response.status,
      json: text ? JSON.parse(text) : undefined,
      headers: response.headers,
    };
  }

  /** Creates a tenant, an account and a key with `scopes`; returns a data-plane client. */
  async tenant(
    id: string,
    scopes = 'read,write,delete,admin',
    ownerToken = this.adminToken(),
  ): Promise<DataClient> {
    let response = await this.admin('POST', '/tenants', ownerToken, { id });
    if (response.status !== 201 && response.status !== 409)
      throw new Error(`tenant: ${response.status} ${JSON.stringify(response.json)}`);
    response = await this.admin('POST', `/tenants/${id}/accounts`, ownerToken, { id: 'app' });
    if (response.status !== 201 && response.status !== 409)
      throw new Error(`account: ${response.status}`);
    response = await this.admin('POST', `/tenants/${id}/keys`, ownerToken, {
      accountId: 'app',
      scopes,
    });
    if (response.status !== 201)
      throw new Error(`key: ${response.status} ${JSON.stringify(response.json)}`);
    const key = response.json as { accessKeyId: string; secretKey: string };
    const client = new DataClient(this.publicUrl, key.accessKeyId, key.secretKey);
    await client.login();
    return client;
  }
}

export class DataClient {
  token = '';

  constructor(
    readonly baseUrl: string,
    readonly accessKeyId: string,
    readonly secretKey: string,
  ) {}

  async login(): Promise<void> {
    const basic = Buffer.from(`${this.accessKeyId}:${this.secretKey}`).toString('base64');
    const response = await fetch(`${this.baseUrl}/auth/token`, {
      method: 'POST',
      headers: { Authorization: `Basic ${basic}` },
    });
    if (response.status !== 200)
      throw new Error(`login: ${response.status} ${await response.text()}`);
    this.token = ((await response.json()) as { token: string }).token;
  }

  async request(
    method: string,
    path: string,
    options: { body?: string | Uint8Array; headers?: Record<string, string>; json?: unknown } = {},
  ): Promise<{ status: number; headers: Headers; bytes: Buffer; json: unknown }> {
    const headers: Record<string, string> = {
      Authorization: `Bearer ${this.token}`,
      ...options.headers,
    };
    let body: string | Uint8Array | undefined;
    if (options.json !== undefined) {
      headers['Content-Type'] = 'application/json';
      body = JSON.stringify(options.json);
    } else if (options.body !== undefined) body = options.body;
    const response = await fetch(this.baseUrl + path, {
      method,
      headers,
      ...(body === undefined ? {} : { body: body as string }),
    });
    const bytes = Buffer.from(await response.arrayBuffer());
    const type = response.headers.get('content-type') ?? '';
    const json: unknown =
      type.includes('json') && bytes.length > 0 ? JSON.parse(bytes.toString()) : undefined;
    return { status: response.status, headers: response.headers, bytes, json };
  }

  put(
    bucket: string,
    key: string,
    body: string | Uint8Array,
    headers: Record<string, string> = {},
  ): ReturnType<DataClient['request']> {
    return this.request('PUT', `/buckets/${bucket}/objects/${encodeKey(key)}`, { body, headers });
  }

  get(
    bucket: string,
    key: string,
    headers: Record<string, string> = {},
  ): ReturnType<DataClient['request']> {
    return this.request('GET', `/buckets/${bucket}/objects/${encodeKey(key)}`, { headers });
  }
}

export function encodeKey(key: string): string {
  return key.split('/').map(encodeURIComponent).join('/');
}

function descendants(pid: number): number[] {
  const found: number[] = [];
  const visit = (parent: number): void => {
    let children: string;
    try {
      children = execFileSync('ps', ['-o', 'pid=', '--ppid', String(parent)], { encoding: 'utf8' });
    } catch {
      return;
    }
    for (const line of children.split('\n')) {
      const child = Number(line.trim());
      if (child > 0) {
        found.push(child);
        visit(child);
      }
    }
  };
  visit(pid);
  return found;
}

/**
 * Waits until the killed processes are gone, reaped included: a zombie still answers kill(0),
 * so the next `lightwell serve` would take it for a live engine (see the report of issue 2).
 * Zombies whose new parent never reaps them are accepted after a while.
 */
async function waitGone(pids: readonly number[]): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (pids.every((pid) => !existsSync(`/proc/${pid}`))) return;
    if (Date.now() > deadline && pids.every((pid) => !existsSync(`/proc/${pid}`) || isZombie(pid)))
      return;
    if (Date.now() > deadline + 15_000) return;
    await new Promise((r) => setTimeout(r, 25));
  }
}

function isZombie(pid: number): boolean {
  try {
    return execFileSync('ps', ['-o', 'stat=', '-p', String(pid)], { encoding: 'utf8' })
      .trim()
      .startsWith('Z');
  } catch {
    return true;
  }
}
