// Sealing the pool's open segments when the gateway stops cleanly.
//
// Each worker thread owns one open segment (worker.ts). Piscina's `destroy` ends the threads
// without a word to them, so without this step every clean stop left the pool's segments open
// and the engine's next start recovered them by scanning each one to its end. Piscina's own
// messages use the thread's `parentPort` (a message of ours there would be taken for its
// start-up message), so ours go over a BroadcastChannel whose name the pool's workerData
// carries: a worker says on it that it listens once its module has loaded, and answers a seal
// request once its segment is sealed (or it had none).
//
// The gateway waits for an answer from every thread that said it listens and is still alive,
// or until a deadline: a worker that cannot seal (the engine is stopping too, or a task still
// writes) leaves its segment to recovery, as a crash would. A thread that never got as far as
// listening has stored nothing, so a stop right after the start does not wait for it.

import { BroadcastChannel, threadId } from 'node:worker_threads';

const SEAL_REQUEST = 'seal';

type WorkerMessage =
  | { readonly kind: 'listening'; readonly threadId: number }
  | { readonly kind: 'sealed'; readonly threadId: number; readonly sealed: boolean };

/** The gateway's side: created with the pool, before its threads start. */
export class PoolSealer {
  private readonly channel: BroadcastChannel;
  private readonly listening = new Set<number>();
  /** The threads a seal request in progress waits for (those listening when it was sent). */
  private asked: Set<number> | undefined;
  private answers: Map<number, boolean> | undefined;
  private answered: (() => void) | undefined;

  constructor(readonly channelName: string) {
    this.channel = new BroadcastChannel(channelName);
    this.channel.unref();
    this.channel.onmessage = (event) => this.onMessage(event.data as WorkerMessage);
  }

  /** A thread the pool ended (Piscina's `workerDestroy`) will not answer. */
  forget(workerThreadId: number): void {
    this.listening.delete(workerThreadId);
    this.asked?.delete(workerThreadId);
    this.settleIfAllAnswered();
  }

  /**
   * Asks every listening thread to seal its open segment. Resolves once each has answered or
   * `timeoutMs` has passed, with how many were asked and how many sealed.
   */
  async sealAll(timeoutMs: number): Promise<{ asked: number; sealed: number }> {
    const answers = new Map<number, boolean>();
    this.answers = answers;
    // A thread that starts listening after the request went out never saw it.
    this.asked = new Set(this.listening);
    const asked = this.asked.size;
    await new Promise<void>((done) => {
      const timer = setTimeout(done, timeoutMs);
      this.answered = () => {
        clearTimeout(timer);
        done();
      };
      this.channel.postMessage(SEAL_REQUEST);
      this.settleIfAllAnswered();
    });
    this.answers = undefined;
    this.answered = undefined;
    this.asked = undefined;
    return { asked, sealed: [...answers.values()].filter(Boolean).length };
  }

  close(): void {
    this.channel.close();
  }

  private onMessage(message: WorkerMessage): void {
    if (message.kind === 'listening') {
      this.listening.add(message.threadId);
      return;
    }
    this.answers?.set(message.threadId, message.sealed);
    this.settleIfAllAnswered();
  }

  private settleIfAllAnswered(): void {
    const { answers, asked, answered } = this;
    if (!answers || !asked || !answered) return;
    for (const id of asked) if (!answers.has(id)) return;
    answered();
  }
}

/**
 * Worker side: says it listens, then runs `seal` whenever the gateway asks and answers whether
 * it succeeded (what it resolves with; a rejection is a failure). The channel does not keep the
 * thread alive (Piscina decides when it ends).
 */
export function answerSealRequests(channelName: string, seal: () => Promise<boolean>): void {
  const channel = new BroadcastChannel(channelName);
  channel.unref();
  const send = (message: WorkerMessage): void => channel.postMessage(message);
  channel.onmessage = (event) => {
    if (event.data !== SEAL_REQUEST) return;
    void seal().then(
      (sealed) => send({ kind: 'sealed', threadId, sealed }),
      () => send({ kind: 'sealed', threadId, sealed: false }),
    );
  };
  send({ kind: 'listening', threadId });
}
