// The few native calls Node does not offer, through koffi (a foreign-function interface with
// prebuilt binaries): from libc, socket options on descriptors that uWebSockets.js owns,
// positional reads that never wait for the disk, and a plain memory copy; from the OpenSSL that
// Node itself links and exports (for native addons), AES-256-GCM into buffers the caller owns;
// and from Lightwell's own native library (native/, built with the machine's C compiler by
// scripts/build-native.mjs), CRC-32C, buffer alignment, LZ4 compression that gives up early,
// one-call forms of the cached read, AES-256-GCM and HMAC-SHA256 for small records, and
// sd_notify's datagram to the service manager. The only module of src/ that touches koffi.
//
// Every function here is optional: where libc cannot be reached (not Linux, koffi has no binary
// for the platform, or a symbol is missing) `libc()` answers undefined, where Lightwell's library
// was not built `native()` does, and callers keep their portable path. koffi is therefore loaded
// on first use, where its failure can be caught, not imported: a static import that failed
// would stop the process from starting at all.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type * as KoffiModule from 'koffi';

type Koffi = typeof KoffiModule;

export const SOL_SOCKET = 1;
export const SO_TYPE = 3;
export const SO_RCVBUF = 8;
export const SO_ACCEPTCONN = 30;
export const SOCK_STREAM = 1;
export const AF_INET = 2;
export const AF_INET6 = 10;
const RWF_NOWAIT = 8;
/** preadv2's answers when the kernel or file system cannot honour RWF_NOWAIT at all. */
const NOWAIT_UNSUPPORTED = new Set([22 /* EINVAL */, 38 /* ENOSYS */, 95 /* EOPNOTSUPP */]);

export interface Libc {
  /** getsockopt for an int option; undefined when it fails. */
  intOption(fd: number, level: number, name: number): number | undefined;
  /** setsockopt for an int option; false when it fails. */
  setIntOption(fd: number, level: number, name: number, value: number): boolean;
  /** getsockname into `address`; false when it fails (not a socket). */
  socketName(fd: number, address: Buffer): boolean;
  /**
   * preadv2 with RWF_NOWAIT: copies what the page cache already holds of the range and never
   * waits for the disk. Answers the bytes read (0 at the end of the file), or undefined when
   * nothing could be read without waiting (or the kernel does not support the flag). Absent
   * where preadv2 is missing or takes a 32-bit offset.
   */
  readonly readCached?: (fd: number, target: Uint8Array, position: number) => number | undefined;
  /**
   * memmove of all of `source` to the start of `target`, which must be at least as long. V8
   * copies between a SharedArrayBuffer and memory whose address differs from it modulo 8 byte
   * by byte (relaxed atomics); this copies at memory speed (measured 3 against 12 GB/s).
   */
  readonly copy?: (target: Uint8Array, source: Uint8Array) => void;
  /** AES-256-GCM through OpenSSL's EVP interface, writing where the caller says. */
  readonly aesGcm?: AesGcm;
  /**
   * sync_file_range(SYNC_FILE_RANGE_WRITE), called on a koffi thread, never on the caller's:
   * starts the write-out of the range's dirty pages and returns at once; `done` runs (on the
   * caller's thread) once the call has returned. A hint, so failures are ignored: answers false
   * when the call could not even be queued, and `done` is then not called. Durability still
   * comes only from fdatasync.
   */
  readonly startWriteback?: (
    fd: number,
    offset: number,
    length: number,
    done: () => void,
  ) => boolean;
  /**
   * glibc's malloc_trim(0), called on libuv's thread pool, never on the caller's: hands the free
   * pages inside every malloc arena back to the kernel. Free memory below a heap's top stays
   * resident otherwise (MALLOC_TRIM_THRESHOLD_ only trims the top). `done` runs on the caller's
   * thread once the call has returned; false when the call could not be queued. Absent where
   * libc has no malloc_trim (musl).
   */
  readonly trimHeap?: (done: () => void) => boolean;
  /**
   * posix_fallocate, called on libuv's thread pool, never on the caller's: allocates the file's
   * blocks over [offset, offset + length) without writing them, so that the space is the file's
   * (the data directory's space reserve, space-reserve.ts). `done` gets 0 or the error number
   * (ENOSPC when the file system has no room); false when the call could not be queued.
   */
  readonly allocateSpace?: (
    fd: number,
    offset: number,
    length: number,
    done: (errno: number) => void,
  ) => boolean;
  /**
   * Ends the process with `code` through `_exit(2)`: no 'exit' listener, no native add-on's
   * clean-up hook, no C exit handler runs. For a process that must end while work it cannot
   * finish is in flight (util/fatal.ts).
   */
  readonly exitAtOnce?: (code: number) => never;
}

