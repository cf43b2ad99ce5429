// Goal: the S3 answers of the object operations are well-formed XML of S3's shapes, carry any
// key (escaped, or percent-encoded with encoding-type=url, S3's way: `foo+1/` → `foo%2B1/`),
// and a 1,000-key ListObjectsV2 page is written at least as fast as the native JSON page
// (~125,000 keys/s); the rate is printed, never asserted (a loaded machine must not fail it).
// Method: documents parsed back with fast-xml-parser and compared field by field.
/* eslint-disable @typescript-eslint/no-explicit-any, @typescript-eslint/no-unsafe-member-access,
   @typescript-eslint/no-unsafe-call, @typescript-eslint/no-unsafe-assignment,
   @typescript-eslint/no-unsafe-argument --
   parsed documents are walked by S3's element names, which the assertions check. */
import t from 'tap';
import { XMLParser } from 'fast-xml-parser';
import {
  completeMultipartUploadXml,
  copyResultXml,
  deleteResultXml,
  initiateMultipartUploadXml,
  listMultipartUploadsXml,
  listObjectsV1Xml,
  listObjectsV2Xml,
  listPartsXml,
  listVersionsXml,
  objectAttributesXml,
  urlText,
  xmlText,
  type XmlListEntry,
} from '../../src/s3/object-xml.js';

const parser = new XMLParser({
  ignoreAttributes: false,
  parseTagValue: false,
  trimValues: false,
  isArray: (name, jpath) =>
    ['Contents', 'CommonPrefixes', 'Version', 'Upload', 'Part', 'Deleted', 'Error'].includes(
      name,
    ) ||
    (name === 'DeleteMarker' && String(jpath).startsWith('ListVersionsResult')),
  htmlEntities: true,
});
const parse = (bytes: Buffer): any => parser.parse(bytes.toString('utf8'));
const owner = { id: 'tenant-id', displayName: 'tenant' };
const T0 = Date.UTC(2026, 0, 2, 3, 4, 5, 6);

function entries(count: number): XmlListEntry[] {
  return Array.from({ length: count }, (_, i) => ({
    key: `logs/2026/01/02/host-${String(i).padStart(5, '0')}.json.gz`,
    lastModified: T0 + i,
    etag: '"9b2cf535f27731c974343645a3985328"',
    size: 4096 + i,
  }));
}

t.test('text escaping and url encoding', async (t) => {
  t.equal(xmlText('plain/key.txt'), 'plain/key.txt');
  t.equal(xmlText(`a&b<c>d"e'f`), 'a&amp;b&lt;c&gt;d&quot;e&apos;f');
  t.equal(xmlText('cr\rlf\ntab\t\u0001'), 'cr&#13;lf\ntab\t&#x1;');
  t.equal(urlText('foo+1/bar baz'), 'foo%2B1/bar%20baz');
  t.equal(urlText('é'), '%C3%A9');
});

t.test('ListObjectsV2: fields, owner only when fetched, url encoding', async (t) => {
  const page = {
    bucket: 'b',
    prefix: '',
    delimiter: '/',
    maxKeys: 2,
    isTruncated: true,
    encodingUrl: true,
    entries: [
      { key: 'asdf+b', lastModified: T0, etag: '"e"', size: 3, checksumAlgorithms: ['CRC32'] },
    ],
    commonPrefixes: ['foo+1/', 'quux ab/'],
    startAfter: 'a b',
    continuationToken: 'tok',
    nextContinuationToken: 'next',
  };
  const doc = parse(listObjectsV2Xml(page)).ListBucketResult;
  t.equal(doc['@_xmlns'], 'http://s3.amazonaws.com/doc/2006-03-01/');
  t.equal(doc.Name, 'b');
  t.equal(doc.KeyCount, '3');
  t.equal(doc.MaxKeys, '2');
  t.equal(doc.IsTruncated, 'true');
  t.equal(doc.EncodingType, 'url');
  t.equal(doc.StartAfter, 'a%20b');
  t.equal(doc.ContinuationToken, 'tok');
  t.equal(doc.NextContinuationToken, 'next');
  t.same(doc.Contents, [
    {
      Key: 'asdf%2Bb',
      LastModified: '2026-01-02T03:04:05.006Z',
      ETag: '"e"',
      ChecksumAlgorithm: 'CRC32',
      Size: '3',
      StorageClass: 'STANDARD',
    },
  ]);
  t.same(
    doc.CommonPrefixes.map((p: { Prefix: string }) => p.Prefix),
    ['foo%2B1/', 'quux%20ab/'],
  );
  const withOwner = parse(listObjectsV2Xml({ ...page, owner, isTruncated: false }));
  t.same(withOwner.ListBucketResult.Contents[0].Owner, { ID: 'tenant-id', DisplayName: 'tenant' });
  t.notOk('NextContinuationToken' in withOwner.ListBucketResult, 'no next token when complete');
});

