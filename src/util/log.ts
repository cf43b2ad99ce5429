// Logging: one pino root logger per process, one child per component.
//
// Secrets never reach a log line: the redact list below removes the fields that can carry
// them (authorization headers, secret keys, tokens), whatever component logs them.

import { pino, type Logger, type LevelWithSilent } from 'pino';

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

export function createRootLogger(options: { level: string; process: string }): Logger {
  root = pino({
    level: options.level as LevelWithSilent,
    base: { process: options.process, pid: process.pid },
    redact: { paths: redactPaths, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
  });
  return root;
}

/** The logger of one component; before the root exists, a silent one (unit tests). */
export function componentLogger(component: string): Logger {
  root ??= pino({ level: process.env['LIGHTWELL_LOG_LEVEL'] ?? 'silent' });
  return root.child({ component });
}