/**
 * AES-256-GCM (96-bit nonce, 128-bit tag) that writes into the caller's buffers. node:crypto's
 * `update` allocates a zero-filled buffer for every call and copies the result once more into a
 * second one when GCM's output is shorter than its guess (measured: 0.41–0.46 against
 * 0.26–0.37 CPU-s per GB for 1 MiB, before the page faults and garbage collection that the
 * allocations cause under load). Each thread has its own cipher context; calls are synchronous.
 */
export interface AesGcm {
  /**
   * Encrypts the concatenation of `parts` into `target`, followed by the 16-byte tag; answers
   * the bytes written (their total length + 16). `target` must hold that many.
   */
  seal(
    key: Uint8Array,
    nonce: Uint8Array,
    aad: Uint8Array,
    parts: readonly Uint8Array[],
    target: Uint8Array,
  ): number;
  /**
   * Decrypts `ciphertext` into `targets` in order (their lengths must add up to its length) and
   * checks `tag`; answers false when authentication fails, and the targets then hold
   * unauthenticated bytes that must not be used.
   */
  open(
    key: Uint8Array,
    nonce: Uint8Array,
    aad: Uint8Array,
    ciphertext: Uint8Array,
    tag: Uint8Array,
    targets: readonly Uint8Array[],
  ): boolean;
}

export const GCM_TAG_BYTES = 16;
const GCM_NONCE_BYTES = 12;
const AES_256_KEY_BYTES = 32;
const SHA256_BYTES = 32;
const EVP_CTRL_GCM_GET_TAG = 0x10;
const EVP_CTRL_GCM_SET_TAG = 0x11;

interface Library {
  func(definition: string): unknown;
}

let loaded: Libc | undefined | null = null;

/**
 * The libc functions, loaded on first use; undefined where they cannot be reached. Where
 * Lightwell's native library offers a one-call form of a function (see `preferOneCall`), that
 * form serves the calls it can.
 */
export function libc(): Libc | undefined {
  if (loaded === null) {
    const base =
      process.platform === 'linux'
        ? loadLibc(() => createRequire(import.meta.url)('koffi') as Koffi)
        : undefined;
    const own = base ? native() : undefined;
    loaded = base && own ? preferOneCall(base, own) : base;
  }
  return loaded;
}

/**
 * `base` with the native library's one-call forms where it has them: `readCached` always, and
 * AES-256-GCM for one or two plaintext parts and one target (every chunk of a small object, and
 * most of a large one's; a chunk over more body blocks keeps the calls made one by one).
 */
export function preferOneCall(base: Libc, own: Native): Libc {
  const gcm = own.gcm;
  const evp = base.aesGcm;
  const aesGcm: AesGcm | undefined =
    gcm && evp
      ? {
          seal: (key, nonce, aad, parts, target) =>
            (parts.length <= 2 ? gcm : evp).seal(key, nonce, aad, parts, target),
          open: (key, nonce, aad, ciphertext, tag, targets) =>
            (targets.length === 1 ? gcm : evp).open(key, nonce, aad, ciphertext, tag, targets),
        }
      : evp;
  return {
    ...base,
    ...(aesGcm ? { aesGcm } : {}),
    ...(own.readCached ? { readCached: own.readCached } : {}),
  };
}

