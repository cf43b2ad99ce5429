// Goal: Lightwell's SigV4 canonicalisation agrees with AWS's own signer for every request shape
// S3 clients send (any key, any query, any header values), and matches AWS's published examples;
// the aws-chunked decoder returns exactly the payload whatever the chunk and delivery
// boundaries, and refuses every changed signature, bad framing and truncated body or trailer.
// Method: fast-check properties with AWS's signer (@smithy/signature-v4, what @aws-sdk/client-s3
// signs with) as the oracle, AWS's documented example signatures, and bodies framed here and
// then changed one way at a time.

import assert from 'node:assert/strict';
import { createHash, createHmac } from 'node:crypto';
import fc from 'fast-check';
import t from 'tap';
import { SignatureV4 } from '@smithy/signature-v4';
import {
  canonicalRequest,
  canonicalUris,
  chunkStringToSign,
  hmacHex,
  parseAuthorization,
  signingKey,
  stringToSign,
  trailerStringToSign,
  EMPTY_SHA256,
  type CredentialScope,
} from '../../src/s3/sigv4.js';
import { ChunkedDecoder, type PayloadMode } from '../../src/s3/payload.js';
import { s3ErrorOf } from '../../src/s3/errors.js';
import { configureFastCheck } from '../format/format-testing.js';

configureFastCheck();

/** The hash the signer asks for: SHA-256, or HMAC-SHA256 when given a secret. */
class Sha256 {
  private readonly hash: ReturnType<typeof createHash> | ReturnType<typeof createHmac>;
  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    const key = secret instanceof ArrayBuffer ? new Uint8Array(secret) : secret;
    this.hash = key === undefined ? createHash('sha256') : createHmac('sha256', key as string);
  }
  update(data: string | ArrayBuffer | ArrayBufferView): void {
    this.hash.update(data instanceof ArrayBuffer ? new Uint8Array(data) : (data as Uint8Array));
  }
  digest(): Promise<Uint8Array> {
    return Promise.resolve(this.hash.digest());
  }
}

const SECRET = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';
const ACCESS_KEY = 'AKIAIOSFODNN7EXAMPLE';

