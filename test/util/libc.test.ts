// Goal: the libc calls behave as their callers rely on: `readCached` copies exactly the bytes
// of the range that the page cache holds and answers 0 at the end of a file; the socket-option
// calls read and write an int option and name a socket's address; `copy` copies exactly its
// source, also into a SharedArrayBuffer at an odd offset, and refuses a short target, and
// `copyBytes` does the same for sources of any size; `aesGcm` produces exactly node:crypto's
// ciphertext and tag, opens what it sealed into any split of targets and refuses any change to
// ciphertext, tag, AAD, key or nonce; the native library's one-call forms (native/oneshot.c) of
// the cached read, AES-256-GCM and HMAC-SHA256 answer exactly what the calls bound one by one
// and node:crypto answer; `lz4Compress` writes blocks that lz4-napi reads back, and never past
// its target, and `lz4Decompress` reads what either compressor writes and refuses malformed
// blocks without writing outside its target; without koffi there is simply no libc.
// Method: a file written just before (so its pages are cached) read at several offsets and
// lengths, also into a pooled Buffer, against `readFileSync`; a listening node:net server's
// descriptor found by its port; `loadLibc` given a koffi loader that throws.
import t, { type Test } from 'tap';
import { createRequire } from 'node:module';
import type * as KoffiModule from 'koffi';
import { mkdtempSync, openSync, closeSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCipheriv, createHmac, randomBytes } from 'node:crypto';
import { compressSync, uncompressSync } from 'lz4-napi';
import { lz4Compressed } from '../../src/engine/chunk-codec.js';
import {
  copyBytes,
  libc,
  loadLibc,
  native,
  type AesGcm,
  SOL_SOCKET,
  SO_RCVBUF,
  SO_TYPE,
  SOCK_STREAM,
} from '../../src/util/libc.js';
import { receiveBufferOf, setReceiveBuffer } from '../../src/http/receive-buffer.js';

const c = libc();
const lz4 = native()?.lz4Compress;
const unlz4 = native()?.lz4Decompress;
/** The functions bound through koffi one by one, without the native library's one-call forms. */
const bound = loadLibc(() => createRequire(import.meta.url)('koffi') as typeof KoffiModule);

t.test('libc is reachable on Linux', async (t) => {
  if (process.platform === 'linux') t.ok(c, 'loaded');
  else t.equal(c, undefined, 'not on this platform');
});

t.test('without koffi there is no libc, and no exception', async (t) => {
  t.equal(
    loadLibc(() => {
      throw new TypeError('Cannot find the native Koffi module');
    }),
    undefined,
  );
});

for (const [form, readCached] of [
  ['one call', native()?.readCached],
  ['preadv2 bound by koffi', bound?.readCached],
] as const) {
  t.test(`readCached copies the cached range (${form})`, { skip: !readCached }, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'lw-libc-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'data');
    const bytes = randomBytes(300_000);
    writeFileSync(path, bytes);
    const fd = openSync(path, 'r');
    t.teardown(() => closeSync(fd));
    const onDisk = readFileSync(path);
    for (const [position, length] of [
      [0, 4096],
      [12_345, 70_000],
      [299_000, 1000],
    ] as const) {
      const target = Buffer.alloc(length);
      t.equal(readCached?.(fd, target, position), length, `${length} bytes at ${position}`);
      t.ok(target.equals(onDisk.subarray(position, position + length)), 'the same bytes');
    }
    // A small Buffer.allocUnsafe is a view into Node's shared pool, at a non-zero offset.
    const pooled = Buffer.allocUnsafe(100);
    t.equal(readCached?.(fd, pooled, 777), 100, 'into a pooled buffer');
    t.ok(pooled.equals(onDisk.subarray(777, 877)), 'at its own offset');
    const tail = Buffer.alloc(4096);
    t.equal(readCached?.(fd, tail, 299_000), 1000, 'a read past the end is short');
    t.equal(readCached?.(fd, tail, 300_000), 0, 'at the end: 0');
  });
}

