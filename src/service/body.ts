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
