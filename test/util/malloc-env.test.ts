// Goal: the heap trimmer calls its trim at its interval, never starts a second call while one
// is running, stops when told, and goes on after a call that could not be queued or that
// reported done before it returned.
// Method: a fake trim that records its calls and finishes when the test says.
import t from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { startHeapTrimmer } from '../../src/util/malloc-env.js';

t.test('calls the trim at its interval, one at a time, until stopped', async (t) => {
  const pending: (() => void)[] = [];
  const stop = startHeapTrimmer(10, (done) => {
    pending.push(done);
    return true;
  });
  await sleep(60);
  t.equal(pending.length, 1, 'no second call while the first runs');
  pending[0]?.();
  await sleep(60);
  t.ok(pending.length >= 2, 'called again once the first is done');
  stop();
  for (const done of pending) done();
  const calls = pending.length;
  await sleep(60);
  t.equal(pending.length, calls, 'no calls after stop');
});

t.test('a trim that could not be queued is tried again at the next interval', async (t) => {
  let calls = 0;
  const stop = startHeapTrimmer(10, () => {
    calls += 1;
    return false;
  });
  for (const deadline = Date.now() + 5000; calls < 2 && Date.now() < deadline;) await sleep(10);
  stop();
  t.ok(calls >= 2, `tried ${calls} times`);
});

t.test('a trim that reports done at once is called again', async (t) => {
  let calls = 0;
  const stop = startHeapTrimmer(10, (done) => {
    calls += 1;
    done();
    return false;
  });
  for (const deadline = Date.now() + 5000; calls < 2 && Date.now() < deadline;) await sleep(10);
  stop();
  t.ok(calls >= 2, `called ${calls} times`);
});
