// One koffi call where a small record would otherwise take several: AES-256-GCM seal and open,
// HMAC-SHA256, and a read from the page cache that never waits for the disk.
//
// A koffi call costs 0.2-1 us, and one with an output array or a struct argument more; sealing a
// 4 KiB chunk through OpenSSL's EVP functions bound one by one took six calls (8 us, of which
// the cipher is under 2), preadv2 with its iovec array 2.7 us, node:crypto's createHmac a
// JavaScript object and a key import per chunk. For chunks of a few KiB, the sizes of small
// objects, those calls were a tenth of a GET's and a PUT's CPU.
//
// The cipher and the MAC are the OpenSSL inside the Node binary, which exports its symbols for
// native addons: they resolve when Node loads this library. They are declared weak, so that the
// library still loads where they are missing; `lw_oneshot_crypto_supported` then answers 0 and
// src/util/libc.ts keeps the calls it makes one by one. The declarations are OpenSSL 3's public
// prototypes, so no OpenSSL headers are needed to build.
//
// Each thread has its own cipher and MAC context (a pthread key's value, freed when the thread
// ends): the gateway's thread and every pool worker call these concurrently. A context keeps the
// key it was last given and its key schedule: a call with the same key (consecutive chunks of
// one tenant, nearly always) sets only the nonce, or restarts the MAC from its saved pads, which
// saves the AES key expansion and GHASH table (about 1 us) or two SHA-256 blocks per call.

#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#ifndef RWF_NOWAIT
#define RWF_NOWAIT 0x00000008
#endif

typedef struct evp_cipher_ctx_st EVP_CIPHER_CTX;
typedef struct evp_cipher_st EVP_CIPHER;
typedef struct evp_md_st EVP_MD;
typedef struct hmac_ctx_st HMAC_CTX;
typedef struct engine_st ENGINE;

#define WEAK __attribute__((weak))
extern EVP_CIPHER_CTX *EVP_CIPHER_CTX_new(void) WEAK;
extern void EVP_CIPHER_CTX_free(EVP_CIPHER_CTX *ctx) WEAK;
extern const EVP_CIPHER *EVP_aes_256_gcm(void) WEAK;
extern int EVP_CIPHER_CTX_ctrl(EVP_CIPHER_CTX *ctx, int type, int arg, void *ptr) WEAK;
extern int EVP_EncryptInit_ex(EVP_CIPHER_CTX *ctx, const EVP_CIPHER *cipher, ENGINE *engine,
                              const unsigned char *key, const unsigned char *iv) WEAK;
extern int EVP_EncryptUpdate(EVP_CIPHER_CTX *ctx, unsigned char *out, int *outl,
                             const unsigned char *in, int inl) WEAK;
extern int EVP_EncryptFinal_ex(EVP_CIPHER_CTX *ctx, unsigned char *out, int *outl) WEAK;
extern int EVP_DecryptInit_ex(EVP_CIPHER_CTX *ctx, const EVP_CIPHER *cipher, ENGINE *engine,
                              const unsigned char *key, const unsigned char *iv) WEAK;
extern int EVP_DecryptUpdate(EVP_CIPHER_CTX *ctx, unsigned char *out, int *outl,
                             const unsigned char *in, int inl) WEAK;
extern int EVP_DecryptFinal_ex(EVP_CIPHER_CTX *ctx, unsigned char *out, int *outl) WEAK;
extern const EVP_MD *EVP_sha256(void) WEAK;
extern HMAC_CTX *HMAC_CTX_new(void) WEAK;
extern void HMAC_CTX_free(HMAC_CTX *ctx) WEAK;
extern int HMAC_Init_ex(HMAC_CTX *ctx, const void *key, int len, const EVP_MD *md,
                        ENGINE *engine) WEAK;
extern int HMAC_Update(HMAC_CTX *ctx, const unsigned char *data, size_t len) WEAK;
extern int HMAC_Final(HMAC_CTX *ctx, unsigned char *md, unsigned int *len) WEAK;

#define EVP_CTRL_GCM_GET_TAG 0x10
#define EVP_CTRL_GCM_SET_TAG 0x11
#define TAG_BYTES 16
#define SHA256_BYTES 32

int lw_oneshot_crypto_supported(void) {
  return EVP_CIPHER_CTX_new && EVP_CIPHER_CTX_free && EVP_aes_256_gcm && EVP_CIPHER_CTX_ctrl &&
         EVP_EncryptInit_ex && EVP_EncryptUpdate && EVP_EncryptFinal_ex && EVP_DecryptInit_ex &&
         EVP_DecryptUpdate && EVP_DecryptFinal_ex && EVP_sha256 && HMAC_CTX_new &&
         HMAC_CTX_free && HMAC_Init_ex && HMAC_Update && HMAC_Final;
}

