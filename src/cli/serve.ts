// `lightwell serve`: the supervisor. Checks the listen addresses, the data directory and the
// ports (before it creates a new data directory), then runs the engine, N gateways and the
// admin process as children. Once every child is ready it prints one ready line per listener,
// with the port bound; a child that exits before then fails the start (exit 1, nothing
// printed on stdout). After the start it restarts a crashed child with exponential backoff; on
// SIGINT/SIGTERM it drains the listeners first (readiness 503, no new connections, in-flight
// requests finish within shutdown.grace), then stops the engine, and exits 0; a second signal
// kills every child at once and exits 1. Under a service manager ($NOTIFY_SOCKET, systemd's
// Type=notify) it sends READY=1 with the ready lines, STOPPING=1 when the drain begins, and a
// STATUS= line when a child is restarted (util/sd-notify.ts); the children never see the socket.

import { fork, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { lookup } from 'node:dns/promises';
import { fileURLToPath } from 'node:url';
import {
  dataDirPaths,
  prepareDataDir,
  engineLockOwner,
  checkDataDirUsable,
  checkDataDirParent,
  newStoreNotice,
  type DataDirPaths,
} from '../engine/data-dir.js';
import {
  parseArgs,
  settingsFrom,
  writeThenExit,
  refuseStart,
  failureText,
  EXIT_FAILURE,
  SERVICE_FLAGS,
  GATEWAY_FLAGS,
  PUBLIC_FLAGS,
  ADMIN_FLAGS,
  versionText,
} from './args.js';
import type { ReadyMessage, Role } from './child.js';
import type { ClusterAgent } from '../cluster/agent.js';
import { tlsFilesOf, type ListenAddress, type Settings } from '../util/config.js';
import { BadRequest, Unavailable, DataDirLocked } from '../util/errors.js';
import { CHILD_MALLOC_ENV } from '../util/malloc-env.js';
import { createRootLogger, type Logger } from '../util/log.js';
import { serviceManager, withoutNotifySocket, type ServiceManager } from '../util/sd-notify.js';

const BACKOFF_MS_MAX = 10_000;
/** How long past `shutdown.grace` a child may take to stop before it is killed. */
const STOP_MARGIN_MS = 10_000;

interface Supervised {
  readonly role: Role;
  readonly name: string;
  child: ChildProcess | undefined;
  backoffMs: number;
  startedAt: number;
  /** The port its listener bound, from its ready message. */
  port: number | undefined;
}

/** `exit` ends the process once everything has stopped; bin/ supplies it (process.exit). */
export async function serve(argv: readonly string[], exit: (code: number) => never): Promise<void> {
  let settings: Settings;
  let created: DataDirPaths | undefined;
  try {
    const args = parseArgs(argv);
    if (args.flags.has('help')) {
      const usage =
        'usage: lightwell serve [options]\n  runs the engine, the gateways and the admin process' +
        `\n${SERVICE_FLAGS}${PUBLIC_FLAGS}${ADMIN_FLAGS}` +
        '  --gateways N               gateway processes (default 1)\n' +
        GATEWAY_FLAGS;
      return await writeThenExit(process.stdout, usage, 0, exit);
    }
    if (args.flags.has('version'))
      return await writeThenExit(process.stdout, versionText('lightwell'), 0, exit);
    settings = settingsFrom(args);
    created = await preflight(settings);
  } catch (error) {
    return await refuseStart(error, { command: 'lightwell serve', program: 'lightwell' }, exit);
  }
  // The supervisor's own notices are log records like its children's (JSON lines on stderr, at
  // --log-level): a log shipper drops plain-text lines, and these are the ones an operator
  // needs most. Only a refused start stays one line of text.
  const log = createRootLogger({
    level: settings.string('log.level'),
    process: 'serve',
    format: settings.string('log.format'),
  });
  if (created !== undefined) {
    // A new store is never silent: a line a person sees, and a record the log keeps.
    process.stderr.write(`lightwell: ${newStoreNotice(created)}\n`);
    log.warn({ dataDir: created.root }, newStoreNotice(created));
  }
  const manager = serviceManager(log);
  const supervisor = new Supervisor(argv, settings, log, manager);
  // Cluster mode only: the agent (and etcd's client) is loaded when `cluster.listen` is set.
  let cluster: ClusterAgent | undefined;
  const shutdown = async (signal: string): Promise<void> => {
    if (supervisor.stopping) {
      // A second signal: no more waiting for requests in flight.
      log.warn({ signal }, 'second signal: stopping at once');
      manager.status(`stopping at once on a second signal (${signal})`);
      supervisor.kill();
      cluster?.stopping();
      await cluster?.stop();
      exit(1);
    }
    log.info({ signal, graceMs: settings.duration('shutdown.grace') }, 'draining');
    manager.stopping(`draining on ${signal}: in-flight requests finish, then the engine stops`);
    cluster?.stopping();
    await supervisor.stop();
    await cluster?.stop();
    exit(0);
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  try {
    if (settings.string('cluster.listen') !== '') {
      const { startClusterAgent } = await import('../cluster/agent.js');
      cluster = await startClusterAgent({
        settings,
        dataDir: settings.string('data_dir'),
        log: log.child({ component: 'cluster' }),
      });
    }
    await supervisor.startAll();
  } catch (error) {
    if (supervisor.stopping) return; // a signal during the start: shutdown() exits
    process.stderr.write(`lightwell: cannot start: ${failureText(error)}\n`);
    await supervisor.stop();
    await cluster?.stop();
    exit(EXIT_FAILURE);
  }
  if (supervisor.stopping) return;
  const lines = readyLines(settings, supervisor.ports());
  process.stdout.write(lines + (cluster?.readyLine() ?? ''));
  manager.ready(servingStatus(lines));
  cluster?.servicesReady();
}

/**
 * The children and their lifecycle. Until every child has been ready once (`started`), a child
 * that exits fails the whole start; after that, a child that exits is restarted with backoff.
 */
class Supervisor {
  stopping = false;
  private started = false;
  private readonly children: Supervised[];
  /**
   * Flags added to every later start of a role: a listener asked for port 0 keeps the port its
   * first process bound, for the other gateways (which share it) and for restarts.
   */
  private readonly pinned = new Map<Role, string[]>();
  /** Fails the start (`startAll`) while it runs. */
  private failStart: (error: unknown) => void = () => undefined;

  constructor(
    private readonly argv: readonly string[],
    private readonly settings: Settings,
    private readonly log: Logger,
    private readonly manager: ServiceManager,
  ) {
    const gateways = Array.from({ length: settings.int('gateways') }, (_, index) =>
      supervised('gateway', `gateway-${index + 1}`),
    );
    this.children = [supervised('engine', 'engine'), ...gateways, supervised('admin', 'admin')];
  }

  /**
   * Starts the engine, then the listeners; resolves once every child is ready, and rejects as
   * soon as any child exits, one that was ready already included.
   */
  async startAll(): Promise<void> {
    const failed = new Promise<never>((_, reject) => (this.failStart = reject));
    await Promise.race([this.startChildren(), failed]);
    this.started = true;
  }

  private async startChildren(): Promise<void> {
    const [engine, ...listeners] = this.children as [Supervised, ...Supervised[]];
    await this.start(engine);
    // Asked for port 0, a gateway binds its port without SO_REUSEPORT (uWebSockets.js sets it
    // only on a given port), and no other gateway could share it: with several, the port is
    // picked here and given to all.
    const address = this.settings.listen('public_listen');
    if (address.port === 0 && this.settings.int('gateways') > 1)
      this.pin('gateway', await probePort(address, 'public'));
    await Promise.all(listeners.map((entry) => this.start(entry)));
  }

  /** The ports the listeners bound, as their first processes reported them. */
  ports(): { public: number | undefined; admin: number | undefined } {
    const port = (role: Role): number | undefined =>
      this.children.find((entry) => entry.role === role)?.port;
    return { public: port('gateway'), admin: port('admin') };
  }

  /**
   * Stops the listeners first (they drain: in-flight requests finish within shutdown.grace),
   * then the engine. A child still running well past the grace is killed.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    const killAfterMs = this.settings.duration('shutdown.grace') + STOP_MARGIN_MS;
    await stopAll(
      this.children.filter((entry) => entry.role !== 'engine'),
      killAfterMs,
    );
    await stopAll(
      this.children.filter((entry) => entry.role === 'engine'),
      killAfterMs,
    );
  }

  /** Ends every child at once (a second signal). */
  kill(): void {
    for (const entry of this.children) entry.child?.kill('SIGKILL');
  }

  /** Resolves when the child is ready; never, when it exits first (see `failStart`). */
  private start(entry: Supervised): Promise<void> {
    return new Promise((resolve) => {
      const script = fileURLToPath(
        new URL(`../../bin/lightwell-${entry.role}.js`, import.meta.url),
      );
      // LIGHTWELL_CHILD_NODE_ARGS passes Node flags to the children (e.g. `--cpu-prof`).
      // A small young generation: request garbage is short-lived, and resident memory matters more
      // than the last percent of allocation speed.
      const execArgv = [
        '--max-semi-space-size=4',
        ...(process.env['LIGHTWELL_CHILD_NODE_ARGS'] ?? '').split(' ').filter((arg) => arg !== ''),
      ];
      const child = fork(script, [...this.argv, ...(this.pinned.get(entry.role) ?? [])], {
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        execArgv,
        env: childEnv(),
      });
      entry.child = child;
      entry.startedAt = Date.now();
      child.on('message', (message: Partial<ReadyMessage>) => {
        if (!message.ready) return;
        entry.port = message.port;
        this.pin(entry.role, message.port);
        resolve();
      });
      child.on('exit', (code, signal) => {
        entry.child = undefined;
        if (this.stopping) return;
        const status = String(signal ?? code);
        if (this.started) this.restartLater(entry, status);
        else this.failStart(Unavailable(`${entry.name} exited (${status}) during start`));
      });
    });
  }

  private restartLater(entry: Supervised, status: string): void {
    if (Date.now() - entry.startedAt > 30_000) entry.backoffMs = 100;
    this.log.error(
      { child: entry.name, exit: status, restartInMs: entry.backoffMs },
      'child exited; restarting',
    );
    const delay = entry.backoffMs;
    entry.backoffMs = Math.min(entry.backoffMs * 2, BACKOFF_MS_MAX);
    this.manager.status(`${entry.name} exited (${status}); restarting in ${delay} ms`);
    setTimeout(() => {
      if (this.stopping) return;
      void this.start(entry).then(() => {
        if (!this.stopping) this.manager.status(`${entry.name} restarted; serving`);
      });
    }, delay);
  }

  private pin(role: Role, port: number | undefined): void {
    const setting = role === 'gateway' ? 'public_listen' : role === 'admin' ? 'admin_listen' : '';
    if (setting === '' || port === undefined || this.pinned.has(role)) return;
    const address = this.settings.listen(setting);
    if (address.port !== 0) return;
    const flag = role === 'gateway' ? '--public-listen' : '--admin-listen';
    this.pinned.set(role, [flag, `${hostInUrl(address.host)}:${port}`]);
  }
}

function supervised(role: Role, name: string): Supervised {
  return { role, name, child: undefined, backoffMs: 100, startedAt: 0, port: undefined };
}

function childEnv(): NodeJS.ProcessEnv {
  return withoutNotifySocket({ ...CHILD_MALLOC_ENV, ...process.env });
}

/**
 * Everything that can be checked before a child starts, cheapest first, and the data directory
 * created last: a start refused here leaves no new directory behind. Answers the paths of a
 * data directory it created.
 */
async function preflight(settings: Settings): Promise<DataDirPaths | undefined> {
  if (settings.string('cluster.listen') === '' && settings.bool('cluster.bootstrap'))
    throw BadRequest('--cluster.bootstrap needs --cluster.listen HOST:PORT and --cluster.node_id');
  await checkListenersApart(settings);
  const paths = dataDirPaths(settings.string('data_dir'));
  const owner = engineLockOwner(paths);
  if (owner !== undefined)
    throw DataDirLocked(
      `data directory ${paths.root} is locked by running process ${owner} (${paths.lock}; ` +
        'if that process is not a Lightwell engine, its pid was reused: remove the file)',
    );
  checkDataDirUsable(paths);
  checkDataDirParent(paths);
  for (const [setting, name] of [
    ['public_listen', 'public'],
    ['admin_listen', 'admin'],
  ] as const) {
    const address = settings.listen(setting);
    if (address.port !== 0) await probePort(address, name);
  }
  return (await prepareDataDir(paths)).created ? paths : undefined;
}

/**
 * The admin listener binds exclusively, so on the public listener's address it could never
 * start; a wildcard host (0.0.0.0, ::) takes the port on every address, and two names of one
 * address (localhost and 127.0.0.1) are one address.
 */
async function checkListenersApart(settings: Settings): Promise<void> {
  const publicAddress = settings.listen('public_listen');
  const adminAddress = settings.listen('admin_listen');
  if (publicAddress.port === 0 || publicAddress.port !== adminAddress.port) return;
  const wildcard = (host: string): boolean => host === '0.0.0.0' || host === '::';
  const hosts = [publicAddress.host, adminAddress.host];
  if (
    publicAddress.host !== adminAddress.host &&
    !hosts.some(wildcard) &&
    !(await shareAnAddress(publicAddress.host, adminAddress.host))
  )
    return;
  throw BadRequest(
    `public_listen ${hostPort(publicAddress)} and admin_listen ${hostPort(adminAddress)} ` +
      'overlap: give the listeners different ports',
  );
}

/** Whether two host names resolve to a common address (a name that does not resolve: no). */
async function shareAnAddress(a: string, b: string): Promise<boolean> {
  const resolve = async (host: string): Promise<string[]> =>
    (await lookup(host, { all: true }).catch(() => [])).map((entry) => entry.address);
  const [first, second] = await Promise.all([resolve(a), resolve(b)]);
  return first.some((address) => second.includes(address));
}

/** Binds `address` exclusively for a moment; answers the port (the one picked, for port 0). */
function probePort(address: ListenAddress, name: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) => {
      const reason = error.code ?? error.message;
      reject(Unavailable(`${name} address ${hostPort(address)} is not available (${reason})`));
    });
    probe.listen({ host: address.host, port: address.port, exclusive: true }, () => {
      const bound = probe.address();
      const port = typeof bound === 'object' && bound !== null ? bound.port : address.port;
      probe.close(() => resolve(port));
    });
  });
}

