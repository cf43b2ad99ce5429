// Segments that hold records of uploads still in flight, as their gateways report them.
//
// An upload's records are written before its manifest commits, so until then no chunk entry
// points at them and a segment that holds only such records looks empty to the compactor: it
// can be retired, which is harmless (the later commit points into the retired segment, whose
// live bytes then keep it), but after `storage.retired_segment_grace` it would be deleted, and
// a slow upload's commit then found its bytes gone. Each gateway reports the segments its
// unfinished uploads wrote to (`pinSegments`, the whole set each time it changes and every few
// seconds), and the compactor deletes no pinned segment. The pins of a connection end with it:
// a gateway that is gone has no uploads left to commit.
//
// A record is written a moment before its pin arrives; the retired grace (a minute by default)
// is what covers that moment, so a segment can never be both retired and deleted in between.
// An engine that has just started knows no pins yet: until every gateway has had the time to
// report again (two report intervals), it deletes no segment (`settled`).

/** Whoever reports pins: one gateway connection. */
export type PinOwner = object;

/** At most this many segments per report (a gateway's uploads in flight touch far fewer). */
export const PINNED_SEGMENTS_MAX = 65_536;

/** How often a gateway reports its pins while it holds any (src/service/upload-pins.ts). */
export const PIN_REPORT_INTERVAL_MS = 5_000;

export class SegmentPins {
  private readonly byOwner = new Map<PinOwner, ReadonlySet<number>>();

  /** `startedAt`: when the engine began taking reports (tests move it back). */
  constructor(private readonly startedAt = Date.now()) {}

  /** Every gateway connected has reported since this engine started (or had the time to). */
  settled(now = Date.now()): boolean {
    return now - this.startedAt >= 2 * PIN_REPORT_INTERVAL_MS;
  }

  /** Replaces `owner`'s pins with `segmentIds`. */
  set(owner: PinOwner, segmentIds: readonly number[]): void {
    if (segmentIds.length === 0) this.byOwner.delete(owner);
    else this.byOwner.set(owner, new Set(segmentIds));
  }

  drop(owner: PinOwner): void {
    this.byOwner.delete(owner);
  }

  /** Every segment pinned now, by any gateway. */
  pinnedNow(): number[] {
    const all = new Set<number>();
    for (const pinned of this.byOwner.values()) for (const segmentId of pinned) all.add(segmentId);
    return [...all];
  }

  has(segmentId: number): boolean {
    for (const pinned of this.byOwner.values()) if (pinned.has(segmentId)) return true;
    return false;
  }
}
