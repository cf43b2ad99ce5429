// lightwell-loadgen: the benchmark's native load generator, a closed-loop HTTP/1.1 client in C.
//
// On a 2-core machine the client shares the cores with the server under test, and the Node
// client (bench/http1.ts, bench/load.ts) costs 46-113 µs of CPU per small request. This one does
// the same work in a few µs: bench/native-load.ts writes its input, starts it, turns its
// progress lines into live progress, and reads its results back into the same LoadResult.
//
// Model, as bench/load.ts: one thread and epoll (edge-triggered); N keep-alive connections, each
// with one request in flight (no pipelining), pulling request numbers from one shared counter
// until every request is done, the duration is over, or failures reach their maximum (a request
// that fails its status, length or CRC32 expectation, or the transport). Requests in flight
// then finish. A connection the server closes, or answers `Connection: close`, is opened again
// for the next request (connects are counted). A request with no progress for the idle timeout
// fails. Latency runs from the first byte written (after connecting) to the last byte read.
//
// Request bodies are written from memory that is reused: bytes of the request file, a template
// (repeated to the body's length), or, for a stamped plan, one slice buffer per connection that
// is filled exactly as `fillSlice` in bench/data.ts fills it (the template, with a 20-byte stamp
// of 12 hex digits of seed and 8 of block index at the start of every 4 KiB block). The kernel
// copies what writev accepts, so one slice buffer suffices. A body is never built whole.
//
// Responses are parsed incrementally from one shared read buffer: the status line, headers
// (Content-Length, Transfer-Encoding: chunked, Connection, case-insensitive), bodies by
// Content-Length, chunked (extensions and trailers) or the close of the connection, none for
// HEAD, 204 and 304; interim 1xx answers are skipped. Body bytes are counted and folded into a
// CRC32 (IEEE, as @node-rs/crc32's `crc32`: PCLMULQDQ folding where the CPU has it, else
// slicing-by-8), and kept only when asked (at most COLLECT_BYTES_MAX). Anything malformed fails
// that request and closes its connection; nothing the server sends can crash the client.
//
// Usage: lightwell-loadgen REQUEST_FILE RESULT_FILE
//
// REQUEST_FILE, written by bench/native-load.ts (integers little-endian):
//   8 bytes "LWLOAD1\n"; u32 connections; u32 entries; u64 requests (0: until the duration);
//   u32 duration ms (0: none); u32 idle timeout ms; u32 failures max; u32 progress interval ms;
//   u16 port; u16 host length, host; u16 templates, each: u16 path length, path (the file's
//   bytes are the template). Then the entries; request i is entry i % entries:
//     u32 head length, head (request line and headers through the empty line, as http1.ts
//     renders them); u8 flags (1 CRC32 of the body, 2 keep the body, 4 keep the head, 8 no
//     body: HEAD); u8 body kind: 0 none, 1 bytes (u32 length, bytes), 2 plan (u16 template,
//     u64 length, u64 seed, all ones for an unstamped plan); u8 accepted statuses (1 to 16),
//     u16 each; u64 expected body bytes; u64 expected CRC32 (all ones: not checked).
// RESULT_FILE: 8 bytes "LWRES01\n"; u64 results; u64 elapsed µs; u64 connects. Then per request,
//   in index order: u16 status; u8 flags (1 failed, 2 keep-alive); u8 zero; u32 CRC32; u64 body
//   bytes received; u64 body bytes sent; u64 latency µs; u32 error length; u32 head length;
//   u32 body length; then the error text, the kept head and the kept body.
// stdout: "P done sent received failures elapsed_us" lines every progress interval and once at
//   the end (body bytes, live), then "D user_us system_us", this process's CPU time, after the
//   result file is written. Exit 0 when the load ran, whatever its requests answered; 2 for
//   unusable input or a failed write of the results, with a message on stderr.

#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "lightwell-loadgen reads and writes little-endian files with memcpy"
#endif

enum {
  SLICE_BYTES = 256 * 1024,
  READ_BUFFER_BYTES = 256 * 1024,
  HEAD_BYTES_MAX = 64 * 1024,
  COLLECT_BYTES_MAX = 1024 * 1024,
  CHUNK_LINE_MAX = 4096,
  STATUSES_MAX = 16,
  STAMP_STRIDE_BYTES = 4096,
  STAMP_BYTES = 20,
  EVENTS_MAX = 256,
  IDLE_CHECK_MS = 50,
  ERROR_BYTES_MAX = 240,
};

#define NONE UINT64_MAX

enum { FLAG_CRC = 1, FLAG_COLLECT = 2, FLAG_KEEP_HEAD = 4, FLAG_NO_BODY = 8 };
enum { BODY_NONE = 0, BODY_BYTES = 1, BODY_PLAN = 2 };
enum { RESULT_FAILED = 1, RESULT_KEEP_ALIVE = 2 };
enum { HEAD, BODY_LENGTH, CHUNK_SIZE, CHUNK_DATA, CHUNK_DATA_END, TRAILER, BODY_UNTIL_CLOSE, DONE };

struct template {
  unsigned char *data;
  size_t length;
};

struct entry {
  const unsigned char *head;
  uint32_t head_length;
  uint8_t flags;
  uint8_t body_kind;
  const unsigned char *bytes;
  const struct template *template;
  uint64_t body_length;
  uint64_t seed;
  uint8_t status_count;
  uint16_t statuses[STATUSES_MAX];
  uint64_t expect_bytes;
  uint64_t expect_crc;
};

struct result {
  uint16_t status;
  uint8_t flags;
  uint32_t crc;
  uint64_t body_bytes;
  uint64_t body_sent;
  uint64_t latency_us;
  char *error;
  unsigned char *head;
  uint32_t head_length;
  unsigned char *body;
  uint32_t body_length;
};

