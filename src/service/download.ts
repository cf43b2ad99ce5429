// The streaming GET path: the chunks that cover the requested range are read, verified and
// decrypted by the pool a few at a time ahead of the socket, and written with uWS backpressure
// (tryEnd + onWritable). Memory per download is bounded by the read-ahead window.
//
// Where it can, a read lands in blocks of the download arena, which the pool writes and this
// thread sends from in place; the blocks go back once uWS has taken their bytes. A read that
// finds too few free blocks waits for its own download's earlier pieces to give theirs back;
// one with nothing of its download in flight is answered as a transferred ArrayBuffer instead,
// so a download never waits for blocks that others hold (clients that read slowly cannot stall
// the rest). Each transferred buffer counts as external memory on this thread, and V8 answers a
// stream of them with a mark-compact every few tens of milliseconds: the arena is the fast path.

import assert from 'node:assert/strict';
import type { Exchange } from '../http/exchange.js';
import { statusLine } from '../http/exchange.js';
import type { TenantKeyMaterial, ReadTask, Outcome, TaskRunner } from '../workers/protocol.js';
import { unpackChunkRefs } from '../engine/ops/objects.js';
import type { ObjectVersionRecord } from '../engine/index/schema.js';
import { BadRequest, CorruptData, InvalidRange, errorCode, fromWire } from '../util/errors.js';
import { readChunk, readChunkNow, type ChunkStoreDeps } from '../workers/chunk-store.js';
import { INLINE_CHUNK_BYTES_MAX, tenantKeysOf } from './upload.js';
import type { BodyArena } from './body-arena.js';
import { ownBytes } from '../util/buffer-pool.js';

/** Pieces a download reads ahead of its socket whatever else the gateway serves. */
const READ_AHEAD_CHUNKS = 6;
/**
 * Pieces it may read ahead while the download arena stays at least half free after the read's
 * blocks are taken: one or two downloads go deeper, which pays because direct reads get no
 * read-ahead from the kernel, and many downloads share the arena at READ_AHEAD_CHUNKS each
 * (8 × 6 chunks of about 1 MiB fill the default 64 MiB).
 */
const READ_AHEAD_CHUNKS_DEEP = 16;

/** Bytes at an object offset, turned into other bytes of the same length (a new buffer). */
export type ByteTransform = (bytes: Uint8Array, offset: number) => Buffer;

export interface ByteRange {
  readonly start: number;
  /** Inclusive. */
  readonly end: number;
}

/**
 * Parses a single `Range: bytes=…` header against a size. Returns `undefined` for "serve the
 * whole object" (no header, or a form we do not serve such as several ranges) and throws
 * `invalid_range` (416) when the range cannot be satisfied.
 */
