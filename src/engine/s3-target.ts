// A small S3 client of a backup target (another S3 endpoint: docs/console.md, "Backups to an S3
// endpoint"), for the backup runner: put a file (one request, or a multipart upload for a large
// one), copy an object the target holds (server-side, for an incremental backup), get an object
// into a file. Path-style requests signed with AWS Signature Version 4.
//
// Invariants:
// - Verified: every request that carries a body signs its SHA-256 (`x-amz-content-sha256`), so
//   the endpoint refuses a body changed on the way (S3's XAmzContentSHA256Mismatch); a download
//   is checked by the caller against the size and SHA-256 its manifest or record holds.
// - Bounded memory: a file is read and sent a part (PART_BYTES) at a time; a download is written
//   to its file as it arrives. Every answer body the client reads whole is capped.
// - The secret is used only to sign: it is in no error, log line or answer. An error names the
//   endpoint, the object key, the HTTP status and the S3 error code.
//
// Persists: nothing (the target's settings are ops/backup-targets.ts's).

import { Buffer } from 'node:buffer';
import { createHash, createHmac } from 'node:crypto';
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';
import { CorruptData, errorCode, Unavailable } from '../util/errors.js';

/** A multipart upload's part (and the largest file sent in one request). */
export const PART_BYTES = 16 * 1024 * 1024;
/** S3's limit on a server-side copy in one request. */
const COPY_BYTES_MAX = 5 * 1024 * 1024 * 1024;
/** The most of an answer body read whole (XML answers, errors). */
const ANSWER_BYTES_MAX = 1024 * 1024;
/** A request that sends or receives nothing for this long fails. */
const IDLE_MS = 60_000;

export interface S3Endpoint {
  /** `http(s)://host[:port]`, no path. */
  endpoint: string;
  region: string;
  bucket: string;
  accessKeyId: string;
  secretAccessKey: string;
}

interface Answer {
  status: number;
  headers: IncomingMessage['headers'];
  body: Buffer;
}

/** Percent-encodes as SigV4 does: everything but unreserved characters (and `/` in a path). */
function encode(text: string, slash: boolean): string {
  const encoded = encodeURIComponent(text).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
  return slash ? encoded.replace(/%2F/g, '/') : encoded;
}

const sha256Hex = (data: Buffer | string): string =>
  createHash('sha256').update(data).digest('hex');
const hmac = (key: Buffer | string, data: string): Buffer =>
  createHmac('sha256', key).update(data).digest();

interface Signed {
  method: string;
  key: string;
  query: Record<string, string>;
  headers: Record<string, string>;
  payloadSha256: string;
}

