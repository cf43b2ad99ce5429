// Goal: a process that crashes while index commits are in flight ends, with its stack on stderr
// and exit code 1 (util/fatal.ts). Through Node's own exit teardown it hangs for ever (lmdb-js's
// exit hooks wait for the write transaction, whose thread waits for JavaScript that no longer
// runs) or dies of SIGSEGV: without the fix this file's child did one or the other every time.
// Method: this file run again as a child (LW_FATAL_CHILD) that opens an LMDB environment, keeps
// four child transactions queued back to back, installs `endOnUncaughtException` and throws
// from an immediate scheduled inside a transaction, so that it lands while that one commits;
// the parent waits for the child's exit, up to the file's own limit, then says what it waited
// for.
import t from 'tap';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { open } from 'lmdb';
import { endOnUncaughtException } from '../../src/util/fatal.js';
import { untilTestDeadline } from '../helpers/deadline.js';

const CRASH_AFTER_TRANSACTIONS = 20;

async function child(dir: string): Promise<void> {
  endOnUncaughtException('fatal-test');
  const db = open({ path: join(dir, 'index') });
  let transactions = 0;
  const writeOn = (lane: number): void => {
    void db
      .childTransaction(() => {
        for (let i = 0; i < 100; i++) db.putSync(`k${lane}-${i}`, 'v'.repeat(200));
        // Thrown once this callback has returned, while its transaction commits.
        if (++transactions === CRASH_AFTER_TRANSACTIONS)
          setImmediate(() => {
            throw new Error('a crash with commits in flight');
          });
      })
      .then(() => writeOn(lane));
  };
  for (let lane = 0; lane < 4; lane++) writeOn(lane);
  await once(process, 'beforeExit'); // never: the writes go on until the crash
}

const childDir = process.env['LW_FATAL_CHILD'];
if (childDir !== undefined) {
  await child(childDir);
} else {
  t.test('an uncaught exception with commits in flight ends the process', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'lw-fatal-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const proc = spawn(process.execPath, [fileURLToPath(import.meta.url)], {
      env: { ...process.env, LW_FATAL_CHILD: dir, TAP: '0' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    t.teardown(() => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
    });
    let stderr = '';
    proc.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const deadline = untilTestDeadline();
    const [code, signal] = (await once(proc, 'exit', deadline ? { signal: deadline } : {}).catch(
      () => {
        throw new Error(
          `the crashed child (pid ${String(proc.pid)}) had not exited by the test's deadline; ` +
            `stderr: ${stderr}`,
        );
      },
    )) as [number | null, string | null];
    t.equal(signal, null, 'ended by its own exit, not a signal');
    t.equal(code, 1, 'with exit code 1');
    t.match(stderr, /fatal-test: uncaught exception, ending at once/, 'said why');
    t.match(stderr, /a crash with commits in flight/, 'with the stack');
  });
}
