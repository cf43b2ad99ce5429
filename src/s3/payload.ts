// The payload of a signed S3 request, checked while it streams: the SHA-256 of
// `x-amz-content-sha256`, or the aws-chunked framing of the STREAMING-* modes with every chunk
// signature verified in order and the trailer (`x-amz-checksum-*`) read and, when signed,
// verified.
//
// It is a filter of the exchange's body (`Exchange.filterBody`), so every consumer (the upload
// pipeline, an XML body read) sees only the decoded payload and never buffers it whole: the
// decoder keeps at most one chunk-header line or trailer (CHUNK_LINE_BYTES_MAX,
// TRAILER_BYTES_MAX) besides the running hashes.
//
// Invariants:
// - The consumer's last delivery (`isLast`) comes only after the whole payload was checked; when
//   a check fails, the failure is recorded first (`PayloadCheck.error`) and the consumer then
//   gets an empty last delivery, so a consumer that calls `PayloadCheck.verify()` before it
//   commits commits nothing that failed (`XAmzContentSHA256Mismatch`, `SignatureDoesNotMatch`,
//   `IncompleteBody`, ...).
// - The decoded length must equal `x-amz-decoded-content-length`.
//
// Persists: nothing.

import { createHash, type Hash } from 'node:crypto';
import { s3Error } from './errors.js';
import {
  chunkStringToSign,
  hmacHex,
  signatureMatches,
  trailerStringToSign,
  type CredentialScope,
} from './sigv4.js';
import type { LightwellError } from '../util/errors.js';

/** A chunk-header line (`hex-size;chunk-signature=<64 hex>`) at most, CRLF included. */
export const CHUNK_LINE_BYTES_MAX = 4096;
/** The trailer (checksum lines and their signature) at most. */
export const TRAILER_BYTES_MAX = 4096;
/** A chunk's size at most (AWS clients send 64 KiB to 8 MiB chunks). */
export const CHUNK_BYTES_MAX = 1 << 30;

export type BodyHandler = (chunk: ArrayBuffer, isLast: boolean) => void;

/** What the signature says of the payload. */
export type PayloadMode =
  | { readonly kind: 'sha256'; readonly hex: string }
  | { readonly kind: 'unsigned' }
  | {
      readonly kind: 'chunked';
      /** Chunk signatures present and verified (the STREAMING-AWS4-HMAC-SHA256-* modes). */
      readonly signed: boolean;
      /** A trailer follows the last chunk (the *-TRAILER modes). */
      readonly trailer: boolean;
      readonly decodedLength: number;
      /** For signed chunks: the signing key, scope, time and the seed (request) signature. */
      readonly signing?: {
        readonly key: Buffer;
        readonly scope: CredentialScope;
        readonly amzDate: string;
        readonly seed: string;
      };
    };

/** The outcome of a payload check, for the handler that consumes the body. */
export class PayloadCheck {
  error: LightwellError | undefined;
  /** Trailing headers, by lower-case name (`x-amz-checksum-crc32` → base64). */
  readonly trailers = new Map<string, string>();
  complete = false;

  constructor(readonly mode: PayloadMode) {}

  /** Throws the recorded failure, if any: call it before committing anything of the body. */
  verify(): void {
    if (this.error) throw this.error;
  }
}

/**
 * Wraps a body handler so that it receives the checked, decoded payload. `declaredLength` is
 * the request's Content-Length (the framed length for aws-chunked bodies).
 */
export function payloadFilter(check: PayloadCheck): (handler: BodyHandler) => BodyHandler {
  return (handler) => {
    const mode = check.mode;
    if (mode.kind === 'unsigned') return handler;
    if (mode.kind === 'sha256') return sha256Filter(check, mode.hex, handler);
    const decoder = new ChunkedDecoder(mode, (bytes) => handler(bytes, false));
    let failed = false;
    return (chunk, isLast) => {
      if (failed) return;
      try {
        decoder.push(new Uint8Array(chunk));
        if (isLast) {
          decoder.end();
          for (const [name, value] of decoder.trailers) check.trailers.set(name, value);
          check.complete = true;
          handler(new ArrayBuffer(0), true);
        }
      } catch (error) {
        failed = true;
        check.error = error as LightwellError;
        handler(new ArrayBuffer(0), true);
      }
    };
  };
}