struct conn {
  int fd;
  uint32_t number;
  uint32_t generation;
  int connecting;
  int busy;
  int peer_closed;
  uint64_t index;
  const struct entry *entry;
  uint64_t started_us;
  uint64_t activity_us;
  // Writing: head bytes sent, body bytes sent, and the stamped slice being sent.
  int writing;
  int write_failed;
  uint32_t head_sent;
  uint64_t body_sent;
  unsigned char *slice;
  size_t slice_capacity;
  size_t slice_length;
  size_t slice_sent;
  // Reading: the parser's state.
  int state;
  uint64_t remaining;
  int status;
  int keep_alive;
  uint64_t body_bytes;
  uint32_t crc;
  unsigned char *head;
  size_t head_length;
  char line[CHUNK_LINE_MAX + 1];
  size_t line_length;
  unsigned char *body;
  size_t body_length;
  size_t body_capacity;
  unsigned char *kept_head;
  uint32_t kept_head_length;
  char error[ERROR_BYTES_MAX];
};

struct loadgen {
  // Input.
  unsigned char *input;
  struct template *templates;
  uint16_t template_count;
  struct entry *entries;
  uint32_t entry_count;
  uint32_t connections;
  uint64_t requests;
  uint32_t duration_ms;
  uint32_t idle_timeout_ms;
  uint32_t failures_max;
  uint32_t progress_interval_ms;
  char host[256];
  uint16_t port;
  struct sockaddr_storage address;
  socklen_t address_length;
  // State.
  int epoll_fd;
  struct conn *conns;
  uint32_t *idle;
  uint32_t idle_count;
  uint32_t busy_count;
  uint64_t next;
  uint64_t done;
  uint64_t failures;
  uint64_t connects;
  uint64_t bytes_sent;
  uint64_t bytes_received;
  uint64_t started_us;
  uint64_t deadline_us;
  struct result *results;
  uint64_t result_capacity;
  unsigned char read_buffer[READ_BUFFER_BYTES];
};

static void die(const char *format, ...)
{
  va_list args;
  va_start(args, format);
  fputs("lightwell-loadgen: ", stderr);
  vfprintf(stderr, format, args);
  fputc('\n', stderr);
  va_end(args);
  exit(2);
}

static void *allocate(size_t bytes)
{
  void *memory = malloc(bytes == 0 ? 1 : bytes);
  if (memory == NULL) die("out of memory (%zu bytes)", bytes);
  return memory;
}

static void *reallocate(void *memory, size_t bytes)
{
  void *grown = realloc(memory, bytes == 0 ? 1 : bytes);
  if (grown == NULL) die("out of memory (%zu bytes)", bytes);
  return grown;
}

static uint64_t now_us(void)
{
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (uint64_t)now.tv_sec * 1000000u + (uint64_t)now.tv_nsec / 1000u;
}

// -------------------------------------------------------------------------------------------
// CRC32 (IEEE, reflected, as zlib and @node-rs/crc32): `crc` in and out is the finished value,
// so a body's CRC is continued piece by piece from 0.

static uint32_t crc_table[8][256];

static void crc_init(void)
{
  for (uint32_t n = 0; n < 256; n++) {
    uint32_t c = n;
    for (int k = 0; k < 8; k++) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
    crc_table[0][n] = c;
  }
  for (uint32_t n = 0; n < 256; n++) {
    for (int k = 1; k < 8; k++) {
      uint32_t c = crc_table[k - 1][n];
      crc_table[k][n] = (c >> 8) ^ crc_table[0][c & 0xff];
    }
  }
}

static uint32_t crc32_slicing(uint32_t crc, const unsigned char *p, size_t n)
{
  crc = ~crc;
  while (n >= 8) {
    uint32_t one;
    uint32_t two;
    memcpy(&one, p, 4);
    memcpy(&two, p + 4, 4);
    one ^= crc;
    crc = crc_table[7][one & 0xff] ^ crc_table[6][(one >> 8) & 0xff] ^
          crc_table[5][(one >> 16) & 0xff] ^ crc_table[4][one >> 24] ^
          crc_table[3][two & 0xff] ^ crc_table[2][(two >> 8) & 0xff] ^
          crc_table[1][(two >> 16) & 0xff] ^ crc_table[0][two >> 24];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) crc = crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return ~crc;
}

#if defined(__x86_64__)
// Folding with carry-less multiplication (Intel, "Fast CRC Computation for Generic Polynomials
// Using PCLMULQDQ", the bit-reflected variant; the constants are those of Linux's
// crc32-pclmul_asm.S): four 128-bit lanes folded 64 bytes at a time, then one lane, then a
// Barrett reduction to 32 bits. Tails under 16 bytes go through the tables.
__attribute__((target("pclmul,sse4.1"))) static __m128i fold(__m128i a, __m128i b, __m128i keys)
{
  __m128i low = _mm_clmulepi64_si128(a, keys, 0x00);
  __m128i high = _mm_clmulepi64_si128(a, keys, 0x11);
  return _mm_xor_si128(_mm_xor_si128(b, low), high);
}

