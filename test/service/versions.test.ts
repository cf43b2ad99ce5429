// Goal: the versions listing's one iterator, which the native API and S3 ListObjectVersions page
// through: versions by key then newest first, only the newest of each key `isLatest`, pages that
// resume after a key marker or after one version of it (also one deleted since, or a `null`
// marker whose null version is gone), markers of the next page only when truncated, and the
// refusals (a version id marker without its key marker, a malformed one).
// Method: listVersionsPage and versionEntries on a real LMDB environment in a temp directory.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IndexStore } from '../../src/engine/index/store.js';
import { DB, versionKey, type BucketRecord } from '../../src/engine/index/schema.js';
import { listVersionsPage, versionEntries } from '../../src/service/versions.js';

const bucket: BucketRecord = {
  id: 7,
  tenantId: 't',
  name: 'b',
  createdAt: 0,
  versioning: 'Enabled',
  objectLock: false,
};
const idOf = (seq: number): string => seq.toString(16).padStart(16, '0');

t.test('versions pages', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'lw-service-versions-'));
  const store = IndexStore.open({ path: dir, readOnly: false });
  t.teardown(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  // a: seqs 1, 2, 3 (3 newest); b: 4 and its null version (seq 5); c: 6, a delete marker.
  const rows: [string, number, string, boolean?][] = [
    ['a', 1, idOf(1)],
    ['a', 2, idOf(2)],
    ['a', 3, idOf(3)],
    ['b', 4, idOf(4)],
    ['b', 5, 'null'],
    ['c', 6, idOf(6), true],
    ['other/x', 7, idOf(7)],
  ];
  store.transactSync(() => {
    for (const [key, seq, versionId, deleteMarker] of rows) {
      const record = { key, versionId, seq, lastModified: seq, size: seq, etag: `"${seq}"` };
      store.put(
        DB.versions,
        versionKey(bucket.id, key, seq),
        deleteMarker ? { ...record, deleteMarker } : record,
      );
    }
  });
  const seen = (page: ReturnType<typeof listVersionsPage>): string[] =>
    page.entries.map((e) => `${e.key}@${e.seq}${e.isLatest ? '*' : ''}`);

  const all = listVersionsPage(store, bucket, { prefix: '', maxKeys: 1000 });
  t.same(seen(all), ['a@3*', 'a@2', 'a@1', 'b@5*', 'b@4', 'c@6*', 'other/x@7*']);
  t.equal(all.isTruncated, false);
  t.equal(all.nextKeyMarker, undefined, 'no markers on the last page');

  const first = listVersionsPage(store, bucket, { prefix: '', maxKeys: 2 });
  t.same(seen(first), ['a@3*', 'a@2']);
  t.equal(first.isTruncated, true);
  t.equal(first.nextKeyMarker, 'a');
  t.equal(first.nextVersionIdMarker, idOf(2));
  const second = listVersionsPage(store, bucket, {
    prefix: '',
    maxKeys: 2,
    keyMarker: first.nextKeyMarker,
    versionIdMarker: first.nextVersionIdMarker,
  });
  t.same(seen(second), ['a@1', 'b@5*'], 'resumed inside a key: none of it is the latest');

  const afterKey = listVersionsPage(store, bucket, { prefix: '', maxKeys: 10, keyMarker: 'a' });
  t.same(seen(afterKey).slice(0, 1), ['b@5*'], 'a key marker alone skips the whole key');

  store.transactSync(() => store.remove(DB.versions, versionKey(bucket.id, 'a', 2)));
  const gone = listVersionsPage(store, bucket, {
    prefix: '',
    maxKeys: 1,
    keyMarker: 'a',
    versionIdMarker: idOf(2),
  });
  t.same(seen(gone), ['a@1'], 'a marker version deleted since still places the page');

  store.transactSync(() => store.remove(DB.versions, versionKey(bucket.id, 'b', 5)));
  const nullGone = listVersionsPage(store, bucket, {
    prefix: '',
    maxKeys: 1,
    keyMarker: 'b',
    versionIdMarker: 'null',
  });
  t.same(seen(nullGone), ['b@4*'], 'a lost null marker lists the key again from its newest');

  t.same(
    [...versionEntries(store, bucket, { prefix: 'other/' })].map((e) => e.key),
    ['other/x'],
    'the prefix bounds the iterator',
  );
  t.same(
    listVersionsPage(store, bucket, { prefix: '', maxKeys: 5, versionIdMarker: '' }).entries.length,
    5,
    'an empty version id marker is absent',
  );
  t.throws(
    () => listVersionsPage(store, bucket, { prefix: '', maxKeys: 5, versionIdMarker: idOf(1) }),
    { code: 'bad_request', message: /needs the keyMarker/ },
  );
  t.throws(
    () =>
      listVersionsPage(store, bucket, {
        prefix: '',
        maxKeys: 5,
        keyMarker: 'a',
        versionIdMarker: 'zz',
      }),
    { code: 'bad_request' },
    'a malformed version id marker',
  );
});