function sha256Filter(check: PayloadCheck, hex: string, handler: BodyHandler): BodyHandler {
  const hash: Hash = createHash('sha256');
  return (chunk, isLast) => {
    hash.update(new Uint8Array(chunk));
    if (!isLast) {
      handler(chunk, false);
      return;
    }
    // The last bytes wait until the hash is known: a mismatch must not complete the body.
    if (!signatureMatches(hash.digest('hex'), hex))
      check.error = s3Error('XAmzContentSHA256Mismatch');
    else check.complete = true;
    handler(check.error ? new ArrayBuffer(0) : chunk, true);
  };
}

const CR = 13;
const LF = 10;

type DecoderState = 'size' | 'data' | 'dataEnd' | 'trailer' | 'done';

/**
 * The aws-chunked framing as a push decoder:
 * `hex-size[;chunk-signature=sig]\r\n data \r\n` … `0[;chunk-signature=sig]\r\n`, then either
 * `\r\n` or trailer lines `name:value\r\n` (with `x-amz-trailer-signature:sig\r\n` when signed)
 * and `\r\n`. Data is handed on as it arrives (copies of the input's ranges).
 */
export class ChunkedDecoder {
  private state: DecoderState = 'size';
  private line: number[] = [];
  private remaining = 0;
  private chunkSignature = '';
  private chunkHash: Hash | undefined;
  private previous: string;
  private decoded = 0;
  private trailerBytes = 0;
  private readonly trailerLines: string[] = [];
  readonly trailers = new Map<string, string>();

  constructor(
    private readonly mode: Extract<PayloadMode, { kind: 'chunked' }>,
    private readonly emit: (bytes: ArrayBuffer) => void,
  ) {
    this.previous = mode.signing?.seed ?? '';
  }

  push(bytes: Uint8Array): void {
    let at = 0;
    while (at < bytes.length) {
      if (this.state === 'data') {
        const take = Math.min(this.remaining, bytes.length - at);
        const piece = bytes.subarray(at, at + take);
        this.chunkHash?.update(piece);
        // A copy of its own (Buffer#slice would share the input's memory).
        this.emit(new Uint8Array(piece).buffer);
        this.remaining -= take;
        at += take;
        if (this.remaining === 0) this.state = 'dataEnd';
        continue;
      }
      if (this.state === 'done') throw framing('bytes after the end of the aws-chunked body');
      const byte = bytes[at] as number;
      at += 1;
      this.line.push(byte);
      const limit = this.state === 'trailer' ? TRAILER_BYTES_MAX : CHUNK_LINE_BYTES_MAX;
      if (this.line.length > limit) throw framing('an aws-chunked line is too long');
      if (byte !== LF) continue;
      if (this.line.length < 2 || this.line[this.line.length - 2] !== CR)
        throw framing('aws-chunked lines end with CRLF');
      const text = Buffer.from(this.line.slice(0, -2)).toString('latin1');
      this.line = [];
      this.onLine(text);
    }
  }

  /** The body ended: it must have ended exactly at the end of the framing. */
  end(): void {
    if (this.state !== 'done') throw s3Error('IncompleteBody', 'the aws-chunked body is truncated');
    if (this.decoded !== this.mode.decodedLength)
      throw s3Error(
        'IncompleteBody',
        `the body decodes to ${this.decoded} bytes, x-amz-decoded-content-length says ` +
          `${this.mode.decodedLength}`,
      );
  }

  private onLine(text: string): void {
    switch (this.state) {
      case 'size':
        this.onSizeLine(text);
        return;
      case 'dataEnd':
        if (text !== '') throw framing('chunk data must be followed by CRLF');
        if (this.finalCrlf) {
          this.state = 'done';
          return;
        }
        this.verifyChunk();
        this.state = 'size';
        return;
      case 'trailer':
        this.onTrailerLine(text);
        return;
      case 'data':
      case 'done':
        throw framing('unexpected aws-chunked line');
    }
  }

