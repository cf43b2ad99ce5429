// The glibc allocator settings of Lightwell's processes: `lightwell serve` starts its children
// with them, and the benchmark runs under them (bench/run.ts); and the trimmer that hands the
// free pages inside glibc's heaps back to the kernel.
import { libc } from './libc.js';

/**
 * glibc gives every thread its own malloc arena and keeps freed memory in it; with a worker pool
 * that allocates megabyte outputs (ciphertext, LZ4) that is hundreds of MiB of retained RSS.
 * Two arenas and an early trim keep the service's memory near what it actually holds.
 *
 * Setting the trim threshold switches off glibc's adaptive mmap threshold, which would leave
 * every allocation over 128 KiB to mmap: each chunk's ciphertext then costs fresh zeroed pages
 * and an munmap, and AES-GCM ran at 0.5 instead of 1.8 GB per CPU-second (measured on 1 MiB
 * chunks). The mmap threshold is therefore set too, above the largest chunk (4 MiB).
 */
export const CHILD_MALLOC_ENV: Readonly<Record<string, string>> = {
  MALLOC_ARENA_MAX: '2',
  MALLOC_TRIM_THRESHOLD_: String(8 * 1024 * 1024),
  MALLOC_MMAP_THRESHOLD_: String(8 * 1024 * 1024),
};

/** How often a service process hands free heap pages back (startHeapTrimmer). */
export const HEAP_TRIM_INTERVAL_MS = 2000;

/**
 * Calls malloc_trim(0) every `intervalMs` on libuv's thread pool (a koffi asynchronous call),
 * until the answered function is called. glibc returns a heap's free memory to the kernel only
 * from its top; buffers of megabytes freed in the middle, between longer-lived allocations, stay
 * resident. Under 16 concurrent 1 GiB uploads the gateway's two heaps held 24 of their 106 MB
 * free (malloc_info), and the service's peak RSS sum fell from 508–534 to 475–481 MiB with the
 * trimmer. A call costs 0.1–7 ms of arena scanning, off the event loop. Does nothing where libc
 * has no malloc_trim; a call still running when the next is due is not joined by a second one.
 */
export function startHeapTrimmer(
  intervalMs = HEAP_TRIM_INTERVAL_MS,
  trimHeap: ((done: () => void) => boolean) | null = libc()?.trimHeap ?? null,
): () => void {
  if (!trimHeap) return () => {};
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    // Set before the call: a call that could not be made may report done at once.
    running = true;
    const queued = trimHeap(() => {
      running = false;
    });
    if (!queued) running = false;
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
