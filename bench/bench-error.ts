// The one error type of the benchmark harness.
//
// A BenchError is an operating failure of a benchmark run (the service did not start, answered
// an unexpected status, returned wrong bytes): the run reports it and exits non-zero. Bugs in the
// harness itself are assertion failures (`node:assert`), as in the rest of Lightwell.

export class BenchError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BenchError';
  }
}

/** The message of anything thrown, for reports. */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
