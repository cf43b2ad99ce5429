// The body of a write as the service sees it: a source of byte chunks with flow control, whatever
// the transport (an HTTP request body, a frame stream of the ingest protocol). The upload
// pipeline (upload.ts) pulls from it; the transport implements it (the HTTP Exchange does).

/** A request body the service reads: chunks in order, pause and resume, and abort. */
export interface BodySource {
  /** The client went away: no more chunks will come, and nothing may be answered. */
  readonly aborted: boolean;
  /**
   * Delivers the body chunk by chunk; `isLast` marks the final one (an empty body is one empty
   * last chunk). The chunk's memory is the transport's: copy what outlives the call. Attached
   * once, before the first await of the operation.
   */
  onBody(handler: (chunk: ArrayBuffer, isLast: boolean) => void): void;
  /** Runs `handler` when the client goes away (at once when it has). */
  onAbort(handler: () => void): void;
  /** Backpressure: stop reading from the client until `resumeReading`. */
  pauseReading(): void;
  resumeReading(): void;
}

/**
 * A body held while its operation awaits something before it reads (a cluster member taking an
 * upload's record from a replica first): attached at once, as uWS requires, and paused; the
 * little the transport still delivers after the pause (its receive buffer) is copied and kept,
 * then handed over, in order, when the operation attaches, and reading resumes.
 */
export class HeldBody implements BodySource {
  private held: Array<{ chunk: ArrayBuffer; isLast: boolean }> = [];
  private handler: ((chunk: ArrayBuffer, isLast: boolean) => void) | undefined;
  /** Whether the operation itself asked for a pause (reading then resumes only when it asks). */
  private pausedByReader = false;

  constructor(private readonly source: BodySource) {
    source.pauseReading();
    source.onBody((chunk, isLast) => {
      if (this.handler !== undefined) this.handler(chunk, isLast);
      else this.held.push({ chunk: chunk.slice(0), isLast });
    });
  }

  get aborted(): boolean {
    return this.source.aborted;
  }

  onBody(handler: (chunk: ArrayBuffer, isLast: boolean) => void): void {
    this.handler = handler;
    const held = this.held;
    this.held = [];
    for (const { chunk, isLast } of held) handler(chunk, isLast);
    if (!this.pausedByReader) this.source.resumeReading();
  }

  onAbort(handler: () => void): void {
    this.source.onAbort(handler);
  }

  pauseReading(): void {
    this.pausedByReader = true;
    this.source.pauseReading();
  }

  resumeReading(): void {
    this.pausedByReader = false;
    this.source.resumeReading();
  }
}
