// The one wall-clock bound a test that waits on events may have: its file's own time limit
// (tap's TAP_TIMEOUT, from the test process's start), less a margin to report which event did
// not come, instead of tap's dump of open handles. Never a bound tighter than that. For a file
// that sets no limit of its own (`t.setTimeout`).

/** What a failed wait needs to report before tap's limit for the file ends the process. */
const REPORT_MARGIN_MS = 10_000;

/** The `Date.now()` time by which a waiting test gives up and says what it waited for. */
export function testDeadline(): number {
  const limitMs = Number(process.env['TAP_TIMEOUT'] ?? 30) * 1000;
  return limitMs > 0 ? performance.timeOrigin + limitMs - REPORT_MARGIN_MS : Infinity;
}

/** A signal that aborts at `testDeadline()`; none (null) when the test has no time limit. */
export function untilTestDeadline(): AbortSignal | null {
  const deadline = testDeadline();
  return deadline === Infinity
    ? null
    : AbortSignal.timeout(Math.max(0, Math.floor(deadline - Date.now())));
}

/**
 * `waited`, or a rejection naming what it waited for (`what()`, evaluated then, so it can say
 * how far things got) once the test's deadline has passed.
 */
export function untilDeadline<T>(waited: Promise<T>, what: () => string): Promise<T> {
  const signal = untilTestDeadline();
  if (!signal) return waited;
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void =>
      reject(new Error(`gave up at the test's deadline waiting for ${what()}`));
    signal.addEventListener('abort', onAbort, { once: true });
    waited.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}
