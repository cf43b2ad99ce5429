// Logging: one pino root logger per process, one child per component.
//
// Log lines go to stderr: stdout carries only what a command answers (serve's ready lines, the
// token that admin-token prints), so a script can read it without filtering logs out.
//
// Secrets never reach a log line: the redact list below removes the fields that can carry
// them (authorization headers, secret keys, tokens, SSE-C keys), whatever component logs them.

import { isatty } from 'node:tty';
import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger };

/** Paths pino removes from every record (exported for its test). */
export const redactPaths = [
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
  // SSE-C keys travel in headers (src/service/customer-key.ts).
  'headers["x-amz-server-side-encryption-customer-key"]',
  'headers["x-amz-copy-source-server-side-encryption-customer-key"]',
  'req.headers["x-amz-server-side-encryption-customer-key"]',
  'req.headers["x-amz-copy-source-server-side-encryption-customer-key"]',
];

let root: Logger | undefined;
/** The asynchronous destination of the root logger, if it has one (`flushLogSync`). */
let buffered: ReturnType<typeof pino.destination> | undefined;

/**
 * Writes out what the root logger still holds, synchronously: for a process about to end
 * without its exit handlers (util/fatal.ts), where pino's own flush at exit would not run.
 */
export function flushLogSync(): void {
  try {
    buffered?.flushSync();
  } catch {
    // Not ready to flush (SonicBoom still opening) or stderr gone: nothing more can be done.
  }
}

/** `listener`: set in a gateway's listener threads other than its first, on their every line. */
export function createRootLogger(options: {
  level: string;
  process: string;
  listener?: number;
  /** `json`, `pretty`, or `auto` (the default): pretty when stderr is a terminal. */
  format?: string;
}): Logger {
  const pretty = options.format === 'pretty' || (options.format !== 'json' && isatty(2));
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
    pretty ? prettyStderr() : (buffered = stderr()),
  );
  return root;
}

const LEVEL_NAMES: Readonly<Record<number, string>> = {
  10: 'TRACE',
  20: 'DEBUG',
  30: 'INFO ',
  40: 'WARN ',
  50: 'ERROR',
  60: 'FATAL',
};
/** Fields every line has, shown in its head rather than among the rest. */
const HEAD_FIELDS = new Set(['level', 'time', 'process', 'pid', 'component', 'msg', 'listener']);

/**
 * One readable line per record for a person at a terminal: time, level, process/component,
 * message, then the other fields as key=value. The redaction has run already (the record is
 * pino's serialized line). Synchronous: a terminal is slow anyway, and nothing is lost at exit.
 */
function prettyStderr(): DestinationStream {
  const out = pino.destination({ dest: 2, sync: true });
  return {
    write: (line: string) => {
      out.write(prettyLine(line));
    },
  };
}

export function prettyLine(line: string): string {
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line;
  }
  const time = typeof record['time'] === 'string' ? record['time'].slice(11, 23) : '';
  const level = LEVEL_NAMES[record['level'] as number] ?? String(record['level']);
  const where = [record['process'], record['component']].filter(
    (part): part is string => typeof part === 'string',
  );
  const rest = Object.entries(record)
    .filter(([key]) => !HEAD_FIELDS.has(key))
    .map(([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`);
  const message = typeof record['msg'] === 'string' ? record['msg'] : '';
  return `${time} ${level} [${where.join('/')}] ${message}${rest.length ? ' ' + rest.join(' ') : ''}\n`;
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