__attribute__((target("pclmul,sse4.1"))) static uint32_t crc32_folded(uint32_t crc,
                                                                      const unsigned char *p,
                                                                      size_t n)
{
  __m128i x3 = _mm_loadu_si128((const __m128i *)p);
  __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 16));
  __m128i x1 = _mm_loadu_si128((const __m128i *)(p + 32));
  __m128i x0 = _mm_loadu_si128((const __m128i *)(p + 48));
  p += 64;
  n -= 64;
  x3 = _mm_xor_si128(x3, _mm_cvtsi32_si128((int)~crc));
  const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596, 0x154442bd4);
  for (; n >= 64; p += 64, n -= 64) {
    x3 = fold(x3, _mm_loadu_si128((const __m128i *)p), k1k2);
    x2 = fold(x2, _mm_loadu_si128((const __m128i *)(p + 16)), k1k2);
    x1 = fold(x1, _mm_loadu_si128((const __m128i *)(p + 32)), k1k2);
    x0 = fold(x0, _mm_loadu_si128((const __m128i *)(p + 48)), k1k2);
  }
  const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009e, 0x1751997d0);
  __m128i x = fold(x3, x2, k3k4);
  x = fold(x, x1, k3k4);
  x = fold(x, x0, k3k4);
  for (; n >= 16; p += 16, n -= 16) x = fold(x, _mm_loadu_si128((const __m128i *)p), k3k4);
  const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
  x = _mm_xor_si128(_mm_clmulepi64_si128(x, k3k4, 0x10), _mm_srli_si128(x, 8));
  x = _mm_xor_si128(
    _mm_clmulepi64_si128(_mm_and_si128(x, mask32), _mm_set_epi64x(0, 0x163cd6124), 0x00),
    _mm_srli_si128(x, 4));
  const __m128i poly_mu = _mm_set_epi64x(0x1f7011641, 0x1db710641);
  __m128i t1 = _mm_clmulepi64_si128(_mm_and_si128(x, mask32), poly_mu, 0x10);
  __m128i t2 = _mm_clmulepi64_si128(_mm_and_si128(t1, mask32), poly_mu, 0x00);
  uint32_t folded = ~(uint32_t)_mm_extract_epi32(_mm_xor_si128(x, t2), 1);
  return n > 0 ? crc32_slicing(folded, p, n) : folded;
}
#endif

static int crc_folding;

static uint32_t crc32_update(uint32_t crc, const unsigned char *p, size_t n)
{
#if defined(__x86_64__)
  if (crc_folding && n >= 128) return crc32_folded(crc, p, n);
#endif
  return crc32_slicing(crc, p, n);
}

// -------------------------------------------------------------------------------------------
// Input

struct reader {
  const unsigned char *at;
  const unsigned char *end;
};

static uint64_t take(struct reader *r, size_t bytes)
{
  if ((size_t)(r->end - r->at) < bytes) die("request file ends early");
  uint64_t value = 0;
  memcpy(&value, r->at, bytes);
  r->at += bytes;
  return value;
}

static const unsigned char *take_bytes(struct reader *r, size_t bytes)
{
  if ((size_t)(r->end - r->at) < bytes) die("request file ends early");
  const unsigned char *at = r->at;
  r->at += bytes;
  return at;
}

static unsigned char *read_file(const char *path, size_t *length)
{
  FILE *file = fopen(path, "rb");
  if (file == NULL) die("%s: %s", path, strerror(errno));
  struct stat info;
  if (fstat(fileno(file), &info) != 0) die("%s: %s", path, strerror(errno));
  unsigned char *data = allocate((size_t)info.st_size);
  if (fread(data, 1, (size_t)info.st_size, file) != (size_t)info.st_size) {
    die("%s: short read", path);
  }
  fclose(file);
  *length = (size_t)info.st_size;
  return data;
}

static void read_header(struct loadgen *g, struct reader *r)
{
  if (memcmp(take_bytes(r, 8), "LWLOAD1\n", 8) != 0) die("not a request file");
  g->connections = (uint32_t)take(r, 4);
  g->entry_count = (uint32_t)take(r, 4);
  g->requests = take(r, 8);
  g->duration_ms = (uint32_t)take(r, 4);
  g->idle_timeout_ms = (uint32_t)take(r, 4);
  g->failures_max = (uint32_t)take(r, 4);
  g->progress_interval_ms = (uint32_t)take(r, 4);
  g->port = (uint16_t)take(r, 2);
  size_t host_length = (size_t)take(r, 2);
  if (host_length >= sizeof g->host) die("host name too long");
  memcpy(g->host, take_bytes(r, host_length), host_length);
  g->host[host_length] = '\0';
  if (g->connections == 0 || g->entry_count == 0) die("no connections or no requests");
  if (g->requests == 0 && g->duration_ms == 0) die("neither a request count nor a duration");
  if (g->progress_interval_ms == 0) g->progress_interval_ms = 200;
  if (g->failures_max == 0) g->failures_max = UINT32_MAX;
  g->template_count = (uint16_t)take(r, 2);
  g->templates = allocate(sizeof *g->templates * g->template_count);
  for (uint16_t t = 0; t < g->template_count; t++) {
    size_t path_length = (size_t)take(r, 2);
    char path[4096];
    if (path_length >= sizeof path) die("template path too long");
    memcpy(path, take_bytes(r, path_length), path_length);
    path[path_length] = '\0';
    g->templates[t].data = read_file(path, &g->templates[t].length);
    if (g->templates[t].length == 0) die("%s: an empty template", path);
  }
}

static void read_entry(struct loadgen *g, struct reader *r, struct entry *e)
{
  e->head_length = (uint32_t)take(r, 4);
  e->head = take_bytes(r, e->head_length);
  e->flags = (uint8_t)take(r, 1);
  e->body_kind = (uint8_t)take(r, 1);
  e->body_length = 0;
  e->seed = NONE;
  if (e->body_kind == BODY_BYTES) {
    e->body_length = take(r, 4);
    e->bytes = take_bytes(r, (size_t)e->body_length);
  } else if (e->body_kind == BODY_PLAN) {
    uint16_t template = (uint16_t)take(r, 2);
    if (template >= g->template_count) die("no template %u", template);
    e->template = &g->templates[template];
    e->body_length = take(r, 8);
    e->seed = take(r, 8);
  } else if (e->body_kind != BODY_NONE) {
    die("unknown body kind %u", e->body_kind);
  }
  e->status_count = (uint8_t)take(r, 1);
  if (e->status_count == 0 || e->status_count > STATUSES_MAX) die("1 to 16 statuses");
  for (int s = 0; s < e->status_count; s++) e->statuses[s] = (uint16_t)take(r, 2);
  e->expect_bytes = take(r, 8);
  e->expect_crc = take(r, 8);
}

