// Runs one service process (engine, gateway or admin) until SIGINT/SIGTERM, and reports
// readiness to a supervising `lightwell serve` over IPC when there is one; run on its own under a
// service manager ($NOTIFY_SOCKET), it sends READY=1 and STOPPING=1 itself (util/sd-notify.ts).

import { createRootLogger } from '../util/log.js';
import {
  parseArgs,
  settingsFrom,
  writeThenExit,
  refuseStart,
  SERVICE_FLAGS,
  GATEWAY_FLAGS,
  PUBLIC_FLAGS,
  ADMIN_FLAGS,
  versionText,
} from './args.js';
import { startHeapTrimmer } from '../util/malloc-env.js';
import { serviceManager } from '../util/sd-notify.js';
import { endOnUncaughtException, exitAtOnce } from '../util/fatal.js';

export type Role = 'engine' | 'gateway' | 'admin';

export interface ReadyMessage {
  readonly ready: Role;
  readonly port?: number;
}

/** `exit` ends the process once it has stopped; bin/ supplies it (process.exit). */
export async function runChild(
  role: Role,
  argv: readonly string[],
  exit: (code: number) => never,
): Promise<void> {
  // A crash ends the process at once: Node's exit teardown can hang on an index commit in flight.
  endOnUncaughtException(`lightwell-${role}`);
  let settings;
  try {
    const args = parseArgs(argv);
    if (args.flags.has('help')) {
      // Only the flags this role reads: the engine listens on no port, the admin process has
      // no listener threads.
      const usage =
        `usage: lightwell-${role} [options]\n  runs the ${role} process on its own` +
        ` (lightwell serve runs them all)\n${SERVICE_FLAGS}` +
        (role === 'gateway' ? PUBLIC_FLAGS + GATEWAY_FLAGS : '') +
        (role === 'admin' ? ADMIN_FLAGS : '');
      return await writeThenExit(process.stdout, usage, 0, exit);
    }
    if (args.flags.has('version'))
      return await writeThenExit(process.stdout, versionText(`lightwell-${role}`), 0, exit);
    settings = settingsFrom(args);
  } catch (error) {
    return await fail(role, error, exit);
  }
  const log = createRootLogger({
    level: settings.string('log.level'),
    process: role,
    format: settings.string('log.format'),
  });
  let running: { port?: number; failed?: Promise<never>; stop(): Promise<void> };
  try {
    const options = { dataDir: settings.string('data_dir'), settings };
    // Each process loads only its own role's modules (and native libraries): code it never runs
    // would still take memory in every process.
    if (role === 'engine')
      running = await (
        await import('../engine/engine.js')
      ).startEngine({
        ...options,
        // A cluster member's cluster-wide records (docs/cluster.md §6); a single node loads
        // nothing more than a look at <data>/cluster/node.json.
        router: async (local, previous) =>
          (await import('../cluster/shared-state.js')).openSharedState(
            options.dataDir,
            local,
            previous,
            log.child({ component: 'cluster.shared' }),
          ),
      });
    else if (role === 'gateway')
      running = await (await import('../gateway/gateway.js')).startGateway(options);
    else running = await (await import('../admin/admin.js')).startAdmin(options);
  } catch (error) {
    return await fail(role, error, exit);
  }
  const stopHeapTrimmer = startHeapTrimmer();
  // Under serve the socket was taken out of the environment: serve speaks for the unit.
  const manager = serviceManager(log);
  let stopping = false;
  const stop = (signal: string, code = 0): void => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'stopping');
    manager.stopping(`lightwell-${role}: stopping (${signal})`);
    stopHeapTrimmer();
    running.stop().then(
      () => exit(code),
      (error: unknown) => {
        log.error({ err: error }, 'unclean stop');
        exit(1);
      },
    );
  };
  // The first signal drains (listeners: readiness 503, no new connections, in-flight requests
  // finish within shutdown.grace); a second one, to a process on its own, stops it at once.
  // Under serve it is ignored: a terminal's Ctrl-C or a service manager may signal the whole
  // process group as well as serve, whose own second signal ends the children (SIGKILL).
  // The engine under serve waits for serve's word (`{stop: true}` over IPC), sent once the
  // listeners have drained: stopped by the group's signal, it would be gone while their last
  // requests commit and their audit rows are sent, and those rows would be lost.
  const underServe = process.send !== undefined;
  process.on('message', (message: unknown) => {
    if ((message as { stop?: unknown } | null)?.stop === true) stop('supervisor');
  });
  const onSignal = (signal: string): void => {
    if (role === 'engine' && underServe) {
      log.info({ signal }, 'signal left to serve, which stops the engine after the listeners');
      return;
    }
    if (!stopping) return stop(signal);
    if (process.send) return;
    log.warn({ signal }, 'second signal: stopping at once');
    // Not `exit`: the stop under way may have a commit in flight, which Node's exit waits on.
    exitAtOnce(1);
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
  process.on('disconnect', () => stop('supervisor gone'));
  // A part of the process failed (a gateway's listener thread): the rest stops, and the exit
  // code says so (serve then restarts the process).
  running.failed?.catch((error: unknown) => {
    log.error({ err: error }, 'failed');
    stop('failure', 1);
  });
  // Ready only now, with the signal handlers in place: a SIGTERM sent on reading the ready line
  // would otherwise meet the default action and end the process without its stop.
  process.send?.({
    ready: role,
    ...(running.port === undefined ? {} : { port: running.port }),
  } satisfies ReadyMessage);
  if (!process.send) {
    const ready = `lightwell-${role}: ready${running.port === undefined ? '' : ` on port ${running.port}`}`;
    process.stdout.write(`${ready}\n`);
    manager.ready(ready);
  }
}

/**
 * Exits with the reason on stderr, in one line unless it is a bug: EXIT_USAGE for a command
 * line it does not take, else EXIT_FAILURE. Not just an exit code: what a failed start had
 * already opened (the index, the engine connection, worker threads) would keep it alive.
 */
function fail(role: Role, error: unknown, exit: (code: number) => never): Promise<never> {
  const name = `lightwell-${role}`;
  return refuseStart(error, { command: name, program: name }, exit);
}
