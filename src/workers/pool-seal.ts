// Sealing the pool's open segments when the gateway stops cleanly.
//
// Each worker thread owns one open segment (worker.ts). Piscina's `destroy` ends the threads
// without a word to them, so without this step every clean stop left the pool's segments open
// and the engine's next start recovered them by scanning each one to its end. Piscina's own
// messages use the thread's `parentPort` (a message of ours there would be taken for its
// start-up message), so the request goes over a BroadcastChannel whose name the pool's
// workerData carries: every thread of the pool hears it, and answers on it once its segment is
// sealed (or it had none).
//
// The gateway waits for as many answers as it has threads, or until a deadline: a worker that
// cannot seal (the engine is stopping too, or a task still writes) leaves its segment to
// recovery, as a crash would.

import { BroadcastChannel, threadId } from 'node:worker_threads';

const SEAL_REQUEST = 'seal';

interface SealAnswer {
  readonly threadId: number;
  readonly sealed: boolean;
}

/**
 * Asks every worker listening on `channelName` to seal its open segment. Resolves with the
 * number of workers that sealed, once `threads` have answered or `timeoutMs` has passed.
 */
export async function sealPoolSegments(
  channelName: string,
  threads: number,
  timeoutMs: number,
): Promise<{ answered: number; sealed: number }> {
  const channel = new BroadcastChannel(channelName);
  const answered = new Map<number, boolean>();
  try {
    await new Promise<void>((done) => {
      const timer = setTimeout(done, timeoutMs);
      channel.onmessage = (event) => {
        const answer = event.data as SealAnswer;
        answered.set(answer.threadId, answer.sealed);
        if (answered.size >= threads) {
          clearTimeout(timer);
          done();
        }
      };
      channel.postMessage(SEAL_REQUEST);
    });
  } finally {
    channel.close();
  }
  const sealed = [...answered.values()].filter(Boolean).length;
  return { answered: answered.size, sealed };
}

/**
 * Worker side: runs `seal` when the gateway asks, and answers whether it succeeded. The channel
 * does not keep the thread alive (Piscina decides when a thread ends).
 */
export function answerSealRequests(channelName: string, seal: () => Promise<void>): void {
  const channel = new BroadcastChannel(channelName);
  channel.unref();
  channel.onmessage = (event) => {
    if (event.data !== SEAL_REQUEST) return;
    void seal().then(
      () => channel.postMessage({ threadId, sealed: true } satisfies SealAnswer),
      () => channel.postMessage({ threadId, sealed: false } satisfies SealAnswer),
    );
  };
}
