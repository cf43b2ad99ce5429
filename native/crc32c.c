// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of every record, header
// and marker Lightwell writes, and of the CRC32C object checksum.
//
// @node-rs/crc32 runs one chain of SSE4.2 `crc32` instructions: each waits for the one before
// (3 cycles), so it moves 8 bytes per 3 cycles, and its calls cost more than the work below
// 4 KiB (measured 3.5-4.9 GB/s on 64 KiB-4 MiB, 1.2 us for 4 KiB). This runs three independent
// chains over three neighbouring stretches of the input and joins them with a carry-less
// multiply (PCLMULQDQ): 16-23 GB/s on the same inputs, 0.6 us for 4 KiB through koffi.
//
// Joining: the CRC register after stretch A followed by stretch B equals the register after A
// multiplied by x^(8*|B|) modulo P, XOR the register of B started from zero. The multiplication
// by a constant x^(8*|B|-32) is one carry-less multiply, and the `crc32` instruction on the
// 64-bit product does the reduction (it multiplies by x^32 and reduces modulo P).
//
// Loaded through koffi by src/util/libc.ts, which calls `lw_crc32c_supported` first and keeps
// @node-rs/crc32 where it answers 0 (another architecture, or a CPU without SSE4.2 or PCLMULQDQ).
// Built by scripts/build-native.mjs; nothing else depends on it.

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define POLY 0x82F63B78u
/* Bytes per chain per round: long rounds for bulk data, short ones for inputs of a few KiB. */
#define LONG_STRETCH 4096
#define SHORT_STRETCH 256

/* a * b modulo P, both in the reflected bit order (bit 31 holds x^0). */
static uint32_t multiply_modulo(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (int bit = 0; bit < 32; bit++) {
    if (b & 0x80000000u) product ^= a;
    b <<= 1;
    a = (a >> 1) ^ ((a & 1) ? POLY : 0);
  }
  return product;
}

/* x^(8 * bytes) modulo P. */
static uint32_t x_to_the_bytes(size_t bytes) {
  uint32_t result = 0x80000000u; /* x^0 */
  uint32_t square = 0x00800000u; /* x^8 */
  for (; bytes != 0; bytes >>= 1) {
    if (bytes & 1) result = multiply_modulo(result, square);
    square = multiply_modulo(square, square);
  }
  return result;
}

/* Bitwise reference: the portable path, and the head and tail of inputs on x86-64. */
static uint32_t crc32c_bitwise(uint32_t crc, const uint8_t *bytes, size_t length) {
  while (length--) {
    crc ^= *bytes++;
    for (int bit = 0; bit < 8; bit++) crc = (crc >> 1) ^ ((crc & 1) ? POLY : 0);
  }
  return crc;
}

#if defined(__x86_64__)
#include <immintrin.h>

#define TARGET __attribute__((target("sse4.2,pclmul")))

/* x^(8 * stretch - 32) for shifting a register over one and over two stretches. */
static uint32_t long_one, long_two, short_one, short_two;
static int supported;

__attribute__((constructor)) static void initialize(void) {
  __builtin_cpu_init();
  supported = __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("pclmul");
  long_one = x_to_the_bytes(LONG_STRETCH - 4);
  long_two = x_to_the_bytes(2 * LONG_STRETCH - 4);
  short_one = x_to_the_bytes(SHORT_STRETCH - 4);
  short_two = x_to_the_bytes(2 * SHORT_STRETCH - 4);
}

static inline uint64_t load64(const uint8_t *bytes) {
  uint64_t value;
  memcpy(&value, bytes, 8);
  return value;
}

/* register * x^(8 * stretch) modulo P, given constant = x^(8 * stretch - 32). */
TARGET static inline uint32_t shift(uint32_t crc, uint32_t constant) {
  __m128i product = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)crc),
                                         _mm_cvtsi32_si128((int)constant), 0);
  /* The integer product of two reflected 32-bit values is the polynomial product times x;
     one bit to the left undoes that, and crc32 multiplies by x^32 and reduces. */
  return (uint32_t)_mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(product) << 1);
}

/* Three chains over rounds of 3 * stretch bytes while they last; answers the rest's start. */
TARGET static inline const uint8_t *three_chains(uint64_t *crc, const uint8_t *bytes,
                                                 size_t *length, size_t stretch, uint32_t one,
                                                 uint32_t two) {
  while (*length >= 3 * stretch) {
    uint64_t first = *crc, second = 0, third = 0;
    for (const uint8_t *end = bytes + stretch; bytes < end; bytes += 8) {
      first = _mm_crc32_u64(first, load64(bytes));
      second = _mm_crc32_u64(second, load64(bytes + stretch));
      third = _mm_crc32_u64(third, load64(bytes + 2 * stretch));
    }
    bytes += 2 * stretch;
    *length -= 3 * stretch;
    *crc = shift((uint32_t)first, two) ^ shift((uint32_t)second, one) ^ (uint32_t)third;
  }
  return bytes;
}

TARGET static uint32_t crc32c_hardware(uint32_t initial, const uint8_t *bytes, size_t length) {
  uint64_t crc = ~initial;
  for (; length != 0 && ((uintptr_t)bytes & 7) != 0; length--)
    crc = _mm_crc32_u8((uint32_t)crc, *bytes++);
  bytes = three_chains(&crc, bytes, &length, LONG_STRETCH, long_one, long_two);
  bytes = three_chains(&crc, bytes, &length, SHORT_STRETCH, short_one, short_two);
  for (; length >= 8; length -= 8, bytes += 8) crc = _mm_crc32_u64(crc, load64(bytes));
  for (; length != 0; length--) crc = _mm_crc32_u8((uint32_t)crc, *bytes++);
  return ~(uint32_t)crc;
}

int lw_crc32c_supported(void) { return supported; }

uint32_t lw_crc32c(uint32_t initial, const uint8_t *bytes, size_t length) {
  return supported ? crc32c_hardware(initial, bytes, length)
                   : ~crc32c_bitwise(~initial, bytes, length);
}

#else

int lw_crc32c_supported(void) { return 0; }

uint32_t lw_crc32c(uint32_t initial, const uint8_t *bytes, size_t length) {
  return ~crc32c_bitwise(~initial, bytes, length);
}

#endif

/* The bitwise reference, exported so that tests can hold the fast path against it. */
uint32_t lw_crc32c_reference(uint32_t initial, const uint8_t *bytes, size_t length) {
  return ~crc32c_bitwise(~initial, bytes, length);
}
