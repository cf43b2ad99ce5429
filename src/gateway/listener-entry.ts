// The entry point of a gateway's listener threads other than its first (listener-threads.ts):
// one more listener of the public port, on this thread's event loop, until the gateway asks it
// to stop.

import { parentPort, workerData } from 'node:worker_threads';
import assert from 'node:assert';
import { createRootLogger } from '../util/log.js';
import { loadSettings } from '../util/config.js';
import { dataDirPaths } from '../engine/data-dir.js';
import { startListener } from './gateway.js';
import {
  PortTasks,
  reportFailures,
  type ListenerThreadData,
  type ThreadMessage,
} from './listener-threads.js';

const gateway = parentPort;
assert(gateway !== null, 'a listener thread runs as a worker thread');
// An exception that nothing caught fails the gateway process, as on its main thread, but through
// a clean stop.
const fail = reportFailures(gateway);
const data = workerData as ListenerThreadData;
const settings = loadSettings({ flags: data.settings });
createRootLogger({
  level: settings.string('log.level'),
  format: settings.string('log.format'),
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
    ordered: data.ordered,
    port: data.port,
  });
  gateway.once('message', () => void running.stop().catch(fail).finally(ended));
  gateway.postMessage('listening' satisfies ThreadMessage);
} catch (error) {
  fail(error);
  ended();
}
