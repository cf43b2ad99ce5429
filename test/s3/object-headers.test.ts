// Goal: S3's request headers of the object operations read into exactly the values they say,
// and every malformed one refused with S3's code: metadata and representation headers stored
// and answered (with response-* overrides), Content-MD5 and x-amz-checksum-* (one per request,
// the SDK's algorithm backed by a value), multipart checksum types, copy sources and ranges,
// listing parameters and GetObjectAttributes' attribute list.
import t from 'tap';
import { createHash } from 'node:crypto';
import {
  S3_DEFAULT_CONTENT_TYPE,
  checkContentMd5,
  checkDeclaredChecksums,
  contentMd5Of,
  copySourceOf,
  copySourceRangeOf,
  declaredChecksums,
  directiveOf,
  encodingUrlOf,
  maxCountOf,
  multipartChecksumOf,
  objectAttributesOf,
  representationHeaders,
  representationOf,
} from '../../src/s3/object-headers.js';
import { isLightwellError } from '../../src/util/errors.js';

function s3Code(run: () => unknown): string | undefined {
  try {
    run();
  } catch (error) {
    if (isLightwellError(error)) {
      const s3 = error.details['s3Code'];
      return typeof s3 === 'string' ? s3 : error.code;
    }
    throw error;
  }
  return undefined;
}

t.test('representation: stored headers, metadata, overrides', async (t) => {
  const stored = representationOf({
    'content-type': 'text/plain',
    'cache-control': 'no-cache',
    'content-disposition': 'attachment; filename="a.txt"',
    'content-encoding': 'gzip',
    'content-language': 'en',
    expires: 'Thu, 01 Dec 1994 16:00:00 GMT',
    'x-amz-meta-color': 'blue',
    'x-amz-acl': 'private',
  });
  t.same(stored.metadata, { color: 'blue' });
  t.equal(stored.contentType, 'text/plain');
  t.same(Object.keys(stored.headers).sort(), [
    'cache-control',
    'content-disposition',
    'content-encoding',
    'content-language',
    'expires',
  ]);
  t.same(
    representationHeaders(stored, { 'response-content-type': 'x/y', 'response-expires': 'e' }),
    {
      'Content-Type': 'x/y',
      'Cache-Control': 'no-cache',
      'Content-Disposition': 'attachment; filename="a.txt"',
      'Content-Encoding': 'gzip',
      'Content-Language': 'en',
      Expires: 'e',
      'x-amz-meta-color': 'blue',
    },
  );
  t.equal(representationOf({}).contentType, S3_DEFAULT_CONTENT_TYPE, "S3's default type");
  t.equal(
    s3Code(() => representationOf({ 'x-amz-meta-bad': 'caf\u00e9' })),
    'bad_request',
  );
});

t.test('Content-MD5', async (t) => {
  const md5 = createHash('md5').update('abc').digest();
  t.same(contentMd5Of({ 'content-md5': md5.toString('base64') }), md5);
  t.equal(contentMd5Of({}), undefined);
  t.equal(
    s3Code(() => contentMd5Of({ 'content-md5': 'nope' })),
    'InvalidDigest',
  );
  t.equal(
    s3Code(() => contentMd5Of({ 'content-md5': Buffer.alloc(15).toString('base64') })),
    'InvalidDigest',
  );
  t.doesNotThrow(() => checkContentMd5(md5, md5));
  t.doesNotThrow(() => checkContentMd5(undefined, undefined));
  t.equal(
    s3Code(() => checkContentMd5(md5, Buffer.alloc(16))),
    'BadDigest',
  );
});

t.test('x-amz-checksum-* and the SDK algorithm', async (t) => {
  const crc = Buffer.alloc(4, 7).toString('base64');
  const one = declaredChecksums({
    'x-amz-checksum-crc32': crc,
    'x-amz-sdk-checksum-algorithm': 'CRC32',
  });
  t.same([...one.expected.keys()], ['CRC32']);
  t.same(one.algs, ['CRC32']);
  const trailer = declaredChecksums({
    'x-amz-trailer': 'x-amz-checksum-crc64nvme',
    'x-amz-sdk-checksum-algorithm': 'CRC64NVME',
  });
  t.same(trailer.trailing, ['CRC64NVME']);
  t.same(trailer.algs, ['CRC64NVME']);
  t.equal(
    s3Code(() => declaredChecksums({ 'x-amz-checksum-crc32': 'xx' })),
    'InvalidRequest',
  );
  t.equal(
    s3Code(() => declaredChecksums({ 'x-amz-checksum-md5': crc })),
    'InvalidRequest',
  );
  t.equal(
    s3Code(() => declaredChecksums({ 'x-amz-checksum-crc32': crc, 'x-amz-checksum-crc32c': crc })),
    'InvalidRequest',
    'one checksum a request',
  );
  t.equal(
    s3Code(() => declaredChecksums({ 'x-amz-sdk-checksum-algorithm': 'SHA256' })),
    'InvalidRequest',
    'an algorithm without its value',
  );
  t.same(
    declaredChecksums({ 'x-amz-checksum-mode': 'ENABLED' }).algs,
    [],
    'mode is not a checksum',
  );
  t.doesNotThrow(() => checkDeclaredChecksums(one.expected, { CRC32: crc }));
  t.equal(
    s3Code(() => checkDeclaredChecksums(one.expected, { CRC32: 'AAAAAA==' })),
    'BadDigest',
  );
});

