// The entry point of a gateway's listener threads other than its first (listener-threads.ts):
// one more listener of the public port, on this thread's event loop, until the gateway asks it
// to stop.

import { parentPort, workerData } from 'node:worker_threads';
import assert from 'node:assert';
import { createRootLogger } from '../util/log.js';
import { toWire } from '../util/errors.js';
import { loadSettings } from '../util/config.js';
import { dataDirPaths } from '../engine/data-dir.js';
import { startListener } from './gateway.js';
import { PortTasks, type ListenerThreadData, type ThreadMessage } from './listener-threads.js';

const gateway = parentPort;
assert(gateway !== null, 'a listener thread runs as a worker thread');
// An exception that nothing caught fails the gateway process, as on its main thread, but through
// a clean stop: a thread ended with its sockets open would abort the process (libuv refuses to
// close a loop that still has handles).
const fail = (error: unknown): void =>
  gateway.postMessage({
    failed: {
      error: toWire(error),
      stack: error instanceof Error ? (error.stack ?? error.message) : String(error),
    },
  } satisfies ThreadMessage);
process.on('uncaughtException', fail);
const data = workerData as ListenerThreadData;
const settings = loadSettings({ flags: data.settings });
createRootLogger({
  level: settings.string('log.level'),
  process: 'gateway',
  listener: data.listener,
});
const tasks = new PortTasks(data.tasks);
const ended = (): void => {
  tasks.close();
  gateway.close();
};
try {
  const running = await startListener({
    settings,
    paths: dataDirPaths(data.dataDir),
    listener: data.listener,
    memory: data.memory,
    tasks,
    port: data.port,
  });
  gateway.once('message', () => void running.stop().catch(fail).finally(ended));
  gateway.postMessage('listening' satisfies ThreadMessage);
} catch (error) {
  fail(error);
  ended();
}