#define AES_256_KEY_BYTES 32
/* HMAC-SHA256 keys up to one block are kept; a longer one is set up anew on every call. */
#define MAC_KEY_BYTES_MAX 64

enum cipher_mode { CIPHER_NONE, CIPHER_ENCRYPT, CIPHER_DECRYPT };

/* The calling thread's contexts, created on its first call and freed when it ends. */
struct contexts {
  EVP_CIPHER_CTX *cipher;
  HMAC_CTX *mac;
  /* What `cipher` was last initialised for: the direction and key (CIPHER_NONE: nothing, or a
     call failed part way and the context must be set up again). */
  enum cipher_mode cipher_mode;
  uint8_t cipher_key[AES_256_KEY_BYTES];
  /* The key `mac` holds, when mac_key_length is not SIZE_MAX. */
  size_t mac_key_length;
  uint8_t mac_key[MAC_KEY_BYTES_MAX];
};

/* Equal keys, in time that depends only on the length. */
static int same_key(const uint8_t *a, const uint8_t *b, size_t length) {
  uint8_t difference = 0;
  for (size_t i = 0; i < length; i++) difference |= a[i] ^ b[i];
  return difference == 0;
}

/* Sets `ctx` up for `mode` under `key` with `nonce`: the whole context when the mode or key
   changed, else only the nonce. Answers 1, or 0 when OpenSSL refuses. */
static int cipher_init(struct contexts *contexts, enum cipher_mode mode, const uint8_t *key,
                       const uint8_t *nonce) {
  EVP_CIPHER_CTX *ctx = contexts->cipher;
  int (*init)(EVP_CIPHER_CTX *, const EVP_CIPHER *, ENGINE *, const unsigned char *,
              const unsigned char *) =
      mode == CIPHER_ENCRYPT ? EVP_EncryptInit_ex : EVP_DecryptInit_ex;
  if (contexts->cipher_mode == mode &&
      same_key(contexts->cipher_key, key, AES_256_KEY_BYTES)) {
    if (init(ctx, NULL, NULL, NULL, nonce) == 1) return 1;
  } else if (init(ctx, EVP_aes_256_gcm(), NULL, key, nonce) == 1) {
    memcpy(contexts->cipher_key, key, AES_256_KEY_BYTES);
    contexts->cipher_mode = mode;
    return 1;
  }
  contexts->cipher_mode = CIPHER_NONE;
  return 0;
}

static pthread_key_t contexts_key;
static pthread_once_t contexts_once = PTHREAD_ONCE_INIT;
static int contexts_key_ok;

static void free_contexts(void *value) {
  struct contexts *contexts = value;
  // Freeing a context also wipes the key schedule it last held.
  if (contexts->cipher) EVP_CIPHER_CTX_free(contexts->cipher);
  if (contexts->mac) HMAC_CTX_free(contexts->mac);
  explicit_bzero(contexts, sizeof *contexts);
  free(contexts);
}

static void create_key(void) {
  contexts_key_ok = pthread_key_create(&contexts_key, free_contexts) == 0;
}

static struct contexts *contexts_of_thread(void) {
  pthread_once(&contexts_once, create_key);
  if (!contexts_key_ok) return NULL;
  struct contexts *contexts = pthread_getspecific(contexts_key);
  if (contexts) return contexts;
  contexts = calloc(1, sizeof *contexts);
  if (!contexts) return NULL;
  contexts->cipher = EVP_CIPHER_CTX_new();
  contexts->mac = HMAC_CTX_new();
  contexts->cipher_mode = CIPHER_NONE;
  contexts->mac_key_length = SIZE_MAX;
  if (!contexts->cipher || !contexts->mac || pthread_setspecific(contexts_key, contexts) != 0) {
    free_contexts(contexts);
    return NULL;
  }
  return contexts;
}

static int fits_int(size_t length) { return length <= (size_t)INT_MAX; }

/*
 * AES-256-GCM of `first` followed by `second` (second_length may be 0) into `target`, then the
 * 16-byte tag. Answers the bytes written (first_length + second_length + 16), or -1 when OpenSSL
 * refuses (which valid arguments never cause). `target` must hold that many bytes; the caller
 * checks the lengths of key (32) and nonce (12).
 */