static void read_input(struct loadgen *g, const char *path)
{
  size_t length;
  g->input = read_file(path, &length);
  struct reader r = {g->input, g->input + length};
  read_header(g, &r);
  g->entries = allocate(sizeof *g->entries * g->entry_count);
  for (uint32_t i = 0; i < g->entry_count; i++) read_entry(g, &r, &g->entries[i]);
  if (r.at != r.end) die("%zu bytes after the last request", (size_t)(r.end - r.at));
}

static void resolve_target(struct loadgen *g)
{
  struct addrinfo hints = {0};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  char port[8];
  snprintf(port, sizeof port, "%u", g->port);
  struct addrinfo *found = NULL;
  int code = getaddrinfo(g->host, port, &hints, &found);
  if (code != 0 || found == NULL) die("%s: %s", g->host, gai_strerror(code));
  memcpy(&g->address, found->ai_addr, found->ai_addrlen);
  g->address_length = found->ai_addrlen;
  freeaddrinfo(found);
}

// -------------------------------------------------------------------------------------------
// Results

static void grow_results(struct loadgen *g, uint64_t index)
{
  if (index < g->result_capacity) return;
  uint64_t capacity = g->result_capacity == 0 ? 4096 : g->result_capacity * 2;
  while (capacity <= index) capacity *= 2;
  g->results = reallocate(g->results, sizeof *g->results * capacity);
  memset(g->results + g->result_capacity, 0,
         sizeof *g->results * (capacity - g->result_capacity));
  g->result_capacity = capacity;
}

/** Whether the result meets the request's own expectations (the `check` callbacks run later). */
static int result_expected(const struct entry *e, const struct result *r)
{
  if (r->flags & RESULT_FAILED) return 0;
  if (e->body_kind != BODY_NONE && r->body_sent != e->body_length) return 0;
  if (e->expect_bytes != NONE && r->body_bytes != e->expect_bytes) return 0;
  if (e->expect_crc != NONE && r->crc != (uint32_t)e->expect_crc) return 0;
  for (int s = 0; s < e->status_count; s++) {
    if (e->statuses[s] == r->status) return 1;
  }
  return 0;
}

static void put_bytes(FILE *file, const void *bytes, size_t length)
{
  if (length > 0 && fwrite(bytes, 1, length, file) != length) die("writing results failed");
}

static void put_number(FILE *file, uint64_t value, size_t bytes)
{
  put_bytes(file, &value, bytes);
}

static void write_results(struct loadgen *g, const char *path, uint64_t elapsed_us)
{
  FILE *file = fopen(path, "wb");
  if (file == NULL) die("%s: %s", path, strerror(errno));
  setvbuf(file, NULL, _IOFBF, 1 << 20);
  put_bytes(file, "LWRES01\n", 8);
  put_number(file, g->next, 8);
  put_number(file, elapsed_us, 8);
  put_number(file, g->connects, 8);
  for (uint64_t i = 0; i < g->next; i++) {
    const struct result *r = &g->results[i];
    uint32_t error_length = r->error == NULL ? 0 : (uint32_t)strlen(r->error);
    put_number(file, r->status, 2);
    put_number(file, r->flags, 1);
    put_number(file, 0, 1);
    put_number(file, r->crc, 4);
    put_number(file, r->body_bytes, 8);
    put_number(file, r->body_sent, 8);
    put_number(file, r->latency_us, 8);
    put_number(file, error_length, 4);
    put_number(file, r->head_length, 4);
    put_number(file, r->body_length, 4);
    put_bytes(file, r->error, error_length);
    put_bytes(file, r->head, r->head_length);
    put_bytes(file, r->body, r->body_length);
  }
  if (fclose(file) != 0) die("%s: %s", path, strerror(errno));
}

// -------------------------------------------------------------------------------------------
// Connections

static void conn_close(struct conn *c)
{
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  c->connecting = 0;
  c->peer_closed = 0;
  c->generation += 1;
}

/** Settles the request in flight: records its result, frees the connection for the next. */
static void finish(struct loadgen *g, struct conn *c, const char *error)
{
  struct result *r = &g->results[c->index];
  r->latency_us = now_us() - c->started_us;
  r->body_sent = c->body_sent;
  if (error != NULL) {
    r->flags = RESULT_FAILED;
    r->error = strdup(error);
    free(c->body);
    free(c->kept_head);
  } else {
    r->status = (uint16_t)c->status;
    r->flags = c->keep_alive ? RESULT_KEEP_ALIVE : 0;
    r->crc = c->crc;
    r->body_bytes = c->body_bytes;
    r->body = c->body;
    r->body_length = (uint32_t)c->body_length;
    r->head = c->kept_head;
    r->head_length = c->kept_head_length;
  }
  c->body = NULL;
  c->kept_head = NULL;
  if (!result_expected(c->entry, r)) g->failures += 1;
  int reuse = error == NULL && c->keep_alive && !c->write_failed &&
              c->head_sent == c->entry->head_length && c->body_sent == c->entry->body_length;
  if (!reuse) conn_close(c);
  c->busy = 0;
  c->writing = 0;
  g->busy_count -= 1;
  g->done += 1;
  g->idle[g->idle_count++] = c->number;
}

static void fail(struct loadgen *g, struct conn *c, const char *format, ...)
{
  va_list args;
  va_start(args, format);
  vsnprintf(c->error, sizeof c->error, format, args);
  va_end(args);
  finish(g, c, c->error);
}

static const char *error_name(int error)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
  const char *name = strerrorname_np(error);
  if (name != NULL) return name;
#endif
  return strerror(error);
}

