// The body of a server-side copy that writes bytes again (a part copied from an object's range):
// a version's bytes, read through the download pipeline, offered to the upload pipeline as the
// BodySource a transport's request body is, with the same flow control. So a copied part is
// chunked, deduplicated, encrypted, hashed and committed exactly as an uploaded one.
//
// Persists: nothing.

import type { BodySource } from './body.js';

export class CopiedBody implements BodySource {
  aborted = false;
  /** Why reading the source failed, once it has (the upload then fails as abandoned). */
  failure: unknown;
  private paused = false;
  private closed = false;
  private wake: (() => void) | undefined;
  private readonly abortHandlers: Array<() => void> = [];

  constructor(
    private readonly bytes: AsyncGenerator<ArrayBuffer, void, undefined>,
    private readonly length: number,
  ) {}

  onBody(handler: (chunk: ArrayBuffer, isLast: boolean) => void): void {
    void this.pump(handler);
  }

  onAbort(handler: () => void): void {
    if (this.aborted) handler();
    else this.abortHandlers.push(handler);
  }

  pauseReading(): void {
    this.paused = true;
  }

  resumeReading(): void {
    this.paused = false;
    this.wakeUp();
  }

  /**
   * The upload settled: stop reading and give back what the read holds ahead. Always called, or
   * a reading paused by an upload that failed would hold its blocks.
   */
  close(): void {
    this.closed = true;
    this.wakeUp();
  }

  /** Read again after each await: `close` may have been called meanwhile. */
  private stopped(): boolean {
    return this.closed;
  }

  private wakeUp(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  private async pump(handler: (chunk: ArrayBuffer, isLast: boolean) => void): Promise<void> {
    let delivered = 0;
    try {
      for (;;) {
        while (this.paused && !this.closed) await new Promise<void>((r) => (this.wake = r));
        if (this.stopped()) return;
        const next = await this.bytes.next();
        if (this.stopped()) return;
        if (next.done === true) break;
        delivered += next.value.byteLength;
        handler(next.value, delivered >= this.length);
        if (delivered >= this.length) return;
      }
      // Fewer bytes than the version's size: the upload refuses a short body.
      handler(new ArrayBuffer(0), true);
    } catch (error) {
      this.failure = error;
      this.aborted = true;
      for (const abort of this.abortHandlers.splice(0)) abort();
    } finally {
      await this.bytes.return(undefined);
    }
  }
}
