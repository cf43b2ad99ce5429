// Goal: the first session of the README works against the real processes: admin token, tenant,
// account, key, bearer token, bucket, PUT, GET (whole and ranged), HEAD, list, DELETE.
// Method: `lightwell serve` on loopback with a fresh data directory; plain fetch.
import t from 'tap';
import { randomBytes, createHash } from 'node:crypto';
import { Service, type ObjectsPage, type Problem } from '../helpers/service.js';

/** The checksums a PUT answer reports. */
interface Stored {
  checksums: { CRC32C?: string; SHA256?: string };
}

t.test('walking skeleton through engine, gateway and admin', async (t) => {
  const service = await Service.start();
  t.teardown(() => service.close());
  const client = await service.tenant('acme');

  let response = await client.request('POST', '/buckets', { json: { name: 'logs' } });
  t.equal(response.status, 201);
  t.match(response.json, { name: 'logs', versioning: 'Unversioned', objectLock: false });
  t.ok(response.headers.get('x-request-id'), 'every response carries X-Request-Id');

  const small = Buffer.from('hello, lightwell\n');
  response = await client.put('logs', 'dir/hello.txt', small, {
    'Content-Type': 'text/plain',
    'X-Service-Meta-Origin': 'test',
  });
  t.equal(response.status, 200);
  t.match(response.json, {
    key: 'dir/hello.txt',
    size: small.length,
    contentType: 'text/plain',
    metadata: { origin: 'test' },
  });
  t.ok((response.json as Stored).checksums.CRC32C, 'a CRC32C is always stored');

  response = await client.get('logs', 'dir/hello.txt');
  t.equal(response.status, 200);
  t.same(response.bytes, small);
  t.equal(response.headers.get('x-service-meta-origin'), 'test');
  t.equal(response.headers.get('x-service-encryption'), 'AES256-GCM');

  // Large enough for content-defined chunking across several body blocks.
  const big = randomBytes(9 * 1024 * 1024 + 123);
  const sha = createHash('sha256').update(big).digest('base64');
  response = await client.put('logs', 'big.bin', big, { 'X-Service-Checksum-SHA256': sha });
  t.equal(response.status, 200, JSON.stringify(response.json));
  t.equal((response.json as Stored).checksums.SHA256, sha);
  t.equal(response.headers.get('x-service-checksum-sha256'), sha, 'a PUT answers its checksums');
  t.ok(response.headers.get('x-service-checksum-crc32c'), 'CRC32C among them');
  t.ok(response.headers.get('last-modified'));
  const bigEtag = response.headers.get('etag') ?? '';
  const bigModified = response.headers.get('last-modified') ?? '';
  response = await client.get('logs', 'big.bin');
  t.equal(response.status, 200);
  t.ok(response.bytes.equals(big), 'large object reads back byte-exact');

  response = await client.get('logs', 'big.bin', { Range: 'bytes=4194000-4194999' });
  t.equal(response.status, 206);
  t.equal(response.headers.get('content-range'), `bytes 4194000-4194999/${big.length}`);
  t.ok(response.bytes.equals(big.subarray(4194000, 4195000)), 'a range across a chunk boundary');
  response = await client.get('logs', 'big.bin', { Range: 'bytes=-10' });
  t.ok(response.bytes.equals(big.subarray(big.length - 10)), 'suffix range');
  response = await client.get('logs', 'big.bin', { Range: `bytes=${big.length}-` });
  t.equal(response.status, 416);
  t.equal((response.json as Problem).code, 'invalid_range');
  t.equal(response.headers.get('content-range'), `bytes */${big.length}`, 'names the length');
  response = await client.get('logs', 'big.bin', { Range: 'bytes=5-2' });
  t.equal(response.status, 200, 'a reversed range is ignored: the whole object');
  t.equal(response.bytes.length, big.length);
  // If-Range (RFC 9110 §13.1.5): the range only while the validator still holds.
  for (const [ifRange, status] of [
    [bigEtag, 206],
    [bigModified, 206],
    ['"stale"', 200],
    [`W/${bigEtag}`, 200],
    ['Sat, 01 Jan 2000 00:00:00 GMT', 200],
  ] as const) {
    response = await client.get('logs', 'big.bin', { Range: 'bytes=0-9', 'If-Range': ifRange });
    t.equal(response.status, status, `If-Range ${ifRange}`);
    t.equal(response.bytes.length, status === 206 ? 10 : big.length);
  }

  response = await client.request('HEAD', '/buckets/logs/objects/big.bin');
  t.equal(response.status, 200);
  t.equal(response.headers.get('content-length'), String(big.length));
  // A HEAD of a JSON answer reports the GET's length too (here the listing, and a 404 problem).
  for (const path of ['/buckets/logs/objects', '/buckets/logs/objects/missing']) {
    const get = await client.request('GET', path);
    const head = await client.request('HEAD', path);
    t.equal(head.status, get.status);
    t.equal(head.headers.get('content-length'), String(get.bytes.length), `HEAD ${path}`);
  }

  response = await client.request('GET', '/buckets/logs/objects?delimiter=/');
  const page = response.json as ObjectsPage & { commonPrefixes: string[] };
  t.same(page.commonPrefixes, ['dir/']);
  t.same(
    page.objects.map((o) => o.key),
    ['big.bin'],
  );

  response = await client.request('DELETE', '/buckets/logs/objects/big.bin');
  t.equal(response.status, 204);
  response = await client.get('logs', 'big.bin');
  t.equal(response.status, 404);
  t.equal((response.json as Problem).code, 'not_found');
  t.equal(response.headers.get('content-type'), 'application/problem+json');
});
