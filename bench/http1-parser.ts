// Incremental HTTP/1.1 response parser for the benchmark client.
//
// `feed(buffer, start, end)` accepts bytes in arbitrary pieces (a response may arrive one byte
// per TCP packet) and returns the position just past the end of the response once it is
// complete. It handles the status line and headers (interim 1xx responses are skipped),
// Content-Length bodies, chunked bodies with extensions and trailers, bodies delimited by the
// close of the connection, and responses without a body (HEAD, 204, 304). Body bytes are only
// counted and folded into a CRC32; they are kept (copied) only when the caller asks to collect
// a small body. Head bytes are copied into a fixed buffer only when a head straddles reads.

import { crc32 } from '@node-rs/crc32';
import { BenchError } from './bench-error.js';

export interface ParsedResponse {
  readonly status: number;
  /** Lower-cased names; repeated headers joined with ", ". */
  readonly headers: Readonly<Record<string, string>>;
  readonly bodyBytes: number;
  /** CRC32 (IEEE) of the body when requested, else 0. */
  readonly crc32: number;
  /** The body when collection was requested, else null. */
  readonly body: Buffer | null;
  readonly keepAlive: boolean;
}

export interface ParseOptions {
  readonly noBody: boolean;
  readonly crc: boolean;
  readonly collect: boolean;
}

const HEAD_BYTES_MAX = 64 * 1024;
const COLLECT_BYTES_MAX = 64 * 1024 * 1024;
const CHUNK_LINE_MAX = 4096;
const CRLF_CRLF = Buffer.from('\r\n\r\n', 'latin1');

const HEAD = 0;
const BODY_LENGTH = 1;
const CHUNK_SIZE = 2;
const CHUNK_DATA = 3;
const CHUNK_DATA_END = 4;
const TRAILER = 5;
const BODY_UNTIL_CLOSE = 6;
const DONE = 7;

export class ResponseParser {
  private state = DONE;
  private options: ParseOptions = { noBody: false, crc: false, collect: false };
  private readonly headBuffer = Buffer.allocUnsafe(HEAD_BYTES_MAX);
  private headFilled = 0;
  private remaining = 0;
  private line = '';
  private status = 0;
  private headers: Record<string, string> = {};
  private keepAlive = true;
  private bodyBytes = 0;
  private crc = 0;
  private pieces: Buffer[] = [];
  private collected = 0;

  begin(options: ParseOptions): void {
    this.options = options;
    this.state = HEAD;
    this.headFilled = 0;
    this.bodyBytes = 0;
    this.crc = 0;
    this.pieces = [];
    this.collected = 0;
    this.line = '';
  }

  get done(): boolean {
    return this.state === DONE;
  }

  result(): ParsedResponse {
    const body = this.options.collect ? joinPieces(this.pieces, this.collected) : null;
    return {
      status: this.status,
      headers: this.headers,
      bodyBytes: this.bodyBytes,
      crc32: this.crc,
      body,
      keepAlive: this.keepAlive,
    };
  }

  /** The peer closed the connection: completes a close-delimited body. */
  endOfStream(): boolean {
    if (this.state !== BODY_UNTIL_CLOSE) return this.state === DONE;
    this.state = DONE;
    return true;
  }

  /** Consumes bytes [start, end); returns where the response ended, or `end`. */
  feed(buffer: Buffer, start: number, end: number): number {
    let position = start;
    while (position < end && this.state !== DONE) {
      switch (this.state) {
        case HEAD:
          position = this.feedHead(buffer, position, end);
          break;
        case BODY_LENGTH:
          position = this.feedLength(buffer, position, end);
          break;
        case CHUNK_SIZE:
          position = this.feedChunkSize(buffer, position, end);
          break;
        case CHUNK_DATA:
          position = this.feedChunkData(buffer, position, end);
          break;
        case CHUNK_DATA_END:
          position = this.feedLine(buffer, position, end);
          break;
        case TRAILER:
          position = this.feedLine(buffer, position, end);
          break;
        case BODY_UNTIL_CLOSE:
          this.onBody(buffer, position, end);
          position = end;
          break;
      }
    }
    return position;
  }

  private feedHead(buffer: Buffer, start: number, end: number): number {
    if (this.headFilled === 0) {
      // Bound the search: a reused read buffer holds stale bytes past `end`.
      const index = buffer.subarray(0, end).indexOf(CRLF_CRLF, start);
      if (index >= 0) {
        this.onHead(buffer.toString('latin1', start, index));
        return index + 4;
      }
    }
    const count = Math.min(end - start, HEAD_BYTES_MAX - this.headFilled);
    buffer.copy(this.headBuffer, this.headFilled, start, start + count);
    const searchFrom = Math.max(0, this.headFilled - 3);
    const filledBefore = this.headFilled;
    this.headFilled += count;
    const index = this.headBuffer.subarray(0, this.headFilled).indexOf(CRLF_CRLF, searchFrom);
    if (index >= 0) {
      this.headFilled = 0;
      this.onHead(this.headBuffer.toString('latin1', 0, index));
      return start + (index + 4 - filledBefore);
    }
    if (this.headFilled >= HEAD_BYTES_MAX) throw new BenchError('response head over 64 KiB');
    return start + count;
  }

