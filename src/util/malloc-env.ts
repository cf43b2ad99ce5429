// The glibc allocator settings of Lightwell's processes: `lightwell serve` starts its children
// with them, and the benchmark runs under them (bench/run.ts).

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
