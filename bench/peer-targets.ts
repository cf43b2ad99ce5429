// The servers that the peer comparison (peers.ts) runs its loads against, one at a time: how
// each is found or installed, started on a loopback port with a fresh temp directory, named
// (`ObjectApi`), stopped, and what it does for a write that the others may not (`PeerFacts`).
//
// - lightwell: this checkout's `lightwell serve`, started as `npm run bench` starts it
//   (service.ts): bearer token, Lightwell's API.
// - s3rver: s3rver@3.7.1, an S3-compatible server in Node that keeps each object in a file.
//   It is installed on first use with `npm install --prefix <cache>/s3rver-3.7.1` (the cache is
//   bench/.peers in a checkout, ignored by git) and never becomes a dependency of Lightwell. It
//   answers unauthenticated path-style requests (`PUT /bucket/key`).
// - nginx: nginx's WebDAV PUT, the plain file server: no index, no checksum, no encryption, no
//   fsync. Found on PATH or in /usr/sbin; `--install` installs Debian's `nginx-core` with
//   apt-get (as root) when it is missing. It runs in the foreground (`daemon off`) under a
//   generated configuration in its temp directory, with a master process and one worker per
//   core (`worker_processes auto`, nginx's own advice), no access log, and the request body
//   temp files on the same file system as the files they are renamed to.
//
// A peer that cannot be had throws a BenchError saying why; peers.ts reports it as skipped.
// Nothing here is persisted beyond the install cache.

import { execFile, spawn, type ChildProcess } from 'node:child_process';
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { delimiter, join } from 'node:path';
import { BenchError, errorMessage } from './bench-error.js';
import { jsonRequest, parseTarget, type ResponseResult, type Target } from './http1.js';
import { findLightwellRoot, packageVersion } from './machine.js';
import type { Progress } from './progress.js';
import { encodeKey, LIGHTWELL_API, type ObjectApi } from './scenario-kit.js';
import { freePort, openService, type Service, stopChild, tail } from './service.js';

export const PEER_NAMES = ['lightwell', 's3rver', 'nginx'] as const;
export type PeerName = (typeof PEER_NAMES)[number];

/** What a target does for a write and a read: the differences behind its numbers. */
export interface PeerFacts {
  readonly durability: string;
  readonly integrity: string;
  readonly encryption: string;
  readonly index: string;
  readonly reads: string;
  readonly auth: string;
}

export interface PeerSetup {
  /** Where each target's temp directory goes. */
  readonly dataParent: string;
  /** First of four consecutive ports to use; null: free ports found by the OS. */
  readonly portBase: number | null;
  /** Install a missing system package (nginx) with apt-get. */
  readonly install: boolean;
  /** Where peers installed from npm are kept between runs. */
  readonly cacheDir: string;
  readonly lightwellBin: string | undefined;
  readonly progress: Progress;
}

export interface StartedPeer {
  readonly service: Service;
  readonly api: ObjectApi;
  readonly version: string;
}

export interface Peer {
  readonly name: PeerName;
  readonly title: string;
  readonly facts: PeerFacts;
  /** Starts the target; throws a BenchError when it cannot be installed or started. */
  start(setup: PeerSetup): Promise<StartedPeer>;
}

const READY_TIMEOUT_MS = 30_000;
const INSTALL_TIMEOUT_MS = 10 * 60_000;

/** The port `offset` places after --port-base, or a free one. */
async function peerPort(setup: PeerSetup, offset: number): Promise<number> {
  return setup.portBase === null ? freePort() : setup.portBase + offset;
}

// ---------------------------------------------------------------------------------------------
// Peer processes

/**
 * Starts `command` with its output (nginx's error log included) in `<runDir>/<name>.log`; ready
 * once it answers HTTP. Stopping it removes `runDir`.
 */