/** Fills [offset, offset + count) of a plan's body into `target`, as bench/data.ts fillSlice. */
static void fill_slice(const struct entry *e, uint64_t offset, unsigned char *target,
                       size_t count)
{
  static const char hex[] = "0123456789abcdef";
  const struct template *t = e->template;
  for (size_t done = 0; done < count;) {
    size_t from = (size_t)((offset + done) % t->length);
    size_t n = count - done < t->length - from ? count - done : t->length - from;
    memcpy(target + done, t->data + from, n);
    done += n;
  }
  if (e->seed == NONE) return;
  unsigned char stamp[STAMP_BYTES];
  for (int k = 0; k < 12; k++) stamp[k] = (unsigned char)hex[(e->seed >> (4 * (11 - k))) & 15];
  uint64_t end = offset + count;
  for (uint64_t block = offset / STAMP_STRIDE_BYTES; block * STAMP_STRIDE_BYTES < end; block++) {
    uint32_t index = (uint32_t)block;
    for (int k = 12; k < STAMP_BYTES; k++) {
      stamp[k] = (unsigned char)hex[(index >> (4 * (19 - k))) & 15];
    }
    int64_t at = (int64_t)(block * STAMP_STRIDE_BYTES) - (int64_t)offset;
    int64_t from = at < 0 ? -at : 0;
    int64_t to = (int64_t)count - at < STAMP_BYTES ? (int64_t)count - at : STAMP_BYTES;
    if (from < to) memcpy(target + at + from, stamp + from, (size_t)(to - from));
  }
}

/** The next piece of the body to write, from the request file, a template or the slice. */
static struct iovec body_piece(struct conn *c)
{
  const struct entry *e = c->entry;
  uint64_t left = e->body_length - c->body_sent;
  struct iovec piece;
  if (e->body_kind == BODY_BYTES) {
    piece.iov_base = (void *)(e->bytes + c->body_sent);
    piece.iov_len = (size_t)left;
  } else if (e->seed == NONE) {
    size_t from = (size_t)(c->body_sent % e->template->length);
    size_t n = e->template->length - from;
    piece.iov_base = e->template->data + from;
    piece.iov_len = left < n ? (size_t)left : n;
  } else {
    if (c->slice_sent == c->slice_length) {
      size_t n = left < SLICE_BYTES ? (size_t)left : SLICE_BYTES;
      if (c->slice_capacity < n) {
        c->slice = reallocate(c->slice, n);
        c->slice_capacity = n;
      }
      fill_slice(e, c->body_sent, c->slice, n);
      c->slice_length = n;
      c->slice_sent = 0;
    }
    piece.iov_base = c->slice + c->slice_sent;
    piece.iov_len = c->slice_length - c->slice_sent;
  }
  return piece;
}

/** Writes until the request is out or the socket is full (EPOLLOUT resumes it). */
static void conn_write(struct loadgen *g, struct conn *c)
{
  const struct entry *e = c->entry;
  while (c->writing) {
    struct iovec pieces[2];
    int count = 0;
    size_t head_left = e->head_length - c->head_sent;
    if (head_left > 0) {
      pieces[count++] = (struct iovec){(void *)(e->head + c->head_sent), head_left};
    }
    if (c->body_sent < e->body_length) pieces[count++] = body_piece(c);
    if (count == 0) {
      c->writing = 0;
      return;
    }
    size_t offered = pieces[0].iov_len + (count > 1 ? pieces[1].iov_len : 0);
    ssize_t written = writev(c->fd, pieces, count);
    if (written < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      // The server closed or reset: stop writing; the read side tells whether it answered.
      c->writing = 0;
      c->write_failed = 1;
      return;
    }
    c->activity_us = now_us();
    size_t head_part = (size_t)written < head_left ? (size_t)written : head_left;
    size_t body_part = (size_t)written - head_part;
    c->head_sent += (uint32_t)head_part;
    c->body_sent += body_part;
    if (e->body_kind == BODY_PLAN && e->seed != NONE) c->slice_sent += body_part;
    g->bytes_sent += body_part;
    if ((size_t)written < offered) return;
  }
}

// -------------------------------------------------------------------------------------------
// Response parsing

static int is_space(unsigned char ch)
{
  return ch == ' ' || ch == '\t' || ch == '\v' || ch == '\f' || ch == '\r' || ch == '\n';
}

static void trim(const unsigned char **start, const unsigned char **end)
{
  while (*start < *end && is_space(**start)) *start += 1;
  while (*end > *start && is_space((*end)[-1])) *end -= 1;
}

static int equals_lower(const unsigned char *p, size_t n, const char *word)
{
  size_t length = strlen(word);
  if (n != length) return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = p[i];
    if (ch >= 'A' && ch <= 'Z') ch = (unsigned char)(ch + 32);
    if (ch != (unsigned char)word[i]) return 0;
  }
  return 1;
}

static int contains_lower(const unsigned char *p, size_t n, const char *word)
{
  size_t length = strlen(word);
  for (size_t i = 0; i + length <= n; i++) {
    if (equals_lower(p + i, length, word)) return 1;
  }
  return 0;
}

/** What the header lines say about framing and the connection. */
struct framing {
  int chunked;
  int connection_close;
  int connection_keep_alive;
  int length_count;
  const unsigned char *length;
  size_t length_bytes;
};

static int read_header_line(struct loadgen *g, struct conn *c, const unsigned char *line,
                            size_t n, struct framing *f)
{
  const unsigned char *colon = memchr(line, ':', n);
  if (colon == NULL || colon == line) {
    fail(g, c, "bad header line \"%.*s\"", (int)(n < 80 ? n : 80), (const char *)line);
    return -1;
  }
  const unsigned char *name = line;
  const unsigned char *name_end = colon;
  const unsigned char *value = colon + 1;
  const unsigned char *value_end = line + n;
  trim(&name, &name_end);
  trim(&value, &value_end);
  size_t name_bytes = (size_t)(name_end - name);
  size_t value_bytes = (size_t)(value_end - value);
  if (equals_lower(name, name_bytes, "content-length")) {
    f->length_count += 1;
    f->length = value;
    f->length_bytes = value_bytes;
  } else if (equals_lower(name, name_bytes, "transfer-encoding")) {
    f->chunked |= contains_lower(value, value_bytes, "chunked");
  } else if (equals_lower(name, name_bytes, "connection")) {
    f->connection_close |= contains_lower(value, value_bytes, "close");
    f->connection_keep_alive |= contains_lower(value, value_bytes, "keep-alive");
  }
  return 0;
}