function hostInUrl(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

function hostPort(address: ListenAddress): string {
  return `${hostInUrl(address.host)}:${address.port}`;
}

/** One line per listener, with the port it bound (not 0 when it was asked for any port). */
function readyLines(
  settings: Settings,
  ports: { public: number | undefined; admin: number | undefined },
): string {
  const scheme = tlsFilesOf(settings) ? 'https' : 'http';
  const line = (name: string, address: ListenAddress, port: number | undefined, path: string) => {
    const url = `${scheme}://${hostInUrl(address.host)}:${port ?? address.port}${path}`;
    return `lightwell: ${name} listener ready on ${url}\n`;
  };
  return (
    line('public', settings.listen('public_listen'), ports.public, '/api/v1') +
    line('admin', settings.listen('admin_listen'), ports.admin, '/admin/api/v1')
  );
}

/** The STATUS= line of a serving service: its listeners' URLs. */
function servingStatus(readyLines: string): string {
  const urls = readyLines.match(/https?:\/\/\S+/g) ?? [];
  return `serving: ${urls.join(', ')}`;
}

async function stopAll(entries: readonly Supervised[], killAfterMs: number): Promise<void> {
  await Promise.all(
    entries.map(
      (entry) =>
        new Promise<void>((resolve) => {
          const child = entry.child;
          if (!child || child.exitCode !== null) {
            resolve();
            return;
          }
          const timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
          child.once('exit', () => {
            clearTimeout(timer);
            resolve();
          });
          // Over IPC: the engine leaves signals to serve (child.ts), which may have reached the
          // whole process group.
          if (!child.connected || !child.send({ stop: true })) child.kill('SIGTERM');
        }),
    ),
  );
}