const EMPTY = new Uint8Array(0);

/** Lightwell's own native library (native/*.c). */
export interface Native {
  /**
   * CRC-32C of `bytes`, continuing from `initial` (the CRC of the bytes before them; 0 to
   * start), as @node-rs/crc32's `crc32c(bytes, initial)` answers it. Absent where the CPU lacks
   * SSE4.2 or PCLMULQDQ.
   */
  readonly crc32c?: (bytes: Uint8Array, initial: number) => number;
  /** The address of the first byte of `bytes` modulo `alignment` (a power of two). */
  readonly misalignment: (bytes: Uint8Array, alignment: number) => number;
  /** As `Libc.readCached`, in one call (native/oneshot.c). Absent where `readCached` would be. */
  readonly readCached?: Libc['readCached'];
  /**
   * AES-256-GCM and HMAC-SHA256 in one call each, through the OpenSSL that Node exports (see
   * native/oneshot.c). Absent where the Node binary does not export those functions. `gcm`
   * seals at most two parts and opens into one target (it refuses more).
   */
  readonly gcm?: AesGcm;
  /** HMAC-SHA256 under `key` of `first` followed by `second` (either may be empty). */
  readonly hmacSha256?: (key: Uint8Array, first: Uint8Array, second: Uint8Array) => Buffer;
  /**
   * `source` as lz4-napi's `compressSync` would store it (the u32 LE length, then an LZ4 block;
   * native/lz4.c), written into `target`: answers the bytes written, or 0 when they would not
   * fit in `target`, and then stops at once (what does not fit does not pay).
   */
  readonly lz4Compress?: (source: Uint8Array, target: Uint8Array) => number;
  /**
   * Decompresses the LZ4 block `block` (without the u32 length) into `target`: answers the bytes
   * written, or -1 when the block is malformed or would not fit.
   */
  readonly lz4Decompress?: (block: Uint8Array, target: Uint8Array) => number;
  /**
   * Sends `message` as one datagram to the service manager's notification socket `socket` (a
   * path, or an abstract name written with a leading '@'), from this process, without blocking
   * (native/notify.c): answers 0, or the error number (EAGAIN when the manager's queue is full).
   */
  readonly notify?: (socket: string, message: string) => number;
}

/** Where scripts/build-native.mjs puts the library: dist/native/, beside dist/src/. */
export const NATIVE_LIBRARY_PATH = fileURLToPath(
  new URL('../../native/liblightwell.so', import.meta.url),
);

let nativeLoaded: Native | undefined | null = null;

/** The native library, loaded on first use; undefined where it cannot be used. */
export function native(): Native | undefined {
  if (nativeLoaded === null) {
    nativeLoaded = process.platform === 'linux' ? loadNative(NATIVE_LIBRARY_PATH) : undefined;
  }
  return nativeLoaded;
}

/** Binds the library at `path`; undefined when it is missing or cannot be loaded. */
export function loadNative(
  path: string,
  requireKoffi = (): Koffi => createRequire(import.meta.url)('koffi') as Koffi,
): Native | undefined {
  let crc32c: (initial: number, bytes: Uint8Array, length: number) => number;
  let misalignment: (bytes: Uint8Array, alignment: number) => number;
  let crc32cSupported: boolean;
  let library: Library;
  try {
    library = requireKoffi().load(path);
    crc32cSupported = (library.func('int lw_crc32c_supported()') as () => number)() === 1;
    crc32c = library.func(
      'uint32_t lw_crc32c(uint32_t initial, const uint8_t *bytes, size_t length)',
    ) as typeof crc32c;
    misalignment = library.func(
      'uint32_t lw_misalignment(const uint8_t *bytes, uint32_t alignment)',
    ) as typeof misalignment;
  } catch {
    return undefined;
  }
  return {
    ...(crc32cSupported
      ? { crc32c: (bytes: Uint8Array, initial: number) => crc32c(initial, bytes, bytes.length) }
      : {}),
    misalignment(bytes, alignment) {
      assert.ok(alignment > 0 && (alignment & (alignment - 1)) === 0, 'alignment is a power of 2');
      return misalignment(bytes, alignment);
    },
    ...bindOneCallRead(library),
    ...bindOneCallCrypto(library),
    ...bindLz4(library),
    ...bindNotify(library),
  };
}

