// LZ4 block compression that gives up early, and decompression: the form of a chunk's payload
// with `compression` 1 (docs/on-disk-format.md) is the uncompressed length as a u32 LE, then one
// LZ4 block, exactly what lz4-napi's `compressSync` writes and its `uncompressSync` reads.
//
// lz4-napi compresses incompressible bytes at about 105 MB/s (620 us for a 64 KiB sample, 29 us
// for a 4 KiB object), and Lightwell tries every chunk: a sample of each large chunk, the whole
// of each small one. This is LZ4's own greedy parse with its acceleration (after 64 probes
// without a match the step between probes grows by one byte, and by one more every 64 probes),
// so bytes that do not compress are crossed at several GB/s; and it stops as soon as the output
// would be longer than the caller's limit, which is where compression would not pay anyway.
//
// Block rules kept (the LZ4 block format): a match is at least 4 bytes, 1 to 65,535 bytes back;
// the last match starts at least 12 bytes before the end of the block and the last 5 bytes are
// literals; a block under 13 bytes is all literals. Room is checked before every write, so a
// target exactly as long as the result is enough.
//
// lz4-napi decompresses at about 0.5 GB/s (it allocates and fills its output itself); the decoder
// below writes into the caller's buffer, checking every length against both buffers.

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MIN_MATCH 4
#define LAST_LITERALS 5
#define MATCH_START_LIMIT 12
#define HASH_BITS 12
#define SKIP_TRIGGER 6
#define DISTANCE_MAX 65535
#define PREFIX_BYTES 4
#define LENGTH_MAX 0x7E000000u /* LZ4_MAX_INPUT_SIZE */
/* The decoder copies short runs as one move of this many bytes where both buffers have room. */
#define WILD 16

static inline uint32_t read32(const uint8_t *p) {
  uint32_t value;
  memcpy(&value, p, sizeof value);
  return value;
}

static inline uint32_t hash4(uint32_t sequence) {
  return (sequence * 2654435761u) >> (32 - HASH_BITS);
}

/* Bytes from `ip` and `match` that are equal, up to `limit` (exclusive) for `ip`. */
static inline size_t common_length(const uint8_t *ip, const uint8_t *match, const uint8_t *limit) {
  const uint8_t *start = ip;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  while (ip + 8 <= limit) {
    uint64_t a, b;
    memcpy(&a, ip, 8);
    memcpy(&b, match, 8);
    if (a != b) return (size_t)(ip - start) + (size_t)(__builtin_ctzll(a ^ b) >> 3);
    ip += 8;
    match += 8;
  }
#endif
  while (ip < limit && *ip == *match) {
    ip++;
    match++;
  }
  return (size_t)(ip - start);
}

/* Writes the 255-runs of a length past its token's 15; answers where writing ends. */
static inline uint8_t *write_length(uint8_t *op, size_t length) {
  while (length >= 255) {
    *op++ = 255;
    length -= 255;
  }
  *op++ = (uint8_t)length;
  return op;
}

/* A sequence's token (its match length still 0), literal length and literals, at `op`. */
static inline uint8_t *write_literals(uint8_t *op, const uint8_t *literals, size_t count) {
  uint8_t *token = op++;
  if (count >= 15) {
    *token = 15 << 4;
    op = write_length(op, count - 15);
  } else {
    *token = (uint8_t)(count << 4);
  }
  memcpy(op, literals, count);
  return op + count;
}

/* Bytes that a length takes after its token's 4 bits. */
static inline size_t length_bytes(size_t length) {
  return length < 15 ? 0 : (length - 15) / 255 + 1;
}

/*
 * Compresses `length` bytes at `source` into `target`: the u32 LE length, then the LZ4 block.
 * Answers the bytes written, or 0 when they would be more than `limit` (the caller's target
 * holds `limit` bytes) or the input is longer than LZ4 allows.
 */