static int choose_framing(struct loadgen *g, struct conn *c, const struct framing *f)
{
  if ((c->entry->flags & FLAG_NO_BODY) || c->status == 204 || c->status == 304) {
    c->state = DONE;
  } else if (f->chunked) {
    c->state = CHUNK_SIZE;
  } else if (f->length_count > 0) {
    uint64_t length = 0;
    int valid = f->length_count == 1 && f->length_bytes > 0 && f->length_bytes <= 18;
    for (size_t i = 0; valid && i < f->length_bytes; i++) {
      valid = f->length[i] >= '0' && f->length[i] <= '9';
      length = length * 10 + (uint64_t)(f->length[i] - '0');
    }
    if (!valid) {
      int shown = (int)(f->length_bytes < 40 ? f->length_bytes : 40);
      fail(g, c, "bad Content-Length \"%.*s\"", shown, (const char *)f->length);
      return -1;
    }
    c->remaining = length;
    c->state = length == 0 ? DONE : BODY_LENGTH;
  } else {
    c->keep_alive = 0;
    c->state = BODY_UNTIL_CLOSE;
  }
  return 0;
}

/** Parses a complete head (without its final CRLF CRLF) and chooses how the body is framed. */
static int parse_head(struct loadgen *g, struct conn *c, const unsigned char *text, size_t n)
{
  const unsigned char *end = text + n;
  const unsigned char *line_end = memmem(text, n, "\r\n", 2);
  if (line_end == NULL) line_end = end;
  size_t first = (size_t)(line_end - text);
  const unsigned char *s = text;
  int valid = first >= 12 && memcmp(s, "HTTP/1.", 7) == 0 && (s[7] == '0' || s[7] == '1') &&
              s[8] == ' ';
  for (int i = 9; valid && i < 12; i++) valid = s[i] >= '0' && s[i] <= '9';
  if (!valid) {
    fail(g, c, "bad status line \"%.*s\"", (int)(first < 80 ? first : 80), (const char *)text);
    return -1;
  }
  c->status = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
  struct framing f = {0};
  for (const unsigned char *line = line_end; line < end;) {
    line += 2;
    const unsigned char *next = memmem(line, (size_t)(end - line), "\r\n", 2);
    if (next == NULL) next = end;
    if (read_header_line(g, c, line, (size_t)(next - line), &f) < 0) return -1;
    line = next;
  }
  c->keep_alive = s[7] == '1' ? !f.connection_close : f.connection_keep_alive;
  if (c->status >= 100 && c->status < 200 && c->status != 101) {
    c->state = HEAD;
    return 0;
  }
  if (c->entry->flags & FLAG_KEEP_HEAD) {
    free(c->kept_head);
    c->kept_head = allocate(n);
    memcpy(c->kept_head, text, n);
    c->kept_head_length = (uint32_t)n;
  }
  return choose_framing(g, c, &f);
}

static long feed_head(struct loadgen *g, struct conn *c, const unsigned char *p, size_t n)
{
  if (c->head_length == 0) {
    const unsigned char *end = memmem(p, n, "\r\n\r\n", 4);
    if (end != NULL) {
      if (parse_head(g, c, p, (size_t)(end - p)) < 0) return -1;
      return end - p + 4;
    }
  }
  if (c->head == NULL) c->head = allocate(HEAD_BYTES_MAX);
  size_t count = n < HEAD_BYTES_MAX - c->head_length ? n : HEAD_BYTES_MAX - c->head_length;
  memcpy(c->head + c->head_length, p, count);
  size_t before = c->head_length;
  size_t from = before >= 3 ? before - 3 : 0;
  c->head_length += count;
  const unsigned char *end = memmem(c->head + from, c->head_length - from, "\r\n\r\n", 4);
  if (end != NULL) {
    size_t index = (size_t)(end - c->head);
    c->head_length = 0;
    if (parse_head(g, c, c->head, index) < 0) return -1;
    return (long)(index + 4 - before);
  }
  if (c->head_length >= HEAD_BYTES_MAX) {
    fail(g, c, "response head over 64 KiB");
    return -1;
  }
  return (long)count;
}

static int on_body(struct loadgen *g, struct conn *c, const unsigned char *p, size_t n)
{
  c->body_bytes += n;
  g->bytes_received += n;
  if (c->entry->flags & FLAG_CRC) c->crc = crc32_update(c->crc, p, n);
  if (!(c->entry->flags & FLAG_COLLECT)) return 0;
  if (c->body_length + n > COLLECT_BYTES_MAX) {
    fail(g, c, "collected body over %d bytes", COLLECT_BYTES_MAX);
    return -1;
  }
  if (c->body_length + n > c->body_capacity) {
    size_t capacity = c->body_capacity == 0 ? 1024 : c->body_capacity;
    while (capacity < c->body_length + n) capacity *= 2;
    c->body = reallocate(c->body, capacity);
    c->body_capacity = capacity;
  }
  memcpy(c->body + c->body_length, p, n);
  c->body_length += n;
  return 0;
}

static long feed_counted(struct loadgen *g, struct conn *c, const unsigned char *p, size_t n)
{
  size_t count = n < c->remaining ? n : (size_t)c->remaining;
  if (on_body(g, c, p, count) < 0) return -1;
  c->remaining -= count;
  if (c->remaining == 0) c->state = c->state == BODY_LENGTH ? DONE : CHUNK_DATA_END;
  return (long)count;
}