t.test('ListObjects V1: marker, next marker, owner, raw keys', async (t) => {
  const key = 'we\rird <&> "key"';
  const control = listObjectsV1Xml({
    bucket: 'b',
    prefix: '',
    maxKeys: 1000,
    isTruncated: false,
    encodingUrl: false,
    entries: [{ key: 'a\u0001b\rc', lastModified: T0, etag: '"e"', size: 0 }],
    commonPrefixes: [],
    marker: '',
  }).toString();
  t.match(control, '<Key>a&#x1;b&#13;c</Key>', 'control characters as references');
  const doc = parse(
    listObjectsV1Xml({
      bucket: 'b',
      prefix: 'p',
      maxKeys: 1000,
      isTruncated: true,
      encodingUrl: false,
      entries: [{ key, lastModified: T0, etag: '"e"', size: 0 }],
      commonPrefixes: [],
      marker: 'm',
      nextMarker: 'n',
      owner,
    }),
  ).ListBucketResult;
  t.equal(doc.Marker, 'm');
  t.equal(doc.NextMarker, 'n');
  t.equal(doc.Prefix, 'p');
  t.equal(doc.Contents[0].Key, key, 'any key survives the round trip');
  t.equal(doc.Contents[0].Owner.ID, 'tenant-id');
});

t.test('ListVersionsResult interleaves versions and delete markers', async (t) => {
  const doc = parse(
    listVersionsXml({
      bucket: 'b',
      prefix: '',
      keyMarker: '',
      versionIdMarker: '',
      nextKeyMarker: 'k',
      nextVersionIdMarker: 'v2',
      maxKeys: 2,
      isTruncated: true,
      encodingUrl: false,
      owner,
      commonPrefixes: [],
      entries: [
        {
          key: 'k',
          versionId: 'v3',
          isLatest: true,
          deleteMarker: true,
          lastModified: T0,
          etag: '',
          size: 0,
        },
        {
          key: 'k',
          versionId: 'v2',
          isLatest: false,
          deleteMarker: false,
          lastModified: T0,
          etag: '"e"',
          size: 5,
        },
      ],
    }),
  ).ListVersionsResult;
  t.equal(doc.NextKeyMarker, 'k');
  t.equal(doc.NextVersionIdMarker, 'v2');
  t.same(doc.DeleteMarker[0], {
    Key: 'k',
    VersionId: 'v3',
    IsLatest: 'true',
    LastModified: '2026-01-02T03:04:05.006Z',
    Owner: { ID: 'tenant-id', DisplayName: 'tenant' },
  });
  t.equal(doc.Version[0].Size, '5');
  t.equal(doc.Version[0].IsLatest, 'false');
});

t.test('multipart answers', async (t) => {
  t.same(
    parse(initiateMultipartUploadXml({ bucket: 'b', key: 'k&', uploadId: 'u' }))
      .InitiateMultipartUploadResult,
    {
      '@_xmlns': 'http://s3.amazonaws.com/doc/2006-03-01/',
      Bucket: 'b',
      Key: 'k&',
      UploadId: 'u',
    },
  );
  const complete = parse(
    completeMultipartUploadXml({
      location: 'http://h/b/k',
      bucket: 'b',
      key: 'k',
      etag: '"abc-2"',
      checksums: { CRC32C: 'AAAAAA==' },
      checksumType: 'FULL_OBJECT',
    }),
  ).CompleteMultipartUploadResult;
  t.equal(complete.ETag, '"abc-2"');
  t.equal(complete.ChecksumCRC32C, 'AAAAAA==');
  t.equal(complete.ChecksumType, 'FULL_OBJECT');
  const parts = parse(
    listPartsXml({
      bucket: 'b',
      key: 'k',
      uploadId: 'u',
      partNumberMarker: 0,
      nextPartNumberMarker: 2,
      maxParts: 2,
      isTruncated: true,
      initiator: { id: 'writer-id', displayName: 'writer' },
      owner,
      parts: [
        {
          partNumber: 1,
          lastModified: T0,
          etag: '"p1"',
          size: 5242880,
          checksums: { SHA256: 'x' },
        },
        { partNumber: 2, lastModified: T0, etag: '"p2"', size: 1 },
      ],
    }),
  ).ListPartsResult;
  t.equal(parts.Part.length, 2);
  t.equal(parts.Part[0].ChecksumSHA256, 'x');
  t.equal(parts.NextPartNumberMarker, '2');
  t.equal(parts.Initiator.ID, 'writer-id');
  t.equal(parts.Owner.ID, 'tenant-id');
  const uploads = parse(
    listMultipartUploadsXml({
      bucket: 'b',
      prefix: '',
      keyMarker: '',
      uploadIdMarker: '',
      maxUploads: 1000,
      isTruncated: false,
      encodingUrl: true,
      commonPrefixes: ['a b/'],
      uploads: [
        {
          key: 'x+y',
          uploadId: 'u1',
          initiated: T0,
          initiator: { id: 'writer-id', displayName: 'writer' },
          owner,
        },
      ],
    }),
  ).ListMultipartUploadsResult;
  t.equal(uploads.Upload[0].Key, 'x%2By');
  t.equal(uploads.Upload[0].Initiated, '2026-01-02T03:04:05.006Z');
  t.equal(uploads.Upload[0].Initiator.DisplayName, 'writer');
  t.equal(uploads.Upload[0].Owner.ID, 'tenant-id');
  t.equal(uploads.CommonPrefixes[0].Prefix, 'a%20b/');
});