/** `Native.notify`. */
function bindNotify(library: Library): Pick<Native, 'notify'> {
  type Call = (name: Buffer, nameLength: number, message: Buffer, length: number) => number;
  let send: Call;
  try {
    send = library.func(
      'int32_t lw_notify(const char *name, size_t nameLength, const uint8_t *message, ' +
        'size_t length)',
    ) as Call;
  } catch {
    return {}; // a library built before lw_notify
  }
  return {
    notify(socket, message) {
      const name = Buffer.from(socket, 'utf8');
      const bytes = Buffer.from(message, 'utf8');
      return -send(name, name.length, bytes, bytes.length);
    },
  };
}

/** `Native.lz4Compress` and `Native.lz4Decompress`. */
function bindLz4(library: Library): Pick<Native, 'lz4Compress' | 'lz4Decompress'> {
  type Call = (source: Uint8Array, length: number, target: Uint8Array, limit: number) => number;
  let compress: Call;
  let decompress: Call;
  try {
    compress = library.func(
      'size_t lw_lz4_compress(const uint8_t *source, size_t length, uint8_t *target, size_t limit)',
    ) as Call;
    decompress = library.func(
      'int64_t lw_lz4_decompress(const uint8_t *source, size_t length, uint8_t *target, ' +
        'size_t capacity)',
    ) as Call;
  } catch {
    return {}; // a library built before these functions
  }
  return {
    lz4Compress: (source, target) => compress(source, source.length, target, target.length),
    lz4Decompress: (block, target) => decompress(block, block.length, target, target.length),
  };
}

/** `Native.readCached`, on 64-bit Linux (lw_read_cached takes a 64-bit offset). */
function bindOneCallRead(library: Library): Pick<Native, 'readCached'> {
  if (!OFF_T_64_ARCHES.has(process.arch)) return {};
  let read: (fd: number, target: Uint8Array, length: number, position: number) => number;
  try {
    read = library.func(
      'int64_t lw_read_cached(int fd, uint8_t *target, size_t length, int64_t position)',
    ) as typeof read;
  } catch {
    return {}; // a library built before lw_read_cached
  }
  return {
    readCached: cachedReads((fd, target, position) => read(fd, target, target.length, position)),
  };
}

/**
 * `Libc.readCached` over a read with RWF_NOWAIT that answers the bytes read or minus errno.
 * EAGAIN is "not cached"; any other error is the asynchronous read's to report; an old kernel
 * or a file system without RWF_NOWAIT stops the attempts for good.
 */
function cachedReads(
  read: (fd: number, target: Uint8Array, position: number) => number,
): NonNullable<Libc['readCached']> {
  let nowaitWorks = true;
  return (fd, target, position) => {
    if (!nowaitWorks) return undefined;
    const result = read(fd, target, position);
    if (result >= 0) return result;
    if (NOWAIT_UNSUPPORTED.has(-result)) nowaitWorks = false;
    return undefined;
  };
}

