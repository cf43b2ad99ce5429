// Goal: background work retried until a dependency answers (src/util/retry.ts), as the admin
// process resumes its rebalance jobs once etcd answers: the backoff doubles up to its ceiling,
// a warning is logged the first time and at the ceiling only, and once stopped (the process
// closes) no try starts and no timer is left.
// Method: `retryUntilDone` with timers fired here by hand and a log that records its lines.
import t from 'tap';
import { retryUntilDone, RETRY_MS_MAX, RETRY_MS_MIN } from '../../src/util/retry.js';
import type { Logger } from '../../src/util/log.js';

function harness() {
  const timers: Array<{ fn: () => void; ms: number; cancelled: boolean }> = [];
  const lines: string[] = [];
  const log = {
    warn: () => lines.push('warn'),
    debug: () => lines.push('debug'),
  } as unknown as Logger;
  const schedule = (fn: () => void, ms: number) => {
    const timer = { fn, ms, cancelled: false };
    timers.push(timer);
    return { cancel: () => (timer.cancelled = true) };
  };
  const settle = () => new Promise((resolve) => setImmediate(resolve));
  /** Fires the timers due now; answers their delays. */
  const tick = async (): Promise<number[]> => {
    const due = timers.splice(0).filter((timer) => !timer.cancelled);
    for (const timer of due) timer.fn();
    await settle();
    return due.map((timer) => timer.ms);
  };
  return { timers, lines, log, schedule, settle, tick };
}

t.test('backs off, warns rarely, and succeeds once the dependency answers', async (t) => {
  const { lines, log, schedule, settle, tick } = harness();
  let tries = 0;
  let up = false;
  retryUntilDone(
    () => {
      tries += 1;
      return up ? Promise.resolve() : Promise.reject(new Error('etcd not answering'));
    },
    { log, what: 'jobs not resumed yet', schedule },
  );
  await settle();
  const delays: number[] = [];
  for (let turn = 0; turn < 12; turn += 1) delays.push(...(await tick()));
  t.equal(delays[0], RETRY_MS_MIN, 'the first retry waits the least');
  t.equal(delays[1], RETRY_MS_MIN * 2, 'then twice as long');
  t.equal(delays[delays.length - 1], RETRY_MS_MAX, 'up to the ceiling');
  t.ok(
    delays.every((ms, index) => index === 0 || ms >= (delays[index - 1] ?? 0)),
    'never shorter',
  );
  t.equal(lines[0], 'warn', 'the first failure is a warning');
  t.ok(lines.includes('debug'), 'the tries below the ceiling are not');
  const warnings = lines.filter((line) => line === 'warn').length;
  t.ok(warnings < lines.length / 2, `few warnings (${warnings} of ${lines.length})`);
  up = true;
  const before = tries;
  await tick();
  t.equal(tries, before + 1, 'tried again');
  t.same(await tick(), [], 'and done: nothing more is scheduled');
});

t.test('stopped, it starts no try and leaves no timer', async (t) => {
  const { timers, log, schedule, settle, tick } = harness();
  let tries = 0;
  const stop = retryUntilDone(
    () => {
      tries += 1;
      return Promise.reject(new Error('etcd not answering'));
    },
    { log, what: 'jobs not resumed yet', schedule },
  );
  await settle();
  t.equal(timers.length, 1, 'a retry is scheduled');
  stop();
  t.ok(
    timers.every((timer) => timer.cancelled),
    'its timer is cancelled',
  );
  await tick();
  t.equal(tries, 1, 'no try after the stop');
});