/** The encoding @aws-sdk/client-s3 gives keys in a path (RFC 3986 plus !'()*). */
function sdkEncode(text: string): string {
  return encodeURIComponent(text).replace(
    /[!'()*]/g,
    (char) => `%${char.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}

/** Verifies a signed request the way auth.ts does (every candidate URI). */
function verifies(options: {
  method: string;
  path: string;
  rawQuery: string;
  headers: Record<string, string>;
  authorization: string;
}): boolean {
  const claim = parseAuthorization(options.authorization, options.headers['x-amz-date']);
  const key = signingKey(SECRET, claim.scope);
  return canonicalUris(options.path).some((uri) => {
    const canonical = canonicalRequest({
      method: options.method,
      uri,
      rawQuery: options.rawQuery,
      headers: options.headers,
      signedHeaders: claim.signedHeaders,
      payloadHash: options.headers['x-amz-content-sha256'] ?? '',
    });
    return hmacHex(key, stringToSign(claim.amzDate, claim.scope, canonical)) === claim.signature;
  });
}

const keyArbitrary = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 });
const queryArbitrary = fc.array(
  fc.tuple(
    fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 12 }),
    fc.string({ unit: 'grapheme', maxLength: 12 }),
  ),
  { maxLength: 5 },
);

t.test("SigV4 canonicalisation agrees with AWS's signer", async () => {
  const signer = new SignatureV4({
    credentials: { accessKeyId: ACCESS_KEY, secretAccessKey: SECRET },
    region: 'us-east-1',
    service: 's3',
    sha256: Sha256,
    uriEscapePath: false,
    applyChecksum: false,
  });
  await fc.assert(
    fc.asyncProperty(
      keyArbitrary,
      queryArbitrary,
      fc.string({ unit: 'grapheme-ascii', maxLength: 30 }),
      fc.constantFrom('GET', 'PUT', 'DELETE', 'HEAD', 'POST'),
      async (key, pairs, metaValue, method) => {
        const path = `/bucket/${key.split('/').map(sdkEncode).join('/')}`;
        const query: Record<string, string> = {};
        for (const [name, value] of pairs) query[name] = value;
        const headers: Record<string, string> = {
          host: '127.0.0.1:9000',
          'x-amz-content-sha256': EMPTY_SHA256,
          'x-amz-meta-note': metaValue,
        };
        const signed = await signer.sign(
          { method, protocol: 'http:', hostname: '127.0.0.1', port: 9000, path, query, headers },
          { signingDate: new Date('2026-12-07T06:00:00Z') },
        );
        const lowered: Record<string, string> = {};
        for (const [name, value] of Object.entries(signed.headers))
          lowered[name.toLowerCase()] = value;
        // The query as an HTTP client sends it: names and values percent-encoded.
        const rawQuery = Object.entries(query)
          .map(([name, value]) => `${sdkEncode(name)}=${sdkEncode(value)}`)
          .join('&');
        assert.ok(
          verifies({
            method,
            path,
            rawQuery,
            headers: lowered,
            authorization: lowered['authorization'] ?? '',
          }),
        );
      },
    ),
  );
});

t.test("AWS's published example: GET Object with a Range", async (t) => {
  // docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html, "GET Object".
  const headers = {
    host: 'examplebucket.s3.amazonaws.com',
    range: 'bytes=0-9',
    'x-amz-content-sha256': EMPTY_SHA256,
    'x-amz-date': '20130524T000000Z',
  };
  const authorization =
    `AWS4-HMAC-SHA256 Credential=${ACCESS_KEY}/20130524/us-east-1/s3/aws4_request,` +
    'SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,' +
    'Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41';
  t.ok(verifies({ method: 'GET', path: '/test.txt', rawQuery: '', headers, authorization }));
  t.notOk(
    verifies({
      method: 'GET',
      path: '/test.txt',
      rawQuery: '',
      headers: { ...headers, range: 'bytes=0-10' },
      authorization,
    }),
    'a changed signed header fails',
  );
});

const scope: CredentialScope = {
  accessKeyId: ACCESS_KEY,
  date: '20130524',
  region: 'us-east-1',
  service: 's3',
};
const amzDate = '20130524T000000Z';

/** Frames `payload` in chunks of `sizes` (cycled), signed from `seed` when `signed`. */
function frame(options: {
  payload: Buffer;
  sizes: readonly number[];
  signed: boolean;
  trailer?: Record<string, string>;
  seed?: string;
}): Buffer {
  const key = signingKey(SECRET, scope);
  let previous = options.seed ?? '0'.repeat(64);
  const parts: Buffer[] = [];
  const sign = (data: Buffer): string => {
    previous = hmacHex(
      key,
      chunkStringToSign({
        amzDate,
        scope,
        previous,
        dataHash: createHash('sha256').update(data).digest('hex'),
      }),
    );
    return previous;
  };
  let at = 0;
  let index = 0;
  const chunks: Buffer[] = [];
  while (at < options.payload.length) {
    const size = Math.max(1, options.sizes[index % options.sizes.length] ?? 1);
    chunks.push(options.payload.subarray(at, at + size));
    at += size;
    index += 1;
  }
  chunks.push(Buffer.alloc(0));
  for (const chunk of chunks) {
    const extension = options.signed ? `;chunk-signature=${sign(chunk)}` : '';
    parts.push(Buffer.from(`${chunk.length.toString(16)}${extension}\r\n`), chunk);
    if (chunk.length > 0) parts.push(Buffer.from('\r\n'));
  }
  if (options.trailer) {
    let lines = '';
    for (const [name, value] of Object.entries(options.trailer)) lines += `${name}:${value}\n`;
    parts.push(Buffer.from(lines.replace(/\n/g, '\r\n')));
    if (options.signed) {
      const signature = hmacHex(
        key,
        trailerStringToSign({ amzDate, scope, previous, trailer: lines }),
      );
      parts.push(Buffer.from(`x-amz-trailer-signature:${signature}\r\n`));
    }
  }
  parts.push(Buffer.from('\r\n'));
  return Buffer.concat(parts);
}

function modeOf(options: {
  signed: boolean;
  trailer: boolean;
  length: number;
  seed?: string;
}): Extract<PayloadMode, { kind: 'chunked' }> {
  return {
    kind: 'chunked',
    signed: options.signed,
    trailer: options.trailer,
    decodedLength: options.length,
    ...(options.signed
      ? {
          signing: {
            key: signingKey(SECRET, scope),
            scope,
            amzDate,
            seed: options.seed ?? '0'.repeat(64),
          },
        }
      : {}),
  };
}

/** Decodes `body` delivered in pieces cut at `cuts`; the payload, or the S3 error code. */
function decode(
  body: Buffer,
  cuts: readonly number[],
  mode: Extract<PayloadMode, { kind: 'chunked' }>,
): { payload?: Buffer; trailers?: Map<string, string>; code?: string } {
  const out: Buffer[] = [];
  const decoder = new ChunkedDecoder(mode, (bytes) => out.push(Buffer.from(bytes)));
  const points = [...new Set(cuts.map((cut) => cut % (body.length + 1)))].sort((a, b) => a - b);
  try {
    let from = 0;
    for (const point of [...points, body.length]) {
      decoder.push(body.subarray(from, point));
      from = Math.max(from, point);
    }
    decoder.end();
  } catch (error) {
    return { code: s3ErrorOf(error, {}).code };
  }
  return { payload: Buffer.concat(out), trailers: decoder.trailers };
}

t.test("AWS's published example: a signed aws-chunked PUT", async (t) => {
  // docs.aws.amazon.com/AmazonS3/latest/API/sigv4-streaming.html: 66,560 bytes of 'a' in a
  // 65,536-byte chunk and a 1,024-byte chunk, seed signature from the request.
  const seed = '4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9';
  const payload = Buffer.alloc(66_560, 'a');
  const body = frame({ payload, sizes: [65_536], signed: true, seed });
  t.match(body.subarray(0, 90).toString(), /^10000;chunk-signature=ad80c730a21e5b8d04586a2213dd/);
  t.ok(body.toString('latin1').includes('400;chunk-signature=0055627c9e194cb4542bae2aa5492e3c'));
  t.ok(body.toString('latin1').includes('0;chunk-signature=b6c6ea8a5354eaf15b3cb7646744f4275b'));
  t.equal(body.length, 66_824, 'the Content-Length of the example');
  const result = decode(
    body,
    [7, 100, 65_600],
    modeOf({ signed: true, trailer: false, length: payload.length, seed }),
  );
  t.same(result.code, undefined);
  t.ok(result.payload?.equals(payload));
});

const payloadArbitrary = fc.uint8Array({ maxLength: 3000 }).map((bytes) => Buffer.from(bytes));
const sizesArbitrary = fc.array(fc.integer({ min: 1, max: 700 }), { minLength: 1, maxLength: 6 });
const cutsArbitrary = fc.array(fc.nat(), { maxLength: 12 });
const trailer = { 'x-amz-checksum-crc32': 'AAAAAA==' };

t.test('the aws-chunked decoder returns the payload at any boundaries', async () => {
  fc.assert(
    fc.property(
      payloadArbitrary,
      sizesArbitrary,
      cutsArbitrary,
      fc.boolean(),
      fc.boolean(),
      (payload, sizes, cuts, signed, withTrailer) => {
        const body = frame({ payload, sizes, signed, ...(withTrailer ? { trailer } : {}) });
        const mode = modeOf({ signed, trailer: withTrailer, length: payload.length });
        const result = decode(body, cuts, mode);
        assert.equal(result.code, undefined);
        assert.ok(result.payload?.equals(payload));
        if (withTrailer) assert.equal(result.trailers?.get('x-amz-checksum-crc32'), 'AAAAAA==');
      },
    ),
  );
});

t.test('a changed chunk or trailer signature is refused', async () => {
  fc.assert(
    fc.property(
      payloadArbitrary,
      sizesArbitrary,
      cutsArbitrary,
      fc.nat(),
      fc.boolean(),
      (payload, sizes, cuts, pick, withTrailer) => {
        const body = frame({ payload, sizes, signed: true, ...(withTrailer ? { trailer } : {}) });
        const text = body.toString('latin1');
        const signatures = [
          ...text.matchAll(/(?:chunk-signature=|trailer-signature:)([0-9a-f]{64})/g),
        ];
        const target = signatures[pick % signatures.length];
        assert.ok(target?.index !== undefined);
        const at = target.index + target[0].length - 1;
        const changed = Buffer.from(body);
        changed[at] = changed[at] === 0x30 ? 0x31 : 0x30;
        const mode = modeOf({ signed: true, trailer: withTrailer, length: payload.length });
        assert.equal(decode(changed, cuts, mode).code, 'SignatureDoesNotMatch');
      },
    ),
  );
});

t.test('changed data, truncated bodies and trailers, and bad framing are refused', async () => {
  fc.assert(
    fc.property(
      payloadArbitrary.filter((payload) => payload.length > 0),
      sizesArbitrary,
      cutsArbitrary,
      fc.nat(),
      fc.boolean(),
      fc.boolean(),
      (payload, sizes, cuts, pick, signed, withTrailer) => {
        const body = frame({ payload, sizes, signed, ...(withTrailer ? { trailer } : {}) });
        const mode = modeOf({ signed, trailer: withTrailer, length: payload.length });
        // Any proper prefix is incomplete.
        const cut = pick % body.length;
        assert.notEqual(decode(body.subarray(0, cut), cuts, mode).code, undefined);
        // A body claiming another decoded length.
        const longer = { ...mode, decodedLength: payload.length + 1 };
        assert.equal(decode(body, cuts, longer).code, 'IncompleteBody');
        // Extra bytes after the end.
        assert.equal(
          decode(Buffer.concat([body, Buffer.from('0\r\n')]), cuts, mode).code,
          'IncompleteBody',
        );
        // A changed data byte breaks a signed body's chunk signature.
        if (signed) {
          const first = body.indexOf('\r\n') + 2 + (pick % Math.min(payload.length, sizes[0] ?? 1));
          const changed = Buffer.from(body);
          changed[first] = (changed[first] ?? 0) ^ 1;
          assert.equal(decode(changed, cuts, mode).code, 'SignatureDoesNotMatch');
        }
      },
    ),
  );
  const mode = modeOf({ signed: false, trailer: false, length: 3 });
  for (const bad of ['3\nabc\r\n0\r\n\r\n', 'x\r\nabc\r\n0\r\n\r\n', '3\r\nabcX\r\n0\r\n\r\n']) {
    assert.equal(decode(Buffer.from(bad), [], mode).code, 'IncompleteBody', bad);
  }
  const longLine = `3;${'x'.repeat(5000)}\r\nabc\r\n0\r\n\r\n`;
  assert.equal(decode(Buffer.from(longLine), [], mode).code, 'IncompleteBody');
  // A signed body without signatures, an unsigned one with them.
  const signedMode = modeOf({ signed: true, trailer: false, length: 3 });
  assert.equal(
    decode(Buffer.from('3\r\nabc\r\n0\r\n\r\n'), [], signedMode).code,
    'SignatureDoesNotMatch',
  );
});
