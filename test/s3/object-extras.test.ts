// Goal: the multipart, copy and batch-delete handlers refuse bad input in S3's words before the
// service is asked (a part list out of order, an ETag Lightwell never gave, a DeleteObjects
// body without Content-MD5 or with a wrong one, a copy onto itself that changes nothing), give
// the service S3's multipart ETag `md5(part md5s)-N`, and answer S3's XML.
// Method: S3Api.handle with a fixed principal, a fake exchange that delivers the body, and a
// recording store behind the object port.
import t from 'tap';
import { createHash } from 'node:crypto';
import { S3Api, type S3Principal, type S3Services } from '../../src/s3/api.js';
import { registerMultipart } from '../../src/s3/multipart.js';
import { registerObjectExtras } from '../../src/s3/object-extras.js';
import type { Exchange } from '../../src/http/exchange.js';
import type { ObjectVersionRecord } from '../../src/engine/index/schema.js';
import type { Settings } from '../../src/util/config.js';
import { NotFound } from '../../src/util/errors.js';

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

function exchangeOf(
  method: string,
  path: string,
  headers: Record<string, string>,
  body: Buffer,
  answer: Answer,
): Exchange {
  const url = new URL(`http://h${path}`);
  let open = true;
  return {
    method,
    path: url.pathname,
    query: url.searchParams,
    headers,
    header: (name: string) => headers[name],
    queryParam: (name: string) => url.searchParams.get(name),
    requestId: 'req-1',
    audit: { action: 'unrouted' },
    onBody: (handler: (chunk: ArrayBuffer, isLast: boolean) => void) => {
      const copy = body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength);
      queueMicrotask(() => handler(copy as ArrayBuffer, true));
    },
    onAbort: () => undefined,
    get open() {
      return open;
    },
    send(status: number, sent: Record<string, string>, text?: string | Buffer) {
      open = false;
      Object.assign(answer, { status, headers: sent, body: text?.toString() ?? '' });
    },
  } as unknown as Exchange;
}

function version(key: string, etag: string): ObjectVersionRecord {
  return {
    key,
    versionId: 'null',
    seq: 1,
    lastModified: Date.UTC(2026, 0, 1),
    size: 1,
    etag,
    contentType: 'binary/octet-stream',
    metadata: {},
    checksums: {},
    chunks: Buffer.alloc(0),
    storedBytes: 1,
    compressed: false,
  };
}

function setup(): { api: S3Api; calls: { name: string; input: unknown }[] } {
  const calls: { name: string; input: unknown }[] = [];
  const representation = { contentType: 'binary/octet-stream', headers: {}, metadata: {} };
  const store = {
    owner: () => ({ id: 't', displayName: 't' }),
    delete: (_request: unknown, input: { key: string }) => {
      calls.push({ name: 'delete', input });
      if (input.key === 'missing') return Promise.reject(NotFound('object missing not found'));
      return Promise.resolve({ deleteMarker: false });
    },
    copy: (_request: unknown, input: { key: string }) => {
      calls.push({ name: 'copy', input });
      return Promise.resolve({
        version: version(input.key, '"c"'),
        representation,
        versioned: false,
        sourceVersionId: 'null',
        sourceVersioned: false,
      });
    },
    multipart: {
      complete: (_request: unknown, input: { key: string; etag: string }) => {
        calls.push({ name: 'complete', input });
        return Promise.resolve({
          version: version(input.key, input.etag),
          representation,
          versioned: false,
        });
      },
    },
  };
  const services = {
    settings: { string: () => '' } as unknown as Settings,
    log: { info: () => undefined, error: () => undefined },
    objects: store,
  } as unknown as S3Services;
  const principal = { accessKeyId: 'AK', tenant: { id: 't' }, scope: {} } as unknown as S3Principal;
  const api = new S3Api(services, () => principal);
  registerMultipart(api);
  registerObjectExtras(api);
  return { api, calls };
}

async function call(
  api: S3Api,
  method: string,
  path: string,
  headers: Record<string, string>,
  body = '',
): Promise<Answer> {
  const answer: Answer = { status: 0, headers: {}, body: '' };
  const bytes = Buffer.from(body);
  await api.handle(
    exchangeOf(method, path, { 'content-length': String(bytes.length), ...headers }, bytes, answer),
  );
  return answer;
}

const md5 = (text: string | Buffer): Buffer => createHash('md5').update(text).digest();