/** `Native.gcm` and `Native.hmacSha256`, where Node's OpenSSL exports what they call. */
function bindOneCallCrypto(library: Library): Pick<Native, 'gcm' | 'hmacSha256'> {
  type Bytes = Uint8Array;
  let seal: (...args: [Bytes, Bytes, Bytes, number, Bytes, number, Bytes, number, Bytes]) => number;
  let open: (...args: [Bytes, Bytes, Bytes, number, Bytes, number, Bytes, Bytes]) => number;
  let hmac: (...args: [Bytes, number, Bytes, number, Bytes, number, Bytes]) => number;
  try {
    if ((library.func('int lw_oneshot_crypto_supported()') as () => number)() !== 1) return {};
    seal = library.func(
      'int64_t lw_gcm_seal(const uint8_t *key, const uint8_t *nonce, const uint8_t *aad, ' +
        'size_t aadLength, const uint8_t *first, size_t firstLength, const uint8_t *second, ' +
        'size_t secondLength, uint8_t *target)',
    ) as typeof seal;
    open = library.func(
      'int lw_gcm_open(const uint8_t *key, const uint8_t *nonce, const uint8_t *aad, ' +
        'size_t aadLength, const uint8_t *ciphertext, size_t length, const uint8_t *tag, ' +
        'uint8_t *target)',
    ) as typeof open;
    hmac = library.func(
      'int lw_hmac_sha256(const uint8_t *key, size_t keyLength, const uint8_t *first, ' +
        'size_t firstLength, const uint8_t *second, size_t secondLength, uint8_t *target)',
    ) as typeof hmac;
  } catch {
    return {}; // a library built before these functions
  }
  // koffi passes bare pointers: every length the C side relies on is checked here.
  const checkKey = (key: Uint8Array, nonce: Uint8Array): void => {
    assert.equal(key.length, AES_256_KEY_BYTES, 'AES-256 key length');
    assert.equal(nonce.length, GCM_NONCE_BYTES, 'GCM nonce length');
  };
  const refused = (what: string): never => {
    // OpenSSL refused a call that cannot fail with valid arguments: a bug, never bad input.
    assert.fail(`OpenSSL ${what} failed`);
  };
  return {
    gcm: {
      seal(key, nonce, aad, parts, target) {
        checkKey(key, nonce);
        assert.ok(parts.length <= 2, 'the one-call seal takes at most two parts');
        const [first = EMPTY, second = EMPTY] = parts;
        const total = first.length + second.length;
        assert.ok(target.length >= total + GCM_TAG_BYTES, 'seal target is too short');
        const written = seal(
          key,
          nonce,
          aad,
          aad.length,
          first,
          first.length,
          second,
          second.length,
          target,
        );
        return written === total + GCM_TAG_BYTES ? written : refused('seal');
      },
      open(key, nonce, aad, ciphertext, tag, targets) {
        checkKey(key, nonce);
        assert.equal(tag.length, GCM_TAG_BYTES, 'GCM tag length');
        const [target] = targets;
        assert.ok(targets.length === 1 && target, 'the one-call open takes one target');
        assert.equal(target.length, ciphertext.length, 'open target does not match the ciphertext');
        const result = open(
          key,
          nonce,
          aad,
          aad.length,
          ciphertext,
          ciphertext.length,
          tag,
          target,
        );
        return result === -1 ? refused('open') : result === 1;
      },
    },
    hmacSha256(key, first, second) {
      const target = Buffer.allocUnsafe(SHA256_BYTES);
      const result = hmac(key, key.length, first, first.length, second, second.length, target);
      return result === 0 ? target : refused('HMAC');
    },
  };
}

/** Copies from here up go through libc's memmove where it is there; a call costs about 0.2 µs. */
const NATIVE_COPY_MIN_BYTES = 4096;

/**
 * Copies all of `source` to `target` at `offset`, through `Libc.copy` when the source is large
 * enough to repay the call: `TypedArray.set` into or out of a SharedArrayBuffer copies byte by
 * byte unless both addresses are equal modulo 8.
 */
export function copyBytes(target: Uint8Array, offset: number, source: Uint8Array): void {
  assert.ok(offset >= 0, 'copy offset is negative');
  const copy = source.length >= NATIVE_COPY_MIN_BYTES ? libc()?.copy : undefined;
  if (copy) copy(target.subarray(offset, offset + source.length), source);
  else target.set(source, offset);
}