int64_t lw_gcm_seal(const uint8_t *key, const uint8_t *nonce, const uint8_t *aad,
                    size_t aad_length, const uint8_t *first, size_t first_length,
                    const uint8_t *second, size_t second_length, uint8_t *target) {
  struct contexts *contexts = contexts_of_thread();
  if (!contexts || !fits_int(aad_length) || !fits_int(first_length) ||
      !fits_int(second_length)) {
    return -1;
  }
  EVP_CIPHER_CTX *ctx = contexts->cipher;
  int written = 0;
  unsigned char none[TAG_BYTES];
  if (!cipher_init(contexts, CIPHER_ENCRYPT, key, nonce)) return -1;
  if (aad_length && EVP_EncryptUpdate(ctx, NULL, &written, aad, (int)aad_length) != 1) return -1;
  size_t offset = 0;
  if (first_length) {
    if (EVP_EncryptUpdate(ctx, target, &written, first, (int)first_length) != 1) return -1;
    offset += (size_t)written;
  }
  if (second_length) {
    if (EVP_EncryptUpdate(ctx, target + offset, &written, second, (int)second_length) != 1) {
      return -1;
    }
    offset += (size_t)written;
  }
  if (EVP_EncryptFinal_ex(ctx, none, &written) != 1 || written != 0) return -1;
  if (offset != first_length + second_length) return -1;
  if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, TAG_BYTES, target + offset) != 1) return -1;
  return (int64_t)(offset + TAG_BYTES);
}

/*
 * Decrypts `ciphertext` into `target` (as long as it) and checks `tag`: answers 1 when the tag
 * authenticates, 0 when it does not (`target` then holds bytes that must not be used), -1 when
 * OpenSSL refuses.
 */
int lw_gcm_open(const uint8_t *key, const uint8_t *nonce, const uint8_t *aad, size_t aad_length,
                const uint8_t *ciphertext, size_t length, const uint8_t *tag, uint8_t *target) {
  struct contexts *contexts = contexts_of_thread();
  if (!contexts || !fits_int(aad_length) || !fits_int(length)) return -1;
  EVP_CIPHER_CTX *ctx = contexts->cipher;
  int written = 0;
  unsigned char none[TAG_BYTES];
  if (!cipher_init(contexts, CIPHER_DECRYPT, key, nonce)) return -1;
  if (aad_length && EVP_DecryptUpdate(ctx, NULL, &written, aad, (int)aad_length) != 1) return -1;
  if (length) {
    if (EVP_DecryptUpdate(ctx, target, &written, ciphertext, (int)length) != 1) return -1;
    if ((size_t)written != length) return -1;
  }
  // SET_TAG takes a non-const pointer but only reads it.
  if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, TAG_BYTES, (void *)tag) != 1) return -1;
  return EVP_DecryptFinal_ex(ctx, none, &written) == 1 ? 1 : 0;
}

/*
 * HMAC-SHA256 under `key` of `first` followed by `second` (second_length may be 0) into the 32
 * bytes at `target`. Answers 0, or -1 when OpenSSL refuses.
 */
int lw_hmac_sha256(const uint8_t *key, size_t key_length, const uint8_t *first,
                   size_t first_length, const uint8_t *second, size_t second_length,
                   uint8_t *target) {
  struct contexts *contexts = contexts_of_thread();
  if (!contexts || !fits_int(key_length)) return -1;
  HMAC_CTX *mac = contexts->mac;
  unsigned int written = 0;
  // A null key asks HMAC_Init_ex to restart under the key it holds; an empty key must be a real
  // pointer.
  static const uint8_t empty_key[1] = {0};
  int kept = contexts->mac_key_length == key_length &&
             same_key(contexts->mac_key, key_length ? key : empty_key, key_length);
  contexts->mac_key_length = SIZE_MAX;
  if (kept) {
    if (HMAC_Init_ex(mac, NULL, 0, NULL, NULL) != 1) return -1;
  } else if (HMAC_Init_ex(mac, key_length ? key : empty_key, (int)key_length, EVP_sha256(),
                          NULL) != 1) {
    return -1;
  }
  if (key_length <= MAC_KEY_BYTES_MAX) {
    if (key_length) memcpy(contexts->mac_key, key, key_length);
    contexts->mac_key_length = key_length;
  }
  if (first_length && HMAC_Update(mac, first, first_length) != 1) return -1;
  if (second_length && HMAC_Update(mac, second, second_length) != 1) return -1;
  if (HMAC_Final(mac, target, &written) != 1 || written != SHA256_BYTES) return -1;
  return 0;
}

/*
 * preadv2 with RWF_NOWAIT into `target`: what the page cache holds of the range, never waiting
 * for the disk. Answers the bytes read (0 at the end of the file), or minus errno (EAGAIN when
 * the range is not cached).
 */
int64_t lw_read_cached(int fd, uint8_t *target, size_t length, int64_t position) {
  struct iovec iov = {.iov_base = target, .iov_len = length};
  ssize_t read = preadv2(fd, &iov, 1, (off_t)position, RWF_NOWAIT);
  return read >= 0 ? (int64_t)read : -(int64_t)errno;
}
