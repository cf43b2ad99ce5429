// Goal: the gateway learns of every way a listener thread can fail, and ends such a thread: an
// exception that nothing caught after the start rejects `failed` with the thread's stack; a start
// refused with a coded error fails the start with that same error and the thread is ended; a
// thread that ends without being asked rejects `failed`; a thread that will not end when asked is
// ended by force once the stop's wait is over; and a thread that behaves stops cleanly, with
// `failed` never rejected.
// Method: startListenerThread with a double of the thread's module (test/helpers/
// listener-thread-double.ts), which uses the real reportFailures and protocol and picks its
// misbehaviour from its listener number; a pool that expects no task, a fresh ordered-stage port.
import t from 'tap';
import { MessageChannel } from 'node:worker_threads';
import { startListenerThread, type ListenerThread } from '../../src/gateway/listener-threads.js';
import { arenaMemory } from '../../src/service/body-arena.js';
import { loadSettings } from '../../src/util/config.js';
import { errorCode } from '../../src/util/errors.js';

const entry = new URL('../helpers/listener-thread-double.js', import.meta.url);
const settings = loadSettings({ flags: {} });
const memory = {
  arenaBlocks: 1,
  upload: arenaMemory(1024 * 1024, 1),
  downloadBlocks: 1,
  downloads: arenaMemory(256 * 1024, 1),
};

function start(listener: number, stopWaitMs?: number): Promise<ListenerThread> {
  return startListenerThread({
    settings,
    dataDir: '/nonexistent',
    listener,
    memory,
    pool: { run: () => Promise.reject(new Error('no task is expected')) },
    ordered: new MessageChannel().port2,
    port: 1,
    entry,
    ...(stopWaitMs === undefined ? {} : { stopWaitMs }),
  });
}

/** Whether `promise` settles within `ms`, and how. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<string>((resolve) => (timer = setTimeout(() => resolve('pending'), ms)));
  const outcome = await Promise.race([
    promise.then(
      () => 'fulfilled',
      () => 'rejected',
    ),
    late,
  ]);
  clearTimeout(timer);
  return outcome;
}

t.test('a thread that behaves stops cleanly', async (t) => {
  const thread = await start(1);
  await thread.stop();
  t.equal(await settlesWithin(thread.failed, 100), 'pending', 'failed is never rejected');
});

t.test("an exception that nothing caught fails the gateway with the thread's stack", async (t) => {
  const thread = await start(2);
  const error = await thread.failed.catch((reason: unknown) => reason);
  t.equal(errorCode(error), 'internal');
  t.match((error as Error).message, /listener thread 2 failed: .*an uncaught error/s);
  t.match((error as Error).message, /listener-thread-double/, 'with the stack of the thread');
  await thread.stop();
});

t.test(
  'a start refused with a coded error fails with that error, and ends the thread',
  async (t) => {
    const alive = new Int32Array(memory.upload.buffer, 0, 1);
    const error = await start(3).catch((reason: unknown) => reason);
    t.equal(errorCode(error), 'conflict');
    t.match((error as Error).message, /is in use/);
    const count = Atomics.load(alive, 0);
    await new Promise((resolve) => setTimeout(resolve, 100));
    t.equal(Atomics.load(alive, 0), count, 'the thread no longer runs');
  },
);

t.test('a thread that ends unasked fails the gateway', async (t) => {
  const thread = await start(4);
  const error = await thread.failed.catch((reason: unknown) => reason);
  t.equal(errorCode(error), 'internal');
  t.match((error as Error).message, /listener thread 4 ended \(code 0\)/);
  await thread.stop();
});

t.test('a thread that will not end is ended by force after the wait', async (t) => {
  const thread = await start(5, 200);
  const started = performance.now();
  await thread.stop();
  const waited = performance.now() - started;
  t.ok(waited >= 150, 'the stop waited for the thread first');
  // Far below the 15 s default, however slow the machine: the given wait was used.
  t.ok(waited < 5000, 'and no longer than it was told to');
  t.equal(await settlesWithin(thread.failed, 100), 'pending', 'an ordered stop is no failure');
});
