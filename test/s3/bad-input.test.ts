// Goal: bad S3 input gets S3's error with nothing committed: a wrong payload hash, a bad chunk
// signature, malformed aws-chunked framing, oversized XML, a skewed clock, Signature V2, an
// empty Content-Length; and a good aws-chunked body with signed chunks is accepted end to end.
// Method: a real `lightwell serve`; requests signed here with AWS's signer
// (@smithy/signature-v4) and sent with fetch, so each can be broken one way; PutBucketVersioning
// is the body-carrying operation, and GetBucketVersioning shows whether anything committed.
import t from 'tap';
import { createHash, createHmac } from 'node:crypto';
import { connect } from 'node:net';
import { SignatureV4 } from '@smithy/signature-v4';
import { Service } from '../helpers/service.js';
import {
  chunkStringToSign,
  hmacHex,
  signingKey,
  STREAMING_SIGNED,
  type CredentialScope,
} from '../../src/s3/sigv4.js';

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

const ENABLED =
  '<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">' +
  '<Status>Enabled</Status></VersioningConfiguration>';

t.test('bad S3 input is refused with nothing committed', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const origin = new URL(service.publicUrl.replace(/\/api\/v1$/, ''));
  const key = await service.tenant('hostile');
  const signer = new SignatureV4({
    credentials: { accessKeyId: key.accessKeyId, secretAccessKey: key.secretKey },
    region: 'us-east-1',
    service: 's3',
    sha256: Sha256,
    uriEscapePath: false,
    applyChecksum: false,
  });
  const send = async (options: {
    method: string;
    path: string;
    query?: Record<string, string>;
    headers?: Record<string, string>;
    body?: Buffer;
    payloadHash?: string;
    signingDate?: Date;
  }): Promise<{ status: number; text: string; authorization: string; amzDate: string }> => {
    const body = options.body ?? Buffer.alloc(0);
    const headers: Record<string, string> = {
      host: origin.host,
      'x-amz-content-sha256':
        options.payloadHash ?? createHash('sha256').update(body).digest('hex'),
      ...options.headers,
    };
    const signed = await signer.sign(
      {
        method: options.method,
        protocol: 'http:',
        hostname: origin.hostname,
        port: Number(origin.port),
        path: options.path,
        query: options.query ?? {},
        headers,
      },
      { signingDate: options.signingDate ?? new Date() },
    );
    const search = new URLSearchParams(options.query ?? {}).toString().replace(/=(&|$)/g, '$1');
    const response = await fetch(`${origin.origin}${options.path}${search ? `?${search}` : ''}`, {
      method: options.method,
      headers: signed.headers,
      ...(options.body ? { body: options.body } : {}),
    });
    return {
      status: response.status,
      text: await response.text(),
      authorization: signed.headers['authorization'] ?? '',
      amzDate: signed.headers['x-amz-date'] ?? '',
    };
  };
  const versioning = async (): Promise<string> =>
    (await send({ method: 'GET', path: '/guarded', query: { versioning: '' } })).text;

  t.equal((await send({ method: 'PUT', path: '/guarded' })).status, 200);
  t.notMatch(await versioning(), /Enabled/);

  const wrongHash = await send({
    method: 'PUT',
    path: '/guarded',
    query: { versioning: '' },
    body: Buffer.from(ENABLED),
    payloadHash: createHash('sha256').update('something else').digest('hex'),
  });
  t.equal(wrongHash.status, 400);
  t.match(wrongHash.text, /<Code>XAmzContentSHA256Mismatch<\/Code>/);
  t.notMatch(await versioning(), /Enabled/, 'a wrong payload hash commits nothing');

  // An upload in HTTP chunked transfer coding has no Content-Length: refused as AWS does (411
  // MissingContentLength), not as a payload-hash mismatch, and nothing is stored.
  const bar = Buffer.from('bar');
  const chunkedSigned = await signer.sign({
    method: 'PUT',
    protocol: 'http:',
    hostname: origin.hostname,
    port: Number(origin.port),
    path: '/guarded/chunked',
    query: {},
    headers: {
      host: origin.host,
      'x-amz-content-sha256': createHash('sha256').update(bar).digest('hex'),
    },
  });
  const unsized = await fetch(`${origin.origin}/guarded/chunked`, {
    method: 'PUT',
    headers: chunkedSigned.headers,
    body: new ReadableStream({
      start(controller) {
        controller.enqueue(bar);
        controller.close();
      },
    }),
    duplex: 'half',
  });
  t.equal(unsized.status, 411, 'a chunked upload without Content-Length');
  t.match(await unsized.text(), /<Code>MissingContentLength<\/Code>/);
  t.equal((await send({ method: 'HEAD', path: '/guarded/chunked' })).status, 404, 'nothing stored');

  const huge = Buffer.from(`<VersioningConfiguration>${' '.repeat(3 * 1024 * 1024)}`);
  const oversized = await send({
    method: 'PUT',
    path: '/guarded',
    query: { versioning: '' },
    body: huge,
  });
  t.equal(oversized.status, 400);
  t.match(oversized.text, /<Code>MaxMessageLengthExceeded<\/Code>/);

  const malformedXml = await send({
    method: 'PUT',
    path: '/guarded',
    query: { versioning: '' },
    body: Buffer.from('<VersioningConfiguration><Status>Enabled</VersioningConfiguration>'),
  });
  t.match(malformedXml.text, /<Code>MalformedXML<\/Code>/);

  const skewed = await send({
    method: 'GET',
    path: '/',
    signingDate: new Date(Date.now() - 3600_000),
  });
  t.equal(skewed.status, 403);
  t.match(skewed.text, /<Code>RequestTimeTooSkewed<\/Code>/);

  const v2 = await fetch(`${origin.origin}/`, {
    headers: {
      Authorization: `AWS ${key.accessKeyId}:c2lnbmF0dXJl`,
      Date: new Date().toUTCString(),
    },
  });
  t.equal(v2.status, 400);
  t.match(await v2.text(), /Signature Version 2 is not supported/);

  /** An aws-chunked PUT of `payload`, its chunk signatures from the seed; `mangle` breaks it. */
  const chunked = async (
    mangle: (framed: string) => string,
  ): Promise<{ status: number; text: string }> => {
    const payload = Buffer.from(ENABLED);
    // The seed signature comes from signing the headers; the body is built from it.
    const headers = {
      'content-encoding': 'aws-chunked',
      'x-amz-decoded-content-length': String(payload.length),
    };
    const date = new Date();
    const probe = await signer.sign(
      {
        method: 'PUT',
        protocol: 'http:',
        hostname: origin.hostname,
        port: Number(origin.port),
        path: '/guarded',
        query: { versioning: '' },
        headers: { host: origin.host, 'x-amz-content-sha256': STREAMING_SIGNED, ...headers },
      },
      { signingDate: date },
    );
    const seed = /Signature=([0-9a-f]{64})/.exec(probe.headers['authorization'] ?? '')?.[1] ?? '';
    const amzDate = probe.headers['x-amz-date'] ?? '';
    const scope: CredentialScope = {
      accessKeyId: key.accessKeyId,
      date: amzDate.slice(0, 8),
      region: 'us-east-1',
      service: 's3',
    };
    const signingKeyBytes = signingKey(key.secretKey, scope);
    let previous = seed;
    let framed = '';
    for (const chunk of [payload.subarray(0, 20), payload.subarray(20), Buffer.alloc(0)]) {
      previous = hmacHex(
        signingKeyBytes,
        chunkStringToSign({
          amzDate,
          scope,
          previous,
          dataHash: createHash('sha256').update(chunk).digest('hex'),
        }),
      );
      framed += `${chunk.length.toString(16)};chunk-signature=${previous}\r\n${chunk.toString()}`;
      framed += '\r\n';
    }
    const response = await fetch(`${origin.origin}/guarded?versioning`, {
      method: 'PUT',
      headers: probe.headers,
      body: Buffer.from(mangle(framed)),
    });
    return { status: response.status, text: await response.text() };
  };

  const badChunk = await chunked((framed) =>
    // The first signature's first digit changed (to 1 where it already is 0).
    framed.replace(/chunk-signature=(.)/, (_, digit: string) =>
      digit === '0' ? 'chunk-signature=1' : 'chunk-signature=0',
    ),
  );
  t.equal(badChunk.status, 403);
  t.match(badChunk.text, /<Code>SignatureDoesNotMatch<\/Code>/);
  t.notMatch(await versioning(), /Enabled/, 'a bad chunk signature commits nothing');

  const badFraming = await chunked((framed) => framed.replace('\r\n', '\n'));
  t.equal(badFraming.status, 400);
  t.match(badFraming.text, /<Code>IncompleteBody<\/Code>/);
  t.notMatch(await versioning(), /Enabled/, 'malformed framing commits nothing');

  const good = await chunked((framed) => framed);
  t.equal(good.status, 200, 'a well-signed aws-chunked body is accepted');
  t.match(await versioning(), /<Status>Enabled<\/Status>/);

  // An empty Content-Length (fetch cannot send one: written on a socket) is not HTTP's digits.
  const created = await signer.sign({
    method: 'PUT',
    protocol: 'http:',
    hostname: origin.hostname,
    port: Number(origin.port),
    path: '/empty-length',
    query: {},
    headers: { host: origin.host, 'x-amz-content-sha256': EMPTY_SHA256, 'content-length': '' },
  });
  const head = Object.entries(created.headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  const answer = await rawExchange(origin, `PUT /empty-length HTTP/1.1\r\n${head}\r\n`);
  t.match(answer, /^HTTP\/1\.1 400 /, 'an empty Content-Length is a bad request');
  t.match(answer, /<Code>InvalidArgument<\/Code>/);
  const probe = await send({ method: 'HEAD', path: '/empty-length' });
  t.equal(probe.status, 404, 'and no bucket was created');
});

const EMPTY_SHA256 = createHash('sha256').digest('hex');

/** Writes `request` on a fresh connection and reads the answer until the server's end. */
function rawExchange(origin: URL, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(origin.port), origin.hostname, () => socket.end(request));
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      text += chunk;
      // One answer is all this waits for: its headers and its XML error body.
      if (text.includes('</Error>')) socket.destroy();
    });
    socket.on('close', () => resolve(text));
    socket.on('error', reject);
  });
}
