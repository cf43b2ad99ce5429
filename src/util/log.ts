// Logging: one pino root logger per process, one child per component.
//
// Log lines go to stderr: stdout carries only what a command answers (serve's ready lines, the
// token that admin-token prints), so a script can read it without filtering logs out.
//
// Secrets never reach a log line: the redact list below removes the fields that can carry
// them (authorization headers, secret keys, tokens), whatever component logs them.

import { pino, type Logger } from 'pino';

export type { Logger };

const redactPaths = [
  'authorization',
  'headers.authorization',
  'req.headers.authorization',
  'secretKey',
  '*.secretKey',
  'token',
  '*.token',
  'signingSecret',
  '*.signingSecret',
  'masterKey',
];

let root: Logger | undefined;

/** `listener`: set in a gateway's listener threads other than its first, on their every line. */
export function createRootLogger(options: {
  level: string;
  process: string;
  listener?: number;
}): Logger {
  root = pino(
    {
      level: options.level,
      base: {
        process: options.process,
        pid: process.pid,
        ...(options.listener === undefined ? {} : { listener: options.listener }),
      },
      redact: { paths: redactPaths, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    stderr(),
  );
  return root;
}

/**
 * File descriptor 2 through SonicBoom, asynchronous as pino's own default for stdout is (pino
 * flushes it at exit).
 */
function stderr(): ReturnType<typeof pino.destination> {
  return pino.destination({ dest: 2, sync: false });
}

/** The logger of one component; before the root exists, a silent one (unit tests). */
export function componentLogger(component: string): Logger {
  root ??= pino({ level: process.env['LIGHTWELL_LOG_LEVEL'] ?? 'silent' }, stderr());
  return root.child({ component });
}