  private onHead(text: string): void {
    const head = parseHead(text);
    this.status = head.status;
    this.headers = head.headers;
    this.keepAlive = head.keepAlive;
    this.chooseFraming(head.headers);
  }

  private chooseFraming(headers: Record<string, string>): void {
    if (this.status >= 100 && this.status < 200 && this.status !== 101) {
      this.state = HEAD;
      return;
    }
    if (this.options.noBody || this.status === 204 || this.status === 304) {
      this.state = DONE;
      return;
    }
    if ((headers['transfer-encoding'] ?? '').toLowerCase().includes('chunked')) {
      this.state = CHUNK_SIZE;
      return;
    }
    const length = headers['content-length'];
    if (length !== undefined) {
      if (!/^\d+$/.test(length)) {
        throw new BenchError(`bad Content-Length ${JSON.stringify(length)}`);
      }
      this.remaining = Number(length);
      this.state = this.remaining === 0 ? DONE : BODY_LENGTH;
      return;
    }
    this.keepAlive = false;
    this.state = BODY_UNTIL_CLOSE;
  }

  private feedLength(buffer: Buffer, start: number, end: number): number {
    const count = Math.min(end - start, this.remaining);
    this.onBody(buffer, start, start + count);
    this.remaining -= count;
    if (this.remaining === 0) this.state = DONE;
    return start + count;
  }

  private feedChunkSize(buffer: Buffer, start: number, end: number): number {
    const lineEnd = this.readLine(buffer, start, end);
    if (lineEnd < 0) return end;
    const sizeText = this.takeLine().split(';')[0]?.trim() ?? '';
    if (!/^[0-9a-fA-F]+$/.test(sizeText)) {
      throw new BenchError(`bad chunk size ${JSON.stringify(sizeText)}`);
    }
    this.remaining = parseInt(sizeText, 16);
    this.state = this.remaining === 0 ? TRAILER : CHUNK_DATA;
    return lineEnd;
  }

  private feedChunkData(buffer: Buffer, start: number, end: number): number {
    const count = Math.min(end - start, this.remaining);
    this.onBody(buffer, start, start + count);
    this.remaining -= count;
    if (this.remaining === 0) this.state = CHUNK_DATA_END;
    return start + count;
  }

  /** CRLF after chunk data (must be empty) and trailer lines (the empty one ends the body). */
  private feedLine(buffer: Buffer, start: number, end: number): number {
    const lineEnd = this.readLine(buffer, start, end);
    if (lineEnd < 0) return end;
    const line = this.takeLine();
    if (this.state === CHUNK_DATA_END) {
      if (line !== '') throw new BenchError('missing CRLF after chunk data');
      this.state = CHUNK_SIZE;
    } else if (line === '') {
      this.state = DONE;
    }
    return lineEnd;
  }

  /** Accumulates one line; returns the position after its LF, or -1 if it is not complete. */
  private readLine(buffer: Buffer, start: number, end: number): number {
    const lf = buffer.subarray(0, end).indexOf(0x0a, start);
    const stop = lf >= 0 ? lf : end;
    this.line += buffer.toString('latin1', start, stop);
    if (this.line.length > CHUNK_LINE_MAX) throw new BenchError('chunk line too long');
    return stop === end ? -1 : stop + 1;
  }

  private takeLine(): string {
    const line = this.line.endsWith('\r') ? this.line.slice(0, -1) : this.line;
    this.line = '';
    return line;
  }

  private onBody(buffer: Buffer, start: number, end: number): void {
    const count = end - start;
    if (count === 0) return;
    this.bodyBytes += count;
    if (this.options.crc) this.crc = crc32(buffer.subarray(start, end), this.crc);
    if (this.options.collect) {
      this.collected += count;
      if (this.collected > COLLECT_BYTES_MAX) throw new BenchError('collected body over 64 MiB');
      // The read buffer is reused for the next read, so collected bytes must be copied.
      this.pieces.push(Buffer.from(buffer.subarray(start, end)));
    }
  }
}

export interface ParsedHead {
  readonly status: number;
  /** Lower-cased names; repeated headers joined with ", ". */
  readonly headers: Record<string, string>;
  /** What the version and the Connection header say (framing may still end the connection). */
  readonly keepAlive: boolean;
}

/** A response head without its final CRLF CRLF: the status line and the header lines. */
export function parseHead(text: string): ParsedHead {
  const lines = text.split('\r\n');
  const match = /^HTTP\/1\.([01]) (\d{3})/.exec(lines[0] ?? '');
  if (!match) {
    throw new BenchError(`bad status line ${JSON.stringify((lines[0] ?? '').slice(0, 80))}`);
  }
  const headers: Record<string, string> = {};
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i] ?? '';
    const colon = line.indexOf(':');
    if (colon <= 0) throw new BenchError(`bad header line ${JSON.stringify(line.slice(0, 80))}`);
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
  }
  const connection = (headers['connection'] ?? '').toLowerCase();
  const keepAlive =
    match[1] === '1' ? !connection.includes('close') : connection.includes('keep-alive');
  return { status: Number(match[2]), headers, keepAlive };
}

function joinPieces(pieces: Buffer[], total: number): Buffer {
  if (pieces.length === 1 && pieces[0] !== undefined) return pieces[0];
  return Buffer.concat(pieces, total);
}
