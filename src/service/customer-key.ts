// SSE-C: objects encrypted under a key the client sends with every request and Lightwell never
// keeps (docs/s3-data-protection.md, "SSE-C").
//
// The customer key is checked against its MD5 (transmission errors), then used only in memory:
// - each version (and each part of a multipart upload) draws a random 16-byte salt; its data key
//   is HKDF-SHA256(customer key, salt, "lightwell sse-c data v1") and its bytes are AES-256-CTR
//   under that key, counter 0 at the version's (the part's) first byte, so any range decrypts
//   on its own and the stored size is the object's size;
// - the index keeps the salt and a verifier, HKDF-SHA256(customer key, salt, "lightwell sse-c
//   verifier v1"), compared in constant time: the verifier tells the right key from a wrong one
//   and yields neither the key nor the data key;
// - the CTR bytes then go through the ordinary pipeline, so every stored chunk is also under the
//   tenant's data key (AES-256-GCM, authenticated: a changed byte fails the read); their chunk
//   ids are over the CTR bytes, which differ for every salt, so such chunks are never shared
//   with any other object's.
// A key is never logged: CustomerKey keeps it in a private field and shows only its MD5.
//
// Persists: nothing itself; ObjectVersionRecord / MultipartUploadRecord `sseCustomer` and
// MultipartPartRecord `sseSalt` through the engine's write commands.

import assert from 'node:assert/strict';
import {
  createCipheriv,
  createHash,
  createHmac,
  hkdfSync,
  randomBytes,
  timingSafeEqual,
  type Cipher,
} from 'node:crypto';
import { inspect } from 'node:util';
import type { BodySource } from './body.js';
import type { ReceivedBody } from './upload.js';
import { createMultiHasher, type DigestAlg, type MultiHasher } from '../engine/checksums.js';
import type { ObjectVersionRecord, SseCustomerRecord } from '../engine/index/schema.js';
import { SSE_C_SALT_BYTES, SSE_C_VERIFIER_BYTES } from '../engine/ops/encryption.js';
import { BadRequest, Forbidden } from '../util/errors.js';

/** Bytes of an SSE-C key: AES-256. */
export const CUSTOMER_KEY_BYTES = 32;
const AES_BLOCK_BYTES = 16;
const DATA_INFO = 'lightwell sse-c data v1';
const VERIFIER_INFO = 'lightwell sse-c verifier v1';
const ETAG_INFO = 'lightwell sse-c etag v1';
/** Bytes of an SSE-C ETag: an MD5's, so clients that parse ETags as hex MD5s still can. */
const ETAG_BYTES = 16;

/** The SSE-C fields of a request as sent (absent: not sent). */
export interface CustomerKeyFields {
  readonly algorithm?: string | undefined;
  readonly key?: string | undefined;
  readonly keyMd5?: string | undefined;
}

/** A customer key a request sent, checked against its MD5. */
export class CustomerKey {
  readonly #key: Buffer;

  private constructor(
    key: Buffer,
    /** The key's MD5, base64: what S3 answers in `…-customer-key-MD5`. */
    readonly keyMd5: string,
  ) {
    this.#key = key;
  }

  /**
   * The key the fields name, undefined when none was sent, or a 400 as S3 checks them: the
   * algorithm AES256, a 256-bit base64 key, and its MD5. `what` names the fields in messages.
   */
  static parse(fields: CustomerKeyFields, what: string): CustomerKey | undefined {
    const { algorithm, key, keyMd5 } = fields;
    if (algorithm === undefined && key === undefined && keyMd5 === undefined) return undefined;
    if (algorithm !== 'AES256')
      throw BadRequest(`the ${what} SSE-C algorithm must be given, and be AES256`);
    const bytes = Buffer.from(key ?? '', 'base64');
    if (bytes.length !== CUSTOMER_KEY_BYTES || bytes.toString('base64') !== key)
      throw BadRequest(`the ${what} SSE-C key must be 256 bits, base64-encoded`);
    const md5 = createHash('md5').update(bytes).digest();
    const given = Buffer.from(keyMd5 ?? '', 'base64');
    if (given.length !== md5.length || !timingSafeEqual(given, md5))
      throw BadRequest(`the ${what} SSE-C key MD5 is missing or does not match the key`);
    return new CustomerKey(bytes, md5.toString('base64'));
  }