/** Binds the functions through the koffi that `requireKoffi` answers; undefined if it throws. */
export function loadLibc(requireKoffi: () => Koffi): Libc | undefined {
  let koffi: Koffi;
  let self: Library;
  let getsockopt: (fd: number, level: number, name: number, v: number[], l: number[]) => number;
  let setsockopt: (fd: number, level: number, name: number, v: number[], l: number) => number;
  let getsockname: (fd: number, address: Buffer, length: number[]) => number;
  try {
    koffi = requireKoffi();
    self = koffi.load(null);
    getsockopt = self.func(
      'int getsockopt(int fd, int level, int name, _Out_ int *value, _Inout_ uint32_t *length)',
    ) as typeof getsockopt;
    setsockopt = self.func(
      'int setsockopt(int fd, int level, int name, _In_ int *value, uint32_t length)',
    ) as typeof setsockopt;
    getsockname = self.func(
      'int getsockname(int fd, _Out_ uint8_t *address, _Inout_ uint32_t *length)',
    ) as typeof getsockname;
  } catch {
    return undefined;
  }
  return {
    intOption(fd, level, name) {
      const value = [0];
      return getsockopt(fd, level, name, value, [4]) === 0 ? value[0] : undefined;
    },
    setIntOption(fd, level, name, value) {
      return setsockopt(fd, level, name, [value], 4) === 0;
    },
    socketName(fd, address) {
      return getsockname(fd, address, [address.length]) === 0;
    },
    ...bindReadCached(koffi, self),
    ...bindCopy(self),
    ...bindAesGcm(self),
    ...bindStartWriteback(self),
    ...bindTrimHeap(self),
    ...bindAllocateSpace(self),
    ...bindExitAtOnce(self),
  };
}

/** `exitAtOnce`: libc's `_exit`, which runs no exit handler of any kind. */
function bindExitAtOnce(self: Library): Pick<Libc, 'exitAtOnce'> {
  let exit: (code: number) => void;
  try {
    exit = self.func('void _exit(int status)') as typeof exit;
  } catch {
    return {};
  }
  return {
    exitAtOnce: (code) => {
      exit(code);
      // _exit does not return; a binding that did would be a broken libc.
      throw new TypeError('_exit returned');
    },
  };
}

/**
 * Queues a koffi asynchronous call (it runs on libuv's thread pool); false when koffi refuses,
 * as it does when too many such calls are queued (max_async_calls).
 */
function queued(call: () => void): boolean {
  try {
    call();
    return true;
  } catch {
    return false;
  }
}

/** `trimHeap`, where libc has malloc_trim (glibc). */
function bindTrimHeap(self: Library): Pick<Libc, 'trimHeap'> {
  let mallocTrim: { async(pad: number, done: (error: unknown, result: number) => void): void };
  try {
    mallocTrim = self.func('int malloc_trim(size_t pad)') as typeof mallocTrim;
  } catch {
    return {};
  }
  return {
    trimHeap: (done) => queued(() => mallocTrim.async(0, () => done())),
  };
}

/** `allocateSpace`, on 64-bit Linux (off_t is 64-bit). posix_fallocate answers its error. */
function bindAllocateSpace(self: Library): Pick<Libc, 'allocateSpace'> {
  if (!OFF_T_64_ARCHES.has(process.arch)) return {};
  let fallocate: {
    async(
      fd: number,
      offset: number,
      length: number,
      done: (error: unknown, result: number) => void,
    ): void;
  };
  try {
    fallocate = self.func(
      'int posix_fallocate(int fd, int64_t offset, int64_t length)',
    ) as typeof fallocate;
  } catch {
    return {};
  }
  return {
    allocateSpace: (fd, offset, length, done) =>
      queued(() =>
        fallocate.async(fd, offset, length, (error, result) => done(error ? -1 : result)),
      ),
  };
}

/** `startWriteback`, on 64-bit Linux (where sync_file_range's off_t is 64-bit). */
function bindStartWriteback(self: Library): Pick<Libc, 'startWriteback'> {
  if (!OFF_T_64_ARCHES.has(process.arch)) return {};
  const SYNC_FILE_RANGE_WRITE = 2;
  let syncFileRange: {
    async(
      fd: number,
      offset: number,
      length: number,
      flags: number,
      done: (error: unknown, result: number) => void,
    ): void;
  };
  try {
    syncFileRange = self.func(
      'int sync_file_range(int fd, int64_t offset, int64_t length, unsigned int flags)',
    ) as typeof syncFileRange;
  } catch {
    return {};
  }
  return {
    startWriteback: (fd, offset, length, done) =>
      queued(() => syncFileRange.async(fd, offset, length, SYNC_FILE_RANGE_WRITE, () => done())),
  };
}