t.test('CompleteMultipartUpload: order checked first, S3 ETag handed to the service', async (t) => {
  const { api, calls } = setup();
  const part = (n: number, etag: string): string =>
    `<Part><PartNumber>${n}</PartNumber><ETag>"${etag}"</ETag></Part>`;
  const e1 = md5('one').toString('hex');
  const e2 = md5('two').toString('hex');
  const unordered = await call(
    api,
    'POST',
    '/b/k?uploadId=u',
    {},
    `<CompleteMultipartUpload>${part(2, e2)}${part(1, e1)}</CompleteMultipartUpload>`,
  );
  t.equal(unordered.status, 400);
  t.match(unordered.body, '<Code>InvalidPartOrder</Code>');
  const foreign = await call(
    api,
    'POST',
    '/b/k?uploadId=u',
    {},
    `<CompleteMultipartUpload>${part(1, 'nothex')}</CompleteMultipartUpload>`,
  );
  // An ETag that is not an MD5 reaches the store without an S3 ETag: it answers InvalidPart
  // once it has found the upload (a missing one is NoSuchUpload; sdk-multipart.test.ts).
  t.equal(foreign.status, 200, 'the fake store completes what it is given');
  t.equal(calls.length, 1);
  t.equal((calls[0]?.input as { etag?: string }).etag, undefined, 'no S3 ETag for a foreign one');
  calls.length = 0;
  const malformed = await call(
    api,
    'POST',
    '/b/k?uploadId=u',
    {},
    '<CompleteMultipartUpload><Part>',
  );
  t.match(malformed.body, '<Code>MalformedXML</Code>');
  t.equal(calls.length, 0, 'the service was not asked');
  const done = await call(
    api,
    'POST',
    '/b/k?uploadId=u',
    {},
    `<CompleteMultipartUpload>${part(1, e1)}${part(2, e2)}</CompleteMultipartUpload>`,
  );
  t.equal(done.status, 200, done.body);
  const expected = `"${md5(Buffer.concat([md5('one'), md5('two')])).toString('hex')}-2"`;
  t.equal((calls[0]?.input as { etag: string }).etag, expected);
  t.match(done.body, `<ETag>${expected.replace(/"/g, '&quot;')}</ETag>`);
  t.match(done.body, '<Bucket>b</Bucket><Key>k</Key>');
});

t.test('DeleteObjects: integrity required and checked, per-key outcomes, quiet', async (t) => {
  const { api, calls } = setup();
  const body = '<Delete><Object><Key>a</Key></Object><Object><Key>missing</Key></Object></Delete>';
  const bare = await call(api, 'POST', '/b?delete', {}, body);
  t.equal(bare.status, 400);
  t.match(bare.body, '<Code>InvalidRequest</Code>');
  const wrong = await call(
    api,
    'POST',
    '/b?delete',
    { 'content-md5': md5('x').toString('base64') },
    body,
  );
  t.match(wrong.body, '<Code>BadDigest</Code>');
  t.equal(calls.length, 0, 'nothing deleted');
  const done = await call(
    api,
    'POST',
    '/b?delete',
    { 'content-md5': md5(body).toString('base64') },
    body,
  );
  t.equal(done.status, 200, done.body);
  t.match(done.body, '<Deleted><Key>a</Key></Deleted><Deleted><Key>missing</Key></Deleted>');
  const quietBody = body.replace('<Delete>', '<Delete><Quiet>true</Quiet>');
  const quiet = await call(
    api,
    'POST',
    '/b?delete',
    { 'content-md5': md5(quietBody).toString('base64') },
    quietBody,
  );
  t.notMatch(quiet.body, '<Deleted>');
});

t.test('CopyObject: onto itself needs REPLACE; answers CopyObjectResult', async (t) => {
  const { api, calls } = setup();
  const self = await call(api, 'PUT', '/b/k', { 'x-amz-copy-source': '/b/k' });
  t.equal(self.status, 400);
  t.match(self.body, '<Code>InvalidRequest</Code>');
  t.equal(calls.length, 0);
  const replaced = await call(api, 'PUT', '/b/k', {
    'x-amz-copy-source': '/b/k',
    'x-amz-metadata-directive': 'REPLACE',
    'x-amz-meta-new': '1',
  });
  t.equal(replaced.status, 200, replaced.body);
  t.match(replaced.body, '<CopyObjectResult');
  t.match(replaced.body, '<ETag>&quot;c&quot;</ETag>');
  t.equal((calls[0]?.input as { directive: string }).directive, 'REPLACE');
});