t.test('socket options on a listening socket', { skip: !c }, async (t) => {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => server.close());
  const port = (server.address() as { port: number }).port;
  const result = setReceiveBuffer(port, 96 * 1024);
  t.match(result, { set: true, sockets: 1, kernelBytes: 192 * 1024 });
  t.same(receiveBufferOf(port), [192 * 1024], 'read back through getsockopt');
  t.match(setReceiveBuffer(port, 2 ** 31), { set: false, reason: /not a socket buffer size/ });
  // The descriptor itself, through the raw calls.
  const fd = (server as unknown as { _handle: { fd: number } })._handle.fd;
  t.equal(c?.intOption(fd, SOL_SOCKET, SO_TYPE), SOCK_STREAM, 'a stream socket');
  t.equal(c?.intOption(fd, SOL_SOCKET, SO_RCVBUF), 192 * 1024);
  t.equal(c?.intOption(-1, SOL_SOCKET, SO_TYPE), undefined, 'a bad descriptor: undefined');
  t.notOk(c?.setIntOption(-1, SOL_SOCKET, SO_RCVBUF, 1), 'and false');
});

t.test('copy moves exactly the source bytes', { skip: !c?.copy }, async (t) => {
  const copy = c?.copy as (target: Uint8Array, source: Uint8Array) => void;
  const shared = Buffer.from(new SharedArrayBuffer(1 << 20));
  const source = randomBytes(300_001).subarray(3);
  for (const offset of [0, 1, 5, 4096 + 3]) {
    shared.fill(0xa5);
    copy(shared.subarray(offset), source);
    t.ok(shared.subarray(offset, offset + source.length).equals(source), `at ${offset}`);
    t.equal(shared[offset - 1] ?? 0xa5, 0xa5, 'the byte before is untouched');
    t.equal(shared[offset + source.length], 0xa5, 'the byte after is untouched');
  }
  t.throws(() => copy(shared.subarray(0, 10), source), /shorter than its source/);
  const overlapping = Buffer.from('abcdefgh');
  copy(overlapping.subarray(2), overlapping.subarray(0, 6));
  t.equal(overlapping.toString(), 'ababcdef', 'overlapping ranges copy as memmove does');
});

t.test('copyBytes puts small and large sources at any offset', async (t) => {
  const shared = Buffer.from(new SharedArrayBuffer(64 * 1024));
  for (const length of [0, 1, 4095, 4096, 40_000]) {
    for (const offset of [0, 3, 8]) {
      const source = randomBytes(length);
      shared.fill(0);
      copyBytes(shared, offset, source);
      t.ok(shared.subarray(offset, offset + length).equals(source), `${length} at ${offset}`);
      t.equal(shared[offset + length], 0, 'nothing past it');
    }
  }
  t.throws(() => {
    copyBytes(shared, shared.length - 100, randomBytes(5000));
  }, 'a copy past the end is refused');
});

