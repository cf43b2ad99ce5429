// How a process ends on an uncaught exception: its stack on stderr, then `_exit(1)`, without
// Node's exit teardown.
//
// Why not Node's own way (print, run the 'exit' listeners and the native add-ons' clean-up hooks,
// exit): lmdb-js's hooks wait for a write transaction in flight, whose worker thread waits in
// turn for JavaScript that will never run again, so a process that crashed while a commit was
// under way hung for ever, or died of SIGSEGV in the teardown, instead of ending (lmdb-js issue
// 336; `process.exit()` and `process.reallyExit()` hang the same way). An engine that crashed on an invariant failure
// (util/invariant.ts) then stayed up, answering nothing, and serve never restarted it. A crash
// needs no teardown: what is acknowledged is on disk, and recovery starts from a SIGKILL-shaped
// state anyway.

import { writeSync } from 'node:fs';
import { libc } from './libc.js';
import { flushLogSync } from './log.js';

/**
 * Ends the process with `code` at once: the logs flushed, then no exit handler run. Where libc
 * cannot be reached, SIGKILL to itself ends it just as surely (with a signal, not the code).
 */
export function exitAtOnce(code: number): never {
  flushLogSync();
  const exit = libc()?.exitAtOnce;
  if (exit) exit(code);
  process.kill(process.pid, 'SIGKILL');
  // Delivered before kill() returns to a single-threaded caller; a guard for the type system.
  throw new TypeError('the process outlived SIGKILL');
}

/** Makes an uncaught exception end this process through `exitAtOnce(1)`, its stack on stderr. */
export function endOnUncaughtException(program: string): void {
  process.on('uncaughtException', (error: unknown) => {
    const text = error instanceof Error ? (error.stack ?? String(error)) : String(error);
    try {
      writeSync(2, `${program}: uncaught exception, ending at once\n${text}\n`);
    } catch {
      // stderr is gone: the exit code still says it.
    }
    exitAtOnce(1);
  });
}
