// Goal: the multipart listings' rules live in the service, one place for every transport: a
// part-number marker (none or 0 is before the first part, else a canonical part number), the
// upload markers (an upload-id marker needs its key marker and is an upload id), pages of
// uploads by key then upload id and of parts by number that resume after their markers, and the
// next page's markers exactly when a page is truncated.
// Method: the marker parsers on their own; the pages on a real LMDB environment in a temp
// directory holding upload and part records written directly.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IndexStore } from '../../src/engine/index/store.js';
import {
  DB,
  multipartPartKey,
  multipartUploadKey,
  type BucketRecord,
  type MultipartUploadRecord,
} from '../../src/engine/index/schema.js';
import {
  listPartsPage,
  listUploadsPage,
  partNumberMarkerOf,
  uploadsMarkersOf,
} from '../../src/service/multipart.js';

const bucket: BucketRecord = {
  id: 3,
  tenantId: 't',
  name: 'b',
  createdAt: 0,
  versioning: 'Unversioned',
  objectLock: false,
};
/** Upload ids sort as their number: the index keys them by their 16 bytes. */
const idOf = (n: number): string => n.toString(16).padStart(32, '0');

t.test('a part-number marker', async (t) => {
  t.equal(partNumberMarkerOf(null), 0, 'none: from the first part');
  t.equal(partNumberMarkerOf('0'), 0, '0, as S3 takes it: from the first part');
  t.equal(partNumberMarkerOf('7'), 7);
  t.equal(partNumberMarkerOf('10000'), 10000, 'the last part number');
  for (const text of ['01', '10001', '-1', '1.5', 'x', '', ' 1'])
    t.throws(() => partNumberMarkerOf(text), { code: 'bad_request' }, JSON.stringify(text));
});

t.test('upload markers', async (t) => {
  t.same(uploadsMarkersOf(null, null), {}, 'none: from the first upload');
  t.same(uploadsMarkersOf('k', null), { keyMarker: 'k' });
  t.same(uploadsMarkersOf('', null), { keyMarker: '' }, 'an empty key marker is a marker');
  t.same(uploadsMarkersOf('k', idOf(1)), { keyMarker: 'k', uploadIdMarker: idOf(1) });
  t.throws(() => uploadsMarkersOf(null, idOf(1)), {
    code: 'bad_request',
    message: 'uploadIdMarker needs the keyMarker it belongs to',
  });
  for (const id of ['x', idOf(1).toUpperCase().replace(/0/g, 'A'), `${idOf(1)}0`, ''])
    t.throws(
      () => uploadsMarkersOf('k', id),
      { code: 'bad_request', message: 'malformed uploadIdMarker' },
      JSON.stringify(id),
    );
});

t.test('pages of uploads and parts', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'lw-service-multipart-'));
  const store = IndexStore.open({ path: dir, readOnly: false });
  t.teardown(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  // a: uploads 1 and 2; b: upload 3 with parts 1, 2, 5; c/x: upload 4.
  const uploads: [string, number][] = [
    ['a', 1],
    ['a', 2],
    ['b', 3],
    ['c/x', 4],
  ];
  const records = new Map<number, MultipartUploadRecord>();
  store.transactSync(() => {
    for (const [key, n] of uploads) {
      const record: MultipartUploadRecord = {
        uploadId: idOf(n),
        tenantId: 't',
        bucketId: bucket.id,
        bucket: bucket.name,
        key,
        initiatedAt: n,
        contentType: 'application/octet-stream',
        metadata: {},
      };
      records.set(n, record);
      store.put(DB.multipart, multipartUploadKey(bucket.id, key, idOf(n)), record);
    }
    for (const partNumber of [1, 2, 5])
      store.put(DB.multipartParts, multipartPartKey(bucket.id, 'b', idOf(3), partNumber), {
        partNumber,
        size: partNumber,
        etag: `"${partNumber}"`,
        checksums: {},
        chunks: Buffer.alloc(0),
        storedBytes: partNumber,
        compressed: false,
        lastModified: partNumber,
      });
  });
  const seen = (page: ReturnType<typeof listUploadsPage>): string[] =>
    page.uploads.map((u) => `${u.key}@${Number.parseInt(u.uploadId, 16)}`);

  const all = listUploadsPage(store, bucket, { prefix: '', max: 1000 });
  t.same(seen(all), ['a@1', 'a@2', 'b@3', 'c/x@4'], 'by key, then upload id');
  t.equal(all.isTruncated, false);
  t.equal(all.nextKeyMarker, undefined, 'no markers on the last page');
  t.equal(all.nextUploadIdMarker, undefined);

  const first = listUploadsPage(store, bucket, { prefix: '', max: 1 });
  t.same(seen(first), ['a@1']);
  t.equal(first.isTruncated, true);
  t.same([first.nextKeyMarker, first.nextUploadIdMarker], ['a', idOf(1)]);
  const markers = uploadsMarkersOf(first.nextKeyMarker ?? null, first.nextUploadIdMarker ?? null);
  const second = listUploadsPage(store, bucket, { prefix: '', ...markers, max: 2 });
  t.same(seen(second), ['a@2', 'b@3'], 'resumes after the marker upload');
  t.same([second.nextKeyMarker, second.nextUploadIdMarker], ['b', idOf(3)]);

  const afterKey = listUploadsPage(store, bucket, { prefix: '', keyMarker: 'a', max: 10 });
  t.same(seen(afterKey), ['b@3', 'c/x@4'], 'a key marker alone skips every upload of it');
  const lenient = listUploadsPage(store, bucket, {
    prefix: '',
    keyMarker: 'a',
    uploadIdMarker: 'not-an-id',
    max: 10,
  });
  t.same(seen(lenient), seen(afterKey), 'an upload id marker that is none: as without it');
  const under = listUploadsPage(store, bucket, { prefix: 'c/', keyMarker: 'a', max: 10 });
  t.same(seen(under), ['c/x@4'], 'a marker before the prefix starts at the prefix');

  const upload = records.get(3);
  if (upload === undefined) throw new TypeError('upload 3 was written above');
  const partsOf = (page: ReturnType<typeof listPartsPage>): number[] =>
    page.parts.map((p) => p.partNumber);
  const parts = listPartsPage(store, upload, { marker: 0, max: 1000 });
  t.same(partsOf(parts), [1, 2, 5]);
  t.equal(parts.isTruncated, false);
  t.equal(parts.nextPartNumberMarker, undefined, 'no marker on the last page');
  t.notOk('chunks' in (parts.parts[0] ?? {}), 'a part as the API shows it');
  const page1 = listPartsPage(store, upload, { marker: 0, max: 2 });
  t.same([partsOf(page1), page1.isTruncated, page1.nextPartNumberMarker], [[1, 2], true, 2]);
  const page2 = listPartsPage(store, upload, { marker: page1.nextPartNumberMarker ?? 0, max: 2 });
  t.same([partsOf(page2), page2.isTruncated, page2.nextPartNumberMarker], [[5], false, undefined]);
  const between = listPartsPage(store, upload, { marker: 3, max: 2 });
  t.same(partsOf(between), [5], 'a marker between parts resumes at the next one');
  const other = records.get(1);
  if (other === undefined) throw new TypeError('upload 1 was written above');
  t.same(partsOf(listPartsPage(store, other, { marker: 0, max: 10 })), [], "another's parts");
});