export function parseRange(header: string | undefined, size: number): ByteRange | undefined {
  if (header === undefined) return undefined;
  const match = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(header);
  if (!match) return undefined;
  const [, first = '', last = ''] = match;
  if (first === '' && last === '') return undefined;
  if (first === '') {
    const suffix = Number(last);
    if (suffix === 0 || size === 0) throw InvalidRange('the range is not satisfiable', { size });
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(first);
  // A reversed range is not a valid range-spec, which a server may ignore (RFC 9110 §14.1.1):
  // the whole object, as S3 answers it.
  if (last !== '' && Number(last) < start) return undefined;
  const end = last === '' ? size - 1 : Math.min(Number(last), size - 1);
  if (start >= size) throw InvalidRange('the range is not satisfiable', { size });
  return { start, end };
}

export interface DownloadServices {
  readonly arena: BodyArena;
  readonly pool: TaskRunner;
  /** Reads chunks on the gateway's own thread (small ones, see INLINE_CHUNK_BYTES_MAX). */
  readonly inline: ChunkStoreDeps;
  /**
   * On a cluster member: replaces this node's copy of a chunk that failed its checksum with a
   * good one from another member; answers whether it did (cluster-read.ts `chunkRepairOf`).
   */
  readonly repairChunk?: (tenantNum: number, chunkId: Uint8Array) => Promise<boolean>;
}

/** Bytes of a piece ready to send, and what gives back the blocks they are in. */
interface ReadPiece {
  readonly bytes: Buffer[];
  readonly release: () => void;
}

const NOTHING_TO_RELEASE = (): void => undefined;

/** Where a small chunk read without waiting is decrypted; sent, or copied, before it is reused. */
const nowPlaintext = Buffer.allocUnsafeSlow(INLINE_CHUNK_BYTES_MAX);

/**
 * Sends the object's bytes (or `range` of them) with `headers`. Answers undefined when the
 * response is complete on return (a HEAD, an empty body, or a small object read without
 * waiting), else a promise settled when it is.
 */
export function sendObject(
  services: DownloadServices,
  exchange: Exchange,
  input: {
    keys: TenantKeyMaterial;
    version: ObjectVersionRecord;
    range: ByteRange | undefined;
    headers: Record<string, string>;
    /**
     * Turns the stored bytes at an object offset into the bytes sent (an SSE-C version's
     * decryption, service/customer-key.ts); the stored bytes are sent as they are without it.
     */
    transform?: ByteTransform | undefined;
  },
): Promise<void> | undefined {
  const { version, range } = input;
  // Bytes under a customer key are sent only decrypted with it (customer-key.ts): a transport
  // without SSE-C (the native API, signed URLs) is refused rather than sent the stored bytes.
  if (version.sseCustomer !== undefined && input.transform === undefined)
    throw BadRequest('the object is encrypted with a customer key: read it over S3 with the key');
  const start = range?.start ?? 0;
  const end = range ? range.end + 1 : version.size;
  const total = end - start;
  // The caller's headers are written as they are; a copy only where a range adds its own.
  const headers = range
    ? { ...input.headers, 'Content-Range': `bytes ${range.start}-${range.end}/${version.size}` }
    : input.headers;
  const status = range ? 206 : 200;
  if (exchange.method === 'HEAD' || total === 0) {
    exchange.send(status, { ...headers, 'Content-Length': String(total) }, Buffer.alloc(0));
    return undefined;
  }
  const pieces = coveringChunks(version, start, end);
  const writer = new StreamWriter(exchange, status, headers, total, input.transform, start);
  const [first] = pieces;
  if (pieces.length === 1 && first && first.plainLength <= INLINE_CHUNK_BYTES_MAX) {
    // A small object whose record the page cache holds is read, decrypted and written in this
    // call (the common case for small objects): no buffer of its own and no promise.
    const plain = nowPlaintext.subarray(0, first.plainLength);
    if (readNowOrLater(services, inlineChunk(input.keys, first), plain)) {
      if (!exchange.open) return undefined;
      const whole = first.from === 0 && first.to === first.plainLength;
      const sent = writer.write(whole ? plain : plain.subarray(first.from, first.to), true);
      if (sent) return sent.then(() => writer.end());
      writer.end();
      return undefined;
    }
  }
  return sendPieces(services, exchange, input.keys, pieces, writer);
}

/** Pieces a server-side read (`versionBytes`) reads ahead of its consumer. */
const COPY_READ_AHEAD_CHUNKS = 2;

/**
 * The bytes of `range` of a version (all of them without one), in order, for a server-side copy
 * that writes them again (a part copied from an object): each yielded buffer is the caller's
 * own. At most COPY_READ_AHEAD_CHUNKS pieces are read ahead; ending the iteration early (or a
 * failed read) gives back the blocks of those still in flight.
 */
export async function* versionBytes(
  services: DownloadServices,
  keys: TenantKeyMaterial,
  version: ObjectVersionRecord,
  range: ByteRange | undefined,
): AsyncGenerator<ArrayBuffer, void, undefined> {
  const pieces = coveringChunks(version, range?.start ?? 0, range ? range.end + 1 : version.size);
  const reads: Array<Promise<ReadPiece>> = [];
  const readNext = (): void => {
    const piece = pieces[reads.length] as Piece;
    const read = readOne(services, keys, piece, { mayTransfer: true, deep: false });
    assert.ok(read, 'a read that may transfer is always made');
    read.catch(() => undefined);
    reads.push(read);
  };
  let index = 0;
  try {
    for (; index < pieces.length; index += 1) {
      while (reads.length < Math.min(pieces.length, index + 1 + COPY_READ_AHEAD_CHUNKS)) readNext();
      const piece = await (reads[index] as Promise<ReadPiece>);
      const own = new Uint8Array(piece.bytes.reduce((sum, bytes) => sum + bytes.length, 0));
      let at = 0;
      for (const bytes of piece.bytes) {
        own.set(bytes, at);
        at += bytes.length;
      }
      piece.release();
      yield own.buffer;
    }
  } finally {
    for (const read of reads.slice(index + 1)) {
      void read.then(
        (piece) => piece.release(),
        () => undefined,
      );
    }
  }
}

/** Streams `pieces` through `writer`, reading ahead of the socket (see the header). */
async function sendPieces(
  services: DownloadServices,
  exchange: Exchange,
  keys: TenantKeyMaterial,
  pieces: readonly Piece[],
  writer: StreamWriter,
): Promise<void> {
  // Reads ahead of the socket, by piece index; each is dropped once written, so a download
  // holds at most READ_AHEAD_CHUNKS_DEEP pieces, whatever the object's size. A read that finds
  // too few free blocks waits for this download's own earlier pieces to give theirs back,
  // unless none is in flight: then (`mayTransfer`) it is answered as a transferred buffer.
  const reads: Array<Promise<ReadPiece> | undefined> = [];
  const readAhead = (next: number, mayTransfer: boolean): void => {
    while (reads.length < Math.min(pieces.length, next + READ_AHEAD_CHUNKS_DEEP)) {
      const piece = pieces[reads.length] as Piece;
      const deep = reads.length >= next + READ_AHEAD_CHUNKS;
      const read = readOne(services, keys, piece, {
        mayTransfer: mayTransfer && reads.length === next,
        deep,
      });
      if (read === undefined) return;
      read.catch(() => undefined);
      reads.push(read);
    }
  };
  let index = 0;
  try {
    for (; index < pieces.length; index += 1) {
      readAhead(index, true);
      const piece = await (reads[index] as Promise<ReadPiece>);
      reads[index] = undefined; // from here the piece is this iteration's to release
      try {
        readAhead(index + 1, false);
        for (const bytes of piece.bytes) {
          if (!exchange.open) return;
          await writer.write(bytes);
        }
      } finally {
        piece.release();
      }
    }
    writer.end();
  } catch (error) {
    // The status line and part of the body are out: a problem object can no longer be sent.
    // Cutting the connection is the one signal left; the client sees a body shorter than its
    // Content-Length instead of waiting for bytes that never come.
    if (writer.started && exchange.open) exchange.res.close();
    throw error;
  } finally {
    // Reads still ahead of the socket give their blocks back when they end (the one at `index`
    // is among them if it was never taken).
    for (const read of reads.slice(index)) {
      void read?.then(
        (piece) => piece.release(),
        () => undefined,
      );
    }
  }
}

/**
 * Reads one piece: on this thread if small, else by the pool, into arena blocks if enough are
 * free, else as a transferred buffer if `mayTransfer`; else answers undefined (read later). A
 * `deep` read (beyond READ_AHEAD_CHUNKS) is made only into blocks, and only while the arena
 * keeps half of its blocks free.
 */
function readOne(
  services: DownloadServices,
  keys: TenantKeyMaterial,
  piece: Piece,
  how: { mayTransfer: boolean; deep: boolean },
): Promise<ReadPiece> | undefined {
  const inline = piece.plainLength <= INLINE_CHUNK_BYTES_MAX;
  const { arena } = services;
  const blockCount = Math.ceil(piece.plainLength / arena.blockBytes);
  if (how.deep && (inline || arena.available - blockCount < arena.blockCount / 2)) {
    return undefined;
  }
  const again = (): Promise<ReadPiece> =>
    inline ? readInline(services, keys, piece) : readPooled(services, keys, piece, undefined);
  if (inline) return orFromReplica(services, keys, piece, again(), again);
  const blocks = blockCount <= arena.blockCount ? arena.tryTakeMany(blockCount) : undefined;
  if (blocks === undefined && !how.mayTransfer) return undefined;
  return orFromReplica(services, keys, piece, readPooled(services, keys, piece, blocks), again);
}

/**
 * Read fallback on a cluster member (docs/cluster.md §8a, "Corrupt replicas"): a piece whose
 * stored copy failed its checksum is replaced with a good copy from another member (fetched,
 * verified there and here, fsync'ed and indexed by the engine), then read again, once, so the
 * client gets the right bytes and the bad copy is repaired by the same step. Anything else, or
 * no member with a good copy, fails as the read did.
 */
async function orFromReplica(
  services: DownloadServices,
  keys: TenantKeyMaterial,
  piece: Piece,
  read: Promise<ReadPiece>,
  again: () => Promise<ReadPiece>,
): Promise<ReadPiece> {
  try {
    return await read;
  } catch (error) {
    const { repairChunk } = services;
    if (errorCode(error) !== 'corrupt_data' || repairChunk === undefined) throw error;
    if (!(await repairChunk(keys.tenantNum, piece.id).catch(() => false))) throw error;
    return again();
  }
}

/**
 * `readChunkNow`, except that a corrupt copy answers false instead of failing: the awaited read
 * then meets it again and does what a corrupt chunk calls for (records it for repair, and on a
 * cluster member reads another replica's copy through the fallback above).
 */
function readNowOrLater(
  services: DownloadServices,
  chunk: ReturnType<typeof inlineChunk>,
  plain: Uint8Array,
): boolean {
  try {
    return readChunkNow(services.inline, chunk, plain);
  } catch (error) {
    if (errorCode(error) !== 'corrupt_data') throw error;
    return false;
  }
}

async function readInline(
  services: DownloadServices,
  keys: TenantKeyMaterial,
  piece: Piece,
): Promise<ReadPiece> {
  const plain = await readChunk(services.inline, inlineChunk(keys, piece));
  return { bytes: [plain.subarray(piece.from, piece.to)], release: NOTHING_TO_RELEASE };
}

/** What the gateway thread's chunk reads take for `piece`. */
function inlineChunk(keys: TenantKeyMaterial, piece: Piece) {
  return { keys: tenantKeysOf(keys), chunkId: piece.id, plainLength: piece.plainLength };
}

async function readPooled(
  services: DownloadServices,
  keys: TenantKeyMaterial,
  piece: Piece,
  blocks: number[] | undefined,
): Promise<ReadPiece> {
  const { arena, pool } = services;
  const task: ReadTask = {
    kind: 'read',
    keys,
    chunkId: ownBytes(piece.id), // a view into the whole version record (see ownBytes)
    plainLength: piece.plainLength,
    ...(blocks && { into: blocks }),
  };
  let result: ArrayBuffer | number | Outcome<never>;
  try {
    result = (await pool.run(task)) as ArrayBuffer | number | Outcome<never>;
  } catch (error) {
    if (blocks) arena.releaseAll(blocks);
    throw error;
  }
  // The one answer that keeps the blocks: the worker filled them with the whole chunk.
  if (blocks && result === piece.plainLength) {
    return {
      bytes: blockViews(arena, blocks, piece.from, piece.to),
      release: () => arena.releaseAll(blocks),
    };
  }
  if (blocks) arena.releaseAll(blocks);
  if (result instanceof ArrayBuffer) {
    return {
      bytes: [Buffer.from(result, piece.from, piece.to - piece.from)],
      release: NOTHING_TO_RELEASE,
    };
  }
  // Never send blocks the worker did not fill: they hold an earlier download's bytes.
  if (typeof result === 'number') {
    throw CorruptData('a chunk read answered the wrong length', {
      plainLength: piece.plainLength,
      length: result,
    });
  }
  throw fromWire((result as { error: Parameters<typeof fromWire>[0] }).error);
}

/** Views of plaintext bytes [from, to) laid out over `blocks` in order. */
function blockViews(
  arena: BodyArena,
  blocks: readonly number[],
  from: number,
  to: number,
): Buffer[] {
  const views: Buffer[] = [];
  const { blockBytes } = arena;
  for (let at = from; at < to;) {
    const i = Math.floor(at / blockBytes);
    const end = Math.min(to, (i + 1) * blockBytes);
    views.push(arena.view(blocks[i] as number, at - i * blockBytes, end - i * blockBytes));
    at = end;
  }
  return views;
}

interface Piece {
  readonly id: Buffer;
  readonly plainLength: number;
  /** The part of the chunk's plaintext to send. */
  readonly from: number;
  readonly to: number;
}

function coveringChunks(version: ObjectVersionRecord, start: number, end: number): Piece[] {
  const pieces: Piece[] = [];
  let offset = 0;
  for (const ref of unpackChunkRefs(version.chunks)) {
    const chunkStart = offset;
    const chunkEnd = offset + ref.plainLength;
    offset = chunkEnd;
    if (chunkEnd <= start || chunkStart >= end) continue;
    pieces.push({
      id: ref.id,
      plainLength: ref.plainLength,
      from: Math.max(start, chunkStart) - chunkStart,
      to: Math.min(end, chunkEnd) - chunkStart,
    });
  }
  return pieces;
}

/** Writes a response body of known length piece by piece, waiting whenever the socket is full. */
class StreamWriter {
  /** The status line and headers have been written. */
  started = false;
  /** Settles the write that waits for the socket to drain. */
  private drained: (() => void) | undefined;
  /** The abort handler is attached (at the first write that waits). */
  private watching = false;

  constructor(
    private readonly exchange: Exchange,
    private readonly status: number,
    private readonly headers: Record<string, string>,
    private readonly total: number,
    private readonly transform?: ByteTransform | undefined,
    /** The object offset of the first byte written (for `transform`). */
    private offset = 0,
  ) {}

  /**
   * After the last write. A response still open then fell short of its Content-Length (the
   * object's size and its chunks disagree): the status line is out, so the connection is cut,
   * the one signal left, and the error is thrown for the log and the audit row.
   */
  end(): void {
    const { exchange } = this;
    if (!exchange.open) return;
    exchange.status = 500;
    exchange.done = true;
    exchange.res.close();
    throw CorruptData('the object is shorter than its size', { size: this.total });
  }

  /**
   * Writes `bytes`, after the status line and headers on the first call. Answers undefined when
   * uWS took all of them at once, else a promise settled when it has (or the client went away).
   * A `transient` buffer is reused once this returns, so what uWS did not take is copied first.
   */
  write(stored: Buffer, transient = false): Promise<void> | undefined {
    const { res } = this.exchange;
    const bytes = this.transform ? this.transform(stored, this.offset) : stored;
    this.offset += stored.length;
    let ended: [ok: boolean, done: boolean] = [false, false];
    let base = 0;
    res.cork(() => {
      if (!this.started) {
        this.started = true;
        this.exchange.status = this.status;
        res.writeStatus(statusLine(this.status));
        res.writeHeader('X-Request-Id', this.exchange.requestId);
        for (const name in this.headers) res.writeHeader(name, this.headers[name] as string);
      }
      base = res.getWriteOffset();
      ended = res.tryEnd(bytes, this.total);
      this.exchange.bytesOut += bytes.length;
    });
    const [ok, done] = ended;
    if (done) this.exchange.done = true;
    if (ok || done) return undefined;
    let rest = bytes;
    if (transient) {
      const taken = res.getWriteOffset() - base;
      rest = Buffer.from(bytes.subarray(taken));
      base += taken;
    }
    return new Promise((resolve) => {
      this.drained = resolve;
      // One abort handler for the whole response, attached by the first write that waits (a
      // small object is written at once and needs none): one per waiting write would keep
      // every piece that ever waited referenced until the connection closes.
      if (!this.watching) {
        this.watching = true;
        this.exchange.onAbort(() => this.drained?.());
      }
      res.onWritable((offset) => {
        const [retryOk, retryDone] = res.tryEnd(rest.subarray(offset - base), this.total);
        if (retryDone) this.exchange.done = true;
        if (retryOk || retryDone) {
          this.drained = undefined;
          // Continue on a later turn: a write issued from inside this callback would register
          // its own onWritable before uWS clears this one, and the stream would stall.
          setImmediate(resolve);
        }
        return retryOk;
      });
    });
  }
}
