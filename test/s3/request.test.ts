// Goal: the S3 adapter finds the bucket, key and operation of every request shape the clients
// send (path-style, virtual-hosted, sub-resources), refuses what it does not know with S3's
// codes, writes well-formed XML and parses request XML only within its limits.
// Method: call the pure functions of src/s3 directly.
import t from 'tap';
import { addressOf, operationOf, OPERATIONS } from '../../src/s3/request.js';
import { s3Error, s3ErrorOf } from '../../src/s3/errors.js';
import { parseXml, XmlWriter, XML_DEPTH_MAX, xmlList, xmlText } from '../../src/s3/xml.js';
import { BadRequest, NotFound, Internal, errorCode } from '../../src/util/errors.js';

function op(method: string, path: string, query = '', headers: Record<string, string> = {}) {
  const address = addressOf({ path, host: '127.0.0.1:9000', domains: [] });
  return operationOf({
    method,
    level: address.level,
    query: new URLSearchParams(query),
    headers,
  }).name;
}

function code(run: () => unknown): string | undefined {
  try {
    run();
  } catch (error) {
    return s3ErrorOf(error, {}).code;
  }
  return undefined;
}

t.test('path-style and virtual-hosted addresses', async (t) => {
  t.same(addressOf({ path: '/', host: 'x', domains: [] }), {
    level: 'service',
    virtualHost: false,
  });
  t.same(addressOf({ path: '/b1', host: 'x', domains: [] }), {
    level: 'bucket',
    bucket: 'b1',
    virtualHost: false,
  });
  t.same(addressOf({ path: '/b1/', host: 'x', domains: [] }).level, 'bucket');
  t.same(addressOf({ path: '/b1/a%2Fb/c%20d', host: 'x', domains: [] }), {
    level: 'object',
    bucket: 'b1',
    key: 'a/b/c d',
    virtualHost: false,
  });
  const domains = ['s3.example.test'];
  t.same(addressOf({ path: '/k/x', host: 'photos.s3.example.test:9000', domains }), {
    level: 'object',
    bucket: 'photos',
    key: 'k/x',
    virtualHost: true,
  });
  t.same(addressOf({ path: '/', host: 'Photos.S3.example.test', domains }), {
    level: 'bucket',
    bucket: 'photos',
    virtualHost: true,
  });
  // The domain itself is not a bucket: path-style on it.
  t.equal(addressOf({ path: '/b/k', host: 's3.example.test', domains }).bucket, 'b');
  t.equal(
    code(() => addressOf({ path: '/b/%E0%A4%A', host: '', domains })),
    'InvalidArgument',
  );
  t.equal(
    code(() => addressOf({ path: '/b/\uFFFD', host: '', domains })),
    'InvalidURI',
  );
});

t.test('operations from method, level, sub-resource and header', async (t) => {
  t.equal(op('GET', '/'), 'ListBuckets');
  t.equal(op('GET', '/b'), 'ListObjects');
  t.equal(op('GET', '/b', 'list-type=2&prefix=a'), 'ListObjectsV2');
  t.equal(op('GET', '/b', 'versions'), 'ListObjectVersions');
  t.equal(op('GET', '/b', 'uploads'), 'ListMultipartUploads');
  t.equal(op('GET', '/b', 'location'), 'GetBucketLocation');
  t.equal(op('PUT', '/b', 'versioning'), 'PutBucketVersioning');
  t.equal(op('PUT', '/b'), 'CreateBucket');
  t.equal(op('HEAD', '/b'), 'HeadBucket');
  t.equal(op('DELETE', '/b'), 'DeleteBucket');
  t.equal(op('DELETE', '/b', 'cors'), 'DeleteBucketCors');
  t.equal(op('POST', '/b', 'delete'), 'DeleteObjects');
  t.equal(op('POST', '/b'), 'PostObject');
  t.equal(op('PUT', '/b/k'), 'PutObject');
  t.equal(op('PUT', '/b/k', '', { 'x-amz-copy-source': '/a/b' }), 'CopyObject');
  t.equal(op('PUT', '/b/k', 'partNumber=1&uploadId=u'), 'UploadPart');
  t.equal(
    op('PUT', '/b/k', 'partNumber=1&uploadId=u', { 'x-amz-copy-source': '/a/b' }),
    'UploadPartCopy',
  );
  t.equal(op('POST', '/b/k', 'uploads'), 'CreateMultipartUpload');
  t.equal(op('POST', '/b/k', 'uploadId=u'), 'CompleteMultipartUpload');
  t.equal(op('DELETE', '/b/k', 'uploadId=u'), 'AbortMultipartUpload');
  t.equal(op('GET', '/b/k', 'uploadId=u'), 'ListParts');
  t.equal(op('GET', '/b/k', 'versionId=v&response-content-type=x'), 'GetObject');
  t.equal(op('GET', '/b/k', 'attributes'), 'GetObjectAttributes');
  t.equal(op('PUT', '/b/k', 'tagging'), 'PutObjectTagging');
  t.equal(op('HEAD', '/b/k'), 'HeadObject');
  t.equal(op('DELETE', '/b/k', 'versionId=v'), 'DeleteObject');
  t.equal(op('GET', '/b/k', 'X-Amz-Signature=x&X-Amz-Credential=y'), 'GetObject');
  // A presigned URL's signed x-amz-* headers, hoisted into the query by the AWS SDK.
  t.equal(op('GET', '/b/k', 'X-Amz-Signature=x&x-amz-checksum-mode=ENABLED'), 'GetObject');
  // Any other one is a signed condition Lightwell would not read from the query: refused, never
  // ignored (a hoisted copy source would otherwise make a CopyObject URL an empty PutObject).
  t.equal(
    code(() => op('PUT', '/b/k', 'X-Amz-Signature=x&x-amz-copy-source=a%2Fb')),
    'NotImplemented',
  );
  t.equal(
    code(() => op('PUT', '/b/k', 'X-Amz-Signature=x&x-amz-checksum-sha256=AAAA')),
    'NotImplemented',
  );
  t.equal(
    code(() => op('GET', '/b', 'frobnicate')),
    'NotImplemented',
  );
  t.equal(
    code(() => op('POST', '/')),
    'MethodNotAllowed',
  );
  t.equal(
    code(() => op('PATCH', '/b/k')),
    'MethodNotAllowed',
  );
  // Once per level it applies at: a CORS preflight is one operation on buckets and on objects.
  const names = OPERATIONS.map((spec) => `${spec.name} ${spec.level}`);
  t.equal(new Set(names).size, names.length, 'every operation is listed once per level');
});

