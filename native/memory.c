// Where a buffer lies relative to a memory page, for direct I/O (O_DIRECT), which wants its
// buffers aligned and JavaScript cannot see addresses. Loaded through koffi by src/util/libc.ts.

#include <stdint.h>

/* The address of `bytes` modulo `alignment` (a power of two). */
uint32_t lw_misalignment(const uint8_t *bytes, uint32_t alignment) {
  return (uint32_t)((uintptr_t)bytes & (uintptr_t)(alignment - 1));
}
