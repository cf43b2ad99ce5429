// Goal: the S3 object handlers speak S3 over whatever the service answers: PutObject stores the
// MD5 ETag and refuses a wrong Content-MD5 or x-amz-checksum-* before anything commits
// (BadDigest), keeps the representation headers without aws-chunked; GetObject and HeadObject
// answer the representation with response-* overrides, checksums only in checksum mode, 304;
// DeleteObject the version and delete-marker headers; ListObjects V1 and V2 their XML with
// continuation tokens that round-trip.
// Method: S3Api.handle with a fixed principal, a fake exchange, and an in-memory store behind the
// object port that computes digests with the real MultiHasher.
import t from 'tap';
import { createHash } from 'node:crypto';
import { S3Api, type S3Principal, type S3Services } from '../../src/s3/api.js';
import { registerObjects } from '../../src/s3/objects.js';
import type { Exchange } from '../../src/http/exchange.js';
import type { S3ObjectStore, StoredVersion, ResolvedRead } from '../../src/s3/object-port.js';
import { createMultiHasher } from '../../src/engine/checksums.js';
import type { ObjectVersionRecord } from '../../src/engine/index/schema.js';
import type { Settings } from '../../src/util/config.js';

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

function exchangeOf(options: {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: Buffer;
  answer: Answer;
}): Exchange & { body: Buffer } {
  const url = new URL(`http://h${options.path}`);
  const headers = options.headers ?? {};
  let open = true;
  return {
    method: options.method,
    path: url.pathname,
    rawQuery: url.search.slice(1),
    query: url.searchParams,
    headers,
    header: (name: string) => headers[name],
    queryParam: (name: string) => url.searchParams.get(name),
    requestId: 'req-1',
    audit: { action: 'unrouted' },
    body: options.body ?? Buffer.alloc(0),
    get open() {
      return open;
    },
    send(status: number, sent: Record<string, string>, body?: string | Buffer) {
      open = false;
      Object.assign(options.answer, { status, headers: sent, body: body?.toString() ?? '' });
    },
  } as unknown as Exchange & { body: Buffer };
}

class MemoryStore implements S3ObjectStore {
  readonly objects = new Map<string, StoredVersion>();
  commits = 0;
  versioned = false;
  private seq = 0;

  async put(
    request: Parameters<S3ObjectStore['put']>[0],
    input: Parameters<S3ObjectStore['put']>[1],
  ) {
    const body = (request.exchange as Exchange & { body: Buffer }).body;
    const hasher = await createMultiHasher(input.algs);
    hasher.update(body);
    const digests = hasher.digestBytes() as Record<string, Buffer>;
    const checksums: Record<string, string> = {};
    for (const [alg, digest] of Object.entries(digests))
      if (alg !== 'MD5') checksums[alg] = digest.toString('base64');
    input.check({ md5: digests['MD5'], checksums });
    const current = this.objects.get(input.key);
    if (input.ifNoneMatch === '*' && current) throw Object.assign(new Error('exists'), {});
    this.commits += 1;
    const version: ObjectVersionRecord = {
      key: input.key,
      versionId: this.versioned ? `v${++this.seq}` : 'null',
      seq: ++this.seq,
      lastModified: Date.UTC(2026, 0, 1, 0, 0, this.seq),
      size: body.length,
      etag: `"${(digests['MD5'] as Buffer).toString('hex')}"`,
      contentType: input.representation.contentType,
      metadata: { ...input.representation.metadata },
      checksums,
      chunks: Buffer.alloc(0),
      storedBytes: body.length,
      compressed: false,
    };
    const stored = { version, representation: input.representation, versioned: this.versioned };
    this.objects.set(input.key, stored);
    return stored;
  }

  resolveRead(_request: unknown, input: Parameters<S3ObjectStore['resolveRead']>[1]): ResolvedRead {
    const stored = this.objects.get(input.key);
    if (!stored) throw Object.assign(new Error('object not found'), {});
    return { ...stored, notModified: input.ifNoneMatch === stored.version.etag };
  }

