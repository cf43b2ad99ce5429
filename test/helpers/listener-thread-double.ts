// A stand-in for src/gateway/listener-entry.ts in tests of startListenerThread: it speaks the
// same protocol (reportFailures, 'listening', a stop message, then ends) without a listener, and
// misbehaves as its listener number asks:
//   1  serves until it is asked to stop;
//   2  listens, then throws an exception that nothing catches;
//   3  refuses to start with a coded error (as a taken port would), then goes on running,
//      counting in the first word of its upload arena, until it is ended;
//   4  listens, then ends on its own;
//   5  listens and never ends, even when asked to stop.
// Loaded as a plain script (the test runner walks the build's test folder), it does nothing.
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { reportFailures, type ListenerThreadData } from '../../src/gateway/listener-threads.js';
import { Conflict, Internal } from '../../src/util/errors.js';

function misbehave(gateway: MessagePort, { listener, memory }: ListenerThreadData): void {
  const fail = reportFailures(gateway);
  const end = (): void => gateway.close();
  if (listener === 3) {
    fail(Conflict('address 127.0.0.1:1 is in use'));
    const alive = new Int32Array(memory.upload.buffer, 0, 1);
    setInterval(() => Atomics.add(alive, 0, 1), 5);
    return;
  }
  gateway.postMessage('listening');
  if (listener === 2)
    setTimeout(() => {
      throw Internal('listener thread double: an uncaught error');
    }, 10);
  if (listener === 4) setTimeout(end, 10);
  if (listener === 5) setInterval(() => undefined, 1000);
  else gateway.once('message', end);
}

if (parentPort) misbehave(parentPort, workerData as ListenerThreadData);