/** Seals as node:crypto does, opens what it sealed, and refuses any change. */
async function checksAesGcm(t: Test, aesGcm: AesGcm): Promise<void> {
  const key = randomBytes(32);
  const nonce = randomBytes(12);
  const aad = randomBytes(56);
  const plain = randomBytes(300_001);
  const shared = new Uint8Array(new SharedArrayBuffer(plain.length + 40), 3, plain.length);
  shared.set(plain);
  for (const parts of [
    [plain],
    [plain.subarray(0, 0), plain.subarray(0, 17), plain.subarray(17)],
    [shared.subarray(0, 65_536), shared.subarray(65_536)],
    [plain.subarray(0, 0), plain],
  ]) {
    const target = Buffer.alloc(plain.length + 16 + 5, 0xee);
    const written = aesGcm.seal(key, nonce, aad, parts, target);
    t.equal(written, plain.length + 16);
    const cipher = createCipheriv('aes-256-gcm', key, nonce, { authTagLength: 16 });
    cipher.setAAD(aad);
    const expected = Buffer.concat([cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
    t.ok(target.subarray(0, written).equals(expected), `${parts.length} parts: node's bytes`);
    t.same([...target.subarray(written)], [0xee, 0xee, 0xee, 0xee, 0xee], 'nothing past the tag');
  }
  const sealed = Buffer.alloc(plain.length + 16);
  aesGcm.seal(key, nonce, aad, [plain], sealed);
  const ciphertext = sealed.subarray(0, plain.length);
  const tag = sealed.subarray(plain.length);
  for (const split of [true, false]) {
    const open = (
      over: Partial<Record<'key' | 'nonce' | 'aad' | 'ciphertext' | 'tag', Buffer>>,
    ) => {
      const out = new Uint8Array(new SharedArrayBuffer(plain.length + 8), 5, plain.length);
      const targets = split
        ? [out.subarray(0, 1000), out.subarray(1000, 1000), out.subarray(1000)]
        : [out];
      const ok = aesGcm.open(
        over.key ?? key,
        over.nonce ?? nonce,
        over.aad ?? aad,
        over.ciphertext ?? ciphertext,
        over.tag ?? tag,
        targets,
      );
      return { ok, out };
    };
    const into = split ? 'three targets' : 'one target';
    const opened = open({});
    t.ok(opened.ok, `opens into ${into}`);
    t.ok(Buffer.from(opened.out).equals(plain), 'in order');
    const flip = (bytes: Buffer, at: number): Buffer => {
      const copy = Buffer.from(bytes);
      copy[at] = (copy[at] ?? 0) ^ 0x40;
      return copy;
    };
    t.notOk(open({ ciphertext: flip(ciphertext, 123_456) }).ok, 'a changed ciphertext byte');
    t.notOk(open({ tag: flip(tag, 15) }).ok, 'a changed tag');
    t.notOk(open({ aad: flip(aad, 0) }).ok, 'a changed AAD');
    t.notOk(open({ key: flip(key, 31) }).ok, 'another key');
    t.notOk(open({ nonce: flip(nonce, 11) }).ok, 'another nonce');
  }
  t.throws(() => aesGcm.seal(key, nonce, aad, [plain], Buffer.alloc(plain.length + 15)));
  t.throws(() => aesGcm.open(key, nonce, aad, ciphertext, tag, [Buffer.alloc(10)]));
  t.throws(() => aesGcm.open(key, nonce, aad, ciphertext, tag.subarray(1), [Buffer.alloc(10)]));
  t.throws(() => aesGcm.seal(key.subarray(0, 16), nonce, aad, [plain], sealed), 'AES-128 key');
  t.throws(() => aesGcm.seal(key, nonce.subarray(1), aad, [plain], sealed), 'a 88-bit nonce');
}

t.test('aesGcm, one call where it can be', { skip: !c?.aesGcm }, async (t) => {
  t.ok(!native()?.gcm || c?.aesGcm !== bound?.aesGcm, 'the one-call form serves');
  t.ok(!native()?.readCached || c?.readCached === native()?.readCached, 'and reads');
  if (c?.aesGcm) await checksAesGcm(t, c.aesGcm);
});

// The native library keeps each thread's last key and direction: a call under another key, or
// in the other direction, must set the whole context up again.
t.test('aesGcm alternating keys and directions', { skip: !c?.aesGcm }, async (t) => {
  const aesGcm = c?.aesGcm;
  if (!aesGcm) return;
  const keys: [Buffer, Buffer] = [randomBytes(32), randomBytes(32)];
  const aad = randomBytes(20);
  const sealed: Array<{ key: Buffer; nonce: Buffer; plain: Buffer; bytes: Buffer }> = [];
  for (const pick of [0, 0, 1, 0, 1, 1, 0]) {
    const key = keys[pick as 0 | 1];
    const nonce = randomBytes(12);
    const plain = randomBytes(4096 + pick);
    const bytes = Buffer.alloc(plain.length + 16);
    aesGcm.seal(key, nonce, aad, [plain], bytes);
    const cipher = createCipheriv('aes-256-gcm', key, nonce, { authTagLength: 16 });
    cipher.setAAD(aad);
    const expected = Buffer.concat([cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
    t.ok(bytes.equals(expected), `sealed under key ${pick} as node:crypto seals`);
    sealed.push({ key, nonce, plain, bytes });
    // Open an earlier record (often under the other key) between seals.
    const earlier = sealed[(sealed.length * 5) % sealed.length] ?? sealed[0];
    if (!earlier) continue;
    const out = Buffer.alloc(earlier.plain.length);
    const length = earlier.plain.length;
    const ok = aesGcm.open(
      earlier.key,
      earlier.nonce,
      aad,
      earlier.bytes.subarray(0, length),
      earlier.bytes.subarray(length),
      [out],
    );
    t.ok(ok && out.equals(earlier.plain), 'an earlier record opens between seals');
  }
  for (const { key, nonce, plain, bytes } of sealed.reverse()) {
    const out = Buffer.alloc(plain.length);
    const length = plain.length;
    const other = keys[0] === key ? keys[1] : keys[0];
    t.notOk(
      aesGcm.open(other, nonce, aad, bytes.subarray(0, length), bytes.subarray(length), [out]),
      'not under the other key',
    );
    t.ok(
      aesGcm.open(key, nonce, aad, bytes.subarray(0, length), bytes.subarray(length), [out]),
      'under its own key, right after',
    );
    t.ok(out.equals(plain));
  }
});

t.test('aesGcm, EVP functions called one by one', { skip: !bound?.aesGcm }, async (t) => {
  if (bound?.aesGcm) await checksAesGcm(t, bound.aesGcm);
});

t.test('hmacSha256 answers what node:crypto does', { skip: !native()?.hmacSha256 }, async (t) => {
  const hmac = native()?.hmacSha256;
  if (!hmac) return;
  const bytes = randomBytes(70_000);
  const empty = Buffer.alloc(0);
  const kept = randomBytes(32);
  for (const key of [kept, randomBytes(100), empty, kept, randomBytes(64), kept]) {
    for (const [at, end] of [
      [0, 0],
      [0, 4096],
      [17, 4096],
      [4096, 70_000],
    ] as const) {
      const expected = createHmac('sha256', key).update(bytes.subarray(0, end)).digest();
      const mac = hmac(key, bytes.subarray(0, at), bytes.subarray(at, end));
      t.ok(mac.equals(expected), `${key.length}-byte key, ${end} bytes split at ${at}`);
    }
  }
});

t.test('lz4Compress writes what lz4-napi reads, within its target', { skip: !lz4 }, async (t) => {
  if (!lz4) return;
  const text = Buffer.from(
    Array.from({ length: 20_000 }, (_, i) => `line ${i}: value ${(i * 7) % 1000}\n`).join(''),
  );
  const pattern = randomBytes(1000);
  const repeated = Buffer.alloc(300_000);
  for (let at = 0; at < repeated.length; at += pattern.length) pattern.copy(repeated, at);
  /** Runs of random bytes, copies of earlier bytes at random distances, and fills. */
  const mixed = (length: number): Buffer => {
    const bytes = Buffer.alloc(length);
    for (let at = 0; at < length;) {
      const run = Math.min(length - at, 1 + Math.floor(Math.random() * 300));
      const kind = Math.random();
      if (kind < 0.3) randomBytes(run).copy(bytes, at);
      else if (kind < 0.6 && at > 0) bytes.copy(bytes, at, Math.floor(Math.random() * at), at);
      else bytes.fill(Math.floor(Math.random() * 4), at, at + run);
      at += run;
    }
    return bytes;
  };
  const inputs: Buffer[] = [];
  for (let length = 0; length < 40; length++)
    inputs.push(Buffer.alloc(length, 7), randomBytes(length));
  for (let round = 0; round < 200; round++) inputs.push(mixed(Math.floor(Math.random() * 70_000)));
  inputs.push(text, repeated, Buffer.alloc(1 << 20), randomBytes(65_536));
  let failures = 0;
  for (const input of inputs) {
    const room = input.length + Math.ceil(input.length / 255) + 16;
    const target = Buffer.alloc(room + 8, 0xee);
    const written = lz4(input, target.subarray(0, room));
    const back = written > 0 ? uncompressSync(target.subarray(0, written)) : undefined;
    if (!back?.equals(input) || target.subarray(room).some((byte) => byte !== 0xee)) failures += 1;
  }
  t.equal(
    failures,
    0,
    `${inputs.length} inputs: lz4-napi reads back each, nothing past the target`,
  );
  t.ok(lz4(text, Buffer.alloc(text.length)) < text.length / 3, 'text shrinks');
  // The limit: exactly enough room writes, one byte less answers 0 and writes nothing past it.
  const exact = lz4(text, Buffer.alloc(text.length));
  t.equal(lz4(text, Buffer.alloc(exact)), exact, 'a target of exactly the length');
  const short = Buffer.alloc(exact + 7, 0xee);
  t.equal(lz4(text, short.subarray(0, exact - 1)), 0, 'one byte short: 0');
  t.ok(
    short.subarray(exact - 1).every((byte) => byte === 0xee),
    'and nothing written past it',
  );
  t.equal(lz4(randomBytes(4096), Buffer.alloc(3686)), 0, 'random bytes do not fit in 90%');
});

t.test(
  'lz4Decompress reads any LZ4 block and refuses malformed ones',
  { skip: !unlz4 },
  async (t) => {
    if (!unlz4 || !lz4) return;
    const text = Buffer.from(
      Array.from({ length: 20_000 }, (_, i) => `{"n":${i},"level":"info"}\n`).join(''),
    );
    const inputs = [
      text,
      Buffer.alloc(100_000),
      randomBytes(5000),
      Buffer.alloc(0),
      text.subarray(0, 7),
    ];
    for (const input of inputs) {
      for (const [writer, stored] of [
        ['lz4-napi', compressSync(input)],
        ['native', lz4Compressed(input)],
      ] as const) {
        const target = Buffer.alloc(input.length + 8, 0xee);
        const block = stored.subarray(4);
        t.equal(
          unlz4(block, target.subarray(0, input.length)),
          input.length,
          `${writer}, ${input.length} bytes`,
        );
        t.ok(target.subarray(0, input.length).equals(input), 'the same bytes');
        t.ok(
          target.subarray(input.length).every((byte) => byte === 0xee),
          'nothing past the target',
        );
        if (input.length > 0) {
          t.equal(unlz4(block, Buffer.alloc(input.length - 1)), -1, 'a target one byte short: -1');
        }
      }
    }
    const block = compressSync(text).subarray(4);
    const target = Buffer.alloc(text.length);
    t.equal(unlz4(block.subarray(0, block.length - 1), target), -1, 'a truncated block');
    t.equal(
      unlz4(Buffer.from([0x0f, 0x01, 0x00]), Buffer.alloc(64)),
      -1,
      'a match before the start',
    );
    t.equal(unlz4(Buffer.from([0x10, 0x61, 0x00, 0x00]), Buffer.alloc(64)), -1, 'distance 0');
    t.equal(unlz4(Buffer.from([0xf0, 0xff, 0xff]), Buffer.alloc(64)), -1, 'a length past the end');
    // Random corruptions never throw or write outside the target; most are refused.
    let outside = 0;
    for (let round = 0; round < 2000; round++) {
      const bad = Buffer.from(block);
      for (let flips = 0; flips < 3; flips++) {
        const at = Math.floor(Math.random() * bad.length);
        bad[at] = Math.floor(Math.random() * 256);
      }
      const guarded = Buffer.alloc(text.length + 64, 0xee);
      const written = unlz4(bad, guarded.subarray(0, text.length));
      if (written > text.length || guarded.subarray(text.length).some((byte) => byte !== 0xee))
        outside += 1;
    }
    t.equal(outside, 0, '2,000 corrupted blocks: nothing written outside the target');
  },
);

t.test('startWriteback on a file being written', { skip: !c?.startWriteback }, async (t) => {
  // A hint with no visible effect but timing: it must accept any range, a closed descriptor
  // included, and never change the file.
  const dir = mkdtempSync(join(tmpdir(), 'lw-libc-wb-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'f');
  const bytes = randomBytes(3 << 20);
  writeFileSync(path, bytes);
  const fd = openSync(path, 'r+');
  const hint = (descriptor: number, offset: number, length: number): Promise<boolean> =>
    new Promise((resolve) => {
      if (c?.startWriteback?.(descriptor, offset, length, () => resolve(true)) !== true)
        resolve(false);
    });
  t.equal(await hint(fd, 0, bytes.length), true, 'started, and done was called');
  t.equal(await hint(fd, 1 << 20, 10 << 20), true, 'a range past the end');
  closeSync(fd);
  t.equal(await hint(fd, 0, 4096), true, 'a closed descriptor: the call fails, quietly');
  t.ok(readFileSync(path).equals(bytes), 'the file is unchanged');
});

t.test('trimHeap hands free pages inside the heap back', { skip: !c?.trimHeap }, async (t) => {
  // Blocks under glibc's mmap threshold come from the heap; freeing every other one leaves
  // holes that the heap's top cannot give back, only malloc_trim can.
  const self = (createRequire(import.meta.url)('koffi') as typeof KoffiModule).load(null);
  const malloc = self.func('void *malloc(size_t size)') as (size: number) => unknown;
  const free = self.func('void free(void *pointer)') as (pointer: unknown) => void;
  const memset = self.func('void *memset(void *s, int c, size_t n)') as (
    s: unknown,
    c: number,
    n: number,
  ) => unknown;
  const blockBytes = 96 * 1024;
  const blocks = Array.from({ length: 512 }, () => malloc(blockBytes));
  for (const block of blocks) memset(block, 1, blockBytes);
  blocks.forEach((block, i) => i % 2 === 0 && free(block));
  const before = residentAnonKiB();
  const trimmed = await new Promise<boolean>((resolve) => {
    if (c?.trimHeap?.(() => resolve(true)) !== true) resolve(false);
  });
  const after = residentAnonKiB();
  blocks.forEach((block, i) => i % 2 === 1 && free(block));
  t.equal(trimmed, true, 'queued, and done was called');
  const freedKiB = (256 * blockBytes) / 1024;
  t.ok(
    before - after >= freedKiB / 2,
    `${before - after} of ${freedKiB} KiB freed in holes returned`,
  );
});

function residentAnonKiB(): number {
  const line = readFileSync('/proc/self/status', 'utf8').match(/^RssAnon:\s+(\d+) kB$/m);
  return Number(line?.[1]);
}