  sendBody(
    request: Parameters<S3ObjectStore['sendBody']>[0],
    read: ResolvedRead,
    headers: Readonly<Record<string, string>>,
  ) {
    request.send(200, { ...headers, 'Content-Length': String(read.version.size) }, 'BYTES');
    return undefined;
  }

  async delete(_request: unknown, input: { key: string }) {
    this.objects.delete(input.key);
    await Promise.resolve();
    return this.versioned ? { versionId: 'm1', deleteMarker: true } : { deleteMarker: false };
  }

  list(_request: unknown, input: Parameters<S3ObjectStore['list']>[1]) {
    const keys = [...this.objects.keys()]
      .filter(
        (key) => key.startsWith(input.prefix) && (input.after === undefined || key > input.after),
      )
      .sort();
    const page = keys.slice(0, input.maxKeys);
    const truncated = keys.length > page.length;
    return {
      entries: page.map((key) => (this.objects.get(key) as StoredVersion).version),
      commonPrefixes: [],
      isTruncated: truncated,
      last: truncated ? page[page.length - 1] : undefined,
    };
  }

  owner() {
    return { id: 'tenant-1', displayName: 'tenant one' };
  }
}

const principal = {
  accessKeyId: 'AK',
  tenant: { id: 'tenant-1' },
  scope: {},
} as unknown as S3Principal;

function apiWith(store: MemoryStore): S3Api {
  const services = {
    settings: { string: () => '' } as unknown as Settings,
    log: { info: () => undefined, error: () => undefined },
    objects: store,
  } as unknown as S3Services;
  const api = new S3Api(services, () => principal);
  registerObjects(api);
  return api;
}

async function call(
  api: S3Api,
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: Buffer,
): Promise<Answer> {
  const answer: Answer = { status: 0, headers: {}, body: '' };
  await api.handle(exchangeOf({ method, path, headers, answer, ...(body ? { body } : {}) }));
  return answer;
}

const md5 = (bytes: Buffer): Buffer => createHash('md5').update(bytes).digest();

t.test('PutObject: MD5 ETag, representation, checksum answer', async (t) => {
  const store = new MemoryStore();
  const api = apiWith(store);
  const body = Buffer.from('hello world');
  const hasher = await createMultiHasher(['CRC32']);
  hasher.update(body);
  const put = await call(
    api,
    'PUT',
    '/b/dir/k',
    {
      'content-length': String(body.length),
      'content-md5': md5(body).toString('base64'),
      'content-type': 'text/plain',
      'content-encoding': 'aws-chunked,gzip',
      'cache-control': 'no-cache',
      'x-amz-meta-color': 'blue',
      'x-amz-checksum-crc32': hasher.digest().CRC32,
    },
    body,
  );
  t.equal(put.status, 200, put.body);
  t.equal(put.headers['ETag'], `"${md5(body).toString('hex')}"`);
  t.ok(put.headers['x-amz-checksum-crc32'], 'the declared checksum answered');
  t.ok(put.headers['x-amz-request-id']);
  const stored = store.objects.get('dir/k') as StoredVersion;
  t.same(stored.representation.headers, {
    'cache-control': 'no-cache',
    'content-encoding': 'gzip',
  });
  t.same(stored.representation.metadata, { color: 'blue' });
});

t.test('PutObject: a wrong Content-MD5 or checksum commits nothing', async (t) => {
  const store = new MemoryStore();
  const api = apiWith(store);
  const body = Buffer.from('payload');
  const wrongMd5 = await call(
    api,
    'PUT',
    '/b/k',
    {
      'content-length': '7',
      'content-md5': md5(Buffer.from('other')).toString('base64'),
    },
    body,
  );
  t.equal(wrongMd5.status, 400);
  t.match(wrongMd5.body, '<Code>BadDigest</Code>');
  const wrongCrc = await call(
    api,
    'PUT',
    '/b/k',
    {
      'content-length': '7',
      'x-amz-checksum-crc32c': 'AAAAAA==',
    },
    body,
  );
  t.equal(wrongCrc.status, 400);
  t.match(wrongCrc.body, '<Code>BadDigest</Code>');
  const badMd5 = await call(
    api,
    'PUT',
    '/b/k',
    { 'content-length': '7', 'content-md5': 'x' },
    body,
  );
  t.match(badMd5.body, '<Code>InvalidDigest</Code>');
  const noLength = await call(api, 'PUT', '/b/k', {}, body);
  t.equal(noLength.status, 411);
  t.equal(store.commits, 0, 'nothing committed');
});

