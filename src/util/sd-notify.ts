// sd_notify: tells a service manager (systemd's `Type=notify`) when the service is ready, when
// it begins to stop, and what it is doing, through the datagram socket named by $NOTIFY_SOCKET.
// `lightwell serve` sends READY=1 once every listener is ready and STOPPING=1 when a drain
// begins; a process run on its own (lightwell-engine, -gateway, -admin) does the same for
// itself. Without $NOTIFY_SOCKET every call is a no-op.
//
// The datagram goes out from this process through Lightwell's native library (native/notify.c,
// see there why not `systemd-notify`), so systemd's default `NotifyAccess=main` accepts it from
// serve, the unit's main process. Where the library was not built, the service cannot tell the
// manager it is ready, and says so once in the log (docs/operations.md: use `Type=exec`).
// A failed send is logged and never stops the service: readiness is a courtesy to the manager.

import { native } from './libc.js';
import type { Logger } from './log.js';

/** The variable systemd sets for a `Type=notify` service. */
export const NOTIFY_SOCKET_ENV = 'NOTIFY_SOCKET';

export interface ServiceManager {
  /** READY=1, with a STATUS= line. */
  ready(status: string): void;
  /** STOPPING=1, with a STATUS= line. */
  stopping(status: string): void;
  /** A STATUS= line alone (shown by `systemctl status`). */
  status(status: string): void;
}

/**
 * The service manager named by `env` (process.env by default); `send` is the datagram's sender
 * (native/notify.c's, by default; null where there is none), answering 0 or an error number.
 */
export function serviceManager(
  log: Logger,
  env: NodeJS.ProcessEnv = process.env,
  send: ((socket: string, message: string) => number) | null = native()?.notify ?? null,
): ServiceManager {
  const socket = env[NOTIFY_SOCKET_ENV];
  if (socket === undefined || socket === '') return { ready: noop, stopping: noop, status: noop };
  let warned = false;
  const notify = (lines: readonly string[]): void => {
    if (!send) {
      if (!warned)
        log.warn(
          { notifySocket: socket },
          'NOTIFY_SOCKET is set, but the native library that sends to it is not built: the ' +
            'service manager is not told of readiness (use Type=exec, docs/operations.md)',
        );
      warned = true;
      return;
    }
    const errno = send(socket, lines.join('\n'));
    if (errno !== 0)
      log.warn({ notifySocket: socket, errno, message: lines[0] }, 'sd_notify failed');
  };
  return {
    ready: (status) => notify(['READY=1', statusLine(status)]),
    stopping: (status) => notify(['STOPPING=1', statusLine(status)]),
    status: (status) => notify([statusLine(status)]),
  };
}

/** The environment without $NOTIFY_SOCKET: for children, which must not speak for the unit. */
export function withoutNotifySocket(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const { NOTIFY_SOCKET: _socket, ...rest } = env;
  return rest;
}

/** One STATUS= line: a status with a newline would end the assignment early. */
function statusLine(status: string): string {
  return `STATUS=${status.replace(/[\r\n]+/g, ' ')}`;
}

function noop(): void {}