type Pointer = unknown;
type EvpUpdate = (
  ctx: Pointer,
  out: Uint8Array | null,
  outLength: number[],
  input: Uint8Array,
  inputLength: number,
) => number;
type EvpInit = (
  ctx: Pointer,
  cipher: Pointer,
  engine: null,
  key: Uint8Array,
  nonce: Uint8Array,
) => number;
type EvpFinal = (ctx: Pointer, out: Uint8Array, outLength: number[]) => number;

/** `aesGcm`, where Node's OpenSSL exports the EVP functions (it does for native addons). */
function bindAesGcm(self: Library): Pick<Libc, 'aesGcm'> {
  let ctx: Pointer;
  let gcm: Pointer;
  let encryptInit: EvpInit;
  let encryptUpdate: EvpUpdate;
  let encryptFinal: EvpFinal;
  let decryptInit: EvpInit;
  let decryptUpdate: EvpUpdate;
  let decryptFinal: EvpFinal;
  let control: (ctx: Pointer, type: number, arg: number, pointer: Uint8Array) => number;
  try {
    const init = (name: string): EvpInit =>
      self.func(
        `int ${name}(void *ctx, const void *cipher, void *engine, const uint8_t *key, ` +
          'const uint8_t *nonce)',
      ) as EvpInit;
    const update = (name: string): EvpUpdate =>
      self.func(
        `int ${name}(void *ctx, uint8_t *out, _Out_ int *outLength, const uint8_t *input, ` +
          'int inputLength)',
      ) as EvpUpdate;
    const final = (name: string): EvpFinal =>
      self.func(`int ${name}(void *ctx, uint8_t *out, _Out_ int *outLength)`) as EvpFinal;
    encryptInit = init('EVP_EncryptInit_ex');
    encryptUpdate = update('EVP_EncryptUpdate');
    encryptFinal = final('EVP_EncryptFinal_ex');
    decryptInit = init('EVP_DecryptInit_ex');
    decryptUpdate = update('EVP_DecryptUpdate');
    decryptFinal = final('EVP_DecryptFinal_ex');
    control = self.func(
      'int EVP_CIPHER_CTX_ctrl(void *ctx, int type, int arg, uint8_t *pointer)',
    ) as typeof control;
    const free = self.func('void EVP_CIPHER_CTX_free(void *ctx)') as (ctx: Pointer) => void;
    ctx = (self.func('void *EVP_CIPHER_CTX_new()') as () => Pointer)();
    gcm = (self.func('const void *EVP_aes_256_gcm()') as () => Pointer)();
    if (!ctx || !gcm) return {};
    // One context per thread, for the thread's life; freeing it also wipes the last key schedule.
    process.once('exit', () => free(ctx));
  } catch {
    return {};
  }
  const length = [0];
  const scratch = Buffer.alloc(GCM_TAG_BYTES);
  const check = (ok: boolean, what: string): void => {
    // OpenSSL refused a call that cannot fail with valid arguments: a bug, never bad input.
    if (!ok) assert.fail(`OpenSSL ${what} failed`);
  };
  const checkKey = (key: Uint8Array, nonce: Uint8Array): void => {
    assert.equal(key.length, AES_256_KEY_BYTES, 'AES-256 key length');
    assert.equal(nonce.length, GCM_NONCE_BYTES, 'GCM nonce length');
  };
  return {
    aesGcm: {
      seal(key, nonce, aad, parts, target) {
        checkKey(key, nonce);
        const total = parts.reduce((sum, part) => sum + part.length, 0);
        assert.ok(target.length >= total + GCM_TAG_BYTES, 'seal target is too short');
        check(encryptInit(ctx, gcm, null, key, nonce) === 1, 'EncryptInit');
        check(encryptUpdate(ctx, null, length, aad, aad.length) === 1, 'EncryptUpdate (AAD)');
        let offset = 0;
        for (const part of parts) {
          const out = target.subarray(offset, offset + part.length);
          check(encryptUpdate(ctx, out, length, part, part.length) === 1, 'EncryptUpdate');
          check(length[0] === part.length, 'EncryptUpdate length');
          offset += part.length;
        }
        check(encryptFinal(ctx, scratch, length) === 1 && length[0] === 0, 'EncryptFinal');
        const tag = target.subarray(offset, offset + GCM_TAG_BYTES);
        check(control(ctx, EVP_CTRL_GCM_GET_TAG, GCM_TAG_BYTES, tag) === 1, 'GET_TAG');
        return offset + GCM_TAG_BYTES;
      },
      open(key, nonce, aad, ciphertext, tag, targets) {
        checkKey(key, nonce);
        assert.equal(tag.length, GCM_TAG_BYTES, 'GCM tag length');
        const total = targets.reduce((sum, target) => sum + target.length, 0);
        assert.equal(total, ciphertext.length, 'open targets do not match the ciphertext');
        check(decryptInit(ctx, gcm, null, key, nonce) === 1, 'DecryptInit');
        check(decryptUpdate(ctx, null, length, aad, aad.length) === 1, 'DecryptUpdate (AAD)');
        let offset = 0;
        for (const target of targets) {
          const input = ciphertext.subarray(offset, offset + target.length);
          check(decryptUpdate(ctx, target, length, input, input.length) === 1, 'DecryptUpdate');
          check(length[0] === target.length, 'DecryptUpdate length');
          offset += target.length;
        }
        check(control(ctx, EVP_CTRL_GCM_SET_TAG, GCM_TAG_BYTES, tag) === 1, 'SET_TAG');
        // GCM's final step writes nothing; it compares the tag.
        return decryptFinal(ctx, scratch, length) === 1;
      },
    },
  };
}