async function startProcess(options: {
  readonly name: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly runDir: string;
  /** Where the objects go (inside runDir). */
  readonly dataDir: string;
  readonly port: number;
}): Promise<Service> {
  const logFile = join(options.runDir, `${options.name}.log`);
  const log = openSync(logFile, 'a');
  let child: ChildProcess;
  try {
    child = spawn(options.command, options.args, { stdio: ['ignore', log, log] });
  } finally {
    closeSync(log);
  }
  const onExit = (): void => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  };
  process.once('exit', onExit);
  const target = parseTarget(`http://127.0.0.1:${options.port}`);
  try {
    await waitAnswering(child, target, logFile);
  } catch (error) {
    process.off('exit', onExit);
    await stopChild(child);
    throw error;
  }
  return {
    mode: 'started',
    target,
    pid: child.pid ?? null,
    dataDir: options.dataDir,
    logFile,
    authHeader: () => Promise.resolve(''),
    stop: async () => {
      process.off('exit', onExit);
      await stopChild(child);
      rmSync(options.runDir, { recursive: true, force: true });
    },
    kill: onExit,
  };
}

/** Polls `GET /` until the server answers anything; fails as soon as the process exits. */
async function waitAnswering(child: ChildProcess, target: Target, logFile: string): Promise<void> {
  const ended = new Promise<string>((resolve) => {
    child.once('exit', (code, signal) => resolve(`exited (${String(code ?? signal)})`));
    child.once('error', (error) => resolve(`could not start (${error.message})`));
  });
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    // A listener that accepts and never answers (another program on the port) fails quickly.
    const request = { method: 'GET', path: '/', idleTimeoutMs: 2000 };
    const answered = jsonRequest(target, request).then(
      () => true,
      () => false,
    );
    const outcome = await Promise.race([answered, ended]);
    if (outcome === true) return;
    if (typeof outcome === 'string') {
      throw new BenchError(`${outcome} before it answered:\n${logTail(logFile)}`);
    }
    if (Date.now() > deadline) {
      throw new BenchError(`not answering after ${READY_TIMEOUT_MS} ms:\n${logTail(logFile)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function logTail(logFile: string): string {
  try {
    return tail(readFileSync(logFile, 'utf8'), 8);
  } catch {
    return '(no log)';
  }
}

/** Runs a command to completion; resolves with its stdout and stderr, throws on failure. */
function run(
  command: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const options = { timeout: INSTALL_TIMEOUT_MS, env, maxBuffer: 16 * 1024 * 1024 };
    execFile(command, args, options, (error, stdout, stderr) => {
      if (error) {
        const output = tail(`${stdout}\n${stderr}`, 10);
        reject(new BenchError(`${command} ${args.join(' ')}: ${error.message}\n${output}`));
      } else {
        resolve({ stdout, stderr });
      }
    });
  });
}

/** Path-style naming (`/bucket/key`), as S3 servers and plain file servers take it. */
function pathStyle(bucket: string, key: string): string {
  return `/${encodeURIComponent(bucket)}/${encodeKey(key)}`;
}

// ---------------------------------------------------------------------------------------------
// Lightwell

const lightwell: Peer = {
  name: 'lightwell',
  title: 'Lightwell (this checkout)',
  facts: {
    durability: 'fdatasync of the data and the LMDB commit before the 2xx',
    integrity: 'CRC32C per object and per record; HMAC-SHA256 chunk ids',
    encryption: 'AES-256-GCM per chunk',
    index: 'LMDB (and an audit row per request)',
    reads: 'large chunks from the disk (O_DIRECT), small ones through the page cache',
    auth: 'bearer token checked per request',
  },
  start: async (setup) => {
    const service = await openService({
      lightwellBin: setup.lightwellBin,
      dataParent: setup.dataParent,
      ...(setup.portBase === null
        ? {}
        : { ports: { public: await peerPort(setup, 0), admin: await peerPort(setup, 1) } }),
    });
    return { service, api: LIGHTWELL_API, version: packageVersion(findLightwellRoot()) };
  },
};

// ---------------------------------------------------------------------------------------------
// s3rver

const S3RVER_VERSION = '3.7.1';

/** s3rver's CLI in the install cache, installed there first when missing. */
async function s3rverBin(setup: PeerSetup): Promise<string> {
  const dir = join(setup.cacheDir, `s3rver-${S3RVER_VERSION}`);
  const bin = join(dir, 'node_modules', 's3rver', 'bin', 's3rver.js');
  if (existsSync(bin)) return bin;
  setup.progress.note(`installing s3rver@${S3RVER_VERSION} into ${dir} (once)`);
  mkdirSync(dir, { recursive: true });
  const flags = ['--no-save', '--no-audit', '--no-fund', '--no-package-lock'];
  await run('npm', ['install', '--prefix', dir, ...flags, `s3rver@${S3RVER_VERSION}`]);
  if (!existsSync(bin)) throw new BenchError(`npm installed s3rver, but ${bin} is missing`);
  return bin;
}

/**
 * The key pair s3rver accepts out of the box (its default `S3RVER` user): the S3 scenarios sign
 * with it, as they sign with Lightwell's key. s3rver checks only that the key id is known: it
 * does not compute Signature Version 4 (lib/middleware/authentication.js, "Signature version 4
 * calculation is unimplemented"), so a wrong secret, a bogus signature, a wrong
 * `x-amz-content-sha256` or `x-amz-checksum-*` are all answered 200 (docs/benchmarks.md).
 */
const S3RVER_CREDENTIALS = { accessKeyId: 'S3RVER', secretKey: 'S3RVER' } as const;

const S3RVER_API: ObjectApi = {
  objectPath: pathStyle,
  createBucket: async (service, bucket) => {
    const response = await jsonRequest(service.target, { method: 'PUT', path: `/${bucket}` });
    if (response.status !== 200 && response.status !== 409) {
      const text = response.text.slice(0, 300);
      throw new BenchError(`create bucket ${bucket}: HTTP ${response.status} ${text}`);
    }
  },
  putAnswer: () => ({
    check: (response: ResponseResult) =>
      response.headers['etag'] === undefined ? 'PUT answered no ETag' : null,
  }),
};

const s3rver: Peer = {
  name: 's3rver',
  title: `s3rver ${S3RVER_VERSION} (S3 API in Node, files on disk)`,
  facts: {
    durability: 'none: written to the page cache, no fsync',
    integrity: 'MD5 of the body (the ETag); payload SHA-256 and checksum headers not verified',
    encryption: 'none',
    index: 'none: a file per object, plus its metadata and MD5 files',
    reads: 'through the page cache',
    auth:
      'none for the HTTP loads; the S3 scenarios sign with its built-in key, whose SigV4 ' +
      'signatures it does not verify (a known key id is enough)',
  },
  start: async (setup) => {
    const bin = await s3rverBin(setup);
    const runDir = mkdtempSync(join(setup.dataParent, 'lightwell-peer-s3rver-'));
    const data = join(runDir, 'data');
    mkdirSync(data);
    const port = await peerPort(setup, 2);
    const args = [bin, '-d', data, '-a', '127.0.0.1', '-p', String(port), '--silent'];
    const service = await startProcess({
      name: 's3rver',
      command: process.execPath,
      args: [...args, '--no-vhost-buckets'],
      runDir,
      dataDir: data,
      port,
    }).catch(keepRunDir(runDir));
    return {
      service: { ...service, credentials: S3RVER_CREDENTIALS },
      api: S3RVER_API,
      version: S3RVER_VERSION,
    };
  },
};

/** Rethrows a start's failure, naming the directory kept for its log. */
function keepRunDir(runDir: string) {
  return (error: unknown): never => {
    throw new BenchError(`${errorMessage(error)}\n(log kept in ${runDir})`, { cause: error });
  };
}

// ---------------------------------------------------------------------------------------------
// nginx

/** nginx on PATH or in the sbin directories, which a non-root PATH often lacks. */
function findNginx(): string | null {
  const dirs = [...(process.env['PATH'] ?? '').split(delimiter), '/usr/sbin', '/usr/local/sbin'];
  for (const dir of dirs) {
    const path = join(dir, 'nginx');
    if (dir !== '' && existsSync(path)) return path;
  }
  return null;
}

/** Debian's nginx-core through apt-get; the package lists are updated if the first try fails. */
async function installNginx(setup: PeerSetup): Promise<void> {
  if (process.getuid?.() !== 0) {
    throw new BenchError('nginx is missing, and installing it (apt-get) needs root');
  }
  setup.progress.note('installing nginx-core with apt-get');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const install = ['install', '-y', '--no-install-recommends', 'nginx-core'];
  try {
    await run('apt-get', install, env);
  } catch {
    await run('apt-get', ['update'], env);
    await run('apt-get', install, env);
  }
}

/** The nginx binary and its version; throws when it is missing or lacks WebDAV. */
async function nginxBinary(setup: PeerSetup): Promise<{ bin: string; version: string }> {
  let bin = findNginx();
  if (bin === null && setup.install) {
    await installNginx(setup);
    bin = findNginx();
  }
  if (bin === null) {
    throw new BenchError(
      "nginx not found; --install installs Debian's nginx-core with apt-get (as root)",
    );
  }
  // `nginx -V` prints its version and configure arguments on stderr.
  const { stderr } = await run(bin, ['-V']);
  if (!stderr.includes('http_dav_module')) {
    throw new BenchError(`${bin} was built without the WebDAV module (http_dav_module)`);
  }
  const version = /nginx version: (\S+)/.exec(stderr)?.[1] ?? 'nginx';
  return { bin, version };
}

/**
 * The generated configuration. As root, `user` keeps the workers as the invoking user (nginx
 * would hand them to nobody, who cannot write the 0700 temp directory); otherwise it is ignored.
 */
function nginxConfig(runDir: string, port: number): string {
  const user = process.getuid?.() === 0 ? 'user root;' : '';
  const temp = (name: string): string => join(runDir, 'temp', name);
  return `daemon off;
master_process on;
worker_processes auto;
${user}
pid ${join(runDir, 'nginx.pid')};
error_log stderr warn;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  keepalive_requests 1000000;
  default_type application/octet-stream;
  client_body_temp_path ${temp('body')};
  proxy_temp_path ${temp('proxy')};
  fastcgi_temp_path ${temp('fastcgi')};
  uwsgi_temp_path ${temp('uwsgi')};
  scgi_temp_path ${temp('scgi')};
  server {
    listen 127.0.0.1:${port};
    root ${join(runDir, 'root')};
    client_max_body_size 0;
    dav_methods PUT DELETE;
    create_full_put_path on;
  }
}
`;
}

const NGINX_API: ObjectApi = {
  objectPath: pathStyle,
  // No buckets: create_full_put_path makes a key's directories on its PUT.
  createBucket: () => Promise.resolve(),
  putAnswer: () => ({ expectStatus: [201, 204] }),
};

const nginx: Peer = {
  name: 'nginx',
  title: 'nginx WebDAV PUT (the plain file server)',
  facts: {
    durability: 'none: written to the page cache, no fsync',
    integrity: 'none',
    encryption: 'none',
    index: 'none: a file per object',
    reads: 'through the page cache (sendfile)',
    auth: 'none',
  },
  start: async (setup) => {
    const { bin, version } = await nginxBinary(setup);
    const runDir = mkdtempSync(join(setup.dataParent, 'lightwell-peer-nginx-'));
    const root = join(runDir, 'root');
    mkdirSync(root);
    mkdirSync(join(runDir, 'temp'));
    const port = await peerPort(setup, 3);
    const config = join(runDir, 'nginx.conf');
    writeFileSync(config, nginxConfig(runDir, port));
    const service = await startProcess({
      name: 'nginx',
      command: bin,
      args: ['-p', runDir, '-c', config, '-e', 'stderr'],
      runDir,
      dataDir: root,
      port,
    }).catch(keepRunDir(runDir));
    return { service, api: NGINX_API, version };
  },
};

export const PEERS: readonly Peer[] = [lightwell, s3rver, nginx];
