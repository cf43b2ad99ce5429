// `lightwell serve`: the supervisor. Checks the data directory and ports, then runs the engine,
// N gateways and the admin process as children; prints one ready line per listener; restarts a
// crashed child with exponential backoff; on SIGINT/SIGTERM stops the listeners first (in-flight
// requests finish), then the engine, and exits 0.

import { fork, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { dataDirPaths, prepareDataDir, engineLockOwner } from '../engine/data-dir.js';
import {
  parseArgs,
  settingsFrom,
  writeThenExit,
  failureText,
  isUsageError,
  EXIT_FAILURE,
  EXIT_USAGE,
  SERVICE_FLAGS,
} from './args.js';
import type { ReadyMessage, Role } from './child.js';
import { tlsFilesOf, type ListenAddress, type Settings } from '../util/config.js';
import { Unavailable, DataDirLocked } from '../util/errors.js';
import { CHILD_MALLOC_ENV } from '../util/malloc-env.js';

const BACKOFF_MS_MAX = 10_000;

interface Supervised {
  readonly role: Role;
  readonly name: string;
  child: ChildProcess | undefined;
  backoffMs: number;
  startedAt: number;
}

/** `exit` ends the process once everything has stopped; bin/ supplies it (process.exit). */
export async function serve(argv: readonly string[], exit: (code: number) => never): Promise<void> {
  let settings: Settings;
  try {
    const args = parseArgs(argv);
    if (args.flags.has('help')) {
      const usage =
        'usage: lightwell serve [options]\n  runs the engine, the gateways and the admin process' +
        `\n${SERVICE_FLAGS}  --gateways N               gateway processes (default 1)\n`;
      return await writeThenExit(process.stdout, usage, 0, exit);
    }
    settings = settingsFrom(args);
    await preflight(settings);
  } catch (error) {
    if (isUsageError(error)) {
      const text = `lightwell serve: ${failureText(error)} (lightwell serve --help lists the options)`;
      return await writeThenExit(process.stderr, `${text}\n`, EXIT_USAGE, exit);
    }
    const text = `lightwell: cannot start: ${failureText(error)}\n`;
    return await writeThenExit(process.stderr, text, EXIT_FAILURE, exit);
  }
  const children: Supervised[] = [
    { role: 'engine', name: 'engine', child: undefined, backoffMs: 100, startedAt: 0 },
  ];
  let stopping = false;
  const announced = new Set<string>();
  const start = (entry: Supervised): Promise<void> =>
    new Promise((resolve, reject) => {
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
      const child = fork(script, argv as string[], {
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        execArgv,
        env: childEnv(),
      });
      entry.child = child;
      entry.startedAt = Date.now();
      child.on('message', (message: Partial<ReadyMessage>) => {
        if (message.ready) {
          announce(entry.role, settings, announced);
          resolve();
        }
      });
      child.on('exit', (code, signal) => {
        entry.child = undefined;
        if (stopping) return;
        if (Date.now() - entry.startedAt > 30_000) entry.backoffMs = 100;
        process.stderr.write(
          `lightwell: ${entry.name} exited (${String(signal ?? code)}); restarting in ${entry.backoffMs} ms\n`,
        );
        reject(Unavailable(`${entry.name} exited during start`));
        const delay = entry.backoffMs;
        entry.backoffMs = Math.min(entry.backoffMs * 2, BACKOFF_MS_MAX);
        setTimeout(() => {
          if (!stopping) start(entry).catch(() => undefined);
        }, delay);
      });
    });
  const shutdown = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`lightwell: ${signal}: stopping\n`);
    await stopAll(children.filter((entry) => entry.role !== 'engine'));
    await stopAll(children.filter((entry) => entry.role === 'engine'));
    exit(0);
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  try {
    await start(children[0] as Supervised);
    for (let index = 0; index < settings.int('gateways'); index += 1) {
      children.push({
        role: 'gateway',
        name: `gateway-${index + 1}`,
        child: undefined,
        backoffMs: 100,
        startedAt: 0,
      });
    }
    children.push({ role: 'admin', name: 'admin', child: undefined, backoffMs: 100, startedAt: 0 });
    await Promise.all(children.slice(1).map((entry) => start(entry)));
  } catch (error) {
    process.stderr.write(`lightwell: cannot start: ${failureText(error)}\n`);
    stopping = true;
    await stopAll(children);
    exit(EXIT_FAILURE);
  }
}

function childEnv(): NodeJS.ProcessEnv {
  return { ...CHILD_MALLOC_ENV, ...process.env };
}

async function preflight(settings: Settings): Promise<void> {
  const paths = dataDirPaths(settings.string('data_dir'));
  const owner = engineLockOwner(paths);
  if (owner !== undefined)
    throw DataDirLocked(`data directory ${paths.root} is locked by running process ${owner}`);
  await prepareDataDir(paths);
  await checkPortFree(settings.listen('public_listen'), 'public');
  await checkPortFree(settings.listen('admin_listen'), 'admin');
}

function checkPortFree(address: ListenAddress, name: string): Promise<void> {
  if (address.port === 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) => {
      reject(
        Unavailable(
          `${name} address ${address.host}:${address.port} is not available (${error.code ?? error.message})`,
        ),
      );
    });
    probe.listen({ host: address.host, port: address.port, exclusive: true }, () =>
      probe.close(() => resolve()),
    );
  });
}

function announce(role: Role, settings: Settings, announced: Set<string>): void {
  const listener = role === 'gateway' ? 'public' : role === 'admin' ? 'admin' : undefined;
  if (!listener || announced.has(listener)) return;
  announced.add(listener);
  const address = settings.listen(listener === 'public' ? 'public_listen' : 'admin_listen');
  const host = address.host.includes(':') ? `[${address.host}]` : address.host;
  const path = listener === 'public' ? '/api/v1' : '/admin/api/v1';
  process.stdout.write(
    `lightwell: ${listener} listener ready on ${tlsFilesOf(settings) ? 'https' : 'http'}://${host}:${address.port}${path}\n`,
  );
}

async function stopAll(entries: readonly Supervised[]): Promise<void> {
  await Promise.all(
    entries.map(
      (entry) =>
        new Promise<void>((resolve) => {
          const child = entry.child;
          if (!child || child.exitCode !== null) {
            resolve();
            return;
          }
          const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
          child.once('exit', () => {
            clearTimeout(timer);
            resolve();
          });
          child.kill('SIGTERM');
        }),
    ),
  );
}