/** The request's headers with its SigV4 Authorization (signed: every header sent). */
function sign(target: S3Endpoint, request: Signed, now: Date): Record<string, string> {
  const url = new URL(target.endpoint);
  const amzDate = now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');
  const date = amzDate.slice(0, 8);
  const headers: Record<string, string> = {
    ...request.headers,
    host: url.host,
    'x-amz-date': amzDate,
    'x-amz-content-sha256': request.payloadSha256,
  };
  const names = Object.keys(headers)
    .map((name) => name.toLowerCase())
    .sort();
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
  const canonical = [
    request.method,
    encode(`/${target.bucket}/${request.key}`, true),
    canonicalQuery(request.query),
    names.map((name) => `${name}:${String(lower[name]).trim()}\n`).join(''),
    names.join(';'),
    request.payloadSha256,
  ].join('\n');
  const scope = `${date}/${target.region}/s3/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256Hex(canonical)].join('\n');
  let signingKey = hmac(`AWS4${target.secretAccessKey}`, date);
  for (const part of [target.region, 's3', 'aws4_request']) signingKey = hmac(signingKey, part);
  const signature = createHmac('sha256', signingKey).update(toSign).digest('hex');
  headers['authorization'] =
    `AWS4-HMAC-SHA256 Credential=${target.accessKeyId}/${scope}, ` +
    `SignedHeaders=${names.join(';')}, Signature=${signature}`;
  return headers;
}

function canonicalQuery(query: Record<string, string>): string {
  return Object.keys(query)
    .sort()
    .map((name) => `${encode(name, false)}=${encode(query[name] ?? '', false)}`)
    .join('&');
}

interface SendOptions {
  query?: Record<string, string>;
  headers?: Record<string, string>;
  body?: Buffer;
  sink?: (answer: IncomingMessage) => Promise<void>;
}

/** Tries of a request, the pause before the second (4x more before each next), and the
 * statuses that are tried again: the endpoint's own transient failures. */
const SEND_ATTEMPTS = 4;
const RETRY_PAUSE_MS = 250;
const RETRIED_STATUSES = new Set([500, 502, 503, 504]);

/** A client of one bucket of an endpoint (the caller puts the target's prefix in each key). */
export class S3Target {
  constructor(
    private readonly target: S3Endpoint,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Sends a signed request; answers its status, headers and body (or streams it to `sink`). A
   * request without a sink that fails on the way (a reset keep-alive socket, say) or meets a 500,
   * 502, 503 (SlowDown) or 504 is sent again, signed afresh, after a growing pause: one such
   * answer must not fail a whole backup.
   */
  private async send(method: string, key: string, options: SendOptions = {}): Promise<Answer> {
    for (let attempt = 1; ; attempt += 1) {
      const last = options.sink !== undefined || attempt >= SEND_ATTEMPTS;
      let answer: Answer;
      try {
        answer = await this.sendOnce(method, key, options);
      } catch (error) {
        if (last || errorCode(error) !== 'unavailable') throw error;
        await sleep(RETRY_PAUSE_MS * 4 ** (attempt - 1));
        continue;
      }
      if (last || !RETRIED_STATUSES.has(answer.status)) return answer;
      await sleep(RETRY_PAUSE_MS * 4 ** (attempt - 1));
    }
  }

  /** Sends one signed request. */
  private sendOnce(method: string, key: string, options: SendOptions): Promise<Answer> {
    const body = options.body ?? Buffer.alloc(0);
    const query = options.query ?? {};
    const headers = sign(
      this.target,
      {
        method,
        key,
        query,
        headers: { ...options.headers, 'content-length': String(body.length) },
        payloadSha256: sha256Hex(body),
      },
      new Date(this.now()),
    );
    const url = new URL(this.target.endpoint);
    const search = canonicalQuery(query);
    const path = encode(`/${this.target.bucket}/${key}`, true) + (search ? `?${search}` : '');
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    return new Promise<Answer>((resolve, reject) => {
      const failed = (error: Error) =>
        reject(Unavailable(`${this.where(key)}: ${error.message}`, {}, { cause: error }));
      const req = send(
        { method, host: url.hostname, port: url.port, path, headers, timeout: IDLE_MS },
        (answer) => {
          const status = answer.statusCode ?? 0;
          if (options.sink && status >= 200 && status < 300) {
            options
              .sink(answer)
              .then(
                () => resolve({ status, headers: answer.headers, body: Buffer.alloc(0) }),
                reject,
              );
            return;
          }
          readCapped(answer).then(
            (bytes) => resolve({ status, headers: answer.headers, body: bytes }),
            failed,
          );
        },
      );
      req.on('timeout', () =>
        req.destroy(Unavailable(`no answer for ${String(IDLE_MS / 1000)} s`)),
      );
      req.on('error', failed);
      req.end(body);
    });
  }

  private where(key: string): string {
    return `${this.target.endpoint}/${this.target.bucket}/${key}`;
  }

  /** Throws `unavailable` naming the request and the endpoint's S3 error code. */
  private check(answer: Answer, key: string, what: string): Answer {
    const text = answer.body.toString('utf8');
    // A copy may fail after its 200 was sent: the error is then in the body.
    if (answer.status >= 200 && answer.status < 300 && !text.includes('<Error>')) return answer;
    const code = /<Code>([^<]{1,100})<\/Code>/.exec(text)?.[1] ?? 'no S3 error code';
    throw Unavailable(
      `${what} ${this.where(key)} answered ${String(answer.status)} (${code}); the backup ` +
        "target's settings or the endpoint are at fault",
    );
  }

  /** Uploads the file at `path` (its `bytes`) as `key`: one request, or a multipart upload. */
  async putFile(key: string, path: string, bytes: number): Promise<void> {
    const file = await open(path, constants.O_RDONLY);
    try {
      const read = async (offset: number, length: number): Promise<Buffer> => {
        const buffer = Buffer.allocUnsafe(length);
        let got = 0;
        while (got < length) {
          const { bytesRead } = await file.read(buffer, got, length - got, offset + got);
          if (bytesRead === 0) throw Unavailable(`${path} ended before ${String(bytes)} bytes`);
          got += bytesRead;
        }
        return buffer;
      };
      if (bytes <= PART_BYTES) {
        const body = await read(0, bytes);
        this.check(await this.send('PUT', key, { body }), key, 'PUT');
        return;
      }
      await this.putMultipart(key, bytes, read);
    } finally {
      await file.close();
    }
  }

  async putBytes(key: string, body: Buffer): Promise<void> {
    this.check(await this.send('PUT', key, { body }), key, 'PUT');
  }

  private async putMultipart(
    key: string,
    bytes: number,
    read: (offset: number, length: number) => Promise<Buffer>,
  ): Promise<void> {
    const created = this.check(
      await this.send('POST', key, { query: { uploads: '' } }),
      key,
      'CreateMultipartUpload',
    );
    const uploadId = /<UploadId>([^<]{1,1024})<\/UploadId>/.exec(created.body.toString())?.[1];
    if (uploadId === undefined)
      throw Unavailable(`CreateMultipartUpload ${this.where(key)} answered no upload id`);
    const etags: string[] = [];
    try {
      for (let offset = 0; offset < bytes; offset += PART_BYTES) {
        const body = await read(offset, Math.min(PART_BYTES, bytes - offset));
        const partNumber = String(etags.length + 1);
        const answer = this.check(
          await this.send('PUT', key, { query: { partNumber, uploadId }, body }),
          key,
          `UploadPart ${partNumber}`,
        );
        etags.push(answer.headers.etag ?? '');
      }
      const parts = etags
        .map(
          (etag, i) => `<Part><PartNumber>${String(i + 1)}</PartNumber><ETag>${etag}</ETag></Part>`,
        )
        .join('');
      const body = Buffer.from(
        `<CompleteMultipartUpload>${parts.replace(/"/g, '&quot;')}</CompleteMultipartUpload>`,
      );
      this.check(
        await this.send('POST', key, { query: { uploadId }, body }),
        key,
        'CompleteMultipartUpload',
      );
    } catch (error) {
      // Frees the parts sent; the upload failed either way.
      await this.send('DELETE', key, { query: { uploadId } }).catch(() => undefined);
      throw error;
    }
  }

  /**
   * Copies `from` (a key of the same bucket) to `key` on the endpoint; false when the file is
   * too large for one copy request (the caller uploads it instead).
   */
  async copy(key: string, from: string, bytes: number): Promise<boolean> {
    if (bytes > COPY_BYTES_MAX) return false;
    const source = encode(`/${this.target.bucket}/${from}`, true);
    const answer = await this.send('PUT', key, { headers: { 'x-amz-copy-source': source } });
    if (answer.status === 404) return false; // the base's copy is gone: upload it again
    this.check(answer, key, 'CopyObject');
    return true;
  }

  /** The object `key` whole (small objects: a manifest); undefined when it is not there. */
  async getBytes(key: string): Promise<Buffer | undefined> {
    const answer = await this.send('GET', key);
    if (answer.status === 404) return undefined;
    return this.check(answer, key, 'GET').body;
  }

  /** Whether the endpoint holds object `key` (a HEAD: no body read, however large). */
  async has(key: string): Promise<boolean> {
    const answer = await this.send('HEAD', key);
    if (answer.status === 404) return false;
    this.check(answer, key, 'HEAD');
    return true;
  }

  /**
   * Writes object `key` into a new file `path` (0600), durable; answers its size and SHA-256.
   * More than `limitBytes` (the size the caller expects) stops the download: a damaged or
   * hostile endpoint cannot fill the disk before the caller's checks.
   */
  async getFile(
    key: string,
    path: string,
    limitBytes: number,
  ): Promise<{ bytes: number; sha256: string }> {
    const hash = createHash('sha256');
    let bytes = 0;
    const file = await open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
    try {
      const answer = await this.send('GET', key, {
        sink: async (stream) => {
          for await (const piece of stream as AsyncIterable<Buffer>) {
            if (bytes + piece.length > limitBytes)
              throw CorruptData(
                `${this.where(key)} sent more than the ${String(limitBytes)} bytes expected`,
              );
            hash.update(piece);
            await file.write(piece, 0, piece.length, bytes);
            bytes += piece.length;
          }
        },
      });
      this.check(answer, key, 'GET');
      await file.datasync();
    } finally {
      await file.close();
    }
    return { bytes, sha256: hash.digest('hex') };
  }
}

async function readCapped(stream: IncomingMessage): Promise<Buffer> {
  const pieces: Buffer[] = [];
  let total = 0;
  for await (const piece of stream as AsyncIterable<Buffer>) {
    total += piece.length;
    if (total > ANSWER_BYTES_MAX) {
      stream.destroy();
      throw Unavailable(`an answer of the backup target exceeds ${String(ANSWER_BYTES_MAX)} bytes`);
    }
    pieces.push(piece);
  }
  return Buffer.concat(pieces);
}
