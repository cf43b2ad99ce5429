// The order rules of an ingest connection (docs/ingest-protocol.md, "Order and window"), kept by
// both ends: the server refuses a client that breaks them, the client never breaks them. Pure
// state, no I/O.
//
// - An object is begun by OBJECT and its body follows in the frame and in DATA frames until its
//   declared size is reached; only then may the next OBJECT come (bodies never interleave).
// - Sequence numbers grow strictly from one OBJECT to the next on a connection.
// - The credit window: an object may begin only while fewer than `windowObjects` are begun and
//   not acknowledged, and while the sizes of those plus its own stay within `windowBytes`; an
//   object larger than that may begin when nothing else is in flight.

import {
  CLOSE_MALFORMED,
  CLOSE_WINDOW,
  FrameError,
  type DataFrame,
  type ObjectFrame,
} from './frames.js';

export interface Window {
  readonly windowObjects: number;
  readonly windowBytes: number;
}

/** Whether an object of `size` may begin with `objects` objects of `bytes` bytes in flight. */
export function windowAdmits(
  window: Window,
  objects: number,
  bytes: number,
  size: number,
): boolean {
  if (objects >= window.windowObjects) return false;
  return objects === 0 || bytes + size <= window.windowBytes;
}

/** The server's view of one connection's objects: in flight, and the one whose body is open. */
export class StreamRules {
  private lastSequence = -1;
  /** Sizes of the objects begun and not acknowledged, by sequence. */
  private readonly inFlight = new Map<number, number>();
  private bytes = 0;
  /** The object whose body is still coming, and how much of it has come. */
  private open: { sequence: number; size: number; received: number } | undefined;

  constructor(private readonly window: Window) {}

  get objectsInFlight(): number {
    return this.inFlight.size;
  }

  get bytesInFlight(): number {
    return this.bytes;
  }

  /** The sequence of the object whose body is still coming, if any. */
  get openSequence(): number | undefined {
    return this.open?.sequence;
  }

  /** Checks an OBJECT frame against the rules; returns whether its body is complete. */
  begin(frame: ObjectFrame): boolean {
    if (this.open)
      throw FrameError(`OBJECT ${frame.sequence} before the body of ${this.open.sequence} ended`);
    if (frame.sequence <= this.lastSequence)
      throw FrameError(`sequence ${frame.sequence} does not follow ${this.lastSequence}`);
    if (!windowAdmits(this.window, this.inFlight.size, this.bytes, frame.size))
      throw FrameError(
        `object ${frame.sequence} exceeds the window (${this.inFlight.size} objects, ` +
          `${this.bytes} bytes in flight)`,
        CLOSE_WINDOW,
      );
    this.lastSequence = frame.sequence;
    this.inFlight.set(frame.sequence, frame.size);
    this.bytes += frame.size;
    if (frame.body.length === frame.size) return true;
    this.open = { sequence: frame.sequence, size: frame.size, received: frame.body.length };
    return false;
  }

  /** Checks a DATA frame; returns whether it completes the open body. */
  data(frame: DataFrame): boolean {
    const open = this.open;
    if (!open) throw FrameError(`DATA for ${frame.sequence} with no object open`);
    if (frame.sequence !== open.sequence)
      throw FrameError(`DATA for ${frame.sequence} while ${open.sequence} is open`);
    if (open.received + frame.body.length > open.size)
      throw FrameError(`DATA runs past the size of object ${open.sequence}`, CLOSE_MALFORMED);
    open.received += frame.body.length;
    if (open.received < open.size) return false;
    this.open = undefined;
    return true;
  }

  /** The object was acknowledged (committed or refused): its credit returns. */
  settle(sequence: number): void {
    const size = this.inFlight.get(sequence);
    if (size === undefined) return;
    this.inFlight.delete(sequence);
    this.bytes -= size;
  }
}