t.test('copy, delete and attributes answers', async (t) => {
  const copy = parse(
    copyResultXml('CopyPartResult', { etag: '"e"', lastModified: T0 }),
  ).CopyPartResult;
  t.same([copy.ETag, copy.LastModified], ['"e"', '2026-01-02T03:04:05.006Z']);
  const outcomes = [
    { key: 'a', versionId: 'v1' },
    { key: 'b', deleteMarker: true, deleteMarkerVersionId: 'm1' },
    { key: 'c', error: { code: 'AccessDenied', message: 'Access Denied' } },
  ];
  const loud = parse(deleteResultXml(outcomes, false)).DeleteResult;
  t.same(loud.Deleted, [
    { Key: 'a', VersionId: 'v1' },
    { Key: 'b', DeleteMarker: 'true', DeleteMarkerVersionId: 'm1' },
  ]);
  t.same(loud.Error, [{ Key: 'c', Code: 'AccessDenied', Message: 'Access Denied' }]);
  const quiet = parse(deleteResultXml(outcomes, true)).DeleteResult;
  t.notOk('Deleted' in quiet, 'quiet lists only the errors');
  t.equal(quiet.Error.length, 1);
  const attributes = parse(
    objectAttributesXml(
      new Set(['ETag', 'Checksum', 'ObjectSize', 'StorageClass', 'ObjectParts']),
      {
        etag: '"abc-2"',
        size: 10,
        checksums: { CRC32: 'AAAAAA==' },
        checksumType: 'COMPOSITE',
        parts: {
          totalPartsCount: 2,
          partNumberMarker: 0,
          maxParts: 1000,
          isTruncated: false,
          parts: [{ partNumber: 1, size: 5 }],
        },
      },
    ),
  ).GetObjectAttributesResponse;
  t.equal(attributes.ETag, 'abc-2', 'unquoted, as S3 answers it');
  t.same(attributes.Checksum, { ChecksumCRC32: 'AAAAAA==', ChecksumType: 'COMPOSITE' });
  t.equal(attributes.ObjectSize, '10');
  t.equal(attributes.ObjectParts.PartsCount, '2');
  const some = parse(objectAttributesXml(new Set(['ObjectSize']), { etag: '"e"', size: 1 }));
  t.same(Object.keys(some.GetObjectAttributesResponse).sort(), ['@_xmlns', 'ObjectSize']);
});

t.test('a 1,000-key ListObjectsV2 page: rate printed, not asserted', async (t) => {
  const page = {
    bucket: 'bench',
    prefix: 'logs/',
    maxKeys: 1000,
    isTruncated: true,
    encodingUrl: false,
    entries: entries(1000),
    commonPrefixes: [],
    nextContinuationToken: 'x'.repeat(40),
  };
  for (let i = 0; i < 20; i++) listObjectsV2Xml(page); // warm-up
  const rounds = 200;
  const started = process.hrtime.bigint();
  let bytes = 0;
  for (let i = 0; i < rounds; i++) bytes += listObjectsV2Xml(page).length;
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const keysPerSecond = Math.round((rounds * 1000) / seconds);
  t.comment(
    `ListObjectsV2 XML: ${keysPerSecond} keys/s, ${Math.round(bytes / rounds)} bytes a page ` +
      `(native JSON page: ~125,000 keys/s)`,
  );
  t.equal(parse(listObjectsV2Xml(page)).ListBucketResult.Contents.length, 1000);
});