t.test('multipart checksum algorithm and type', async (t) => {
  t.same(multipartChecksumOf({}), { alg: undefined, type: undefined });
  t.same(multipartChecksumOf({ 'x-amz-checksum-algorithm': 'CRC32' }), {
    alg: 'CRC32',
    type: 'COMPOSITE',
  });
  t.same(multipartChecksumOf({ 'x-amz-checksum-algorithm': 'crc64nvme' }), {
    alg: 'CRC64NVME',
    type: 'FULL_OBJECT',
  });
  t.same(
    multipartChecksumOf({
      'x-amz-checksum-algorithm': 'CRC32C',
      'x-amz-checksum-type': 'FULL_OBJECT',
    }),
    {
      alg: 'CRC32C',
      type: 'FULL_OBJECT',
    },
  );
  t.equal(
    s3Code(() =>
      multipartChecksumOf({
        'x-amz-checksum-algorithm': 'SHA256',
        'x-amz-checksum-type': 'FULL_OBJECT',
      }),
    ),
    'InvalidRequest',
  );
  t.equal(
    s3Code(() =>
      multipartChecksumOf({
        'x-amz-checksum-algorithm': 'CRC64NVME',
        'x-amz-checksum-type': 'COMPOSITE',
      }),
    ),
    'InvalidRequest',
  );
  t.equal(
    s3Code(() => multipartChecksumOf({ 'x-amz-checksum-type': 'COMPOSITE' })),
    'InvalidRequest',
  );
});

t.test('copy source, range and directives', async (t) => {
  t.same(copySourceOf({ 'x-amz-copy-source': '/b/dir/a%20b%2Bc' }), {
    bucket: 'b',
    key: 'dir/a b+c',
  });
  t.same(copySourceOf({ 'x-amz-copy-source': 'b/k?versionId=v1' }), {
    bucket: 'b',
    key: 'k',
    versionId: 'v1',
  });
  for (const bad of ['b', '/b/', 'b/k?x=1', '/%zz/k']) {
    t.equal(
      s3Code(() => copySourceOf({ 'x-amz-copy-source': bad })),
      'InvalidArgument',
      bad,
    );
  }
  t.same(copySourceRangeOf({ 'x-amz-copy-source-range': 'bytes=0-9' }), { start: 0, end: 9 });
  t.equal(copySourceRangeOf({}), undefined);
  t.equal(
    s3Code(() => copySourceRangeOf({ 'x-amz-copy-source-range': 'bytes=9-0' })),
    'InvalidRange',
  );
  t.equal(
    s3Code(() => copySourceRangeOf({ 'x-amz-copy-source-range': 'bytes=5-' })),
    'InvalidArgument',
  );
  t.equal(directiveOf({}, 'x-amz-metadata-directive'), 'COPY');
  t.equal(
    directiveOf({ 'x-amz-metadata-directive': 'REPLACE' }, 'x-amz-metadata-directive'),
    'REPLACE',
  );
  t.equal(
    s3Code(() => directiveOf({ 'x-amz-metadata-directive': 'MOVE' }, 'x-amz-metadata-directive')),
    'InvalidArgument',
  );
});

t.test('listing parameters and object attributes', async (t) => {
  t.equal(maxCountOf(undefined, 'max-keys'), 1000);
  t.equal(maxCountOf('5000', 'max-keys'), 1000);
  t.equal(maxCountOf('0', 'max-keys'), 0);
  t.equal(
    s3Code(() => maxCountOf('-1', 'max-keys')),
    'InvalidArgument',
  );
  t.equal(
    s3Code(() => maxCountOf('ten', 'max-keys')),
    'InvalidArgument',
  );
  t.equal(encodingUrlOf('url'), true);
  t.equal(encodingUrlOf(undefined), false);
  t.equal(
    s3Code(() => encodingUrlOf('base64')),
    'InvalidArgument',
  );
  t.same(
    [...objectAttributesOf({ 'x-amz-object-attributes': 'ETag, ObjectSize' })],
    ['ETag', 'ObjectSize'],
  );
  t.equal(
    s3Code(() => objectAttributesOf({ 'x-amz-object-attributes': 'Color' })),
    'InvalidArgument',
  );
  t.equal(
    s3Code(() => objectAttributesOf({})),
    'InvalidArgument',
  );
});
