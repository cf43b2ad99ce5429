// A gateway's listener threads other than its first (listener-entry.ts runs in each), and how
// they share the gateway's one worker pool.
//
// The pool belongs to the gateway's first thread, which runs listener 0. Every other listener
// thread sends its tasks there over a MessagePort; the first thread runs them on the pool and
// sends the answers back (a read's plaintext ArrayBuffer transferred, not copied). Only chunks
// that are worth the pool go this way (see upload.ts and download.ts), so the two hops cost
// little against the task. A task names blocks of its own listener's arenas, which every pool
// thread holds (WorkerConfig.arenas), so no body byte crosses a port.

import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads';
import { fromWire, Internal, toWire, type LightwellError, type WireError } from '../util/errors.js';
import { componentLogger } from '../util/log.js';
import type { Settings, SettingName } from '../util/config.js';
import type { PoolTask, Task, TaskRunner } from '../workers/protocol.js';
import type { ListenerMemory, RunningListener } from './gateway.js';

/** What a listener thread starts from (listener-entry.ts). */
export interface ListenerThreadData {
  readonly settings: Readonly<Record<SettingName, string>>;
  readonly dataDir: string;
  readonly listener: number;
  readonly memory: ListenerMemory;
  /** The public port, which the first listener already holds. */
  readonly port: number;
  /** Where the thread's pool tasks go (serveTasks). */
  readonly tasks: MessagePort;
  /** The thread's port to the gateway's ordered-stage thread (ordered-stage.ts). */
  readonly ordered: MessagePort;
}

/**
 * What a listener thread tells its gateway: that it listens, or that an exception nothing caught
 * reached it (listener-entry.ts), after which the gateway stops all its listeners.
 */
export type ThreadMessage = 'listening' | { readonly failed: ThreadFailure };

export interface ThreadFailure {
  readonly error: WireError;
  readonly stack: string;
}

export interface ListenerThread extends RunningListener {
  /** Rejects when the thread fails or ends without having been asked to stop. */
  readonly failed: Promise<never>;
}

/** How long a stop waits for a thread to end on its own, unless told: the default drain and more. */
const THREAD_EXIT_WAIT_MS = 35_000;

/**
 * Starts listener `listener` on its own thread; resolves once it listens. `entry` is the thread's
 * module, listener-entry.ts unless a test gives a double that speaks the same protocol.
 */
export async function startListenerThread(options: {
  settings: Settings;
  dataDir: string;
  listener: number;
  memory: ListenerMemory;
  pool: PoolRunner;
  ordered: MessagePort;
  port: number;
  entry?: URL;
  /** How long a stop waits for the thread to end on its own before ending it by force. */
  stopWaitMs?: number;
}): Promise<ListenerThread> {
  const log = componentLogger('gateway');
  const channel = new MessageChannel();
  serveTasks(channel.port1, options.pool, options.listener);
  const workerData: ListenerThreadData = {
    settings: options.settings.raw,
    dataDir: options.dataDir,
    listener: options.listener,
    memory: options.memory,
    port: options.port,
    tasks: channel.port2,
    ordered: options.ordered,
  };
  const worker = new Worker(options.entry ?? new URL('./listener-entry.js', import.meta.url), {
    workerData,
    transferList: [channel.port2, options.ordered],
  });
  let stopping = false;
  const exited = new Promise<number>((resolve) => worker.once('exit', resolve));
  let listening: () => void = () => {};
  const started = new Promise<void>((resolve) => (listening = resolve));
  const failed = new Promise<never>((_, reject) => {
    worker.on('message', (message: ThreadMessage) => {
      if (message === 'listening') listening();
      else reject(threadFailure(options.listener, message.failed));
    });
    worker.once('error', reject);
    void exited.then((code) => {
      if (!stopping) reject(Internal(`listener thread ${options.listener} ended (code ${code})`));
    });
  });
  const stop = async (): Promise<void> => {
    stopping = true;
    worker.postMessage('stop');
    // Past the listener's drain (`shutdown.grace`), after which its sockets are closed: a thread
    // ended with sockets open would abort the process.
    const timer = setTimeout(() => {
      log.warn({ listener: options.listener }, 'listener thread ended by force');
      void worker.terminate();
    }, options.stopWaitMs ?? THREAD_EXIT_WAIT_MS);
    await exited;
    clearTimeout(timer);
    channel.port1.close();
  };
  // Until the thread listens, its failure is the start's. Such a thread holds no socket yet (a
  // listener binds last), so it is ended at once.
  try {
    await Promise.race([started, failed]);
  } catch (error) {
    stopping = true;
    await worker.terminate();
    channel.port1.close();
    throw error;
  }
  return { port: options.port, failed, stop };
}

/**
 * In a listener thread: an exception that nothing caught is reported to the gateway, which stops
 * every listener cleanly and fails the process; a thread ended with its uWS sockets open would
 * abort the process instead (libuv refuses to close a loop that still has handles). Returns the
 * report, for a start that fails.
 */
export function reportFailures(gateway: MessagePort): (error: unknown) => void {
  const fail = (error: unknown): void =>
    gateway.postMessage({
      failed: {
        error: toWire(error),
        stack: error instanceof Error ? (error.stack ?? error.message) : String(error),
      },
    } satisfies ThreadMessage);
  process.on('uncaughtException', fail);
  return fail;
}

/**
 * A thread's failure: its own error when it has a code of the catalogue (a start refused, e.g.
 * the port), else an internal error with the thread's stack.
 */
function threadFailure(listener: number, failure: ThreadFailure): LightwellError {
  if (failure.error.code !== 'internal') return fromWire(failure.error);
  return Internal(`listener thread ${listener} failed: ${failure.stack}`);
}

/** Listener 0's tasks: straight to the pool. */
export function poolTasks(pool: PoolRunner, listener: number): TaskRunner {
  return { run: (task) => pool.run({ listener, task }) };
}

interface TaskMessage {
  readonly id: number;
  readonly task: Task;
}

type AnswerMessage =
  | { readonly id: number; readonly ok: true; readonly value: unknown }
  | { readonly id: number; readonly ok: false; readonly error: WireError };

/** What serveTasks needs of the pool. */
export interface PoolRunner {
  run(task: PoolTask): Promise<unknown>;
}

/** In the first thread: runs on the pool what listener `listener` sends over `port`. */
export function serveTasks(port: MessagePort, pool: PoolRunner, listener: number): void {
  port.on('message', ({ id, task }: TaskMessage) => {
    pool
      .run({ listener, task })
      .then((value: unknown) =>
        port.postMessage({ id, ok: true, value } satisfies AnswerMessage, transferOf(value)),
      )
      .catch((error: unknown) =>
        port.postMessage({ id, ok: false, error: toWire(error) } satisfies AnswerMessage),
      );
  });
}

/** In another listener thread: the tasks go to the first thread's pool over `port`. */
export class PortTasks implements TaskRunner {
  private nextId = 0;
  private readonly waiting = new Map<number, (answer: AnswerMessage) => void>();

  constructor(private readonly port: MessagePort) {
    port.on('message', (answer: AnswerMessage) => {
      const settle = this.waiting.get(answer.id);
      this.waiting.delete(answer.id);
      settle?.(answer);
    });
  }

  run(task: Task): Promise<unknown> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, (answer) => {
        if (answer.ok) resolve(answer.value);
        else reject(fromWire(answer.error));
      });
      this.port.postMessage({ id, task } satisfies TaskMessage);
    });
  }

  close(): void {
    this.port.close();
  }
}

function transferOf(value: unknown): ArrayBuffer[] {
  return value instanceof ArrayBuffer ? [value] : [];
}
