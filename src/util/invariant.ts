// Invariant failures end the process. An `AssertionError` (node:assert: a state machine found
// itself where it cannot be, a count below zero) or a `ReferenceError` (code that cannot run) is
// a bug whose state may already be wrong, not a request's error: answering 500 and carrying on
// would serve on from that state. The process is ended from outside every promise chain and
// catch, as an uncaught exception: serve restarts a crashed child, and a listener thread's
// uncaught exception fails its gateway (docs/architecture.md, "Invariant failures").
//
// A `TypeError` is not one: Node's own APIs raise it for bad input the code answers as 500 (an
// unparsable URL, a failed fetch), so it is answered, not crashed on.

import { AssertionError } from 'node:assert';

export function isInvariantFailure(error: unknown): boolean {
  return error instanceof AssertionError || error instanceof ReferenceError;
}

/**
 * Ends the process with `error` when it is an invariant failure, after the caller has answered
 * what it can: thrown from an immediate, where no catch of the caller's can take it, once the
 * event loop has had its turn to send the answer (a uWS answer is sent when the handler's
 * callback returns to it; a next-tick throw would come first).
 */
export function crashOnInvariantFailure(error: unknown): void {
  if (!isInvariantFailure(error)) return;
  setImmediate(() => {
    throw error;
  });
}