t.test('Lightwell errors map to S3 codes by what was addressed', async (t) => {
  t.equal(
    s3ErrorOf(NotFound('bucket b not found'), { bucket: 'b', key: 'k' }).code,
    'NoSuchBucket',
  );
  t.equal(s3ErrorOf(NotFound('object k not found'), { bucket: 'b', key: 'k' }).code, 'NoSuchKey');
  t.equal(s3ErrorOf(NotFound('x'), { bucket: 'b' }).code, 'NoSuchBucket');
  t.equal(s3ErrorOf(BadRequest('nope'), {}).code, 'InvalidRequest');
  const internal = s3ErrorOf(Internal('secret detail'), {});
  t.same(internal.code, 'InternalError');
  t.notMatch(internal.message, /secret/, 'a failure of the service hides its details');
  t.equal(s3ErrorOf(new TypeError('bug'), {}).status, 500);
  const own = s3Error('BucketAlreadyExists');
  t.equal(own.status, 409);
  t.equal(errorCode(own), 'conflict', 'an S3 error keeps a Lightwell code for logs');
  t.same(s3ErrorOf(own, {}).code, 'BucketAlreadyExists');
});

t.test('XML out: escaped text, S3 namespace on the root, checked nesting', async (t) => {
  const xml = new XmlWriter()
    .start('R')
    .leaf('K', 'a<b>&"\'\u0001')
    .leaf('N', 5)
    .leaf('U', undefined)
    .end('R')
    .toString();
  t.equal(
    xml,
    '<?xml version="1.0" encoding="UTF-8"?>\n<R xmlns="http://s3.amazonaws.com/doc/2006-03-01/">' +
      '<K>a&lt;b&gt;&amp;&quot;&apos;&#x1;</K><N>5</N></R>',
  );
  t.throws(() => new XmlWriter().start('A').end('B'));
  t.throws(() => new XmlWriter().start('A').toString());
});

t.test('XML in: limits, DTDs, malformed documents', async (t) => {
  const doc = parseXml(
    Buffer.from(
      '<Delete xmlns="x"><Object><Key>0012</Key></Object><Object><Key>b</Key></Object></Delete>',
    ),
  );
  const objects = xmlList(doc, 'Delete').flatMap((node) => xmlList(node, 'Object'));
  t.same(
    objects.map((node) => xmlText(node, 'Key')),
    ['0012', 'b'],
    'values stay strings',
  );
  const xmlCode = (text: string, limit?: number) => code(() => parseXml(Buffer.from(text), limit));
  t.equal(xmlCode('<a><b></a>'), 'MalformedXML');
  t.equal(xmlCode(''), 'MalformedXML');
  t.equal(xmlCode('<!DOCTYPE x [<!ENTITY a "b">]><a>&a;</a>'), 'MalformedXML');
  t.equal(xmlCode('<a>x</a>', 3), 'MaxMessageLengthExceeded');
  const deep = '<a>'.repeat(XML_DEPTH_MAX + 1) + '</a>'.repeat(XML_DEPTH_MAX + 1);
  t.equal(xmlCode(deep), 'MalformedXML');
  const ok = '<a>'.repeat(XML_DEPTH_MAX) + '</a>'.repeat(XML_DEPTH_MAX);
  t.equal(xmlCode(ok), undefined);
});