static int chunk_size(struct loadgen *g, struct conn *c, const unsigned char *line, size_t n)
{
  const unsigned char *end = memchr(line, ';', n);
  if (end == NULL) end = line + n;
  trim(&line, &end);
  size_t digits = (size_t)(end - line);
  uint64_t size = 0;
  int valid = digits > 0 && digits <= 15;
  for (size_t i = 0; valid && i < digits; i++) {
    unsigned char ch = line[i];
    int value = ch >= '0' && ch <= '9'   ? ch - '0'
                : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                         : -1;
    valid = value >= 0;
    size = size * 16 + (uint64_t)value;
  }
  if (!valid) {
    fail(g, c, "bad chunk size \"%.*s\"", (int)(digits < 40 ? digits : 40), (const char *)line);
    return -1;
  }
  c->remaining = size;
  c->state = size == 0 ? TRAILER : CHUNK_DATA;
  return 0;
}

/** Chunk size lines, the CRLF after chunk data, and trailer lines (an empty one ends them). */
static long feed_line(struct loadgen *g, struct conn *c, const unsigned char *p, size_t n)
{
  const unsigned char *lf = memchr(p, '\n', n);
  size_t stop = lf == NULL ? n : (size_t)(lf - p);
  if (c->line_length + stop > CHUNK_LINE_MAX) {
    fail(g, c, "chunk line too long");
    return -1;
  }
  memcpy(c->line + c->line_length, p, stop);
  c->line_length += stop;
  if (lf == NULL) return (long)n;
  size_t length = c->line_length;
  if (length > 0 && c->line[length - 1] == '\r') length -= 1;
  c->line_length = 0;
  const unsigned char *line = (const unsigned char *)c->line;
  if (c->state == CHUNK_SIZE) {
    if (chunk_size(g, c, line, length) < 0) return -1;
  } else if (c->state == CHUNK_DATA_END) {
    if (length != 0) {
      fail(g, c, "missing CRLF after chunk data");
      return -1;
    }
    c->state = CHUNK_SIZE;
  } else if (length == 0) {
    c->state = DONE;
  }
  return (long)stop + 1;
}

/** Feeds response bytes; returns how many were used, or -1 when the request failed. */
static long feed(struct loadgen *g, struct conn *c, const unsigned char *p, size_t n)
{
  size_t position = 0;
  while (position < n && c->state != DONE) {
    long used = 0;
    switch (c->state) {
    case HEAD:
      used = feed_head(g, c, p + position, n - position);
      break;
    case BODY_LENGTH:
    case CHUNK_DATA:
      used = feed_counted(g, c, p + position, n - position);
      break;
    case CHUNK_SIZE:
    case CHUNK_DATA_END:
    case TRAILER:
      used = feed_line(g, c, p + position, n - position);
      break;
    case BODY_UNTIL_CLOSE:
      used = on_body(g, c, p + position, n - position) < 0 ? -1 : (long)(n - position);
      break;
    }
    if (used < 0) return -1;
    position += (size_t)used;
  }
  return (long)position;
}

/** The server closed (or reset) the connection with a request in flight. */
static void end_of_stream(struct loadgen *g, struct conn *c, int error)
{
  if (c->state == BODY_UNTIL_CLOSE) {
    c->state = DONE;
    finish(g, c, NULL);
  } else if (error != 0) {
    fail(g, c, "connection closed before the response ended: read %s", error_name(error));
  } else {
    fail(g, c, "connection closed before the response ended");
  }
}

static void conn_read(struct loadgen *g, struct conn *c)
{
  while (c->busy) {
    ssize_t n = read(c->fd, g->read_buffer, READ_BUFFER_BYTES);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      end_of_stream(g, c, n < 0 ? errno : 0);
      return;
    }
    c->activity_us = now_us();
    long used = feed(g, c, g->read_buffer, (size_t)n);
    if (used < 0) return;
    if (c->state == DONE) {
      if (used < n) fail(g, c, "%ld bytes after the end of a response", (long)n - used);
      else finish(g, c, NULL);
      return;
    }
    // A short read emptied the socket, and edge-triggered epoll reports the next bytes; but not
    // a close that came with these bytes, in the same event: then read on, to the end.
    if (n < READ_BUFFER_BYTES && !c->peer_closed) return;
  }
}

// -------------------------------------------------------------------------------------------
// The loop

static void begin_request(struct loadgen *g, struct conn *c)
{
  c->started_us = now_us();
  c->activity_us = c->started_us;
  c->writing = 1;
  conn_write(g, c);
  // A failed write: whatever the server answered before closing is still to be read.
  if (c->write_failed) conn_read(g, c);
}

static int conn_open(struct loadgen *g, struct conn *c)
{
  g->connects += 1;
  c->generation += 1;
  c->fd = socket(g->address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c->fd < 0) {
    fail(g, c, "socket %s", error_name(errno));
    return -1;
  }
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct epoll_event event = {0};
  event.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  event.data.u64 = ((uint64_t)c->generation << 32) | c->number;
  if (epoll_ctl(g->epoll_fd, EPOLL_CTL_ADD, c->fd, &event) != 0) die("epoll_ctl failed");
  if (connect(c->fd, (struct sockaddr *)&g->address, g->address_length) == 0) return 0;
  if (errno == EINPROGRESS) {
    c->connecting = 1;
    return 0;
  }
  int error = errno;
  fail(g, c, "connect %s %s:%u", error_name(error), g->host, g->port);
  return -1;
}

static int should_stop(const struct loadgen *g)
{
  if (g->failures >= g->failures_max) return 1;
  if (g->requests != 0 && g->next >= g->requests) return 1;
  return g->deadline_us != 0 && now_us() >= g->deadline_us;
}