/** `copy`, wherever memmove can be bound. */
function bindCopy(self: Library): Pick<Libc, 'copy'> {
  let memmove: (target: Uint8Array, source: Uint8Array, length: number) => unknown;
  try {
    memmove = self.func(
      'void *memmove(void *target, const void *source, size_t length)',
    ) as typeof memmove;
  } catch {
    return {};
  }
  return {
    copy(target, source) {
      // The bounds check koffi cannot make: it passes bare pointers.
      assert.ok(target.length >= source.length, 'copy target is shorter than its source');
      memmove(target, source, source.length);
    },
  };
}

/** The architectures of 64-bit Linux, where libc's off_t arguments are 64-bit. */
const OFF_T_64_ARCHES = new Set(['x64', 'arm64', 'ppc64', 'riscv64', 'loong64', 's390x']);

/** `readCached`, on 64-bit Linux where preadv2 exists (its offset is 64-bit there). */
function bindReadCached(koffi: Koffi, self: Library): Pick<Libc, 'readCached'> {
  if (!OFF_T_64_ARCHES.has(process.arch)) return {};
  let preadv2: (
    fd: number,
    iov: { base: Uint8Array; len: number }[],
    count: number,
    offset: number,
    flags: number,
  ) => number;
  try {
    try {
      koffi.struct('lw_iovec', { base: 'void *', len: 'size_t' });
    } catch {
      // declared by an earlier loadLibc in this thread; a failure of another kind fails below
    }
    preadv2 = self.func(
      'intptr_t preadv2(int fd, const lw_iovec *iov, int count, int64_t offset, int flags)',
    ) as typeof preadv2;
  } catch {
    return {};
  }
  return {
    readCached: cachedReads((fd, target, position) => {
      const read = preadv2(fd, [{ base: target, len: target.length }], 1, position, RWF_NOWAIT);
      return read >= 0 ? read : -koffi.errno();
    }),
  };
}