  /** A new salt and its verifier, for a new version or upload under this key. */
  seal(): SseCustomerRecord {
    const salt = randomBytes(SSE_C_SALT_BYTES);
    return { salt, verifier: this.derive(salt, VERIFIER_INFO, SSE_C_VERIFIER_BYTES) };
  }

  /** Whether this is the key `record` was sealed with (constant time). */
  matches(record: SseCustomerRecord): boolean {
    const verifier = this.derive(Buffer.from(record.salt), VERIFIER_INFO, SSE_C_VERIFIER_BYTES);
    return (
      record.verifier.length === verifier.length &&
      timingSafeEqual(Buffer.from(record.verifier), verifier)
    );
  }

  /** The key of the ETags of bytes under `salt` (see `sealedUpload`). */
  etagKey(salt: Uint8Array): Buffer {
    return this.derive(Buffer.from(salt), ETAG_INFO, CUSTOMER_KEY_BYTES);
  }

  /** The AES-256 key of the bytes sealed under `salt`. */
  dataKey(salt: Uint8Array): Buffer {
    return this.derive(Buffer.from(salt), DATA_INFO, CUSTOMER_KEY_BYTES);
  }

  private derive(salt: Buffer, info: string, bytes: number): Buffer {
    return Buffer.from(hkdfSync('sha256', this.#key, salt, info, bytes));
  }

  /** Logs and JSON never carry the key. */
  toJSON(): { keyMd5: string } {
    return { keyMd5: this.keyMd5 };
  }

  [inspect.custom](): string {
    return `CustomerKey(md5 ${this.keyMd5})`;
  }
}

/**
 * The key a request about `version` (or a multipart upload) must send: none for one not under
 * SSE-C (a key sent anyway is a 400, as on AWS), the matching key for one that is: 400 without
 * a key; with another key 403 for a read of an object (AWS's answer: access to its bytes is
 * denied) and 400 for a part or a completion of an upload (a request that contradicts its
 * upload, as RGW answers it too).
 */
export function requireCustomerKeyFor(
  version: Pick<ObjectVersionRecord, 'sseCustomer'>,
  key: CustomerKey | undefined,
  what: 'object' | 'copy source' | 'upload' = 'object',
): CustomerKey | undefined {
  const record = version.sseCustomer;
  if (record === undefined) {
    if (key !== undefined)
      throw BadRequest(`the ${what} is not encrypted with a customer key: send no SSE-C key`);
    return undefined;
  }
  if (key === undefined)
    throw BadRequest(
      `the ${what} is encrypted with a customer key: the SSE-C algorithm, key and MD5 are required`,
    );
  if (!key.matches(record)) {
    const message = `the SSE-C key is not the one the ${what} is encrypted with`;
    throw what === 'upload' ? BadRequest(message) : Forbidden(message);
  }
  return key;
}

/**
 * SSE-C keys travel in request headers: AWS refuses them over plain HTTP, and so does Lightwell
 * unless the peer is on loopback (tests, a local proxy) or is `security.trusted_proxy`, the
 * proxy that terminates TLS in front of it, as for minting tokens.
 */
export function checkCustomerKeyTransport(transport: {
  readonly tls: boolean;
  readonly remoteAddress: string;
  readonly trustedProxy: string;
}): void {
  const { tls, remoteAddress, trustedProxy } = transport;
  const loopback = remoteAddress === '::1' || remoteAddress.startsWith('127.');
  if (tls || loopback || (trustedProxy !== '' && remoteAddress === trustedProxy)) return;
  throw BadRequest(
    'Requests specifying Server Side Encryption with Customer provided keys must be made over ' +
      'a secure connection.',
  );
}

/** A byte range of an object under one data key, CTR counter 0 at `start`. */
interface KeyedSpan {
  readonly start: number;
  readonly end: number;
  readonly key: Buffer;
}

/**
 * The AES-256-CTR keystream of a version (or of a part) under its customer key: `apply` turns
 * plaintext into stored bytes and back, at any offset. Spans are the version's parts (one span
 * for a single PUT), each with its own key.
 */
export class CustomerCipher {
  private constructor(private readonly spans: readonly KeyedSpan[]) {}

  /** The cipher of a version, whose record `key` matches (requireCustomerKeyFor). */
  static forVersion(
    version: Pick<ObjectVersionRecord, 'sseCustomer' | 'size' | 'partSizes'>,
    key: CustomerKey,
  ): CustomerCipher {
    const record = version.sseCustomer;
    assert.ok(record !== undefined, 'a cipher is made for an SSE-C version');
    if (record.partSalts === undefined)
      return new CustomerCipher([{ start: 0, end: version.size, key: key.dataKey(record.salt) }]);
    const sizes = version.partSizes ?? [];
    assert.equal(record.partSalts.length, sizes.length * SSE_C_SALT_BYTES, 'a salt per part');
    const spans: KeyedSpan[] = [];
    let start = 0;
    sizes.forEach((size, index) => {
      const at = index * SSE_C_SALT_BYTES;
      const salt = record.partSalts?.subarray(at, at + SSE_C_SALT_BYTES) as Buffer;
      spans.push({ start, end: start + size, key: key.dataKey(salt) });
      start += size;
    });
    return new CustomerCipher(spans);
  }

  /** The cipher of one part (or object) of `size` bytes under `salt`. */
  static forSalt(key: CustomerKey, salt: Uint8Array, size: number): CustomerCipher {
    return new CustomerCipher([{ start: 0, end: size, key: key.dataKey(salt) }]);
  }

  /** `bytes` at object offset `offset`, en- or decrypted (CTR is its own inverse): a new buffer. */
  apply(bytes: Uint8Array, offset: number): Buffer {
    const out = Buffer.allocUnsafeSlow(bytes.length);
    let done = 0;
    for (const span of this.spans) {
      if (done === bytes.length) break;
      const at = offset + done;
      if (at >= span.end || at < span.start) continue;
      const take = Math.min(bytes.length - done, span.end - at);
      const cipher = ctrAt(span.key, at - span.start);
      const skip = (at - span.start) % AES_BLOCK_BYTES;
      if (skip > 0) cipher.update(Buffer.alloc(skip));
      const piece = cipher.update(bytes.subarray(done, done + take));
      piece.copy(out, done);
      done += take;
    }
    assert.equal(done, bytes.length, 'the bytes lie inside the version');
    return out;
  }
}

/** AES-256-CTR under `key`, positioned at the block that holds byte `offset`. */
function ctrAt(key: Buffer, offset: number): Cipher {
  const iv = Buffer.alloc(AES_BLOCK_BYTES);
  const block = Math.floor(offset / AES_BLOCK_BYTES);
  // A 128-bit big-endian counter from 0; 2^53 bytes fit its low 64 bits.
  iv.writeBigUInt64BE(BigInt(block), 8);
  return createCipheriv('aes-256-ctr', key, iv);
}

/**
 * A body encrypted as it arrives: the upload pipeline stores (and hashes) the CTR bytes, and
 * `digests` are the plaintext's, which is what a client's Content-MD5 and checksums are of and
 * what GET and HEAD report. AES-CTR and the digests run on this thread, a few milliseconds per
 * MiB (docs/s3-data-protection.md).
 */
export class EncryptingSource implements BodySource {
  private readonly hasher: Promise<MultiHasher<DigestAlg>>;
  private readonly mac: ReturnType<typeof createHmac>;
  private ready: MultiHasher<DigestAlg> | undefined;
  /** Plaintext copies that arrived before the hasher was made (the first one or two). */
  private early: Buffer[] | undefined = [];
  private offset = 0;

  constructor(
    private readonly inner: BodySource,
    private readonly cipher: CustomerCipher,
    algs: readonly DigestAlg[],
    etagKey: Buffer,
  ) {
    this.mac = createHmac('sha256', etagKey);
    this.hasher = createMultiHasher(algs).then((hasher) => {
      for (const bytes of this.early ?? []) hasher.update(bytes);
      this.early = undefined;
      this.ready = hasher;
      return hasher;
    });
  }

  get aborted(): boolean {
    return this.inner.aborted;
  }

  onBody(handler: (chunk: ArrayBuffer, isLast: boolean) => void): void {
    this.inner.onBody((chunk, isLast) => {
      const plain = new Uint8Array(chunk);
      this.mac.update(plain);
      if (this.ready) this.ready.update(plain);
      else this.early?.push(Buffer.from(plain));
      const sealed = this.cipher.apply(plain, this.offset);
      this.offset += plain.length;
      handler(arrayBufferOf(sealed), isLast);
    });
  }

  onAbort(handler: () => void): void {
    this.inner.onAbort(handler);
  }

  pauseReading(): void {
    this.inner.pauseReading();
  }

  resumeReading(): void {
    this.inner.resumeReading();
  }

  /** The body's ETag: a keyed hash of the plaintext (see `sealedUpload`), quoted hex. */
  etag(): string {
    return `"${this.mac.digest().subarray(0, ETAG_BYTES).toString('hex')}"`;
  }

  /** The plaintext's digests (base64 by algorithm; MD5 among them when asked for). */
  async digests(): Promise<Record<string, string>> {
    const hasher = await this.hasher;
    const digests = hasher.digest();
    hasher.dispose();
    return digests;
  }
}

/** The bytes of `buffer` as an ArrayBuffer of their own. */
function arrayBufferOf(buffer: Buffer): ArrayBuffer {
  if (buffer.byteOffset === 0 && buffer.byteLength === buffer.buffer.byteLength)
    return buffer.buffer as ArrayBuffer;
  return buffer.buffer.slice(
    buffer.byteOffset,
    buffer.byteOffset + buffer.byteLength,
  ) as ArrayBuffer;
}

/** Decrypts `bytes` (a version's stored bytes from `start`, in order) for a server-side copy. */
export async function* decrypted(
  bytes: AsyncGenerator<ArrayBuffer, void, undefined>,
  cipher: CustomerCipher,
  start: number,
): AsyncGenerator<ArrayBuffer, void, undefined> {
  let offset = start;
  try {
    for await (const chunk of bytes) {
      const plain = cipher.apply(new Uint8Array(chunk), offset);
      offset += chunk.byteLength;
      yield arrayBufferOf(plain);
    }
  } finally {
    await bytes.return(undefined);
  }
}

/**
 * A body to be stored under `key` with a new salt: `source` is what the upload pipeline reads,
 * `record` what the version (or `salt`, the part) keeps, and `plaintext` turns what the pipeline
 * received into what the client sent: its digests over the plaintext. Its ETag is neither the
 * plaintext's MD5 (listings show ETags to readers without the key, and AWS's SSE-C ETags are
 * not the data's MD5 either) nor the stored bytes' (which change with every salt): HMAC-SHA256
 * of the plaintext under a key derived from the customer key and `etagSalt` (the upload's salt
 * for a part, so a part sent again gets its ETag again), cut to 16 bytes.
 */
export function sealedUpload(
  source: BodySource,
  key: CustomerKey,
  size: number,
  algs: readonly DigestAlg[],
  etagSalt?: Uint8Array,
): {
  source: BodySource;
  record: SseCustomerRecord;
  plaintext: (received: ReceivedBody) => Promise<ReceivedBody>;
} {
  const record = key.seal();
  const cipher = CustomerCipher.forSalt(key, record.salt, size);
  const sealed = new EncryptingSource(source, cipher, algs, key.etagKey(etagSalt ?? record.salt));
  const plaintext = async (received: ReceivedBody): Promise<ReceivedBody> => {
    const checksums = await sealed.digests();
    const md5 = checksums['MD5'];
    delete checksums['MD5'];
    const out: ReceivedBody = { ...received, checksums, etag: sealed.etag() };
    return md5 === undefined ? out : { ...out, md5: Buffer.from(md5, 'base64') };
  };
  return { source: sealed, record, plaintext };
}