  private onSizeLine(text: string): void {
    const match = /^([0-9a-fA-F]{1,16})(?:;chunk-signature=([0-9a-f]{64}))?$/.exec(text);
    if (!match) throw framing('a chunk header must be hex-size[;chunk-signature=…]');
    const size = Number.parseInt(match[1] as string, 16);
    if (size > CHUNK_BYTES_MAX) throw framing(`chunks are limited to ${CHUNK_BYTES_MAX} bytes`);
    if (this.mode.signed !== (match[2] !== undefined))
      throw this.mode.signed
        ? s3Error('SignatureDoesNotMatch', 'a chunk carries no chunk-signature')
        : framing('unsigned chunks carry no chunk-signature');
    this.decoded += size;
    if (this.decoded > this.mode.decodedLength)
      throw s3Error('IncompleteBody', 'the body is longer than x-amz-decoded-content-length');
    this.chunkSignature = match[2] ?? '';
    this.chunkHash = this.mode.signed ? createHash('sha256') : undefined;
    if (size > 0) {
      this.remaining = size;
      this.state = 'data';
      return;
    }
    // The last chunk: signed over empty data, then the trailer or the final CRLF.
    this.verifyChunk();
    this.state = this.mode.trailer ? 'trailer' : 'dataEnd';
    if (!this.mode.trailer) this.finalCrlf = true;
  }

  /** After the zero-size chunk of a body without a trailer, one CRLF ends the body. */
  private finalCrlf = false;

  private verifyChunk(): void {
    const signing = this.mode.signing;
    if (!this.mode.signed || !signing) return;
    const expected = hmacHex(
      signing.key,
      chunkStringToSign({
        amzDate: signing.amzDate,
        scope: signing.scope,
        previous: this.previous,
        dataHash: (this.chunkHash as Hash).digest('hex'),
      }),
    );
    if (!signatureMatches(expected, this.chunkSignature))
      throw s3Error('SignatureDoesNotMatch', 'a chunk signature does not match');
    this.previous = this.chunkSignature;
  }

  private onTrailerLine(text: string): void {
    this.trailerBytes += text.length + 2;
    if (this.trailerBytes > TRAILER_BYTES_MAX) throw framing('the trailer is too long');
    if (text === '') {
      this.finishTrailer();
      return;
    }
    const colon = text.indexOf(':');
    if (colon <= 0) throw framing('a trailer line must be name:value');
    const name = text.slice(0, colon).trim().toLowerCase();
    const value = text.slice(colon + 1).trim();
    if (name === 'x-amz-trailer-signature') {
      this.verifyTrailer(value);
      return;
    }
    if (this.trailerSigned) throw framing('the trailer signature must come last');
    this.trailers.set(name, value);
    this.trailerLines.push(`${name}:${value}\n`);
  }

  private trailerSigned = false;

  private verifyTrailer(signature: string): void {
    const signing = this.mode.signing;
    if (!this.mode.signed || !signing) throw framing('an unsigned trailer carries no signature');
    const expected = hmacHex(
      signing.key,
      trailerStringToSign({
        amzDate: signing.amzDate,
        scope: signing.scope,
        previous: this.previous,
        trailer: this.trailerLines.join(''),
      }),
    );
    if (!signatureMatches(expected, signature))
      throw s3Error('SignatureDoesNotMatch', 'the trailer signature does not match');
    this.trailerSigned = true;
  }

  private finishTrailer(): void {
    if (this.mode.signed && !this.trailerSigned)
      throw s3Error('SignatureDoesNotMatch', 'the trailer carries no x-amz-trailer-signature');
    this.state = 'done';
  }
}

function framing(message: string): LightwellError {
  return s3Error('IncompleteBody', `malformed aws-chunked body: ${message}`);
}