t.test('GetObject and HeadObject: headers, overrides, checksum mode, 304', async (t) => {
  const store = new MemoryStore();
  store.versioned = true;
  const api = apiWith(store);
  const body = Buffer.from('data');
  await call(
    api,
    'PUT',
    '/b/k',
    {
      'content-length': '4',
      'content-type': 'text/plain',
      'content-disposition': 'inline',
      'x-amz-meta-a': '1',
    },
    body,
  );
  const get = await call(
    api,
    'GET',
    '/b/k?response-content-type=x%2Fy&response-cache-control=max-age%3D1',
  );
  t.equal(get.status, 200);
  t.equal(get.headers['Content-Type'], 'x/y');
  t.equal(get.headers['Cache-Control'], 'max-age=1');
  t.equal(get.headers['Content-Disposition'], 'inline');
  t.equal(get.headers['x-amz-meta-a'], '1');
  t.equal(get.headers['x-amz-version-id'], 'v1');
  t.equal(get.headers['Accept-Ranges'], 'bytes');
  t.notOk('x-amz-checksum-crc32c' in get.headers, 'no checksum unless asked');
  const checked = await call(api, 'HEAD', '/b/k', { 'x-amz-checksum-mode': 'ENABLED' });
  t.ok(checked.headers['x-amz-checksum-crc32c'], 'checksum in checksum mode');
  t.equal(checked.headers['x-amz-checksum-type'], 'FULL_OBJECT');
  const etag = get.headers['ETag'] as string;
  const notModified = await call(api, 'GET', '/b/k', { 'if-none-match': etag });
  t.equal(notModified.status, 304);
  // Which parts an object has is the service's (sdk-multipart.test.ts); a part number that is
  // not one is the handler's to refuse.
  const part0 = await call(api, 'GET', '/b/k?partNumber=0');
  t.equal(part0.status, 400);
});

t.test('DeleteObject: version and delete marker headers', async (t) => {
  const store = new MemoryStore();
  store.versioned = true;
  const api = apiWith(store);
  const deleted = await call(api, 'DELETE', '/b/k');
  t.equal(deleted.status, 204);
  t.equal(deleted.headers['x-amz-delete-marker'], 'true');
  t.equal(deleted.headers['x-amz-version-id'], 'm1');
});

t.test('ListObjectsV2 pages with continuation tokens; V1 with markers', async (t) => {
  const store = new MemoryStore();
  const api = apiWith(store);
  for (const key of ['a', 'b', 'c'])
    await call(api, 'PUT', `/b/${key}`, { 'content-length': '1' }, Buffer.from('x'));
  const first = await call(api, 'GET', '/b?list-type=2&max-keys=2');
  t.equal(first.status, 200, first.body);
  t.match(first.body, '<KeyCount>2</KeyCount>');
  t.match(first.body, '<IsTruncated>true</IsTruncated>');
  const token = /<NextContinuationToken>([^<]+)</.exec(first.body)?.[1] ?? '';
  const second = await call(api, 'GET', `/b?list-type=2&continuation-token=${token}`);
  t.match(second.body, '<Key>c</Key>');
  t.notMatch(second.body, '<Key>a</Key>');
  t.notMatch(second.body, '<Owner>', 'owner only with fetch-owner');
  const owned = await call(api, 'GET', '/b?list-type=2&fetch-owner=true');
  t.match(owned.body, '<Owner><ID>tenant-1</ID><DisplayName>tenant one</DisplayName></Owner>');
  const bad = await call(api, 'GET', '/b?list-type=2&continuation-token=%25%25');
  t.match(bad.body, '<Code>InvalidArgument</Code>');
  const v1 = await call(api, 'GET', '/b?marker=a');
  t.match(v1.body, '<Marker>a</Marker>');
  t.match(v1.body, '<Owner><ID>tenant-1</ID>');
  t.notMatch(v1.body, '<Key>a</Key>');
});
