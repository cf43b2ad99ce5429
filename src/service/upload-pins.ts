// The segments this gateway's unfinished uploads have written records to, reported to the engine
// so that compaction never deletes one before the upload commits (engine/segments/
// segment-pins.ts). An upload holds a segment from the moment a record of it is written there
// until its request has ended (committed, refused or abandoned).
//
// The whole set goes to the engine in the event-loop turn after a hold adds a segment the engine
// was not last told of, or a connection to the engine is made (a restarted engine, or a lost
// link made again, knows none of it). Releases are reported lazily, with the next report or at
// the next interval tick (every few seconds): a pin kept a little longer only delays the
// deletion of a retired segment, while a report per release cost a lone small upload two extra
// engine round trips (its hold's report and its release's). An engine deletes no segment until
// two such intervals after its start (SegmentPins.settled), whoever reconnects first.

import type { Logger } from '../util/log.js';
import type { EngineClient } from '../engine/protocol.js';
import { PIN_REPORT_INTERVAL_MS } from '../engine/segments/segment-pins.js';
import { isLightwellError } from '../util/errors.js';

export class UploadPins {
  private readonly counts = new Map<number, number>();
  /** The set the engine was last sent (empty after a failed report or a new connection). */
  private reported = new Set<number>();
  private scheduled = false;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly engine: EngineClient,
    private readonly log: Logger,
  ) {
    this.timer = setInterval(() => this.tick(), PIN_REPORT_INTERVAL_MS);
    this.timer.unref();
    // A new connection (a restarted engine, or a lost link made again) knows none of them.
    engine.onConnected(() => {
      this.reported = new Set();
      if (this.counts.size > 0) this.changed();
    });
  }

  hold(segmentId: number): void {
    const count = this.counts.get(segmentId) ?? 0;
    this.counts.set(segmentId, count + 1);
    if (count === 0 && !this.reported.has(segmentId)) this.changed();
  }

  release(segmentId: number): void {
    const count = this.counts.get(segmentId);
    if (count === undefined) return;
    if (count > 1) this.counts.set(segmentId, count - 1);
    else this.counts.delete(segmentId);
  }

  /** The segments held now (for tests and debug logs). */
  held(): number[] {
    return [...this.counts.keys()];
  }

  /**
   * The interval's work: the set again while any is held (the engine keeps pins per
   * connection, and this refreshes them), or once when releases left the engine's set stale.
   */
  tick(): void {
    if (this.counts.size > 0 || this.reported.size > 0) this.report();
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
    const segments = this.held();
    this.reported = new Set(segments);
    this.engine.call('pinSegments', { segments }).catch((error: unknown) => {
      // Not known to the engine: the next hold or tick reports the set again. An engine that is
      // away is expected now and then; one that refuses the report is a bug worth seeing.
      this.reported = new Set();
      if (isLightwellError(error) && error.code === 'engine_unavailable')
        this.log.debug({ err: error }, 'segment pins not reported');
      else this.log.warn({ err: error }, 'segment pins refused by the engine');
    });
  }
}
