// Goal: the Delete and CompleteMultipartUpload bodies are read exactly (keys untrimmed, not
// numbers, entities and character references decoded) and every bad body is refused with S3's
// code before anything acts on it: not XML, wrong root, too large, too deep, a DOCTYPE, an
// unknown entity, too many entries, a part list out of order or out of range.
import t from 'tap';
import {
  COMPLETE_PARTS_MAX,
  DELETE_BODY_BYTES_MAX,
  DELETE_KEYS_MAX,
  XML_DEPTH_MAX,
  parseCompleteRequest,
  parseDeleteRequest,
} from '../../src/s3/object-xml-parse.js';
import { isLightwellError } from '../../src/util/errors.js';

const NS = 'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"';
const xml = (text: string): Buffer => Buffer.from(text, 'utf8');

function s3Code(run: () => unknown): string | undefined {
  try {
    run();
  } catch (error) {
    if (isLightwellError(error) && error.status === 400) return String(error.details['s3Code']);
    throw error;
  }
  return undefined;
}

t.test('Delete: keys exactly as sent, quiet, versions', async (t) => {
  const parsed = parseDeleteRequest(
    xml(
      `<?xml version="1.0" encoding="UTF-8"?>\n<Delete ${NS}>\n  <Quiet>true</Quiet>\n` +
        `  <Object><Key> a&amp;b&#13;&#x41;&lt; </Key></Object>\n` +
        `  <Object><Key>0001</Key><VersionId>v1</VersionId></Object>\n</Delete>`,
    ),
  );
  t.equal(parsed.quiet, true);
  t.same(parsed.objects, [{ key: ' a&b\rA< ' }, { key: '0001', versionId: 'v1' }]);
  const one = parseDeleteRequest(xml(`<Delete><Object><Key>k</Key></Object></Delete>`));
  t.equal(one.quiet, false, 'Quiet defaults to false');
  t.same(one.objects, [{ key: 'k' }], 'a single Object is a list of one');
});

t.test('Delete: bad bodies are MalformedXML', async (t) => {
  const bad: Record<string, string> = {
    empty: '',
    'not XML': 'garbage',
    unclosed: '<Delete><Object><Key>a</Key></Delete>',
    'wrong root': '<Remove><Object><Key>a</Key></Object></Remove>',
    'two roots': '<Delete><Object><Key>a</Key></Object></Delete><Delete/>',
    'no objects': '<Delete><Quiet>true</Quiet></Delete>',
    'no key': '<Delete><Object><VersionId>1</VersionId></Object></Delete>',
    'two keys': '<Delete><Object><Key>a</Key><Key>b</Key></Object></Delete>',
    'bad quiet': '<Delete><Quiet>yes</Quiet><Object><Key>a</Key></Object></Delete>',
    doctype: '<!DOCTYPE Delete [<!ENTITY x "y">]><Delete><Object><Key>&x;</Key></Object></Delete>',
    'unknown entity': '<Delete><Object><Key>a&foo;</Key></Object></Delete>',
    'bare ampersand': '<Delete><Object><Key>a & b</Key></Object></Delete>',
    'a surrogate reference': '<Delete><Object><Key>&#xD800;</Key></Object></Delete>',
    'too deep': `<Delete>${'<a>'.repeat(XML_DEPTH_MAX)}${'</a>'.repeat(XML_DEPTH_MAX)}</Delete>`,
  };
  for (const [name, body] of Object.entries(bad)) {
    t.equal(
      s3Code(() => parseDeleteRequest(xml(body))),
      'MalformedXML',
      name,
    );
  }
  const many = `<Delete>${'<Object><Key>k</Key></Object>'.repeat(DELETE_KEYS_MAX + 1)}</Delete>`;
  t.equal(
    s3Code(() => parseDeleteRequest(xml(many))),
    'MalformedXML',
    'over 1,000 keys',
  );
  const big = `<Delete><Object><Key>${'k'.repeat(DELETE_BODY_BYTES_MAX)}</Key></Object></Delete>`;
  t.equal(
    s3Code(() => parseDeleteRequest(xml(big))),
    'MaxMessageLengthExceeded',
    'over the size limit',
  );
  const full = `<Delete>${'<Object><Key>k</Key></Object>'.repeat(DELETE_KEYS_MAX)}</Delete>`;
  t.equal(parseDeleteRequest(xml(full)).objects.length, DELETE_KEYS_MAX, '1,000 keys pass');
});

t.test('CompleteMultipartUpload: parts with their checksums', async (t) => {
  const parts = parseCompleteRequest(
    xml(
      `<CompleteMultipartUpload ${NS}>` +
        `<Part><PartNumber>1</PartNumber><ETag>"aa"</ETag><ChecksumCRC32>AAAAAA==</ChecksumCRC32></Part>` +
        `<Part><ETag>&quot;bb&quot;</ETag><PartNumber>3</PartNumber></Part>` +
        `</CompleteMultipartUpload>`,
    ),
  );
  t.same(parts, [
    { partNumber: 1, etag: '"aa"', checksums: { CRC32: 'AAAAAA==' } },
    { partNumber: 3, etag: '"bb"', checksums: {} },
  ]);
});

t.test('CompleteMultipartUpload: bad lists', async (t) => {
  const part = (n: number | string): string =>
    `<Part><PartNumber>${n}</PartNumber><ETag>"e"</ETag></Part>`;
  const doc = (body: string): Buffer =>
    xml(`<CompleteMultipartUpload>${body}</CompleteMultipartUpload>`);
  t.equal(
    s3Code(() => parseCompleteRequest(doc(part(2) + part(1)))),
    'InvalidPartOrder',
  );
  t.equal(
    s3Code(() => parseCompleteRequest(doc(part(2) + part(2)))),
    'InvalidPartOrder',
  );
  t.equal(
    s3Code(() => parseCompleteRequest(doc(part(0)))),
    'InvalidArgument',
  );
  t.equal(
    s3Code(() => parseCompleteRequest(doc(part(COMPLETE_PARTS_MAX + 1)))),
    'InvalidArgument',
  );
  t.equal(
    s3Code(() => parseCompleteRequest(doc(part('1.5')))),
    'InvalidArgument',
  );
  t.equal(
    s3Code(() => parseCompleteRequest(doc(''))),
    'MalformedXML',
    'no parts',
  );
  t.equal(
    s3Code(() => parseCompleteRequest(doc('<Part><PartNumber>1</PartNumber></Part>'))),
    'MalformedXML',
    'no ETag',
  );
  t.equal(
    s3Code(() => parseCompleteRequest(xml('<Complete/>'))),
    'MalformedXML',
    'wrong root',
  );
});
