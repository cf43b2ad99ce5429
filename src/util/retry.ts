// Background work that must happen once a dependency answers (etcd at a start, say): tried at
// once, then again after a backoff that doubles from RETRY_MS_MIN to RETRY_MS_MAX, until it
// succeeds or its owner stops it (a process that closes must leave no timer behind). A failure is
// logged as a warning the first time and whenever the backoff is at its ceiling; the tries in
// between are logged at debug, so a dependency that stays away does not fill the log.

import type { Logger } from './log.js';

export const RETRY_MS_MIN = 1_000;
export const RETRY_MS_MAX = 300_000;

export interface RetryOptions {
  log: Logger;
  /** What the log line says while it has not succeeded. */
  what: string;
  /** Timers (tests fire them by hand). */
  schedule?: (fn: () => void, ms: number) => { cancel(): void };
}

function defaultSchedule(fn: () => void, ms: number): { cancel(): void } {
  const timer = setTimeout(fn, ms);
  timer.unref();
  return { cancel: () => clearTimeout(timer) };
}

/** Runs `work` until it succeeds; answers what stops it (no try starts after that). */
export function retryUntilDone(work: () => Promise<void>, options: RetryOptions): () => void {
  const schedule = options.schedule ?? defaultSchedule;
  let stopped = false;
  let timer: { cancel(): void } | undefined;
  let delayMs = RETRY_MS_MIN;
  let failures = 0;
  const attempt = (): void => {
    timer = undefined;
    if (stopped) return;
    work().catch((error: unknown) => {
      if (stopped) return;
      failures += 1;
      const line = { err: error, failures, retryInMs: delayMs };
      if (failures === 1 || delayMs === RETRY_MS_MAX) options.log.warn(line, options.what);
      else options.log.debug(line, options.what);
      timer = schedule(attempt, delayMs);
      delayMs = Math.min(delayMs * 2, RETRY_MS_MAX);
    });
  };
  attempt();
  return () => {
    stopped = true;
    timer?.cancel();
  };
}