size_t lw_lz4_compress(const uint8_t *source, size_t length, uint8_t *target, size_t limit) {
  if (length > LENGTH_MAX || limit < PREFIX_BYTES + 1) return 0;
  uint32_t table[1 << HASH_BITS];
  memset(table, 0, sizeof table);
  const uint8_t *ip = source;
  const uint8_t *anchor = source;
  const uint8_t *const end = source + length;
  const uint8_t *const match_start_limit = end - MATCH_START_LIMIT; /* only read when longer */
  const uint8_t *const match_end_limit = end - LAST_LITERALS;
  uint8_t *op = target + PREFIX_BYTES;
  uint8_t *const op_end = target + limit;
  target[0] = (uint8_t)length;
  target[1] = (uint8_t)(length >> 8);
  target[2] = (uint8_t)(length >> 16);
  target[3] = (uint8_t)(length >> 24);

  if (length <= MATCH_START_LIMIT) goto last_literals;
  table[hash4(read32(ip))] = 0;
  ip++;
  for (;;) {
    const uint8_t *match;
    const uint8_t *forward = ip;
    uint32_t probes = 1u << SKIP_TRIGGER;
    do {
      ip = forward;
      if (ip > match_start_limit) goto last_literals;
      forward = ip + (probes++ >> SKIP_TRIGGER);
      uint32_t h = hash4(read32(ip));
      match = source + table[h];
      table[h] = (uint32_t)(ip - source);
    } while ((size_t)(ip - match) > DISTANCE_MAX || read32(match) != read32(ip));

    while (ip > anchor && match > source && ip[-1] == match[-1]) {
      ip--;
      match--;
    }
    size_t literals = (size_t)(ip - anchor);
    /* the token, the literal length, the literals, the offset */
    if ((size_t)(op_end - op) < 1 + length_bytes(literals) + literals + 2) return 0;
    uint8_t *token = op;
    op = write_literals(op, anchor, literals);

    for (;;) {
      /* The match at `ip`, `match` behind it; `token` is its sequence's. */
      size_t distance = (size_t)(ip - match);
      *op++ = (uint8_t)distance;
      *op++ = (uint8_t)(distance >> 8);
      size_t extra = common_length(ip + MIN_MATCH, match + MIN_MATCH, match_end_limit);
      ip += MIN_MATCH + extra;
      if (extra >= 15) {
        if ((size_t)(op_end - op) < length_bytes(extra)) return 0;
        *token |= 15;
        op = write_length(op, extra - 15);
      } else {
        *token |= (uint8_t)extra;
      }
      anchor = ip;
      if (ip > match_start_limit) goto last_literals;
      table[hash4(read32(ip - 2))] = (uint32_t)(ip - 2 - source);
      /* A match right here continues with no literals. */
      uint32_t h = hash4(read32(ip));
      match = source + table[h];
      table[h] = (uint32_t)(ip - source);
      if ((size_t)(ip - match) > DISTANCE_MAX || read32(match) != read32(ip)) break;
      if ((size_t)(op_end - op) < 1 + 2) return 0;
      token = op++;
      *token = 0;
    }
    ip++;
  }

last_literals: {
  size_t literals = (size_t)(end - anchor);
  if ((size_t)(op_end - op) < 1 + length_bytes(literals) + literals) return 0;
  op = write_literals(op, anchor, literals);
}
  return (size_t)(op - target);
}

/* Reads a length's 255-runs after its token's 15 into `*length`; answers 0 past the input. */
static inline int read_length(const uint8_t **ip, const uint8_t *end, size_t *length) {
  uint8_t byte;
  do {
    if (*ip >= end) return 0;
    byte = *(*ip)++;
    *length += byte;
  } while (byte == 255);
  return 1;
}

/*
 * Decompresses the LZ4 block at `source` (without the u32 length) into `target`: answers the
 * bytes written, or -1 when the block is malformed or would write past `capacity` bytes. Every
 * read and write is checked, so no input can reach outside the two buffers.
 */
int64_t lw_lz4_decompress(const uint8_t *source, size_t length, uint8_t *target,
                          size_t capacity) {
  const uint8_t *ip = source;
  const uint8_t *const end = source + length;
  uint8_t *op = target;
  uint8_t *const op_end = target + capacity;
  for (;;) {
    if (ip >= end) return -1;
    const uint8_t token = *ip++;
    size_t literals = token >> 4;
    if (literals == 15 && !read_length(&ip, end, &literals)) return -1;
    if (literals <= WILD && (size_t)(end - ip) >= WILD && (size_t)(op_end - op) >= WILD) {
      memcpy(op, ip, WILD); /* one fixed-size move; the bytes past `literals` are rewritten */
    } else {
      if ((size_t)(end - ip) < literals || (size_t)(op_end - op) < literals) return -1;
      memcpy(op, ip, literals);
    }
    op += literals;
    ip += literals;
    if (ip == end) break; /* the last sequence has literals only */
    if (end - ip < 2) return -1;
    const size_t distance = (size_t)ip[0] | ((size_t)ip[1] << 8);
    ip += 2;
    if (distance == 0 || distance > (size_t)(op - target)) return -1;
    size_t match_length = token & 15;
    if (match_length == 15 && !read_length(&ip, end, &match_length)) return -1;
    match_length += MIN_MATCH;
    if ((size_t)(op_end - op) < match_length) return -1;
    const uint8_t *match = op - distance;
    if (distance >= WILD && (size_t)(op_end - op) >= match_length + WILD) {
      /* Fixed-size moves, each reading only bytes already written (distance >= WILD). */
      for (size_t copied = 0; copied < match_length; copied += WILD) {
        memcpy(op + copied, match + copied, WILD);
      }
      op += match_length;
    } else if (distance >= match_length) {
      memcpy(op, match, match_length);
      op += match_length;
    } else {
      /* An overlapping match repeats the last `distance` bytes. */
      for (size_t i = 0; i < match_length; i++) *op++ = *match++;
    }
  }
  return (int64_t)(op - target);
}