/** Starts the next request on an idle connection, or closes it when the load is over. */
static void conn_next(struct loadgen *g, struct conn *c)
{
  if (should_stop(g)) {
    conn_close(c);
    return;
  }
  uint64_t index = g->next++;
  grow_results(g, index);
  const struct entry *e = &g->entries[index % g->entry_count];
  c->index = index;
  c->entry = e;
  c->busy = 1;
  g->busy_count += 1;
  c->write_failed = 0;
  c->head_sent = 0;
  c->body_sent = 0;
  c->slice_length = 0;
  c->slice_sent = 0;
  c->state = HEAD;
  c->head_length = 0;
  c->line_length = 0;
  c->status = 0;
  c->keep_alive = 1;
  c->body_bytes = 0;
  c->crc = 0;
  c->body_length = 0;
  c->body_capacity = 0;
  c->kept_head_length = 0;
  c->started_us = now_us();
  if (c->fd >= 0 && c->peer_closed) conn_close(c);
  if (c->fd < 0 && conn_open(g, c) < 0) return;
  if (!c->connecting) begin_request(g, c);
}

static void on_event(struct loadgen *g, const struct epoll_event *event)
{
  struct conn *c = &g->conns[(uint32_t)event->data.u64];
  if ((uint32_t)(event->data.u64 >> 32) != c->generation || c->fd < 0 || !c->busy) return;
  if (event->events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) c->peer_closed = 1;
  if (c->connecting) {
    int error = 0;
    socklen_t length = sizeof error;
    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &error, &length);
    if (error != 0) {
      fail(g, c, "connect %s %s:%u", error_name(error), g->host, g->port);
      return;
    }
    if (!(event->events & EPOLLOUT)) return;
    c->connecting = 0;
    begin_request(g, c);
    return;
  }
  if ((event->events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) && c->writing) {
    conn_write(g, c);
    if (c->write_failed) conn_read(g, c);
  }
  if (c->busy && (event->events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) conn_read(g, c);
}

static void check_idle(struct loadgen *g, uint64_t now)
{
  uint64_t idle_us = (uint64_t)g->idle_timeout_ms * 1000;
  for (uint32_t i = 0; i < g->connections; i++) {
    struct conn *c = &g->conns[i];
    if (c->busy && now - c->activity_us >= idle_us) {
      fail(g, c, "no progress for %u ms", g->idle_timeout_ms);
    }
  }
}

static void report_progress(struct loadgen *g, uint64_t now)
{
  printf("P %llu %llu %llu %llu %llu\n", (unsigned long long)g->done,
         (unsigned long long)g->bytes_sent, (unsigned long long)g->bytes_received,
         (unsigned long long)g->failures, (unsigned long long)(now - g->started_us));
  fflush(stdout);
}

static int wait_ms(const struct loadgen *g, uint64_t now, uint64_t next_progress,
                   uint64_t next_idle_check)
{
  uint64_t until = next_progress < next_idle_check ? next_progress : next_idle_check;
  if (g->deadline_us != 0 && now < g->deadline_us && g->deadline_us < until) {
    until = g->deadline_us;
  }
  return until <= now ? 0 : (int)((until - now + 999) / 1000);
}

static void run(struct loadgen *g)
{
  struct epoll_event events[EVENTS_MAX];
  g->started_us = now_us();
  g->deadline_us = g->duration_ms == 0 ? 0 : g->started_us + (uint64_t)g->duration_ms * 1000;
  uint64_t next_progress = g->started_us + (uint64_t)g->progress_interval_ms * 1000;
  uint64_t next_idle_check = g->started_us + IDLE_CHECK_MS * 1000;
  for (;;) {
    while (g->idle_count > 0) conn_next(g, &g->conns[g->idle[--g->idle_count]]);
    if (g->busy_count == 0) break;
    uint64_t now = now_us();
    int count = epoll_wait(g->epoll_fd, events, EVENTS_MAX,
                           wait_ms(g, now, next_progress, next_idle_check));
    if (count < 0 && errno != EINTR) die("epoll_wait: %s", strerror(errno));
    for (int i = 0; i < count; i++) on_event(g, &events[i]);
    now = now_us();
    if (now >= next_idle_check) {
      check_idle(g, now);
      next_idle_check = now + IDLE_CHECK_MS * 1000;
    }
    if (now >= next_progress) {
      report_progress(g, now);
      next_progress = now + (uint64_t)g->progress_interval_ms * 1000;
    }
  }
}

int main(int argc, char **argv)
{
  if (argc != 3) die("usage: lightwell-loadgen REQUEST_FILE RESULT_FILE");
  // End with the parent (the benchmark) rather than load a server nobody measures.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  signal(SIGPIPE, SIG_IGN);
  crc_init();
#if defined(__x86_64__)
  __builtin_cpu_init();
  crc_folding = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
#endif
  static struct loadgen g;
  read_input(&g, argv[1]);
  resolve_target(&g);
  g.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (g.epoll_fd < 0) die("epoll_create1: %s", strerror(errno));
  g.conns = allocate(sizeof *g.conns * g.connections);
  g.idle = allocate(sizeof *g.idle * g.connections);
  memset(g.conns, 0, sizeof *g.conns * g.connections);
  for (uint32_t i = 0; i < g.connections; i++) {
    g.conns[i].fd = -1;
    g.conns[i].number = i;
    g.idle[g.connections - 1 - i] = i;
  }
  g.idle_count = g.connections;
  if (g.requests != 0) grow_results(&g, g.requests - 1);
  run(&g);
  uint64_t elapsed_us = now_us() - g.started_us;
  report_progress(&g, now_us());
  write_results(&g, argv[2], elapsed_us);
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  printf("D %lld %lld\n",
         (long long)usage.ru_utime.tv_sec * 1000000 + (long long)usage.ru_utime.tv_usec,
         (long long)usage.ru_stime.tv_sec * 1000000 + (long long)usage.ru_stime.tv_usec);
  fflush(stdout);
  return 0;
}
