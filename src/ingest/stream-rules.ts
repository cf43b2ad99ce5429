// The order rules of an ingest connection (docs/ingest-protocol.md, "Order and window"), kept by
// both ends: the server refuses a client that breaks them, the client never breaks them. Pure
// state, no I/O.
//
// - An object is begun by OBJECT and its body follows in the frame and in DATA frames until its
//   declared size is reached; only then may the next OBJECT come (bodies never interleave).
// - Sequence numbers grow strictly from one OBJECT to the next on a connection.
// - The window: at most `windowObjects` objects begun and not acknowledged, and at most
//   `windowBytes` body bytes sent and not yet given back by a CREDIT frame.

import { CLOSE_WINDOW, FrameError, type DataFrame, type ObjectFrame } from './frames.js';

export interface Window {
  readonly windowObjects: number;
  readonly windowBytes: number;
}

/** Both ends' count of one connection's window. */
export class WindowCount {
  /** Objects begun and not acknowledged, by sequence. */
  readonly inFlight = new Set<number>();
  /** Body bytes sent and not yet credited back. */
  outstanding = 0;

  constructor(readonly window: Window) {}

  /** Whether an object whose OBJECT frame carries `bodyBytes` body bytes may begin. */
  admitsObject(bodyBytes: number): boolean {
    return this.inFlight.size < this.window.windowObjects && this.admitsBytes(bodyBytes);
  }

  admitsBytes(bytes: number): boolean {
    return this.outstanding + bytes <= this.window.windowBytes;
  }

  /** The bytes the client may send now. */
  get room(): number {
    return this.window.windowBytes - this.outstanding;
  }

  credit(bytes: number): void {
    this.outstanding = Math.max(0, this.outstanding - bytes);
  }

  settle(sequence: number): boolean {
    return this.inFlight.delete(sequence);
  }
}

/** The server's view of one connection's objects: in flight, and the one whose body is open. */
export class StreamRules {
  private lastSequence = -1;
  readonly count: WindowCount;
  /** The object whose body is still coming, and how much of it has come. */
  private open: { sequence: number; size: number; received: number } | undefined;

  constructor(window: Window) {
    this.count = new WindowCount(window);
  }

  get objectsInFlight(): number {
    return this.count.inFlight.size;
  }

  get bytesOutstanding(): number {
    return this.count.outstanding;
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
    if (!this.count.admitsObject(frame.body.length))
      throw FrameError(
        `object ${frame.sequence} exceeds the window (${this.count.inFlight.size} objects, ` +
          `${this.count.outstanding} bytes outstanding)`,
        CLOSE_WINDOW,
      );
    this.lastSequence = frame.sequence;
    this.count.inFlight.add(frame.sequence);
    this.count.outstanding += frame.body.length;
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
      throw FrameError(`DATA runs past the size of object ${open.sequence}`);
    if (!this.count.admitsBytes(frame.body.length))
      throw FrameError(
        `DATA exceeds the window (${this.count.outstanding} bytes outstanding)`,
        CLOSE_WINDOW,
      );
    this.count.outstanding += frame.body.length;
    open.received += frame.body.length;
    if (open.received < open.size) return false;
    this.open = undefined;
    return true;
  }

  /** Body bytes the server gave back (CREDIT). */
  credit(bytes: number): void {
    this.count.credit(bytes);
  }

  /** The object was acknowledged (committed or refused). */
  settle(sequence: number): void {
    this.count.settle(sequence);
  }
}
