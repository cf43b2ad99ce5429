// The segments this gateway's unfinished uploads have written records to, reported to the engine
// so that compaction never deletes one before the upload commits (engine/segments/
// segment-pins.ts). An upload holds a segment from the moment a record of it is written there
// until its request has ended (committed, refused or abandoned).
//
// The whole set goes to the engine in the event-loop turn after it changes or a connection to
// the engine is made (a restarted engine, or a lost link made again, knows none of it), and
// again every few seconds while it is not empty; an engine deletes no segment until two such
// intervals after its start (SegmentPins.settled), whoever reconnects first.

import type { Logger } from '../util/log.js';
import type { EngineClient } from '../engine/protocol.js';
import { PIN_REPORT_INTERVAL_MS } from '../engine/segments/segment-pins.js';
import { isLightwellError } from '../util/errors.js';

export class UploadPins {
  private readonly counts = new Map<number, number>();
  private scheduled = false;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly engine: EngineClient,
    private readonly log: Logger,
  ) {
    this.timer = setInterval(() => {
      if (this.counts.size > 0) this.report();
    }, PIN_REPORT_INTERVAL_MS);
    this.timer.unref();
    // A new connection (a restarted engine, or a lost link made again) knows none of them.
    engine.onConnected(() => {
      if (this.counts.size > 0) this.changed();
    });
  }

  hold(segmentId: number): void {
    const count = this.counts.get(segmentId) ?? 0;
    this.counts.set(segmentId, count + 1);
    if (count === 0) this.changed();
  }

  release(segmentId: number): void {
    const count = this.counts.get(segmentId);
    if (count === undefined) return;
    if (count > 1) {
      this.counts.set(segmentId, count - 1);
      return;
    }
    this.counts.delete(segmentId);
    this.changed();
  }

  /** The segments held now (for tests and debug logs). */
  held(): number[] {
    return [...this.counts.keys()];
  }

  close(): void {
    clearInterval(this.timer);
  }

  private changed(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.report();
    });
  }

  private report(): void {
    this.engine.call('pinSegments', { segments: this.held() }).catch((error: unknown) => {
      // The next report (the next change, or the interval) tries again. An engine that is away
      // is expected now and then; one that refuses the report is a bug worth seeing.
      if (isLightwellError(error) && error.code === 'engine_unavailable')
        this.log.debug({ err: error }, 'segment pins not reported');
      else this.log.warn({ err: error }, 'segment pins refused by the engine');
    });
  }
}
